"""What one request holds of its run besides its host's slot: one of the run's
``concurrency`` slots and room in the parse queue for its body.

Both are taken after the host's slot. A redirect that must wait for another host's slot
gives them back first (:class:`~signal_feeds.http.slots.HeldBesides`): the requests
holding that host's slots may themselves be waiting for a run slot or for room, and
with ``concurrency`` redirected requests waiting so, the run would stand still until
their deadlines failed them.
"""

from __future__ import annotations

import asyncio
from typing import Any

from signal_feeds.run.queues import StageQueue

__all__ = ["RunHold"]


class RunHold:
    """A run slot and a parse-queue reservation, each given back at most once;
    ``async with`` gives back what is still held at the end."""

    def __init__(self, slots: asyncio.Semaphore, queue: StageQueue[Any]) -> None:
        self._slots = slots
        self._queue = queue
        self._slot = False
        #: The reservation held (``None``: none), for :meth:`StageQueue.put`.
        self.reservation: int | None = None

    async def __aenter__(self) -> RunHold:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.give_back()

    @property
    def held(self) -> bool:
        return self._slot or self.reservation is not None

    async def take(self) -> None:
        """Take a run slot, then room in the parse queue (waiting for each)."""
        await self._slots.acquire()
        self._slot = True
        self.reservation = await self._queue.reserve()

    def keep_reservation(self) -> int:
        """The reservation, which the caller now answers for (it outlives the slot)."""
        reservation, self.reservation = self.reservation or 0, None
        return reservation

    def give_back(self) -> None:
        """Give back whatever is still held."""
        if self.reservation is not None:
            self._queue.cancel(self.reservation)
            self.reservation = None
        if self._slot:
            self._slot = False
            self._slots.release()
