"""The run's store writer: many responses per commit, each failing or succeeding alone."""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import dump

from signal_feeds import Store
from signal_feeds.errors import StoreError
from signal_feeds.run.writer import StoreWriter
from signal_feeds.store import FetchRecord, SourceState

NOW = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


def save(store: Store, source_id: str) -> None:
    store.save_attempt(SourceState(source_id=source_id, url=f"https://{source_id}.example/"),
                       FetchRecord(source_id=source_id, started_at=NOW, url="u",
                                   outcome="not_modified", http_status=304))


def test_writes_within_the_window_share_one_commit(db_path: Path) -> None:
    async def main(store: Store) -> int:
        async with StoreWriter(store, window=5.0) as writer:
            calls = []
            for i in range(20):  # arriving one by one, as parsed responses do
                calls.append(asyncio.ensure_future(writer.call(lambda i=i: save(store, f"s{i}"))))
                await asyncio.sleep(0.005)
            writer.pending = lambda: 0  # the run says nothing more will come
            calls.append(asyncio.ensure_future(writer.call(lambda: save(store, "last"))))
            started = time.monotonic()
            await asyncio.gather(*calls)
            assert time.monotonic() - started < 2.0  # not the 5 s window
            return writer.batches

    with Store(db_path) as store:
        assert asyncio.run(main(store)) == 1
        assert store.count("sources") == 21 and store.count("fetches") == 21


def test_without_a_window_writes_that_queue_meanwhile_join_the_batch(db_path: Path) -> None:
    gate = threading.Event()

    async def main(store: Store) -> tuple[list[Any], int]:
        async with StoreWriter(store, window=0.0) as writer:
            # The first write holds the writer until the others are queued behind it.
            first = asyncio.ensure_future(writer.call(lambda: gate.wait(5)))
            await asyncio.sleep(0.05)
            rest = [asyncio.ensure_future(writer.call(lambda i=i: save(store, f"s{i}")))
                    for i in range(20)]
            await asyncio.sleep(0.05)
            gate.set()
            results = await asyncio.gather(first, *rest)
            later = await writer.call(lambda: save(store, "later"))
            return [*results, later], writer.batches

    with Store(db_path) as store:
        results, batches = asyncio.run(main(store))
        assert results[0] is True and results[1:] == [None] * 21
        assert batches == 2  # the gate and the twenty queued meanwhile; then "later"
        assert store.count("sources") == 21 and store.count("fetches") == 21


def test_a_failing_write_is_undone_alone(db_path: Path) -> None:
    def half_then_fail() -> None:
        save(store, "half")  # this one's savepoint is released ...
        with store._db.transaction() as conn:  # ... this one is rolled back
            conn.execute("INSERT INTO sources (id, url) VALUES ('never', 'x')")
            raise StoreError("injected", source_id="never")

    async def main() -> list[Any]:
        async with StoreWriter(store) as writer:
            calls = [writer.call(lambda: save(store, "a")), writer.call(half_then_fail),
                     writer.call(lambda: save(store, "b"))]
            return await asyncio.gather(*calls, return_exceptions=True)

    with Store(db_path) as store:
        a, failed, b = asyncio.run(main())
        assert a is None and b is None
        assert isinstance(failed, StoreError) and failed.source_id == "never"
        ids = {s.source_id for s in store.source_states()}
        assert ids == {"a", "b", "half"}


def test_a_failed_commit_fails_every_write_of_the_batch(db_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    with Store(db_path) as store:
        save(store, "before")
    before = dump(db_path)
    with Store(db_path) as store:
        real = store._db.conn
        commits: list[str] = []

        class FailingCommit:
            def __getattr__(self, name: str) -> Any:
                return getattr(real, name)

            def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
                if sql == "COMMIT":
                    commits.append(sql)
                    if len(commits) == 2:  # the first batch commits, the next fails
                        raise sqlite3.OperationalError("disk I/O error")
                return real.execute(sql, *args)

        monkeypatch.setattr(store._db, "conn", FailingCommit())

        async def main() -> list[Any]:
            async with StoreWriter(store, window=0.0) as writer:
                await writer.call(lambda: None)  # the first commit goes through
                calls = [writer.call(lambda i=i: save(store, f"s{i}")) for i in range(5)]
                return await asyncio.gather(*calls, return_exceptions=True)

        results = asyncio.run(main())
        assert all(isinstance(r, StoreError) and "commit failed" in r.message
                   for r in results), results
        assert not real.in_transaction
        monkeypatch.undo()
    assert dump(db_path) == before  # nothing of the failed batch is stored


def test_new_requests_wait_while_downloaded_bodies_pile_up() -> None:
    from signal_feeds.run.pipeline import _Backlog

    async def admitted_after(backlog: _Backlog, unblock: Callable[[], None]) -> bool:
        task = asyncio.ensure_future(backlog.admit())
        await asyncio.sleep(0.05)
        waited = not task.done()
        unblock()
        await asyncio.wait_for(task, 2)
        backlog.release(task.result())
        return waited

    async def main() -> None:
        limit = 4 * 100_000
        backlog = _Backlog(limit=limit)
        first = await backlog.admit()  # nothing waiting: at once
        backlog.release(first)
        size = backlog.charge(100_000)  # the body and its parsed rows
        assert size == limit  # about 2.5 times the body as Python objects, plus the body
        assert await admitted_after(backlog, lambda: backlog.refund(size))
        # A download under way counts as the mean response so far, until it ends.
        small = backlog.charge(20_000)
        backlog.refund(small)
        guesses = [await backlog.admit(), await backlog.admit()]
        assert guesses == [(size + small) // 2] * 2  # 240,000 each: two fill the limit
        assert await admitted_after(backlog, lambda: backlog.release(guesses.pop()))
        backlog.release(guesses.pop())
        assert backlog.used == backlog.reserved == 0
        # A body already in hand (waiting to be parsed) waits for room as a whole.
        held = await backlog.take(100_000)
        waiter = asyncio.ensure_future(backlog.take(1))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        backlog.refund(held)
        backlog.refund(await asyncio.wait_for(waiter, 2))
        assert backlog.used == 0

    asyncio.run(main())
