"""Faults: a failed write leaves the database as it was, a parser that hangs or blows
its memory costs one source, and a broken database or config gives one clean line."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from _hostile import item, rows, rss, write_config
from click.testing import CliRunner
from conftest import FIXTURES, Clock, dump, make_config, sqlite_read_only
from scenario_server import ScenarioServer
from threaded_socket import interrupt_when_waiting, silent_server

import signal_feeds.run.pipeline
import signal_feeds.store.sqlite.connection
from signal_feeds import Store, run_fetch
from signal_feeds.cli.commands import cli
from signal_feeds.errors import DatabaseUnavailableError, StoreError
from signal_feeds.parse.processes import ParseJob, ParseOutcome, ParserPool, parse_job


class InlineParser:
    """Parses in the test process: the store faults do not need worker processes."""

    workers = 1

    async def parse(self, job: ParseJob) -> ParseOutcome:
        return parse_job(job)

    def close(self) -> None:
        pass


# -- fault injection in the store ----------------------------------------------------------

class Plan:
    """Which statement of one ``apply_response`` fails, and how.

    A point is ``(index, "before")`` (the statement raises before it runs) or
    ``(index, "mid")`` (an ``executemany`` raises after its first row: between entries).
    With ``fail_at=None`` the plan only records the points there are.
    """

    def __init__(self, fail_at: tuple[int, str] | str | None = None,
                 message: str = "injected fault") -> None:
        self.fail_at = fail_at
        self.message = message
        self.calls = 0
        self.points: list[tuple[int, str, str]] = []
        self.fired = False

    def before(self, sql: str) -> int:
        index = self.calls
        self.calls += 1
        words = sql.split()
        # Savepoints by name: a response's own and the duplicate marking's nested one.
        verb = " ".join(words[:2]) if words[0] in ("SAVEPOINT", "RELEASE") else words[0]
        self.points.append((index, "before", verb))
        if self.fail_at == (index, "before"):
            self._fire()
        return index

    def rows(self, index: int, sql: str, seq: Iterable[Any]) -> Iterator[Any]:
        data = list(seq)
        if len(data) >= 2:
            self.points.append((index, "mid", sql.split()[0]))
        first_mid = self.fail_at == "first-mid" and not self.fired
        for n, row in enumerate(data):
            if n == 1 and (first_mid or self.fail_at == (index, "mid")):
                self._fire()
            yield row

    def _fire(self) -> None:
        self.fired = True
        raise sqlite3.OperationalError(self.message)


class FaultyConnection:
    def __init__(self, conn: sqlite3.Connection, plan: Plan) -> None:
        self._conn = conn
        self._plan = plan

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        self._plan.before(sql)
        return self._conn.execute(sql, *args)

    def executemany(self, sql: str, seq: Iterable[Any]) -> sqlite3.Cursor:
        index = self._plan.before(sql)
        return self._conn.executemany(sql, self._plan.rows(index, sql, seq))


def faulty_store(plan: Plan) -> type[Store]:
    class FaultyStore(Store):
        def apply_response(self, *args: Any, **kwargs: Any) -> Any:
            real = self._db.conn
            self._db.conn = FaultyConnection(real, plan)  # type: ignore[assignment]
            try:
                return super().apply_response(*args, **kwargs)
            finally:
                self._db.conn = real
    return FaultyStore


def copy_database(source: Path, target: Path) -> None:
    """Copy an SQLite file with SQLite's backup API, closing both connections."""
    with closing(sqlite3.connect(source)) as src, closing(sqlite3.connect(target)) as dst:
        src.backup(dst)


def _changed_feed() -> bytes:
    # The corrected title (an update), the other entries (unchanged) and one new entry.
    body = (FIXTURES / "variants" / "demo-rss-corrected.xml").read_bytes()
    new = item("release-new", "New entry").encode()
    return body.replace(b"</channel>", new + b"</channel>", 1)


