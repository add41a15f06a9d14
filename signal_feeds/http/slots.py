"""The per-host limit, counted on every hop of a request.

A source's request holds one slot of the host it is talking to; when a redirect leads
to another host, the slot is given back and one of the new host's is taken. Eight
sources on eight hosts that all redirect to one host therefore never put more than
``per_host`` requests in flight there. A request holds at most one host slot at a time,
so two requests redirecting towards each other's hosts cannot wait on each other.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

__all__ = ["HostHold", "HostSlots"]


class HostSlots:
    """``per_host`` slots for each host name (lower-cased; the port is not part of it)."""

    def __init__(self, per_host: int) -> None:
        self.per_host = per_host
        self._hosts: dict[str, asyncio.Semaphore] = {}

    def _semaphore(self, host: str) -> asyncio.Semaphore:
        semaphore = self._hosts.get(host)
        if semaphore is None:
            semaphore = self._hosts[host] = asyncio.Semaphore(self.per_host)
        return semaphore

    def hold(self, host: str) -> HostHold:
        """``async with slots.hold(host) as hold:`` waits for a slot of ``host``;
        :meth:`HostHold.move_to` trades it for another host's."""
        return HostHold(self, host.lower())


class HostHold:
    """The one host slot a request holds (see :class:`HostSlots`)."""

    def __init__(self, slots: HostSlots, host: str) -> None:
        self._slots = slots
        self._host = host
        self._held: asyncio.Semaphore | None = None

    @property
    def host(self) -> str:
        """The host whose slot is held (or wanted)."""
        return self._host

    async def __aenter__(self) -> HostHold:
        await self.move_to(self._host)
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self._release()

    async def move_to(self, host: str) -> None:
        """Hold a slot of ``host`` (lower-cased), giving back the one held for another."""
        host = host.lower()
        if self._held is not None and host == self._host:
            return
        self._release()
        semaphore = self._slots._semaphore(host)
        await semaphore.acquire()
        self._held, self._host = semaphore, host

    def _release(self) -> None:
        if self._held is not None:
            self._held.release()
            self._held = None
