"""The run's store writer: many responses per commit, each failing or succeeding alone."""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import dump

from signal_feeds import Store
from signal_feeds.errors import StoreError
from signal_feeds.store import FetchRecord, SourceState
from signal_feeds.writer import StoreWriter

NOW = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


def save(store: Store, source_id: str) -> None:
    store.save_attempt(SourceState(source_id=source_id, url=f"https://{source_id}.example/"),
                       FetchRecord(source_id=source_id, started_at=NOW, url="u",
                                   outcome="not_modified", http_status=304))


def test_waiting_writes_share_one_commit(db_path: Path) -> None:
    gate = threading.Event()

    async def main(store: Store) -> tuple[list[Any], int]:
        async with StoreWriter(store) as writer:
            # The first write holds the writer thread until the others are queued.
            first = asyncio.ensure_future(writer.call(lambda: gate.wait(5)))
            await asyncio.sleep(0.05)  # the writer has taken it and waits on the gate
            rest = [asyncio.ensure_future(writer.call(lambda i=i: save(store, f"s{i}")))
                    for i in range(20)]
            await asyncio.sleep(0.05)
            gate.set()
            results = await asyncio.gather(first, *rest)
            return results, writer.batches

    with Store(db_path) as store:
        results, batches = asyncio.run(main(store))
        assert results[0] is True and results[1:] == [None] * 20
        assert batches == 2  # the gate alone, then all twenty together
        assert store.count("sources") == 20 and store.count("fetches") == 20


def test_a_failing_write_is_undone_alone(db_path: Path) -> None:
    def half_then_fail() -> None:
        save(store, "half")  # this one's savepoint is released ...
        with store.transaction() as conn:  # ... this one is rolled back
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
    gate = threading.Event()

    with Store(db_path) as store:
        real = store._conn
        commits: list[str] = []

        class FailingCommit:
            def __getattr__(self, name: str) -> Any:
                return getattr(real, name)

            def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
                if sql == "COMMIT":
                    commits.append(sql)
                    if len(commits) == 2:  # the holder's batch commits, the next fails
                        raise sqlite3.OperationalError("disk I/O error")
                return real.execute(sql, *args)

        monkeypatch.setattr(store, "_conn", FailingCommit())

        async def main() -> list[Any]:
            async with StoreWriter(store) as writer:
                holder = asyncio.ensure_future(writer.call(lambda: gate.wait(5)))
                await asyncio.sleep(0.05)
                calls = [asyncio.ensure_future(writer.call(lambda i=i: save(store, f"s{i}")))
                         for i in range(5)]
                await asyncio.sleep(0.05)
                gate.set()
                await holder
                return await asyncio.gather(*calls, return_exceptions=True)

        results = asyncio.run(main())
        assert all(isinstance(r, StoreError) and "commit failed" in r.message
                   for r in results), results
        assert not real.in_transaction
        monkeypatch.undo()
    assert dump(db_path) == before  # nothing of the failed batch is stored