def test_a_fault_at_every_step_of_storing_leaves_the_database_as_before(
        server: ScenarioServer, db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = make_config(db_path, {"demo-rss": server.url("/feeds/demo-rss.xml")})
    clock = Clock()
    first = run_fetch(config, clock=clock, force=True, parser=InlineParser())
    assert first.get("demo-rss").created == 3
    server.put("/feeds/demo-rss.xml", _changed_feed())
    clock.advance(60)

    # A dry pass on a copy of the database lists the statements of one response.
    copy = db_path.with_name("copy.db")
    copy_database(db_path, copy)
    recorder = Plan()
    monkeypatch.setattr(signal_feeds.run.pipeline, "open_store", faulty_store(recorder))
    dry = run_fetch(config, database=copy, clock=clock, force=True, parser=InlineParser())
    assert dry.get("demo-rss").status == "fetched"
    points = [(i, kind) for i, kind, _ in recorder.points]
    verbs = [verb for _, _, verb in recorder.points]
    # The run's writer commits many responses at once; each is its own savepoint.
    assert verbs[0] == "SAVEPOINT signal_write" and verbs[-1] == "RELEASE signal_write"
    assert any(kind == "mid" for _, kind in points)  # between entries
    assert len(points) >= 6

    # Cross-source duplicate marking runs under a savepoint and is allowed to fail
    # alone (the store logs it): a fault inside it still stores the whole response.
    tolerated: set[tuple[int, str]] = set()
    inside = False
    for index, kind, verb in recorder.points:
        if verb == "RELEASE signal_dedupe":
            inside = False
        if inside:
            tolerated.add((index, kind))
        if verb == "SAVEPOINT signal_dedupe":
            inside = True

    before = dump(db_path)
    snapshot = db_path.with_name("snapshot.db")
    copy_database(db_path, snapshot)
    for point in points:
        plan = Plan(fail_at=point)
        monkeypatch.setattr(signal_feeds.run.pipeline, "open_store", faulty_store(plan))
        report = run_fetch(config, clock=clock, force=True, parser=InlineParser())
        rep = report.get("demo-rss")
        assert plan.fired, point
        if point in tolerated:
            assert (rep.status, rep.created, rep.updated) == ("fetched", 1, 1), (point, rep)
            copy_database(snapshot, db_path)  # back to the state before the response
            continue
        assert rep.status == "failed" and "injected fault" in rep.error, (point, rep)
        assert dump(db_path) == before, f"fault at {point} changed the database"
    assert len(tolerated) < len(points)

    # The next run does the work the failed ones could not.
    monkeypatch.setattr(signal_feeds.run.pipeline, "open_store", Store)
    clock.advance(60)
    report = run_fetch(config, clock=clock, force=True, parser=InlineParser())
    rep = report.get("demo-rss")
    assert (rep.status, rep.created, rep.updated, rep.unchanged) == ("fetched", 1, 1, 2)
    with Store(db_path) as store:
        assert store.count("entries") == 4
        assert store.count("entry_versions") == 5


def test_a_failed_commit_leaves_no_transaction_open(db_path: Path) -> None:
    """A COMMIT that fails (disk full, I/O error) must not leave the connection inside
    a transaction: the next response on the same store would fail to begin."""
    from signal_feeds.identity.keys import identify
    from signal_feeds.parse.feed import parse_feed
    from signal_feeds.store import FetchRecord, SourceState

    body = (FIXTURES / "demo-rss.xml").read_bytes()
    entries = identify("demo", parse_feed(body).entries).rows
    clock = Clock()
    state = SourceState(source_id="demo", url="https://example.org/feed")
    record = FetchRecord(source_id="demo", started_at=clock(), url=state.url, outcome="fetched")
    with Store(db_path) as store:
        real = store._db.conn

        class FailingCommit(FaultyConnection):
            def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
                if sql == "COMMIT":
                    raise sqlite3.OperationalError("disk I/O error")
                return real.execute(sql, *args)

        store._db.conn = FailingCommit(real, Plan())  # type: ignore[assignment]
        with pytest.raises(StoreError, match="disk I/O error"):
            store.apply_response(state, entries, record, clock())
        store._db.conn = real
        assert not real.in_transaction
        counts = store.apply_response(state, entries, record, clock())
        assert counts.created == 3


def test_disk_full_while_storing_is_reported_and_the_next_run_recovers(
        server: ScenarioServer, db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Full disk simulated with an injected ``sqlite3.OperationalError`` carrying
    SQLite's own message, raised between entries (a real tiny filesystem is in
    :func:`test_full_filesystem`, where ``mount`` is allowed)."""
    config = make_config(db_path, {"demo-rss": server.url("/feeds/demo-rss.xml"),
                                   "demo-atom": server.url("/feeds/demo-atom.xml")})
    # Every response fails in its first executemany, between its first and second row.
    class FullDisk(Store):
        def apply_response(self, *args: Any, **kwargs: Any) -> Any:
            real = self._db.conn
            plan = Plan(fail_at="first-mid", message="database or disk is full")
            self._db.conn = FaultyConnection(real, plan)  # type: ignore[assignment]
            try:
                return super().apply_response(*args, **kwargs)
            finally:
                self._db.conn = real

    monkeypatch.setattr(signal_feeds.run.pipeline, "open_store", FullDisk)
    report = run_fetch(config, force=True, parser=InlineParser())
    for rep in report.sources:
        assert rep.status == "failed"
        assert rep.error == f"cannot store response in {db_path}: database or disk is full"
    assert rows(db_path, "SELECT count(*) FROM entries") == [(0,)]
    monkeypatch.setattr(signal_feeds.run.pipeline, "open_store", Store)
    report = run_fetch(config, force=True, parser=InlineParser())
    assert [r.created for r in report.sources] == [3, 2]


def _mount_tmpfs(where: Path, size: str) -> bool:
    if os.geteuid() != 0:
        return False
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, check=False)
    return proc.returncode == 0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 1 MB file system (a tmpfs) at ``tmp_path / "disk"``, unmounted after."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if not _mount_tmpfs(disk, "1m"):
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def _demo_stored(server: ScenarioServer, tmp_path: Path, db: Path,
                 big: dict[str, str]) -> tuple[Path, dict[str, Any]]:
    """The config of the demo feed and ``big`` sources, the demo stored: (config, dump)."""
    config = write_config(tmp_path / "signal.toml", db,
                          {"demo": server.url("/feeds/demo-rss.xml"), **big})
    first = _cli("fetch", "--config", str(config), "--source", "demo", "--force")
    assert first.returncode == 0, first.stderr
    return config, dump(db)


def test_full_filesystem(server: ScenarioServer, tmp_path: Path, small_disk: Path) -> None:
    """A real full disk: a 1 MB tmpfs, filled up after the first run."""
    db = small_disk / "signal.db"
    server.put("/big.xml", rss("".join(item(f"e{i}", "t" * 200) for i in range(50))))
    config, before = _demo_stored(server, tmp_path, db, {"big": server.url("/big.xml")})
    filler = small_disk / "filler"
    try:
        with filler.open("wb") as out:
            while True:
                out.write(b"\0" * 4096)
                out.flush()
    except OSError:
        pass
    full = _cli("fetch", "--config", str(config), "--force")
    # Found when the run opens the database (SQLite cannot grow -shm): a setup error,
    # exit 2, named as such (it said "disk I/O error"); or, when the open went
    # through, each source that cannot be stored fails (exit 1).
    assert full.returncode in (1, 2), (full.stdout, full.stderr)
    assert "Traceback" not in full.stderr
    assert "full" in (full.stdout + full.stderr), (full.stdout, full.stderr)
    filler.unlink()  # (reading needs a little room too: the WAL index)
    after = dump(db)
    assert [r for r in after["entries"] if r[1] == "big"] == []
    assert [r for r in after["entries"] if r[1] == "demo"] == before["entries"]
    again = _cli("fetch", "--config", str(config), "--force")
    assert again.returncode == 0, again.stdout + again.stderr
    assert rows(db, "SELECT count(*) FROM entries WHERE source_id = 'big'") == [(50,)]


def test_a_disk_that_fills_during_a_run_stops_it_with_one_line(
        server: ScenarioServer, tmp_path: Path, small_disk: Path) -> None:
    """The database opens, then the disk fills while responses are stored: SQLite says
    "database or disk is full" and no later write fits either. Each source failed on its
    own line (a cron mail of one line per due source, exit 1) and the run went on
    fetching what it could not store; it stops with one line naming the database."""
    db = small_disk / "signal.db"
    server.put("/big.xml", rss("".join(item(f"e{i}", "t" * 1000) for i in range(300))))
    big = {f"big-{n}": server.url(f"/big.xml?{n}") for n in range(6)}
    config, before = _demo_stored(server, tmp_path, db, big)
    with open(small_disk / "filler", "wb") as filler:  # leave room to open, not to store
        filler.write(b"\0" * (os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
                              - 200 * 1024))
    full = _cli("fetch", "-q", "--config", str(config))
    assert (full.returncode, full.stdout) == (2, ""), (full.stdout, full.stderr)
    assert full.stderr.splitlines() == [full.stderr.strip()], full.stderr
    assert full.stderr.startswith("signal: error: "), full.stderr
    assert f"{db}: database or disk is full" in full.stderr, full.stderr
    (small_disk / "filler").unlink()
    assert rows(db, "PRAGMA integrity_check") == [("ok",)]
    assert rows(db, "SELECT count(*) FROM sources WHERE lease_owner IS NOT NULL") == [(0,)]
    assert dump(db)["entries"] == before["entries"]


def test_a_file_size_limit_reached_stops_the_run_with_one_line_that_names_it(
        server: ScenarioServer, tmp_path: Path) -> None:
    """A job run under ``ulimit -f`` (a limits.conf ``fsize``, a container's): writes past
    it fail with EFBIG (Python ignores SIGXFSZ), which SQLite calls "disk I/O error".
    Every source failed on its own line with that (exit 1), and nothing said which limit
    to raise. It is a setup error like a full disk: one line that names it, exit 2."""
    import resource

    db = tmp_path / "signal.db"
    server.put("/big.xml", rss("".join(item(f"e{i}", "t" * 1000) for i in range(300))))
    big = {f"big-{n}": server.url(f"/big.xml?{n}") for n in range(6)}
    config = write_config(tmp_path / "signal.toml", db, big)
    limit = 400 * 1024

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    run = subprocess.run([sys.executable, "-m", "signal_feeds", "fetch", "-q", "--config",
                          str(config)], capture_output=True, text=True, timeout=120,
                         check=False, preexec_fn=limited)  # noqa: PLW1509
    assert (run.returncode, run.stdout) == (2, ""), (run.stdout, run.stderr)
    assert run.stderr.splitlines() == [run.stderr.strip()], run.stderr
    assert run.stderr.startswith("signal: error: "), run.stderr
    assert (f"file size limit of {limit} bytes: raise 'ulimit -f' for this job"
            in run.stderr), run.stderr
    assert rows(db, "PRAGMA integrity_check") == [("ok",)]
    again = _cli("fetch", "-q", "--config", str(config))  # no limit: the rest is stored
    assert again.returncode == 0, again.stdout + again.stderr
    assert rows(db, "SELECT count(DISTINCT source_id) FROM entries") == [(6,)]


@pytest.mark.parametrize("files", [16, 20])
def test_too_few_file_descriptors_to_start_the_parsers_is_one_line_not_a_hang(
        server: ScenarioServer, tmp_path: Path, files: int) -> None:
    """Under a low ``ulimit -n`` (or ``-u``) the parser pool could not be made: a
    traceback (exit 1), or, once some workers were forked, a hang at exit, the program
    waiting for workers that waited for jobs. Now one line that names the limit, exit 2."""
    import resource

    config = write_config(tmp_path / "signal.toml", tmp_path / "signal.db",
                          {"demo": server.url("/feeds/demo-rss.xml")})

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))

    run = subprocess.run([sys.executable, "-m", "signal_feeds", "fetch", "--config",
                          str(config)], capture_output=True, text=True, timeout=60,
                         check=False, preexec_fn=limited)  # noqa: PLW1509
    _assert_clean_error(run, 2, "cannot start the parser processes and threads a run "
                        "needs: [Errno 24] Too many open files", "ulimit -n")


def _fetch_limited(config: Path, **limits: int) -> subprocess.CompletedProcess[str]:
    import resource

    def limited() -> None:
        for name, value in limits.items():
            resource.setrlimit(getattr(resource, name), (value, value))

    return subprocess.run([sys.executable, "-m", "signal_feeds", "fetch", "-q", "--config",
                           str(config)], capture_output=True, text=True, timeout=120,
                          check=False, preexec_fn=limited)  # noqa: PLW1509


@pytest.mark.parametrize("files", [22, 24, 26, 28, 40])
def test_a_few_file_descriptors_too_few_is_one_line_or_a_smaller_run(
        server: ScenarioServer, tmp_path: Path, files: int) -> None:
    """Under ulimit -n 22 the run said SQLite needed to create -wal and -shm (it needed
    descriptors), and at 24 to 28 sources failed with "unexpected error" tracebacks
    ending in EMFILE. Now: one line naming 'ulimit -n' (exit 2), or, where a few
    connections fit, a run with fewer at once that stores every source."""
    sources = {f"s{i}": server.url(f"/feeds/demo-rss.xml?{i}") for i in range(30)}
    config = write_config(tmp_path / "signal.toml", tmp_path / "signal.db", sources)
    run = _fetch_limited(config, RLIMIT_NOFILE=files)
    assert "Traceback" not in run.stderr and "unexpected error" not in run.stderr, run.stderr
    if run.returncode == 2:
        _assert_clean_error(run, 2, "ulimit -n")
        return
    assert run.returncode == 0, run.stderr
    assert "concurrency lowered from 20" in run.stderr and "'ulimit -n'" in run.stderr
    assert rows(tmp_path / "signal.db", "SELECT count(DISTINCT source_id) FROM entries") \
        == [(30,)]


def test_a_database_not_opened_for_want_of_descriptors_names_ulimit_n(
        tmp_path: Path) -> None:
    """SQLite reports EMFILE as "unable to open database file", which the hint read as
    a folder where -wal and -shm cannot be made (ulimit -n 22). It names the limit."""
    code = f"""
import os, resource
from signal_feeds import Store
from signal_feeds.errors import DatabaseUnavailableError
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
held = []
try:
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    os.close(held.pop())
try:
    Store({str(tmp_path / "signal.db")!r})
except DatabaseUnavailableError as exc:
    print(exc)
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=False)
    assert "raise 'ulimit -n' for this job" in run.stdout, run.stdout + run.stderr
    assert "-wal" not in run.stdout, run.stdout


def test_concurrency_over_the_open_file_limit_is_lowered_with_a_warning(
        server: ScenarioServer, tmp_path: Path) -> None:
    """concurrency = 200 under ulimit -n 64: most sources failed with "cannot connect:
    [Errno 24] Too many open files" and nothing said to lower concurrency or raise the
    limit. The run now makes as many requests at once as its descriptors allow, and
    says so once."""
    sources = {f"s{i}": server.url(f"/feeds/demo-rss.xml?{i}") for i in range(150)}
    config = write_config(tmp_path / "signal.toml", tmp_path / "signal.db", sources,
                          concurrency=200)
    run = _fetch_limited(config, RLIMIT_NOFILE=64)
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and "concurrency lowered from 200 to" in lines[0], run.stderr
    assert "raise 'ulimit -n' to at least" in lines[0] and "set concurrency =" in lines[0]
    assert rows(tmp_path / "signal.db", "SELECT count(DISTINCT source_id) FROM entries") \
        == [(150,)]


@pytest.mark.parametrize("megabytes", [100])
def test_too_little_address_space_never_hangs_or_prints_a_traceback(
        server: ScenarioServer, tmp_path: Path, megabytes: int) -> None:
    """ulimit -v 100000: MemoryErrors, then a hang (a dead executor thread waited on).
    Where memory runs out depends on the machine and its load: starting the parsers or
    opening the store, the run ends with one line naming the limit (exit 2); later,
    duplicate marking is given up for a source (its entries stored unmarked, as the
    warning says, which is not a reason to lose them). Never a hang or a traceback, and
    the database stays whole."""
    sources = {f"s{i}": server.url(f"/feeds/demo-rss.xml?{i}") for i in range(30)}
    config = write_config(tmp_path / "signal.toml", tmp_path / "signal.db", sources)
    run = _fetch_limited(config, RLIMIT_AS=megabytes * 1000 * 1024)
    assert "Traceback" not in run.stderr and "unexpected error" not in run.stderr, run.stderr
    if run.returncode == 2:
        _assert_clean_error(run, 2, "ulimit -v")
    else:
        assert run.returncode in (0, 1), run.stderr
    if (tmp_path / "signal.db").exists():
        assert rows(tmp_path / "signal.db", "PRAGMA integrity_check") == [("ok",)]


def test_a_memory_error_under_an_address_space_limit_names_ulimit_v() -> None:
    # Where it is met is up to the machine; what it is called is not.
    code = ("import resource\n"
            "from signal_feeds.limits import refused\n"
            "assert refused(MemoryError()) is None\n"
            "soft, hard = resource.getrlimit(resource.RLIMIT_AS)\n"
            "resource.setrlimit(resource.RLIMIT_AS, (8 * 1024**3, hard))\n"
            "print(refused(MemoryError(), 'the run could not go on'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert out.startswith("the run could not go on: MemoryError (the limit on memory, "
                          "ulimit -v, now 8388608 KB, is too low"), out


def test_a_parser_process_that_cannot_be_forked_again_stops_the_run_with_one_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ulimit -u 9 a worker replaced midway could not be forked (BlockingIOError)
    and the run never ended. Root is exempt from RLIMIT_NPROC, so the refusal is made
    here by the start method Signal's executors get (this test process only): the
    parse raises ResourceLimitError naming the limit, promptly."""
    import errno
    import multiprocessing

    import signal_feeds.parse.processes as processes
    from signal_feeds.errors import ResourceLimitError
    from signal_feeds.parse.settings import ParseSettings

    fork = multiprocessing.get_context("fork")

    class Refused(fork.Process):  # type: ignore[name-defined,misc]
        def start(self) -> None:
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")

    class NoFork(type(fork)):  # type: ignore[misc]
        Process = Refused

    pool = ParserPool(workers=1)
    try:
        pool.kill()  # the worker dies: the next parse needs a new one
        monkeypatch.setattr(processes, "_context", NoFork)
        job = ParseJob(source_id="s", body=(FIXTURES / "demo-rss.xml").read_bytes(),
                       url="", content_type="", settings=ParseSettings())
        with pytest.raises(ResourceLimitError, match="ulimit -u"):
            asyncio.run(asyncio.wait_for(pool.parse(job), 30))
    finally:
        pool.close()


# -- parsing isolated in worker processes ----------------------------------------------------

def _worker_pids() -> set[int]:
    """Parser workers: children of this process forked from it (the same command line;
    the session's PostgreSQL watchdog is a child of ours too, with its own)."""
    me = os.getpid()
    ours = Path("/proc/self/cmdline").read_bytes()
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == me and cmdline == ours:
            found.add(int(entry.name))
    return found


def _many_elements() -> bytes:
    # CPU-bound in feedparser for many seconds (about 20 here: still three times the
    # limit below on a machine three times as fast), small in memory (about 40 MB): a
    # parser that "hangs". (200,000 attributes on one element did, until they were cut.)
    return rss("<item><guid>g</guid>" + "<x/>" * 1_000_000 + "</item>")


def _markup_heavy() -> bytes:
    # 56 MB of one summary (a body cap raised to 64 MiB lets it in): feedparser holds it
    # in several copies, about six times its size, far over the 256 MB cap. (Sanitizing
    # 14 MB of tiny elements used to take 750 MB; it sees a field's limit now.) The cap
    # leaves room above a worker's own address space, which peaks near 170 MB while it
    # starts: a 100 MB cap sometimes failed workers that were merely importing
    # feedparser, and the next sources with them.
    return rss(item("big", extra="<description><![CDATA[" + "<p>a</p>" * 7_000_000
                    + "]]></description>"))


@pytest.mark.parametrize(("body", "pool", "settings", "reason"), [
    (_many_elements, {"timeout": 2.0}, {}, "parsing took longer than 2 s"),
    (_markup_heavy, {"memory": 256 * 2**20, "timeout": 30.0},
     {"max_body_bytes": 64 * 2**20}, "memory"),
], ids=["hangs", "blows-memory"])
def test_a_parser_that_hangs_or_blows_memory_costs_one_source(
        server: ScenarioServer, db_path: Path, body: Any, pool: dict[str, Any],
        settings: dict[str, Any], reason: str) -> None:
    server.put("/hostile.xml", body())
    config = make_config(db_path, {"hostile": server.url("/hostile.xml"),
                                   "demo-rss": server.url("/feeds/demo-rss.xml"),
                                   "demo-atom": server.url("/feeds/demo-atom.xml")},
                         **settings)
    parser = ParserPool(**pool)
    try:
        report = run_fetch(config, force=True, parser=parser)
        # The pool still works after losing a worker.
        again = run_fetch(config, force=True, parser=parser, source_ids=["hostile"])
    finally:
        parser.close()
    hostile = report.get("hostile")
    assert hostile.status == "rejected" and reason in hostile.error, hostile
    assert again.get("hostile").status == "rejected"
    assert [(r.status, r.created) for r in report.sources[1:]] == [
        ("fetched", 3), ("fetched", 2)], report.sources
    assert rows(db_path, "SELECT count(*) FROM entries WHERE source_id = 'hostile'") == [(0,)]
    assert not _worker_pids(), "parser processes left behind"


# -- a broken database or config: one clean line -------------------------------------------

def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "signal_feeds", *args], capture_output=True,
                          text=True, timeout=120, check=False)


def _assert_clean_error(result: Any, code: int, *needles: str) -> None:
    out = result.stderr if isinstance(result, subprocess.CompletedProcess) else result.output
    assert result.returncode == code if isinstance(result, subprocess.CompletedProcess) \
        else result.exit_code == code, out
    assert "Traceback" not in out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("signal: error: "), out
    for needle in needles:
        assert needle in lines[0], out


def test_missing_config_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    _assert_clean_error(_cli("fetch", "--config", str(missing)), 2, str(missing),
                        "config file not found")
    result = CliRunner().invoke(cli, ["fetch", "--config", str(missing)])
    _assert_clean_error(result, 2, "config file not found")


def test_corrupted_database_file(server: ScenarioServer, tmp_path: Path) -> None:
    db = tmp_path / "signal.db"
    db.write_bytes(b"this is not a database\n" * 400)
    config = write_config(tmp_path / "signal.toml", db,
                          {"demo": server.url("/feeds/demo-rss.xml")})
    # Found before anything is fetched, and a configuration error (it was exit 1, in
    # SQLite's words "file is not a database").
    _assert_clean_error(_cli("fetch", "--config", str(config), "--force"), 2,
                        str(db), "is not a SQLite database (another kind of file, or a "
                        "damaged one); it is left as it is")
    result = CliRunner().invoke(cli, ["fetch", "--config", str(config), "--force"])
    _assert_clean_error(result, 2, "is not a SQLite database")
    assert db.read_bytes() == b"this is not a database\n" * 400  # left as it was


def test_database_damaged_inside(server: ScenarioServer, tmp_path: Path) -> None:
    db = tmp_path / "signal.db"
    config = write_config(tmp_path / "signal.toml", db,
                          {"demo": server.url("/feeds/demo-rss.xml")})
    assert _cli("fetch", "--config", str(config), "--force").returncode == 0
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(db.read_bytes())
    page = 4096
    for start in range(page, len(data), page):  # every page after the header page
        data[start:start + page] = b"\xa5" * min(page, len(data) - start)
    db.write_bytes(bytes(data))
    result = _cli("fetch", "--config", str(config), "--force")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    text = result.stderr + result.stdout
    assert "malformed" in text or "not a database" in text, text


def test_read_only_database(server: ScenarioServer, db_path: Path,
                            monkeypatch: pytest.MonkeyPatch,
                            caplog: pytest.LogCaptureFixture) -> None:
    """Read-only: tests run as root, which ignores file modes, so the store's connection
    is opened with SQLite's URI ``mode=ro`` (SQLite itself refuses every write)."""
    config = make_config(db_path, {"demo-rss": server.url("/feeds/demo-rss.xml")})
    config_file = write_config(db_path.parent / "signal.toml", db_path,
                               {"demo-rss": server.url("/feeds/demo-rss.xml")})
    run_fetch(config, force=True, parser=InlineParser())
    server.put("/feeds/demo-rss.xml", _changed_feed())
    before = dump(db_path)
    sqlite_read_only(monkeypatch)
    # It was every source "failed" with "cannot claim sources in ...: attempt to write a
    # readonly database", and a warning that the leases could not be given back: SQLite
    # lets BEGIN IMMEDIATE through on a file it may only read.
    with caplog.at_level(logging.WARNING):
        with pytest.raises(DatabaseUnavailableError) as raised:
            run_fetch(config, force=True, parser=InlineParser())
        assert str(raised.value) == (
            f"cannot use database in {db_path}: attempt to write a readonly database "
            "(the file or its folder is read-only for this user)")
        result = CliRunner().invoke(cli, ["fetch", "--config", str(config_file)])
    assert result.exit_code == 2, result.output
    assert result.stderr == f"signal: error: {raised.value}\n"
    assert [r.getMessage() for r in caplog.records] == []
    monkeypatch.undo()
    assert dump(db_path) == before


@pytest.mark.parametrize(("signum", "code", "said"), [
    (signal.SIGINT, 130, "signal: interrupted\n"),
    # SIGTERM (timeout, systemd, kill) killed the process on the spot, leases held.
    (signal.SIGTERM, 143, "signal: terminated\n")])
def test_ctrl_c_during_a_fetch_ends_the_run_without_a_traceback(
        server: ScenarioServer, tmp_path: Path, signum: int, code: int, said: str) -> None:
    # One source answers; the other accepts the connection and never says a word, so
    # the run is surely in the middle of a request when Ctrl-C comes.
    db = tmp_path / "signal.db"
    with silent_server() as (silent, accepted):
        config = write_config(tmp_path / "signal.toml", db, {
            "demo": server.url("/feeds/demo-rss.xml"), "silent": f"{silent}/feed.xml"})
        returncode, _out, err = interrupt_when_waiting(
            [sys.executable, "-m", "signal_feeds", "fetch", "--config", str(config),
             "--force"], accepted, signum)
    # 130, as shells report Ctrl-C: not click's "Aborted!" and 1, which for `signal
    # fetch` means that a source failed.
    assert returncode == code
    assert err == said, err
    assert rows(db, "PRAGMA integrity_check") == [("ok",)]
    assert rows(db, "SELECT count(*) FROM sources WHERE lease_owner IS NOT NULL") == [(0,)]
    # Whole or not at all: the answered source has its fetch row and all its entries,
    # or neither; the silent one has nothing.
    stored = rows(db, "SELECT count(*) FROM entries WHERE source_id = 'demo'")
    fetched = rows(db, "SELECT count(*) FROM fetches WHERE source_id = 'demo'")
    assert (stored, fetched) in (([(0,)], [(0,)]), ([(3,)], [(1,)]))
    assert rows(db, "SELECT count(*) FROM fetches WHERE source_id = 'silent'") == [(0,)]
    # The next run, without the silent source, finds the database as a run leaves it.
    config = write_config(tmp_path / "signal.toml", db,
                          {"demo": server.url("/feeds/demo-rss.xml")})
    assert _cli("fetch", "--config", str(config), "--force").returncode == 0
    assert rows(db, "SELECT count(*) FROM entries WHERE source_id = 'demo'") == [(3,)]


def test_ctrl_c_while_waiting_for_a_locked_database_stops_at_once(tmp_path: Path) -> None:
    # The open waited in asyncio's thread pool, which the event loop's end waits for:
    # Ctrl-C took effect only when the other program let go (up to busy_timeout).
    db = tmp_path / "signal.db"
    with Store(db):
        pass
    config = write_config(tmp_path / "signal.toml", db, {"a": "http://127.0.0.1:9/feed.xml"},
                          busy_timeout=60)
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        proc = subprocess.Popen([sys.executable, "-m", "signal_feeds", "fetch", "--config",
                                 str(config)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            time.sleep(3)  # started, and waiting for the lock
            assert proc.poll() is None
            stopped = time.monotonic()
            proc.send_signal(signal.SIGINT)
            _out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert time.monotonic() - stopped < 10
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (proc.returncode, err) == (130, "signal: interrupted\n")


def test_a_database_lost_mid_run_stops_the_run_with_one_line(
        server: ScenarioServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every source after the loss "failed" with the same connection error (160 lines
    # of cron mail under -q), and the run exited 1 as if feeds had failed.
    db = tmp_path / "signal.db"
    config = write_config(tmp_path / "signal.toml", db, {
        f"s{i}": server.url(f"/feeds/demo-rss.xml?n={i}") for i in range(6)}, concurrency=1)
    real_claim = Store.claim_sources
    calls = []

    def claim_then_lose(self: Store, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) > 2:
            raise DatabaseUnavailableError(f"cannot claim sources in {db}: the server is gone")
        return real_claim(self, *args, **kwargs)

    monkeypatch.setattr(Store, "claim_sources", claim_then_lose)
    result = CliRunner().invoke(cli, ["fetch", "-q", "--config", str(config)])
    assert result.exit_code == 2, result.output
    assert result.output.splitlines() == [
        f"signal: error: cannot claim sources in {db}: the server is gone"]
    monkeypatch.undo()
    assert rows(db, "PRAGMA integrity_check") == [("ok",)]
    # What was fetched before the loss was stored whole; nothing is left leased.
    fetched = rows(db, "SELECT count(*) FROM fetches")[0][0]
    assert rows(db, "SELECT count(*) FROM entries")[0][0] == 3 * fetched
    assert rows(db, "SELECT count(*) FROM sources WHERE lease_owner IS NOT NULL") == [(0,)]


def test_a_full_disk_is_called_full(tmp_path: Path) -> None:
    # SQLite says "disk I/O error" when it cannot grow -shm on a full disk: every
    # command exited 1 with that, and an operator would look at the hardware.
    full = tmp_path / "full"
    full.mkdir()
    if os.geteuid() != 0 or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(full)],
            capture_output=True).returncode != 0:
        pytest.skip("needs root to mount a small file system")
    try:
        with Store(full / "f.db"):
            pass
        with open(full / "fill", "wb") as fill, contextlib.suppress(OSError):
            while True:
                fill.write(b"\0" * 65536)
        result = CliRunner().invoke(cli, ["entries", "--db", str(full / "f.db")])
        assert result.exit_code == 2, result.output
        assert result.output.strip().endswith(f"(the disk that holds {full} is full)")
    finally:
        subprocess.run(["umount", str(full)], check=True)
