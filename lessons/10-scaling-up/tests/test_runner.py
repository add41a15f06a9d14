"""Many sources at once: limits seen from the servers, the same results, flat memory."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import tracemalloc
from contextlib import ExitStack, closing
from pathlib import Path

import pytest
from signal_lesson.config import Config, Source
from signal_lesson.fetch import new_client
from signal_lesson.identity import Identified, Row
from signal_lesson.parse import NORMALIZER_VERSION
from signal_lesson.pipeline import run, update_source
from signal_lesson.runner import Concurrency, run_async
from signal_lesson.server import InFlight, TeachingServer
from signal_lesson.store import Store

LESSON_DIR = Path(__file__).resolve().parents[1]
FEEDS = ("demo-rss.xml", "demo-atom.xml", "variants/no-dates.xml", "variants/zones.xml")


def crowd(tmp_path: Path, concurrency: Concurrency, *, hosts: int = 3, delay: float = 0.3):
    everywhere = InFlight()
    with ExitStack() as stack:
        servers = [stack.enter_context(TeachingServer(delay=delay, shared=everywhere))
                   for _ in range(hosts)]
        sources = tuple(Source(f"h{n}-{i}", server.url(f"/feeds/{feed}"))
                        for n, server in enumerate(servers) for i, feed in enumerate(FEEDS))
        store = stack.enter_context(Store(tmp_path / "crowd.db"))
        report = asyncio.run(run_async(Config("crowd", sources), store,
                                       concurrency=concurrency))
        logs = [list(server.log) for server in servers]
    return report, [s.in_flight.peak for s in servers], everywhere.peak, logs


def test_limits_hold_per_host_and_in_all(tmp_path: Path) -> None:
    report, per_host, overall, _ = crowd(tmp_path, Concurrency(total=4, per_host=2))
    assert [r.status for r in report.sources] == ["fetched"] * 12
    assert max(per_host) == 2 and overall == 4


def test_without_limits_the_servers_see_a_burst(tmp_path: Path) -> None:
    _, per_host, overall, _ = crowd(tmp_path, Concurrency(total=100, per_host=100))
    assert overall > 4 and max(per_host) > 2


def test_connections_are_pooled_and_reused(tmp_path: Path) -> None:
    _, _, _, logs = crowd(tmp_path, Concurrency(total=2, per_host=2), hosts=1, delay=0.0)
    requests = logs[0]
    assert len(requests) == 4
    assert len({request.connection for request in requests}) <= 2


def test_concurrent_results_equal_sequential_ones(tmp_path: Path) -> None:
    """With two worker processes parsing, a contradiction among them."""
    paths = {"rss": "/feeds/demo-rss.xml", "missing": "/feeds/missing.xml",
             "contradiction": "/feeds/variants/demo-rss-contradiction.xml",
             "gone": "/scenario/gone", "atom": "/feeds/demo-atom.xml"}
    with TeachingServer() as server, new_client() as client:
        config = Config("t", tuple(Source(k, server.url(v)) for k, v in paths.items()))
        with Store(tmp_path / "one.db") as store:
            sequential = run(config, store, client)
        with Store(tmp_path / "two.db") as store:
            concurrent = asyncio.run(run_async(config, store,
                                               concurrency=Concurrency(workers=2)))
    strip = [{**r.to_dict(), "next_due": None} for r in sequential.sources]
    assert strip == [{**r.to_dict(), "next_due": None} for r in concurrent.sources]
    assert [r.source for r in concurrent.sources] == list(paths)  # list order, always
    assert [r.status for r in concurrent.sources] == ["fetched", "failed", "rejected",
                                                      "gone", "fetched"]
    assert "release-1" in (concurrent.sources[2].error or "")  # rejected in a worker


def rows(source_id: str, count: int, start: int = 0) -> Identified:
    return Identified(source_id, tuple(
        Row(f"{source_id}-{n:08d}", source_id, f"id-{n}", "", f"title {n}", "", "",
            f"fp-{n}", NORMALIZER_VERSION) for n in range(start, start + count)), 0)


def peak_of_a_small_response(store: Store) -> int:
    tracemalloc.start()
    try:
        store.apply(rows("big", 3), store.validators("big"))
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_follows_the_response_not_the_database(tmp_path: Path) -> None:
    with Store(tmp_path / "small.db") as small, Store(tmp_path / "large.db") as large:
        for store in (small, large):
            store.add_source("big", "https://example.org/big.xml")
        large.apply(rows("big", 20_000, start=10), large.validators("big"))
        empty, full = peak_of_a_small_response(small), peak_of_a_small_response(large)
    # Loading 20,000 keys and fingerprints would take megabytes; by key, it stays small.
    assert full < 2 * empty + 64 * 1024, (empty, full)


def test_lookups_go_through_the_primary_key(tmp_path: Path) -> None:
    with Store(tmp_path / "plan.db") as store:
        plan = store.db.execute("EXPLAIN QUERY PLAN SELECT id, fingerprint FROM entries "
                                "WHERE id IN (?, ?)", ["a", "b"]).fetchall()
    details = " ".join(str(step[-1]) for step in plan)
    assert "SEARCH entries" in details and "SCAN entries" not in details


def test_two_runs_at_once_neither_corrupt_nor_duplicate(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    command = [sys.executable, "-m", "signal_lesson", "fetch", "--config", "demo.toml",
               "--db", str(db), "--teaching-server", "--force",
               "--source", "demo-rss", "--source", "demo-atom"]
    runs = [subprocess.Popen(command, cwd=LESSON_DIR, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE) for _ in range(2)]
    for process in runs:
        _, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
    with closing(sqlite3.connect(db)) as conn, conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT count(*), count(DISTINCT id) FROM entries").fetchone() \
            == (5, 5)
        assert conn.execute("SELECT count(*) FROM fetches").fetchone() == (4,)
    conn.close()


class Recorder:
    """Wraps a Store and writes down every attribute the pipeline asks it for."""

    def __init__(self, store: Store) -> None:
        self._store, self.used = store, set()

    def __getattr__(self, name: str):
        self.used.add(name)
        return getattr(self._store, name)


INTERFACE = {"add_source", "clock", "source_state", "validators", "save_schedule",
             "not_modified", "apply", "failed"}


@pytest.mark.parametrize("concurrent", [False, True])
def test_the_pipeline_needs_a_narrow_store(tmp_path: Path, concurrent: bool) -> None:
    paths = ["/feeds/demo-rss.xml", "/feeds/missing.xml", "/feeds/demo-rss.xml"]
    with TeachingServer() as server, new_client() as client, \
            Store(tmp_path / "n.db") as store:
        recorder = Recorder(store)
        config = Config("t", tuple(Source(f"s{n}", server.url(p)) for n, p in enumerate(paths)))
        for _ in range(2):
            if concurrent:
                asyncio.run(run_async(config, recorder, force=True))  # type: ignore[arg-type]
            else:
                for source in config.sources:
                    update_source(recorder, client, source.id, source.url,  # type: ignore[arg-type]
                                  force=True)
    assert recorder.used == INTERFACE
