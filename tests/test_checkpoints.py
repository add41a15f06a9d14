"""The writer's checkpoints beside other programs on the same SQLite file."""

from __future__ import annotations

import itertools
import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path

import pytest

from signal_feeds.store.sqlite import maintenance
from signal_feeds.store.sqlite.connection import Connection

BUSY_TIMEOUT = 3.0


def _write(db: Connection) -> float:
    """One commit of 32 KiB, and how long it took, the checkpoint after it included."""
    start = time.monotonic()
    with db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (randomblob(32768))")
    return time.monotonic() - start


def _other_program(path: Path, stop: threading.Event, refused: list[str]) -> None:
    """Write now and then, waiting for the lock less long than the store does."""
    with closing(sqlite3.connect(path, isolation_level=None,
                                 timeout=BUSY_TIMEOUT * 0.8)) as conn:
        while not stop.is_set():
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("INSERT INTO t VALUES (1)")
                conn.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                refused.append(str(exc))
                return
            time.sleep(0.05)


def _log_frames(path: Path) -> int:
    with closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])


def test_a_reader_on_an_old_snapshot_stalls_neither_the_run_nor_other_writers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A backup, an export or a long query of another program keeps the log from being
    # started over. The writer's restart used to wait busy_timeout for it at every
    # commit, keeping every other writer out meanwhile: their writes gave up.
    monkeypatch.setattr(maintenance, "CHECKPOINT_WAL_BYTES", 64 * 1024)
    monkeypatch.setattr(maintenance, "WAL_LIMIT_BYTES", 256 * 1024)
    path = tmp_path / "signal.db"
    db = Connection(path, busy_timeout=BUSY_TIMEOUT)
    try:
        with db.transaction() as conn:
            conn.execute("CREATE TABLE t (x BLOB)")
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM t").fetchone()
        refused: list[str] = []
        stop = threading.Event()
        writer = threading.Thread(target=_other_program, args=(path, stop, refused))
        writer.start()
        slowest = 0.0
        try:
            for _ in range(32):  # 1 MiB of log: four times the limit
                slowest = max(slowest, _write(db))
                if slowest >= BUSY_TIMEOUT:
                    break
                time.sleep(0.01)  # the background checkpoint measures the log
        finally:
            stop.set()
            writer.join()
        assert refused == [], "another program gave up waiting for the lock"
        assert slowest < BUSY_TIMEOUT / 2, f"a commit took {slowest:.1f} s"

        # Once the reader is gone, the writer starts the log over again.
        reader.execute("COMMIT")
        reader.close()
        deadline = time.monotonic() + 30
        while _log_frames(path) * 4096 >= maintenance.WAL_LIMIT_BYTES:
            assert time.monotonic() < deadline, "the log was never started over"
            _write(db)
            time.sleep(0.01)
    finally:
        db.close()


def test_after_a_reader_held_the_restart_back_the_writer_pauses_before_trying_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each try keeps other writers out for up to RESTART_WAIT; tries 80 ms apart (the log
    # grew fast) left gaps SQLite's busy handler, polling every 100 ms, could miss: the
    # other program waited through two tries and gave up.
    monkeypatch.setattr(maintenance, "CHECKPOINT_WAL_BYTES", 64 * 1024)
    monkeypatch.setattr(maintenance, "WAL_LIMIT_BYTES", 256 * 1024)
    monkeypatch.setattr(maintenance, "RESTART_WAIT", 0.2)
    monkeypatch.setattr(maintenance, "RESTART_PAUSE", 0.6)
    # (start, end, held back): a try that failed instead (the background checkpoint had
    # the log, under load) kept no writer out and asks for no pause.
    tries: list[tuple[float, float, bool]] = []
    held_back = maintenance.Checkpointer._held_back

    def timed(self: maintenance.Checkpointer, conn: sqlite3.Connection) -> bool:
        start = time.monotonic()
        held = held_back(self, conn)
        tries.append((start, time.monotonic(), held))
        return held

    monkeypatch.setattr(maintenance.Checkpointer, "_held_back", timed)
    path = tmp_path / "signal.db"
    db = Connection(path, busy_timeout=BUSY_TIMEOUT)
    try:
        with db.transaction() as conn:
            conn.execute("CREATE TABLE t (x BLOB)")
        with closing(sqlite3.connect(path, isolation_level=None)) as reader:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM t").fetchone()
            deadline = time.monotonic() + 30
            while sum(held for *_, held in tries[:-1]) < 2:
                assert time.monotonic() < deadline, f"only {len(tries)} tries"
                _write(db)
            reader.execute("COMMIT")
    finally:
        db.close()
    gaps = [start - end for (_, end, held), (start, _, _) in itertools.pairwise(tries)
            if held]
    assert min(gaps) >= 0.6, f"tries {gaps} s apart"
