"""Pauses a host asked for, kept for the rest of the run (and the runs after it).

A 429 (RFC 6585 §4) or a 503 with ``Retry-After`` is nearly always about the client, not
the one feed asked for: a site that rate-limits Signal answers every one of its feeds
the same way. The source that got the answer waits out its ``Retry-After`` (see
:func:`signal_feeds.decide.schedule.next_poll`); the host's other sources are not
requested for the rest of the run either, so a run over a site's hundred feeds sends
it the requests it allows, not a hundred more after being told to stop. A pause still
running when the next run starts holds there too: it is read from the stored state of
the source that was told (:meth:`HostPauses.from_states`), so a cron job every few
minutes does not knock on a host that asked for an hour's quiet.

A 429 *without* ``Retry-After`` names no time, so it is a failure of the source that got
it (backed off like a 500), but it still says "too many requests" of the client: the
host's other sources are not requested for the rest of that run (a rate limiter such
as nginx's ``limit_req`` answers so, and a run over a site's hundred feeds sent it a
hundred more requests and backed off every feed). Nothing is stored for them: the next
run asks the host again. A bare 503 pauses nothing: it is as often one broken feed as a
busy host.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from signal_feeds.decide.schedule import parse_retry_after
from signal_feeds.records import SourceState
from signal_feeds.urls import request_host

__all__ = ["HostPause", "HostPaused", "HostPauses"]


@dataclass(frozen=True)
class HostPause:
    """Until when a host asked not to be asked, and which source it told so."""

    #: ``None``: for the rest of this run (a 429 that named no time).
    until: dt.datetime | None
    source_id: str
    status: int
    #: Told in an earlier run (read from the stored state), not in this one.
    earlier: bool = False


class HostPaused(Exception):
    """A request not made: its host (or a host it was redirected to) asked for a
    pause earlier in the run."""

    def __init__(self, host: str, pause: HostPause) -> None:
        said = (" with Retry-After" if pause.until is not None
                else " without Retry-After; asked again next run")
        super().__init__(f"not requested: {host} answered {pause.status} to "
                         f"{pause.source_id}{said}")
        self.pause = pause


def _key(host: str) -> str:
    """One name for a host however it is written (a redirect's hop names
    ``bücher.example``, a response ``xn--bcher-kva.example``)."""
    return request_host(host.lower())


class HostPauses:
    """The pauses hosts asked for in one run."""

    def __init__(self) -> None:
        self._pauses: dict[str, HostPause] = {}

    @classmethod
    def from_states(cls, states: Iterable[SourceState], now: dt.datetime) -> HostPauses:
        """The pauses still running that earlier runs were told of: each source waiting
        out a 429's or a 503's ``Retry-After`` pauses the host it asked."""
        pauses = cls()
        for state in states:
            if (state.status == "retry_later" and state.http_status in (429, 503)
                    and state.retry_after is not None and state.retry_after > now):
                pauses._keep(state.retry_host or urlsplit(state.request_url).hostname or "",
                             HostPause(state.retry_after, state.source_id, state.http_status,
                                       earlier=True))
        return pauses

    def note(self, host: str, *, status: int, headers: Mapping[str, str],
             now: dt.datetime, source_id: str) -> None:
        """Remember the pause a response asked for, if it did (``headers`` lower-case)."""
        if status not in (429, 503) or not host:
            return
        value = headers.get("retry-after")
        until = parse_retry_after(value, now, headers.get("date"))
        if until is None and status == 429:
            # No time named (or none readable): the rest of this run.
            self._keep(host, HostPause(None, source_id, status))
            return
        if until is None or until <= now:
            return
        self._keep(host, HostPause(until, source_id, status))

    def _keep(self, host: str, pause: HostPause) -> None:
        known = self._pauses.get(_key(host))
        if host and (known is None or _outlasts(pause, known)):
            self._pauses[_key(host)] = pause

    def pause(self, host: str, now: dt.datetime) -> HostPause | None:
        """The pause ``host`` asked for that still runs at ``now``, else ``None``."""
        found = self._pauses.get(_key(host))
        if found is None or (found.until is not None and found.until <= now):
            return None
        return found

    def refusal(self, host: str, now: dt.datetime) -> HostPaused | None:
        """What a request to ``host`` at ``now`` is refused with, if it is."""
        found = self.pause(host, now)
        return HostPaused(host, found) if found is not None else None


def _outlasts(pause: HostPause, known: HostPause) -> bool:
    """Whether ``pause`` holds longer in this run than ``known`` (one for the rest of
    the run holds longest; the told source's stored ``Retry-After`` still holds in the
    runs after)."""
    if known.until is None:
        return False
    return pause.until is None or pause.until > known.until
