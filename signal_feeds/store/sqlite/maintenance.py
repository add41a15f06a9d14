"""Checkpoints of the write-ahead log, on a thread of their own."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path

__all__ = ["CHECKPOINT_WAL_BYTES", "RESTART_PAUSE", "RESTART_WAIT", "WAL_LIMIT_BYTES",
           "WAL_LIMIT_SHARE", "Checkpointer"]

log = logging.getLogger("signal_feeds.store")

#: WAL size, in bytes, at which a commit asks for a checkpoint (SQLite's own default is
#: 1000 pages of 4 KiB).
CHECKPOINT_WAL_BYTES = 4 * 1024 * 1024
#: WAL content past which the checkpoint waits for the writer and starts the log over;
#: also the size the file is cut back to when it does.
WAL_LIMIT_BYTES = 32 * 1024 * 1024
#: In a large database the limit is this share of the file instead. Each such restart
#: copies what the background checkpoint has not yet, on the writer's time, and in a
#: large file new rows land on pages all over it: into 1,000,000 entries, restarting
#: every 32 MB took a quarter of a cold run.
WAL_LIMIT_SHARE = 1 / 32
#: Seconds the writer's own restart of the log waits for other connections, at most.
#: While it waits, SQLite keeps every other writer out; a reader on an older snapshot (a
#: backup, an export, a long query) never lets it finish, so waiting ``busy_timeout``
#: stalled the run at each commit and made other programs' writes give up.
RESTART_WAIT = 1.0
#: Seconds after a restart a reader held back before the writer tries again, however
#: fast the log grows: SQLite's busy handler retries only every 100 ms, so another
#: program waiting for the lock could miss a shorter gap between two tries and give up.
#: With the pause, no other writer waits much longer than one :data:`RESTART_WAIT`.
RESTART_PAUSE = 2.0


class Checkpointer:
    """Runs ``PRAGMA wal_checkpoint(PASSIVE)`` on its own connection and thread when the
    WAL has grown past :data:`CHECKPOINT_WAL_BYTES`.

    SQLite releases the GIL while it copies and syncs, so the checkpoint overlaps with the
    writer's next responses instead of stalling one commit. PASSIVE never blocks a
    writer or a reader; what it cannot copy now, the next one does.
    """

    def __init__(self, path: Path, busy_timeout: float) -> None:
        self._wal = Path(f"{path}-wal")
        self._path = path
        self._busy_timeout = busy_timeout
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        #: WAL content at the last background checkpoint.
        self.wal_bytes = 0
        #: WAL content below which the writer does not try to restart the log again
        #: after a reader held back the last try, and the moment (monotonic) before
        #: which it does not try.
        self._restart_from = 0
        self._restart_after = 0.0

    def committed(self, conn: sqlite3.Connection) -> None:
        """After a commit, on the writer's connection (outside any transaction)."""
        # (The first test spares most commits the stat of the database file.)
        if (self.wal_bytes >= WAL_LIMIT_BYTES and self.wal_bytes >= self._restart_from
                and time.monotonic() >= self._restart_after
                and self.wal_bytes >= (limit := self._limit())):
            # A writer that never pauses keeps a PASSIVE checkpoint from ever reaching
            # the end of the log, and the WAL grew without end (800 MB in one cold run).
            # Between two transactions the writer itself copies what is left and makes
            # the next transaction start the log over.
            seen, self.wal_bytes = self.wal_bytes, 0
            # Held back by a reader: try again once the log has grown by another limit
            # and the pause is over, not at every commit.
            if self._held_back(conn):
                self._restart_from = seen + limit
                self._restart_after = time.monotonic() + RESTART_PAUSE
            else:
                self._restart_from, self._restart_after = 0, 0.0
        try:
            size = self._wal.stat().st_size
        except OSError:
            return
        if size < CHECKPOINT_WAL_BYTES:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="signal-checkpoint",
                                            daemon=True)
            self._thread.start()
        self._wake.set()

    def _held_back(self, conn: sqlite3.Connection) -> bool:
        """Copy the rest of the log into the file and make the next transaction start
        the log over, waiting at most :data:`RESTART_WAIT` for other connections; True
        if one of them held it back."""
        wait = min(RESTART_WAIT, self._busy_timeout)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
            try:
                busy, frames, _copied = conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
            finally:
                conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000)}")
        except sqlite3.Error as exc:
            log.debug("checkpoint of %s failed: %s", self._path, exc)
            return False
        # No frame count: the background checkpoint had the log; the next commit retries.
        return bool(busy) and frames >= 0

    def _limit(self) -> int:
        try:
            size = self._path.stat().st_size
        except OSError:
            size = 0
        return max(WAL_LIMIT_BYTES, int(size * WAL_LIMIT_SHARE))

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self._path, timeout=self._busy_timeout,
                                   isolation_level=None)
        except sqlite3.Error as exc:  # the writer's own restarts still bound the log
            log.warning("no background checkpoints for %s: %s", self._path, exc)
            return
        try:
            page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])  # per file
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopping:
                    return
                try:
                    _busy, frames, _copied = conn.execute(
                        "PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    self.wal_bytes = frames * page_size
                except sqlite3.Error as exc:  # the file is still consistent: try next time
                    log.debug("background checkpoint of %s failed: %s", self._path, exc)
        except sqlite3.Error as exc:
            log.warning("no background checkpoints for %s: %s", self._path, exc)
        finally:
            conn.close()

    def close(self) -> None:
        if self._thread is not None:
            self._stopping = True
            self._wake.set()
            self._thread.join()
            self._thread = None
