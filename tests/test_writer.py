"""The run's write stage (many responses per commit, each failing or succeeding alone)
and the queues that join the stages (bounded by memory)."""

from __future__ import annotations

import asyncio
import datetime as dt
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any

import pytest
from conftest import dump, make_config
from pytest_httpserver import HTTPServer

from signal_feeds import Store, run_fetch
from signal_feeds.errors import StoreError
from signal_feeds.run import stages
from signal_feeds.run.queues import StageQueue
from signal_feeds.run.writer import Write, WriteStage
from signal_feeds.store import FetchRecord, SourceState

NOW = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


def save(store: Store, source_id: str) -> None:
    store.save_attempt(SourceState(source_id=source_id, url=f"https://{source_id}.example/"),
                       FetchRecord(source_id=source_id, started_at=NOW, url="u",
                                   outcome="not_modified", http_status=304))


class Writer:
    """A write stage on its own queue, as a run drives it."""

    def __init__(self, stage: WriteStage) -> None:
        self.stage = stage
        self.remaining = 1_000  # "more may come", until a test says otherwise

    def call(self, fn: Callable[[], Any]) -> asyncio.Future[Any]:
        result: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.stage.queue.put(Write(fn, result), 1)
        return result

    @property
    def batches(self) -> int:
        return self.stage.batches


@asynccontextmanager
async def writer_for(store: Store, **options: Any) -> AsyncIterator[Writer]:
    queue: StageQueue[Write] = StageQueue(1_000_000, first_guess=1)
    box: list[Writer] = []
    stage = WriteStage(store, queue, remaining=lambda: box[0].remaining, **options)
    box.append(Writer(stage))
    task = asyncio.create_task(stage.run())
    try:
        yield box[0]
    finally:
        queue.close()
        await task


def test_writes_within_the_window_share_one_commit(db_path: Path) -> None:
    async def main(store: Store) -> int:
        async with writer_for(store, window=30.0) as writer:
            calls = []
            for i in range(20):  # arriving one by one, as parsed responses do
                calls.append(asyncio.ensure_future(writer.call(lambda i=i: save(store, f"s{i}"))))
                await asyncio.sleep(0.005)
            writer.remaining = 0  # the run says nothing more will come
            calls.append(asyncio.ensure_future(writer.call(lambda: save(store, "last"))))
            # Committed at once, not after the 30 s window.
            await asyncio.wait_for(asyncio.gather(*calls), 10)
            return writer.batches

    with Store(db_path) as store:
        assert asyncio.run(main(store)) == 1
        assert store.count("sources") == 21 and store.count("fetches") == 21


def test_without_a_window_writes_that_queue_meanwhile_share_the_next_commit(db_path: Path) -> None:
    gate = threading.Event()

    async def main(store: Store) -> tuple[list[Any], int]:
        async with writer_for(store, window=0.0) as writer:
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
        assert batches == 3  # the gate; the twenty queued meanwhile, together; "later"
        assert store.count("sources") == 21 and store.count("fetches") == 21


def test_a_failing_write_is_undone_alone(db_path: Path) -> None:
    def half_then_fail() -> None:
        save(store, "half")  # this one's savepoint is released ...
        with store._db.transaction() as conn:  # ... this one is rolled back
            conn.execute("INSERT INTO sources (id, url) VALUES ('never', 'x')")
            raise StoreError("injected", source_id="never")

    async def main() -> list[Any]:
        async with writer_for(store) as writer:
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
            async with writer_for(store, window=0.0) as writer:
                await writer.call(lambda: None)  # the first commit goes through
                calls = [writer.call(lambda i=i: save(store, f"s{i}")) for i in range(5)]
                return await asyncio.gather(*calls, return_exceptions=True)

        results = asyncio.run(main())
        assert all(isinstance(r, StoreError) and "commit failed" in r.message
                   for r in results), results
        assert not real.in_transaction
        monkeypatch.undo()
    assert dump(db_path) == before  # nothing of the failed batch is stored


def test_producers_wait_while_queued_items_fill_the_limit() -> None:
    async def waited(coro: Any, unblock: Callable[[], None]) -> Any:
        task = asyncio.ensure_future(coro)
        await asyncio.sleep(0.05)
        assert not task.done()
        unblock()
        return await asyncio.wait_for(task, 2)

    async def main() -> None:
        queue: StageQueue[str] = StageQueue(400_000, first_guess=1_000)
        first = await queue.reserve()  # nothing waiting: at once, at the first guess
        assert first == 1_000
        queue.put("a", 400_000, reservation=first)  # a body and its parsed rows
        # Full: the next producer waits until the consumer is done with "a".
        taken = await queue.get()
        assert taken == ("a", 400_000)
        later = await waited(queue.reserve(), lambda: queue.done(400_000))
        # A reservation is the mean cost so far.
        assert later == 400_000 and queue.reserved == 400_000
        queue.cancel(later)
        queue.put("b", 100_000, reservation=await queue.reserve())
        queue.put("c", 100_000, reservation=await queue.reserve())
        assert (queue.used, queue.reserved) == (200_000, 0)
        guess = await queue.reserve()
        assert guess == 200_000  # (400,000 + 100,000 + 100,000) / 3
        # Reserved plus queued is at the limit: wait for a consumer.
        def consume_one() -> None:
            item = queue.get_nowait()
            assert item is not None
            queue.done(item[1])

        third = await waited(queue.reserve(), consume_one)
        queue.cancel(guess)
        queue.cancel(third)
        assert queue.reserved == 0
        # An empty queue admits one item whatever its size, so nothing stalls for ever.
        while (item := queue.get_nowait()) is not None:
            queue.done(item[1])
        assert queue.used == 0
        queue.put("huge", 10_000_000, reservation=await queue.reserve())
        queue.close()
        assert await queue.get() == ("huge", 10_000_000)
        assert await queue.get() is None  # closed and empty

    asyncio.run(main())


