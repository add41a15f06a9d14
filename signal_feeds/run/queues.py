"""The queue between two stages of a run, bounded by the memory its items hold.

A run is three stages: fetch, parse, write. Downloaded bodies wait for a parser and
parsed rows wait for the writer; when a later stage falls behind, what waits piles up.
Each :class:`StageQueue` has a byte limit, and a producer waits for room before it makes
an item (before a download starts, before a body is parsed), so the bound holds for
the work under way too. That is the back-pressure of the run, and these limits are
where its memory bound lives.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

__all__ = ["StageQueue"]

T = TypeVar("T")


class StageQueue(Generic[T]):
    """A FIFO of ``(item, cost)`` pairs, bounded by the sum of the costs.

    A producer first :meth:`reserve`-s room (it waits while what is queued and reserved
    reaches ``limit``), then :meth:`put`-s the item with its real cost, or
    :meth:`cancel`-s the reservation. The cost stays counted until the consumer says
    :meth:`done`, after it has let the item's memory go. An empty queue with nothing
    reserved always admits one, so an item larger than the limit cannot stall a run.
    """

    def __init__(self, limit: int, *, first_guess: int) -> None:
        self.limit = limit
        #: Bytes held by queued items and items a consumer still works on.
        self.used = 0
        #: Bytes reserved by producers whose items are not made yet.
        self.reserved = 0
        self._first_guess = first_guess
        self._costs = self._count = 0
        self._items: deque[tuple[T, int]] = deque()
        self._closed = False
        self._room = asyncio.Event()
        self._room.set()
        self._ready = asyncio.Event()

    def __len__(self) -> int:
        return len(self._items)

    async def reserve(self) -> int:
        """Wait for room, then reserve what an item has cost on average so far (a first
        guess before any); returns the reservation for :meth:`put` or :meth:`cancel`."""
        while self.used + self.reserved >= self.limit and (self.used or self.reserved):
            self._room.clear()
            await self._room.wait()
        guess = self._costs // self._count if self._count else self._first_guess
        self.reserved += guess
        return guess

    def cancel(self, reservation: int) -> None:
        """Give back a reservation that made no item."""
        self.reserved -= reservation
        self._update()

    def put(self, item: T, cost: int, *, reservation: int = 0) -> None:
        """Queue ``item``, counting ``cost`` bytes until :meth:`done`; never waits."""
        self.reserved -= reservation
        self.used += cost
        self._costs += cost
        self._count += 1
        self._items.append((item, cost))
        self._ready.set()
        self._update()

    async def get(self) -> tuple[T, int] | None:
        """The next item and its cost; ``None`` once the queue is closed and empty."""
        while not self._items:
            if self._closed:
                return None
            self._ready.clear()
            await self._ready.wait()
        return self._items.popleft()

    def get_nowait(self) -> tuple[T, int] | None:
        """The next item if one is queued, else ``None``."""
        return self._items.popleft() if self._items else None

    def done(self, cost: int) -> None:
        """The consumer has finished with an item that cost ``cost``."""
        self.used -= cost
        self._update()

    def close(self) -> None:
        """No more items will come: :meth:`get` returns ``None`` once the queue is empty."""
        self._closed = True
        self._ready.set()

    def _update(self) -> None:
        if self.used + self.reserved < self.limit:
            self._room.set()
