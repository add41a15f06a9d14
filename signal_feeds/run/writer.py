"""The write stage of a run: the store's writes on one thread, many per commit.

The event loop only talks HTTP and hands finished work over; this stage takes what is
waiting in its queue and applies it on a thread of its own in one transaction
(:meth:`~signal_feeds.store.protocol.FeedStore.batch`), each write under its own
savepoint. Under load that is one commit for dozens of responses, and the time SQLite
spends in C (it releases the GIL) overlaps with the loop's work instead of stalling it.
A write's future resolves only once its batch is committed, so the report never claims
what the database does not hold.

Deciding how long a batch stays open is plain bookkeeping on the event loop: it takes
what is queued, waits up to ``window`` seconds for more while more can still come, and
commits at once when every source of the run is accounted for.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from signal_feeds.errors import DatabaseUnavailableError, StoreError, log_level_of
from signal_feeds.run.queues import StageQueue
from signal_feeds.store.protocol import FeedStore

__all__ = ["DEFAULT_COMMIT_WINDOW", "DEFAULT_MAX_BATCH", "Write", "WriteStage"]

log = logging.getLogger("signal_feeds.run")

#: Most writes in one transaction: bounds how long other processes wait for the lock.
DEFAULT_MAX_BATCH = 64
#: Seconds a batch waits for more writes while more can come. One commit rewrites every
#: page its writes touched; on a small database one response touches most pages of the
#: token index, so ten responses per commit cost little more than one.
DEFAULT_COMMIT_WINDOW = 0.2


@dataclass
class Write:
    """One store call waiting in the write queue, and where its result goes."""

    apply: Callable[[], Any]
    result: asyncio.Future[Any] = field(repr=False)


class WriteStage:
    """Consumes a queue of :class:`Write` until it is closed; run it as a task.

    ``remaining`` tells how many writes may still be queued in this run (the sources
    not yet accounted for); when the open batch holds them all, it commits at once.
    """

    def __init__(self, store: FeedStore, queue: StageQueue[Write], *,
                 remaining: Callable[[], int], max_batch: int = DEFAULT_MAX_BATCH,
                 window: float = DEFAULT_COMMIT_WINDOW) -> None:
        self.store = store
        self.queue = queue
        self.remaining = remaining
        self.max_batch = max_batch
        self.window = window
        self.batches = 0  # commits made, for tests and benchmarks
        self._stopped = False
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="signal-writer")

    async def call(self, function: Callable[[], Any]) -> Any:
        """Run ``function`` (a store call outside the batches: a claim, a read) on the
        writer's thread, between two batches, and return what it returns."""
        return await asyncio.get_running_loop().run_in_executor(self._thread, function)

    def stop(self) -> None:
        """The run was stopped: what is queued, and any batch not yet begun, is dropped
        (its writes cancelled) rather than written after the stop. The batch being
        committed finishes: a response is stored whole or not at all."""
        self._stopped = True
        while (item := self.queue.get_nowait()) is not None:
            self._drop([item])

    def _drop(self, batch: list[tuple[Write, int]]) -> None:
        for write, cost in batch:
            self.queue.done(cost)
            write.result.cancel()

    async def run(self) -> None:
        """Write batches until the queue is closed and drained.

        While the thread applies one batch, the loop gathers the next, so the thread's
        SQL work overlaps the waiting instead of following it. At most one batch is
        applied at a time, and each batch's writes resolve as soon as it is committed.
        """
        loop = asyncio.get_running_loop()
        applying: asyncio.Future[list[tuple[bool, Any]]] | None = None
        try:
            while (first := await self.queue.get()) is not None:
                batch = await self._collect(first)
                if applying is not None and not applying.done():
                    await asyncio.wait([applying])
                    # What arrived while the last batch was applied joins this one.
                    while len(batch) < self.max_batch and (
                            more := self.queue.get_nowait()) is not None:
                        batch.append(more)
                if self._stopped:
                    self._drop(batch)
                    continue
                applying = loop.run_in_executor(
                    self._thread, self._apply, [write for write, _cost in batch])
                applying.add_done_callback(functools.partial(self._settle, batch))
            if applying is not None:
                await asyncio.wait([applying])
        finally:
            self._thread.shutdown(wait=True)

    def _settle(self, batch: list[tuple[Write, int]],
                applied: asyncio.Future[list[tuple[bool, Any]]]) -> None:
        """On the loop, once a batch is committed (or not): resolve its writes."""
        self.batches += 1
        if applied.cancelled() or applied.exception() is not None:
            failure = StoreError("not stored: the writer stopped")
            results: list[tuple[bool, Any]] = [(False, failure)] * len(batch)
        else:
            results = applied.result()
        for (write, cost), (ok, value) in zip(batch, results, strict=True):
            self.queue.done(cost)
            if write.result.done():
                continue
            if ok:
                write.result.set_result(value)
            else:
                write.result.set_exception(value)

    async def _collect(self, first: tuple[Write, int]) -> list[tuple[Write, int]]:
        batch = [first]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.window
        while len(batch) < self.max_batch:
            waiting = self.queue.get_nowait()
            if waiting is not None:
                batch.append(waiting)
                continue
            left = deadline - loop.time()
            if left <= 0 or self.remaining() == 0:
                break
            try:
                more = await asyncio.wait_for(self.queue.get(), left)
            except TimeoutError:
                break
            if more is None:  # closed: nothing else comes
                break
            batch.append(more)
        return batch

    def _apply(self, writes: list[Write]) -> list[tuple[bool, Any]]:
        """On the writer thread: every write of the batch, then one commit."""
        results: list[tuple[bool, Any]] = []
        try:
            with self.store.batch():
                for write in writes:
                    try:
                        results.append((True, write.apply()))
                    except Exception as exc:  # this write was undone alone
                        results.append((False, exc))
        except Exception as exc:  # the commit failed: nothing of the batch is stored
            # The database gone stops the run (one line says so); any other failure of
            # the commit fails the batch's sources, and the run goes on.
            log.log(log_level_of(exc), "a batch of %d writes was not committed: %s",
                    len(writes), exc)
            message = exc.message if isinstance(exc, StoreError) else str(exc)
            gone = isinstance(exc, DatabaseUnavailableError)
            failure = DatabaseUnavailableError if gone else StoreError
            results = [(False, failure(f"not stored: the commit failed: {message}"))
                       for _write in writes]
        return results