def _rows(source_id: str, title: str) -> Any:
    from signal_feeds.identity.keys import identify
    from signal_feeds.parse.feed import parse_feed

    body = (f"<rss version='2.0'><channel><title>{source_id}</title><item>"
            f"<guid>{source_id}-1</guid><title>{title}</title>"
            f"<description>&lt;p&gt;Words of {title}&lt;/p&gt;</description>"
            "</item></channel></rss>").encode()
    return identify(source_id, parse_feed(body).entries).rows


def test_the_full_text_index_commits_with_its_batch_and_a_failed_write_leaves_none(
        db_path: Path) -> None:
    # Index rows are written at the end of the batch, not inside each write's savepoint
    # (see Connection.before_commit): a write undone inside the batch must take its
    # index rows with it, and the others must be searchable once the batch commits.
    def store_response(source_id: str, title: str) -> None:
        store.apply_response(SourceState(source_id=source_id, url=f"https://{source_id}/"),
                             _rows(source_id, title),
                             FetchRecord(source_id=source_id, started_at=NOW, url="u",
                                         outcome="fetched", http_status=200), NOW)

    def store_then_fail() -> None:
        with store._db.transaction():
            store_response("b", "tunnel")
            raise StoreError("injected", source_id="b")

    async def main() -> list[Any]:
        async with writer_for(store) as writer:
            calls = [writer.call(lambda: store_response("a", "bridge")),
                     writer.call(store_then_fail),
                     writer.call(lambda: store_response("c", "ferry"))]
            return await asyncio.gather(*calls, return_exceptions=True)

    with Store(db_path) as store:
        a, failed, c = asyncio.run(main())
        assert a is None and c is None and isinstance(failed, StoreError)
        found = store.search("bridge OR tunnel OR ferry")
        assert sorted(hit.entry.title for hit in found) == ["bridge", "ferry"]
        assert len(store.search("words")) == 2 and not store.search("tunnel")
    with closing(sqlite3.connect(db_path)) as conn, conn:
        assert conn.execute("SELECT count(*) FROM entries_fts").fetchone()[0] == 2
        assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == 2


def test_a_failed_write_of_a_stopped_source_is_not_reported_as_never_retrieved() -> None:
    # The database went away while a run stopped: the source's report was cancelled,
    # then its write failed, and asyncio printed "Future exception was never retrieved"
    # under the run's one-line error (a test failed about once in eight).
    import gc

    from signal_feeds.errors import DatabaseUnavailableError
    from signal_feeds.run.written import report_when_written as _report

    complaints: list[dict[str, Any]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: complaints.append(context))
        report: asyncio.Future[Any] = loop.create_future()
        written: asyncio.Future[Any] = loop.create_future()
        report.cancel()
        written.set_exception(DatabaseUnavailableError("not stored: the commit failed"))
        _report(report, None, written)  # type: ignore[arg-type]  # not read: cancelled
        del report, written
        gc.collect()

    asyncio.run(main())
    assert complaints == []


def test_a_stop_drops_the_writes_still_queued(db_path: Path) -> None:
    # Ctrl-C went on storing every response already parsed, 30-40 s of them in a
    # review's run: a stop now ends with the batch being committed.
    gate = threading.Event()

    async def main(store: Store) -> list[Any]:
        async with writer_for(store, window=0.0) as writer:
            first = writer.call(lambda: (gate.wait(5), save(store, "committing")))
            await asyncio.sleep(0.05)  # the first batch is being committed
            queued = [writer.call(lambda i=i: save(store, f"s{i}")) for i in range(20)]
            writer.stage.stop()
            gate.set()
            return await asyncio.gather(first, *queued, return_exceptions=True)

    with Store(db_path) as store:
        first, *queued = asyncio.run(main(store))
        assert not isinstance(first, BaseException)  # stored whole
        assert all(isinstance(r, asyncio.CancelledError) for r in queued)
        assert {s.source_id for s in store.source_states()} == {"committing"}


def test_parsed_rows_are_counted_by_their_body_in_the_write_queue(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The write queue's byte bound counted every parsed response at the reservation's
    # guess (an average of earlier guesses: 256 KiB each), so a 3 MB feed's rows took
    # no more room than a small one's and the bound held about 32 responses, whatever
    # their size.
    items = "".join(f"<item><guid>g{i}</guid><title>Entry {i}</title>"
                    f"<description>{'word ' * 200}</description></item>"
                    for i in range(1500))
    body = f'<rss version="2.0"><channel><title>Big</title>{items}</channel></rss>'.encode()
    counted: list[tuple[str, int]] = []
    put = StageQueue.put

    def recording_put(self: StageQueue[Any], item: Any, cost: int, *,
                      reservation: int = 0) -> None:
        counted.append((type(item).__name__, cost))
        put(self, item, cost, reservation=reservation)

    monkeypatch.setattr(StageQueue, "put", recording_put)
    with HTTPServer(host="127.0.0.1") as server:
        server.expect_request("/big.xml").respond_with_data(
            body, content_type="application/rss+xml")
        report = run_fetch(make_config(tmp_path / "signal.db",
                                       {"big": server.url_for("/big.xml")}))
    assert report.get("big").created == 1500
    writes = [cost for kind, cost in counted if kind == "Write"]
    assert max(writes) >= stages.COST_PER_BODY_BYTE * len(body), (len(body), writes)
