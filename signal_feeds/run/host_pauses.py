"""Pauses a host asked for, kept for the rest of one run.

A 429 (RFC 6585 §4) or a 503 with ``Retry-After`` is nearly always about the client, not
the one feed asked for: a site that rate-limits Signal answers every one of its feeds
the same way. The source that got the answer waits out its ``Retry-After`` (see
:func:`signal_feeds.decide.schedule.next_poll`); the host's other sources are not
requested for the rest of the run either, so a run over a site's hundred feeds sends
it the requests it allows, not a hundred more after being told to stop. The next run
asks again, one request at a time per host slot.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from signal_feeds.decide.schedule import parse_retry_after
from signal_feeds.urls import ascii_host

__all__ = ["HostPause", "HostPaused", "HostPauses"]


@dataclass(frozen=True)
class HostPause:
    """Until when a host asked not to be asked, and which source it told so."""

    until: dt.datetime
    source_id: str
    status: int


class HostPaused(Exception):
    """A request not made: its host (or a host it was redirected to) asked for a
    pause earlier in the run."""

    def __init__(self, host: str, pause: HostPause) -> None:
        super().__init__(f"not requested: {host} answered {pause.status} to "
                         f"{pause.source_id} with Retry-After")
        self.pause = pause


def _key(host: str) -> str:
    """One name for a host however it is written (a redirect's hop names
    ``bücher.example``, a response ``xn--bcher-kva.example``)."""
    return ascii_host(host.lower())


class HostPauses:
    """The pauses hosts asked for in one run."""

    def __init__(self) -> None:
        self._pauses: dict[str, HostPause] = {}

    def note(self, host: str, *, status: int, headers: Mapping[str, str],
             now: dt.datetime, source_id: str) -> None:
        """Remember the pause a response asked for, if it did (``headers`` lower-case)."""
        if status not in (429, 503) or not host:
            return
        until = parse_retry_after(headers.get("retry-after"), now)
        if until is None or until <= now:
            return
        known = self._pauses.get(_key(host))
        if known is None or until > known.until:
            self._pauses[_key(host)] = HostPause(until, source_id, status)

    def pause(self, host: str, now: dt.datetime) -> HostPause | None:
        """The pause ``host`` asked for that still runs at ``now``, else ``None``."""
        found = self._pauses.get(_key(host))
        return found if found is not None and found.until > now else None

    def refusal(self, host: str, now: dt.datetime) -> HostPaused | None:
        """What a request to ``host`` at ``now`` is refused with, if it is."""
        found = self.pause(host, now)
        return HostPaused(host, found) if found is not None else None
