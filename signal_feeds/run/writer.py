"""Store writes of a run, on one thread of their own, many responses per commit.

The event loop only talks HTTP and hands finished work over; the writer thread applies
it. Whatever is waiting when the writer comes round goes into one transaction
(:meth:`Store.batch`), each write under its own savepoint. Under load that is one commit
for dozens of responses, and the time SQLite spends in C (it releases the GIL) overlaps
with the loop's work instead of stalling it. A coroutine's ``await`` returns only once its
write is committed, so the report never claims what the database does not hold.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from signal_feeds.errors import StoreError
from signal_feeds.store import Store

__all__ = ["DEFAULT_COMMIT_WINDOW", "DEFAULT_MAX_BATCH", "StoreWriter"]

log = logging.getLogger("signal_feeds")
T = TypeVar("T")

#: Most writes in one transaction: bounds how long other processes wait for the lock.
DEFAULT_MAX_BATCH = 64
#: Seconds a batch stays open for more writes. One commit rewrites every page its writes
#: touched; on a small database one response touches most pages of the token index, so
#: ten responses per commit cost little more than one.
DEFAULT_COMMIT_WINDOW = 0.2

_Job = tuple[Callable[[], Any], "asyncio.Future[Any]", asyncio.AbstractEventLoop]


class StoreWriter:
    """Runs store calls on one thread, in batches; use as an async context manager.

    A batch opens with the first waiting write and takes what arrives within ``window``
    seconds (at most ``max_batch`` writes), each applied as it comes. ``pending``, if
    given, says how many writes may still come in this run; when the batch holds them
    all it commits at once instead of waiting out the window.
    """

    def __init__(self, store: Store, *, max_batch: int = DEFAULT_MAX_BATCH,
                 window: float = DEFAULT_COMMIT_WINDOW,
                 pending: Callable[[], int] | None = None) -> None:
        self.store = store
        self.max_batch = max_batch
        self.window = window
        self.pending = pending
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="signal-writer", daemon=True)
        self.batches = 0  # commits made, for tests and benchmarks

    async def __aenter__(self) -> StoreWriter:
        self._thread.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._jobs.put(None)
        await asyncio.get_running_loop().run_in_executor(None, self._thread.join)

    async def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` (a store call) on the writer thread; return once it is committed."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((fn, future, loop))
        return await future

    def _run(self) -> None:
        while True:
            first = self._jobs.get()
            if first is None or not self._batch(first):
                return

    def _all_here(self, count: int) -> bool:
        return self.pending is not None and self.pending() <= count

    def _batch(self, first: _Job) -> bool:
        """Apply ``first`` and what follows it in one transaction; False once the
        writer has been told to stop."""
        jobs: list[_Job] = []
        results: list[tuple[bool, Any]] = []
        going = True
        try:
            with self.store.batch():
                job = first
                deadline = time.monotonic() + self.window
                last: int | None = None  # batch size once the window has closed
                while True:
                    jobs.append(job)
                    try:
                        results.append((True, job[0]()))
                    except Exception as exc:  # this write was undone alone
                        results.append((False, exc))
                    if len(jobs) >= self.max_batch or self._all_here(len(jobs)):
                        break
                    left = deadline - time.monotonic()
                    if left <= 0 and last is None:
                        # The writes queued when the window closes join; later ones
                        # wait for the next commit. A batch that took every write as
                        # it came could run for seconds while parsers keep up, holding
                        # each response's rows in memory and its report back.
                        last = len(jobs) + self._jobs.qsize()
                    if last is not None and len(jobs) >= last:
                        break
                    try:
                        waiting = self._jobs.get(timeout=max(0.0, left))
                    except queue.Empty:
                        break
                    if waiting is None:
                        going = False
                        break
                    job = waiting
        except Exception as exc:  # the commit failed: nothing of the batch is stored
            # (When the transaction could not even begin, ``first`` never ran: it fails
            # too, or its caller would wait for ever.)
            jobs = jobs or [first]
            log.warning("a batch of %d writes was not committed: %s", len(jobs), exc)
            message = exc.message if isinstance(exc, StoreError) else str(exc)
            results = [(False, StoreError(f"not stored: the commit failed: {message}"))
                       for _job in jobs]
        self.batches += 1
        for (_fn, future, loop), (ok, value) in zip(jobs, results, strict=True):
            loop.call_soon_threadsafe(_settle, future, ok, value)
        return going


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.cancelled():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)
