"""Several ``signal fetch`` workers on one database: real processes, a real HTTP server.

The server (scenario_server) logs every request and counts the requests in flight, so
"requested exactly once" and "never more than per_host at once" are read from what it
saw, not from what the workers say they did.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from conftest import FIXTURES, make_config, query
from scenario_server import ScenarioServer, ScriptedResponse

from signal_feeds import run_fetch
from signal_feeds.run import pipeline
from signal_feeds.store import Store, leases, open_store
from signal_feeds.store.leases import (
    Candidate,
    Lease,
    choose_claims,
    may_claim,
    owner_is_gone,
    worker_id,
)

ENTRIES_PER_SOURCE = 3
RSS_TYPE = ("Content-Type", "application/rss+xml; charset=utf-8")


def feed(n: int) -> bytes:
    """Source ``n``'s feed: entries whose ids, titles and links no other source has."""
    items = "".join(
        f"<item><guid>s{n}-e{k}</guid><title>Story {k} of source {n}</title>"
        f"<link>https://example.org/{n}/{k}</link></item>"
        for k in range(ENTRIES_PER_SOURCE))
    return (f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel>'
            f"<title>Source {n}</title>{items}</channel></rss>").encode()


def serve_sources(server: ScenarioServer, count: int, *, delay: float) -> dict[str, str]:
    """``count`` feeds on the server, each answered after ``delay`` seconds: id -> URL."""
    urls = {}
    for n in range(count):
        path = f"/w/{n}.xml"
        server.script(path, [ScriptedResponse(200, (RSS_TYPE,), feed(n), delay=delay)])
        urls[f"s{n:04d}"] = server.url(path)
    return urls


def write_config(folder: Path, urls: dict[str, str], **settings: object) -> Path:
    """A source list with every source due at once and polled hourly."""
    settings = {"min_interval": 3600, **settings}
    lines = ["[settings]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    for sid, url in urls.items():
        lines += ["", "[[sources]]", f'id = "{sid}"', f'url = "{url}"']
    path = folder / "signal.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


_STARTED: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_worker_outlives_its_test() -> Iterator[None]:
    yield
    while _STARTED:
        worker = _STARTED.pop()
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.communicate()


def start_worker(config: Path, database: Path | str,
                 name: str | None = None) -> subprocess.Popen[str]:
    """``signal fetch --json`` in a process group of its own (its parser processes
    included), so that a SIGKILL can take the whole worker down as a dying host would."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    worker = subprocess.Popen(
        [sys.executable, "-m", "signal_feeds", "fetch", "--config", str(config),
         "--db", str(database), "--json", *(["--worker", name] if name else [])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True)
    _STARTED.append(worker)
    return worker


def finish(worker: subprocess.Popen[str], timeout: float = 300) -> dict[str, object]:
    out, err = worker.communicate(timeout=timeout)
    assert worker.returncode == 0, err
    report: dict[str, object] = json.loads(out)
    return report


def statuses(report: dict[str, object]) -> dict[str, str]:
    sources = report["sources"]
    assert isinstance(sources, list)
    return {s["source"]: s["status"] for s in sources}


def requests_per_source(server: ScenarioServer) -> collections.Counter[str]:
    """How many requests the server saw for each source (by its feed's path)."""
    counts: collections.Counter[str] = collections.Counter()
    for record in server.requests:
        path = urlsplit(record.path).path
        if path.startswith("/w/"):
            counts[f"s{int(path[3:].removesuffix('.xml')):04d}"] += 1
    return counts


def stored(database: Path | str) -> tuple[dict[str, int], collections.Counter[str], int]:
    """Row counts per table, entries per source, and changes logged as created."""
    with open_store(database) as store:
        counts = dict(store.table_counts())
        per_source = collections.Counter(e.source_id for e in store.entries(
            include_duplicates=True))
        changes = store.changes(limit=1_000_000)
    return counts, per_source, sum(1 for c in changes if c.kind == "created")


def assert_each_stored_once(database: Path | str, ids: Sequence[str]) -> None:
    """Every source's entries stored once, from one stored response per source."""
    counts, per_source, created = stored(database)
    assert per_source == {sid: ENTRIES_PER_SOURCE for sid in ids}
    total = len(ids) * ENTRIES_PER_SOURCE
    assert counts["entries"] == counts["entry_versions"] == created == total
    # A fetch row per stored response: each source has one (it has entries), so a
    # second response stored for any source would show here.
    assert counts["fetches"] == len(ids)


def test_four_workers_started_at_once_request_each_source_once(
        server: ScenarioServer, tmp_path: Path, database: Path | str) -> None:
    urls = serve_sources(server, 400, delay=0.05)
    config = write_config(tmp_path, urls, concurrency=10, per_host=64)

    workers = [start_worker(config, database) for _ in range(4)]
    reports = [finish(w) for w in workers]

    assert requests_per_source(server) == {sid: 1 for sid in urls}
    assert_each_stored_once(database, list(urls))
    fetched_by = collections.Counter(
        sid for report in reports for sid, status in statuses(report).items()
        if status == "fetched")
    assert fetched_by == {sid: 1 for sid in urls}
    # Each worker accounts for every source: fetched itself, or another worker's.
    for report in reports:
        assert set(statuses(report).values()) <= {"fetched", "not_due", "leased"}
    with open_store(database) as store:
        assert store.leases() == {}  # every lease given back


def test_a_worker_killed_mid_run_loses_nothing(
        server: ScenarioServer, tmp_path: Path, database: Path | str) -> None:
    urls = serve_sources(server, 40, delay=0.5)
    # Outlasts starting the second worker on a loaded machine: at the kill a lease has
    # between two thirds and all of it left (renewed every third).
    lease_seconds = 20
    config = write_config(tmp_path, urls, concurrency=4, per_host=64,
                          lease_seconds=lease_seconds)

    # Named workers, as on three hosts: nobody can see that host-a's process is gone.
    doomed = start_worker(config, database, "host-a")
    deadline = time.monotonic() + 120
    while len(server.requests) < 10:  # some responses stored, some in flight
        assert doomed.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(doomed.pid, signal.SIGKILL)
    doomed.communicate()
    killed_at = time.monotonic()

    with open_store(database) as store:
        held = store.leases()
    assert held, "the killed worker held no lease: it was not mid-run"
    assert {lease.owner for lease in held.values()} == {"host-a"}
    # `signal sources` says who holds them, and since when.
    shown = subprocess.run(
        [sys.executable, "-m", "signal_feeds", "sources", "--config", str(config),
         "--db", str(database), "--json"], capture_output=True, text=True, check=True)
    rows = {r["id"]: r for r in json.loads(shown.stdout)["sources"]}
    assert {sid for sid, r in rows.items() if r["leased_by"]} == set(held)
    for sid, lease in held.items():
        assert rows[sid]["leased_by"] == lease.owner
        assert dt.datetime.fromisoformat(rows[sid]["leased_at"]) == lease.leased_at

    # At once, the dead worker's sources are still leased: the next run leaves them.
    second = statuses(finish(start_worker(config, database, "host-b")))
    assert {sid for sid, status in second.items() if status == "leased"} == set(held)

    # Once the leases have expired, the next run completes them.
    time.sleep(max(0.0, killed_at + lease_seconds + 0.5 - time.monotonic()))
    third = statuses(finish(start_worker(config, database, "host-c")))
    assert {sid for sid, status in third.items() if status == "fetched"} == set(held)

    assert_each_stored_once(database, list(urls))
    requested = requests_per_source(server)
    assert set(requested) == set(urls)
    # Only what was in flight when the worker died was asked for twice.
    assert {sid for sid, n in requested.items() if n > 1} <= set(held)
    assert max(requested.values()) <= 2
    with open_store(database) as store:
        assert store.leases() == {}


def test_per_host_holds_across_workers(
        server: ScenarioServer, tmp_path: Path, database: Path | str) -> None:
    urls = serve_sources(server, 40, delay=0.3)
    config = write_config(tmp_path, urls, concurrency=8, per_host=2)

    workers = [start_worker(config, database) for _ in range(3)]
    reports = [finish(w) for w in workers]

    assert requests_per_source(server) == {sid: 1 for sid in urls}
    busy = [r for r in reports if "fetched" in statuses(r).values()]
    assert len(busy) >= 2, "one worker did everything: the limit was not shared"
    # Every source is on one host (127.0.0.1): never more than per_host at once, in all.
    assert 1 <= server.peak_in_flight <= 2


def test_workers_running_at_once_respect_a_pause_another_was_told(
        server: ScenarioServer, tmp_path: Path, database: Path | str) -> None:
    # One worker was told 429 with Retry-After and went past the host's other sources
    # without asking them, giving their leases back; they were still due, so a worker
    # running beside it claimed and fetched them all (26 requests after the 429).
    urls = serve_sources(server, 30, delay=0.3)
    server.script("/w/0.xml", [ScriptedResponse(429, (("Retry-After", "3600"),), b"")])
    config = write_config(tmp_path, urls, concurrency=2, per_host=2)

    workers = [start_worker(config, database, f"w{i}") for i in range(2)]
    reports = [finish(w) for w in workers]

    told = [r for r in server.requests if urlsplit(r.path).path == "/w/0.xml"]
    after = [r for r in server.requests if r.started > told[0].finished]
    # Only what either worker already held when the 429 came (two chunks of
    # `concurrency` each) may still go out; before, every other source did.
    assert len(after) <= 2 * 2 * 2, [r.path for r in after]
    requested = {sid for report in reports for sid, status in statuses(report).items()
                 if status == "fetched"}
    with open_store(database) as store:
        waiting = {s.source_id for s in store.source_states()
                   if s.retry_after is not None and s.source_id not in requested}
    assert waiting | requested | {"s0000"} == set(urls)


# -- the pure decision and the SQLite host gate, without workers -------------------------

NOW = dt.datetime(2026, 12, 4, 12, tzinfo=dt.UTC)
URL = "https://example.org/feed"


def lease(owner: str, expires_in: float) -> Lease:
    return Lease(owner=owner, leased_at=NOW - dt.timedelta(seconds=60),
                 expires=NOW + dt.timedelta(seconds=expires_in))


@pytest.mark.parametrize(("candidate", "force", "claimable"), [
    (Candidate("a"), False, True),  # never stored
    (Candidate("a", URL, next_due_at=NOW + dt.timedelta(hours=1)), False, False),
    (Candidate("a", URL, next_due_at=NOW + dt.timedelta(hours=1)), True, True),
    (Candidate("a", "https://example.org/old", next_due_at=NOW + dt.timedelta(hours=1)),
     False, True),  # stored for another URL: a fresh state, due
    (Candidate("a", URL, next_due_at=NOW - dt.timedelta(seconds=1)), False, True),
    (Candidate("a", URL, gone=True), True, False),
    (Candidate("a", URL, retry_after=NOW + dt.timedelta(seconds=5)), True, False),
    (Candidate("a", URL, lease=lease("other:1", 30)), False, False),
    (Candidate("a", URL, lease=lease("other:1", 30)), True, False),
    (Candidate("a", URL, lease=lease("other:1", -1)), False, True),  # expired
    (Candidate("a", URL, lease=lease("me:1", 30)), False, True),  # its own
])
def test_may_claim(candidate: Candidate, force: bool, claimable: bool) -> None:
    assert may_claim(candidate, url=URL, owner="me:1", now=NOW, lease_now=NOW,
                     force=force) is claimable


def test_choose_claims_keeps_the_order_and_the_limit() -> None:
    taken = Candidate("b", URL, lease=lease("other:1", 30))
    candidates = [Candidate("a"), taken, Candidate("c"), Candidate("d")]
    urls = {c.source_id: URL for c in candidates}
    assert choose_claims(candidates, urls, owner="me:1", now=NOW, lease_now=NOW,
                         force=False, limit=2) == ["a", "c"]


def test_the_lease_expiry_is_the_database_clock_not_the_workers() -> None:
    held = Candidate("a", URL, lease=lease("other:1", 30))
    # The worker's clock is far ahead; the database says the lease is still running.
    assert not may_claim(held, url=URL, owner="me:1", now=NOW + dt.timedelta(days=1),
                         lease_now=NOW, force=False)


def test_claims_on_one_database_exclude_each_other(database: Path | str) -> None:
    urls = {f"s{n}": f"{URL}/{n}" for n in range(10)}
    with open_store(database) as first, open_store(database) as second:
        mine = first.claim_sources(urls, owner="a:1", now=NOW, limit=4)
        theirs = second.claim_sources(urls, owner="b:2", now=NOW, limit=100)
        assert list(mine) == ["s0", "s1", "s2", "s3"]
        assert set(theirs) == set(urls) - set(mine)
        assert second.claim_sources(urls, owner="c:3", now=NOW, limit=100) == {}
        assert {sid: lease.owner for sid, lease in first.leases().items()} == {
            **{sid: "a:1" for sid in mine}, **{sid: "b:2" for sid in theirs}}
        # Another worker's lease is never given back by someone else.
        assert second.release_sources(list(mine), owner="b:2") == 0
        assert first.release_sources(None, owner="a:1") == 4
        assert set(second.claim_sources(urls, owner="c:3", now=NOW, limit=100)) == set(mine)
        assert first.renew_leases(owner="b:2") == 6


def _hold_slot(database: str, ready: Any, done: Any, host: str = "Example.org",
               per_host: int = 2) -> None:
    """Another worker that holds slot 0 of ``host``, does nothing more, and exits
    without giving it back."""
    with open_store(database) as store:
        gate = store.host_gate()
        assert gate.take(host, per_host) == 0
        ready.set()
        done.wait(60)


def test_the_file_gate_counts_slots_across_processes(tmp_path: Path) -> None:
    db = tmp_path / "gate.db"
    Store(db).close()
    context = multiprocessing.get_context("spawn")
    ready, done = context.Event(), context.Event()
    holder = context.Process(target=_hold_slot, args=(str(db), ready, done))
    holder.start()
    try:
        assert ready.wait(30)
        with Store(db) as store:
            gate = store.host_gate()
            assert gate.take("example.org", 2) == 1  # slot 0 is the other process's
            assert gate.take("example.org", 2) is None
            assert gate.take("other.example", 2) == 0
            gate.give_back("example.org", 1)
            assert gate.take("example.org", 2) == 1
            done.set()
            holder.join(30)
            # The holder exited without giving its slot back: the kernel did.
            assert gate.take("example.org", 2) == 0
            gate.close()
    finally:
        done.set()
        holder.join(30)


def _ask_in_line(database: str, ready: Any, go: Any, took: Any, done: Any) -> None:
    """Another worker whose request finds the slot of example.org held, stands in line,
    and takes the slot when told to."""
    with open_store(database) as store:
        gate = store.host_gate()
        assert gate.take("example.org", 1) is None
        gate.join_line("example.org")
        ready.set()
        go.wait(60)
        assert gate.take("example.org", 1, in_line=True) == 0
        gate.leave_line("example.org")
        took.set()
        done.wait(60)


def test_a_slot_given_back_goes_to_the_worker_waiting_in_line(database: Path | str) -> None:
    # The worker holding a host's slot handed it to its own next request at once, every
    # time, while a request of another worker asked only every 50-75 ms: with more
    # workers than per_host, that request waited for as long as the holder had requests
    # for the host, and failed "held by other workers" though none was hung.
    open_store(database).close()
    context = multiprocessing.get_context("spawn")
    ready, go, took, done = (context.Event() for _ in range(4))
    other = context.Process(target=_ask_in_line, args=(str(database), ready, go, took, done))
    with open_store(database) as store:
        gate = store.host_gate()
        try:
            assert gate.take("example.org", 1) == 0
            other.start()
            assert ready.wait(30)
            gate.give_back("example.org", 0)
            # This worker's next request asks first, and waits its turn all the same.
            assert gate.take("Example.org", 1) is None
            gate.join_line("example.org")
            go.set()
            assert took.wait(30)
            assert gate.take("example.org", 1, in_line=True) is None  # the other's now
            # Its own place in line never holds back this worker's first asks.
            assert gate.take("other.example", 1) == 0
            done.set()
            other.join(30)
            gate.leave_line("example.org")
            deadline = time.monotonic() + 10  # a server process ends a moment after
            while (slot := gate.take("example.org", 1)) is None \
                    and time.monotonic() < deadline:
                time.sleep(0.05)
            assert slot == 0  # the other worker is gone, and its place in line with it
        finally:
            gate.close()
            done.set()
            go.set()
            if other.is_alive() or other.exitcode is not None:
                other.join(30)
    assert other.exitcode == 0


class _ListedGate:
    """A host gate whose slot is free from the third ask on; it lists every call."""

    instant = True

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def take(self, host: str, per_host: int, *, in_line: bool = False) -> int | None:
        self.calls.append(("take", "in line" if in_line else "first"))
        return 0 if len(self.calls) > 3 else None

    def give_back(self, host: str, slot: int) -> None:
        self.calls.append(("give_back",))

    def join_line(self, host: str) -> None:
        self.calls.append(("join_line",))

    def leave_line(self, host: str) -> None:
        self.calls.append(("leave_line",))


def test_a_request_stands_in_the_host_line_while_it_waits_for_the_gate() -> None:
    from signal_feeds.http.slots import HostSlots

    async def request(slots: HostSlots) -> None:
        async with slots.hold("Example.org"):
            pass

    gate = _ListedGate()
    asyncio.run(request(HostSlots(1, gate=gate)))
    assert gate.calls == [("take", "first"), ("join_line",), ("take", "in line"),
                          ("take", "in line"), ("leave_line",), ("give_back",)]


def test_a_request_waits_for_a_host_slot_others_hold_a_bounded_time(
        server: ScenarioServer, database: Path | str) -> None:
    # A worker stopped with kill -STOP keeps its slots (its connection, its file lock)
    # for as long as it lives: every other worker's requests to the host waited without
    # end. The wait now ends after twice a lease's length (a minute more at most): the
    # source fails that run, with a line saying why, and nothing is stored for it.
    server.put("/a.xml", b'<rss version="2.0"><channel><title>t</title></channel></rss>')
    open_store(database).close()
    context = multiprocessing.get_context("spawn")
    ready, done = context.Event(), context.Event()
    holder = context.Process(target=_hold_slot,
                             args=(str(database), ready, done, "127.0.0.1", 1))
    holder.start()
    try:
        assert ready.wait(30)
        config = make_config(database, {"a": server.url("/a.xml")}, per_host=1,
                             lease_seconds=1)
        started = time.monotonic()
        report = run_fetch(config, force=True)
        waited = time.monotonic() - started
    finally:
        done.set()
        holder.join(30)
    (rep,) = report.sources
    assert rep.status == "failed" and "every slot of 127.0.0.1 has been held" in rep.error
    assert waited < 120 and server.requests == [] and not report.ok
    with open_store(database) as store:
        assert [s.error_count for s in store.source_states()] in ([], [0])


def test_the_advisory_gate_counts_slots_across_connections(postgres_url: str) -> None:
    with open_store(postgres_url) as store:
        mine, theirs = store.host_gate(), store.host_gate()
        try:
            assert theirs.take("example.org", 2) == 0
            assert mine.take("Example.org", 2) == 1
            assert mine.take("example.org", 2) is None
            assert theirs.take("example.org", 2) is None
            mine.give_back("example.org", 1)
            assert theirs.take("example.org", 2) == 1
            theirs.close()  # a connection that ends (a dead worker's) frees its slots
            # ... once its server process has ended, a moment after the client closed;
            # the ending backend lets its locks go one by one, in no set order.
            taken: set[int] = set()
            deadline = time.monotonic() + 10
            while len(taken) < 2 and time.monotonic() < deadline:
                if (slot := mine.take("example.org", 2)) is None:
                    time.sleep(0.05)
                else:
                    taken.add(slot)
            assert taken == {0, 1}
        finally:
            mine.close()
            theirs.close()


def test_a_source_report_times_its_own_request_not_its_wait_for_a_slot(
        server: ScenarioServer, tmp_path: Path) -> None:
    # Four sources in line for one slot, each answered after 0.4 s: the run takes 1.6 s,
    # and each source's duration is its own 0.4 s (as its fetch row's is), not the time
    # it stood in line; else the last one in line looks four times as slow as it is.
    urls = serve_sources(server, 4, delay=0.4)
    report = run_fetch(make_config(tmp_path / "signal.db", urls, concurrency=1, per_host=1))
    assert [s.status for s in report.sources] == ["fetched"] * 4
    assert report.duration >= 1.6
    # (Relative bounds: a loaded machine slows every part alike.)
    whole = report.duration
    assert all(0.4 <= s.duration < whole / 2 for s in report.sources), \
        [s.duration for s in report.sources]
    rows = query(tmp_path / "signal.db", "SELECT duration_ms FROM fetches")
    assert len(rows) == 4 and all(400 <= ms < whole * 500 for (ms,) in rows), rows


def test_a_run_claims_in_chunks_and_never_hoards(
        server: ScenarioServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    urls = serve_sources(server, 30, delay=0.0)
    unanswered: list[int] = []
    limits: list[int] = []

    class Recording(Store):
        def claim_sources(self, urls: Any, **kwargs: Any) -> Any:
            # Leases held on sources the server has not answered yet: a fetched source
            # keeps its lease until its write commits, and does not count.
            unanswered.append(len(self.leases()) - len(server.requests))
            limits.append(kwargs["limit"])
            return super().claim_sources(urls, **kwargs)

    monkeypatch.setattr(pipeline, "open_store", Recording)
    config = make_config(tmp_path / "one.db", urls, min_interval=3600.0, concurrency=3)
    report = run_fetch(config)
    assert {r.status for r in report.sources} == {"fetched"}
    # The first claim takes two chunks; each later one tops that up once a chunk of
    # it has been fetched.
    assert limits[0] == 2 * 3 and all(3 <= n <= 2 * 3 for n in limits)
    assert len(limits) >= 30 // (2 * 3)
    # A claim is made only while at most one chunk waits to be fetched: never a hoard.
    assert max(unanswered) <= 3
    with open_store(tmp_path / "one.db") as store:
        assert store.leases() == {}


def test_a_database_that_goes_away_mid_run_ends_the_worker(
        server: ScenarioServer, tmp_path: Path, postgres_cluster: Any,
        postgres_url: str) -> None:
    # A host slot given back on a dead connection once leaked the process's own slot
    # of that host, and every later request to it waited for ever.
    urls = serve_sources(server, 40, delay=0.5)
    config = write_config(tmp_path, urls, concurrency=4, per_host=2)
    worker = start_worker(config, postgres_url)
    try:
        deadline = time.monotonic() + 120
        while len(server.requests) < 6:
            assert worker.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        postgres_cluster.kill()
        out, err = worker.communicate(timeout=120)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.communicate()
        postgres_cluster.ensure_running()
    assert worker.returncode in (1, 2), err
    assert "Traceback" not in err


def test_a_dead_process_on_this_host_is_seen_at_once(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    here = socket.gethostname()
    assert owner_is_gone(f"{here}:{dead.pid}")  # as workers were named before
    assert owner_is_gone(f"{here}:{dead.pid}:3")
    assert not owner_is_gone(f"{here}:{os.getpid()}")  # alive (this process)
    assert not owner_is_gone(f"{here}:{os.getpid()}:7")
    assert not owner_is_gone(f"name:with:{dead.pid}")  # a given name: unknown
    assert not owner_is_gone(f"elsewhere.example:{dead.pid}")  # another host: unknown
    assert not owner_is_gone("host-a")  # a given name: unknown
    # Exited but not reaped yet (a zombie): signal 0 still reaches it. It kept its
    # leases until reaped, so a rerun right after a kill -9 left its sources "leased".
    if Path("/proc/self/stat").exists():
        zombie = subprocess.Popen([sys.executable, "-c", "pass"])
        try:
            deadline = time.monotonic() + 30
            while not owner_is_gone(f"{here}:{zombie.pid}") and time.monotonic() < deadline:
                time.sleep(0.05)
            assert owner_is_gone(f"{here}:{zombie.pid}")
        finally:
            zombie.wait()
    urls = {"a": URL}
    with Store(tmp_path / "dead.db") as store:
        assert store.claim_sources(urls, owner=f"{here}:{dead.pid}", now=NOW, limit=1)
        # Its lease has not expired, but its process is gone: taken at once.
        assert store.claim_sources(urls, owner="me:1", now=NOW, limit=1)
        assert store.claim_sources(urls, owner="me:2", now=NOW, limit=1) == {}


def test_containers_sharing_a_host_name_keep_their_pids_apart(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Containers on host networking have the host's name but pids of their own: a pid
    # that is dead here may be another container's live worker, whose leases stand.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    here = socket.gethostname()
    monkeypatch.setattr(leases, "_pid_namespace", lambda: "pid:[4026532451]")
    assert leases.this_host() == f"{here}@pidns4026532451"
    assert worker_id().startswith(f"{here}@pidns4026532451:{os.getpid()}:")
    assert owner_is_gone(f"{here}@pidns4026532451:{dead.pid}:1")  # this container's
    assert not owner_is_gone(f"{here}@pidns4026532999:{dead.pid}:1")  # another's
    assert not owner_is_gone(f"{here}:{dead.pid}:1")  # the host's, or an older version's
    # Outside any container (the kernel's first namespace), or without /proc: the name.
    for namespace in ("pid:[4026531836]", ""):
        monkeypatch.setattr(leases, "_pid_namespace", lambda ns=namespace: ns)
        assert leases.this_host() == here
        assert owner_is_gone(f"{here}:{dead.pid}:1")


def test_the_advisory_gate_connects_again_after_losing_its_session(postgres_url: str) -> None:
    import psycopg

    with open_store(postgres_url) as store:
        gate = store.host_gate()
        try:
            assert gate.take("example.org", 1) == 0
            assert gate.take("example.org", 1) is None
            with psycopg.connect(postgres_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE datname = current_database() AND pid != pg_backend_pid()"
                              " AND application_name = 'signal' AND query ILIKE '%advisory%'")
            time.sleep(0.5)  # the server ends the session
            # The take finds the session ended and connects again at once (it used to
            # stop the whole run with "the database is gone"). Slot 0's number is still
            # in use by this process's request that took it, so slot 1 is taken.
            assert gate.take("example.org", 2) == 1
            # That request ends: no unlock goes to the new session for it (it would
            # free a lock the new session took for another request).
            gate.give_back("example.org", 0)
            assert gate.take("example.org", 2) == 0
            gate.give_back("example.org", 1)
            assert gate.take("example.org", 2) == 1
        finally:
            gate.close()


def test_the_host_slot_file_is_made_as_sqlite_makes_its_own(tmp_path: Path) -> None:
    # It was made 0644 for whoever ran first: after one run as root, every later cron
    # run as the database's user failed each source ("cannot open the host slot file:
    # Permission denied"). It takes the database's permissions (and owner, for root),
    # as -wal and -shm do, and sits beside the real file whatever path reached it.
    from signal_feeds.errors import DatabaseUnavailableError
    from signal_feeds.store.sqlite.host_locks import FileHostGate

    real = tmp_path / "data" / "signal.db"
    real.parent.mkdir()
    real.write_bytes(b"")
    os.chmod(real, 0o660)
    (tmp_path / "link.db").symlink_to(real)
    old_mask = os.umask(0o077)
    try:
        gate = FileHostGate(tmp_path / "link.db")
        assert gate.take("example.org", 1) == 0
    finally:
        os.umask(old_mask)
    try:
        assert gate.path == Path(f"{real}-hosts")
        made = os.stat(gate.path)
        assert made.st_mode & 0o777 == 0o660
        assert (made.st_uid, made.st_gid) == (os.stat(real).st_uid, os.stat(real).st_gid)
        other = FileHostGate(real)  # the same file: the slot is taken (by this process
        assert other.path == gate.path  # here, so only the path is comparable)
    finally:
        gate.close()
    # A file that cannot be opened stops the run with one line (exit 2), not a failure
    # per source.
    (tmp_path / "dir.db-hosts").mkdir()
    with pytest.raises(DatabaseUnavailableError, match="cannot open the host slot file"):
        FileHostGate(tmp_path / "dir.db").take("example.org", 1)


def test_two_runs_at_once_in_one_program_share_the_sources(server: ScenarioServer,
                                                           tmp_path: Path) -> None:
    # A scheduler's run and a "refresh now" run in one program: both were named
    # host:pid, each took the other's leases for its own, and every source was fetched
    # twice.
    import asyncio

    from signal_feeds import fetch_sources

    for i in range(12):
        server.put(f"/s{i}.xml", (FIXTURES / "demo-rss.xml").read_bytes().replace(
            b"release-", f"s{i}-".encode()))
    config = make_config(tmp_path / "signal.db",
                         {f"s{i}": server.url(f"/s{i}.xml") for i in range(12)},
                         concurrency=2)

    async def both() -> list[Any]:
        return list(await asyncio.gather(fetch_sources(config), fetch_sources(config)))

    first, second = asyncio.run(both())
    asked = collections.Counter(r.path for r in server.requests if r.path.startswith("/s"))
    assert set(asked.values()) == {1} and len(asked) == 12, asked
    assert {r.source for r in (*first.sources, *second.sources)
            if r.status == "fetched"} == {f"s{i}" for i in range(12)}


def test_two_runs_at_once_in_one_program_keep_per_host_together(server: ScenarioServer,
                                                                tmp_path: Path) -> None:
    # Each run opened its own gate on <db>-hosts, and POSIX locks are the process's: the
    # second run's lock on a byte the first held "succeeded", so per_host = 1 let two
    # requests at once reach the host (two processes kept to one).
    from signal_feeds import fetch_sources

    sources = {f"s{i}": server.url(f"/scenario/slow?delay=0.4&n={i}") for i in range(4)}
    config = make_config(tmp_path / "signal.db", sources, per_host=1)
    server.reset_peak()

    async def both() -> list[Any]:
        return list(await asyncio.gather(fetch_sources(config, source_ids=["s0", "s1"]),
                                         fetch_sources(config, source_ids=["s2", "s3"])))

    reports = asyncio.run(both())
    assert [r.status for report in reports for r in report.sources] == ["fetched"] * 4
    assert server.peak_in_flight == 1


def test_a_gate_closed_in_one_program_keeps_the_slots_of_its_other_gates(
        tmp_path: Path) -> None:
    # Closing any descriptor of the file lets go of every lock the process holds on it:
    # a run that ended freed the slots of another run still going in the same program,
    # and other workers took them while its requests were in flight.
    db = tmp_path / "gate.db"
    Store(db).close()
    with Store(db) as store:
        first, second = store.host_gate(), store.host_gate()
        try:
            assert first.take("example.org", 1) == 0
            assert second.take("example.org", 1) is None  # one slot, and it is held
            first.give_back("example.org", 0)
            assert second.take("example.org", 1) == 0
            first.close()
            context = multiprocessing.get_context("spawn")
            with context.Pool(1) as other:
                assert other.apply(_take_once, (str(db), "example.org")) is None
        finally:
            first.close()
            second.close()


def _take_once(database: str, host: str) -> int | None:
    """What another worker's first ask for a slot of ``host`` gets."""
    with open_store(database) as store:
        gate = store.host_gate()
        try:
            return gate.take(host, 1)
        finally:
            gate.close()
