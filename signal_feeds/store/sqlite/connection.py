"""One SQLite connection: opening it, its settings, transactions, and error translation.

Every ``sqlite3`` error the store meets passes through :meth:`Connection.errors`, which
turns it into a :class:`~signal_feeds.errors.StoreError` naming the database file: no
driver exception leaves the store package.

A locked database is waited for at most ``busy_timeout`` seconds (SQLite's busy
handler). Once one wait has run out, later writes on the connection try once without
waiting, until one gets the lock again. A run with many responses would otherwise wait
the whole timeout again for each of them while another program holds the lock.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from signal_feeds.errors import DatabaseUnavailableError, StoreError
from signal_feeds.limits import descriptors
from signal_feeds.store.sqlite.maintenance import WAL_LIMIT_BYTES, Checkpointer

__all__ = ["CACHE_KIB", "DEFAULT_BUSY_TIMEOUT", "Connection", "foreign_reason",
           "foreign_tables", "newer_schema_error", "not_a_file", "user_tables"]

log = logging.getLogger("signal_feeds.store")

#: Seconds a connection waits for another program's lock before giving up. A minute is
#: far longer than any one Signal transaction holds the lock (a batch of responses,
#: or `signal dedupe` on a large file), and short enough that a cron job never piles up.
DEFAULT_BUSY_TIMEOUT = 60.0
#: SQLite page cache of the writing connection, in KiB. New rows land at random places
#: in large indexes, so beyond the interior pages a bigger cache saves little: a cold
#: ingest of 20,000 entries took as long at 8 MB as at 16 MB and 64 MB, into an empty
#: database and into one of 1,000,000 entries, and the run's peak RSS fell by 8 MB.
CACHE_KIB = 8 * 1024

_BUSY_WORDS = ("locked", "busy")


def user_tables(conn: sqlite3.Connection) -> set[str]:
    """The file's tables, without SQLite's own (``sqlite_stat1`` of an ANALYZE)."""
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                       "AND name NOT LIKE 'sqlite!_%' ESCAPE '!'")}


def foreign_tables(tables: set[str]) -> list[str]:
    """``tables`` (see :func:`user_tables`), sorted, if they are another program's
    database; ``[]`` for a file without tables or Signal's own."""
    return [] if not tables or {"sources", "entries"} <= tables else sorted(tables)


def foreign_reason(tables: list[str]) -> str:
    """Why a file holding ``tables`` (see :func:`foreign_tables`) is left alone."""
    shown = ", ".join(tables[:5]) + (", …" if len(tables) > 5 else "")
    return (f"another program's SQLite database (its tables: {shown}); Signal makes its "
            "tables only in a new file or its own database")


def newer_schema_error(path: Path, found: int, newest: int) -> DatabaseUnavailableError:
    """The refusal of a file a newer Signal made (schema version ``found``, past the
    ``newest`` this code knows): it keeps tables this one would leave silently stale."""
    return DatabaseUnavailableError(
        f"cannot use database {path}: a newer Signal made it (schema version {found}; "
        f"this one knows up to {newest}); upgrade signal-feeds to use it")


def not_a_file(path: Path) -> str:
    """What the thing at ``path`` is when it is there and neither a regular file nor a
    folder (a named pipe, a device, a socket), else ``""``. SQLite would wait for ever on
    a named pipe, and on ``/dev/null`` say "disk I/O error" after leaving a
    ``/dev/null-journal`` beside it."""
    try:
        mode = os.stat(path).st_mode  # through a symbolic link, as SQLite opens it
    except (OSError, ValueError):
        return ""
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return ""


def _is_busy(exc: sqlite3.Error) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and any(
        word in str(exc) for word in _BUSY_WORDS)


_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL, _SQLITE_CANTOPEN = 8, 10, 13, 14
#: Less free space than this where the file is, and an I/O error is the disk being full.
_NEARLY_FULL = 64 * 1024


def _setup_hint(exc: sqlite3.Error, path: Path) -> str:
    """What to check when SQLite cannot open or write the file at all, else ''."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code == _SQLITE_READONLY:
        return "the file or its folder is read-only for this user"
    if code == _SQLITE_CANTOPEN:
        if not path.parent.is_dir():
            return f"the folder {path.parent} does not exist"
        if path.is_dir():
            return "that is a folder, not a database file"
        if (known := descriptors()) is not None and known[0] + 3 >= known[1]:
            # SQLite's EMFILE is CANTOPEN too: the folder was not the problem.
            return (f"this process has {known[0]} of its {known[1]} open files in use: "
                    "raise 'ulimit -n' for this job")
        return (f"SQLite needs to read and write the file and to create {path.name}-wal "
                "and -shm beside it in its folder")
    if code == _SQLITE_FULL or (code == _SQLITE_IOERR
                                and _free_space(path.parent) < _NEARLY_FULL):
        # SQLite says "disk I/O error" when it cannot grow -shm on a full disk: an
        # operator would look at the hardware. No later write fits either.
        return f"the disk that holds {path.parent} is full"
    if code == _SQLITE_IOERR and (limit := _file_size_limit(path)):
        # A write past RLIMIT_FSIZE fails with EFBIG (Python ignores SIGXFSZ), which
        # SQLite reports as a plain I/O error. No later write fits either.
        return (f"a file of the database reached this process's file size limit of "
                f"{limit} bytes: raise 'ulimit -f' for this job")
    return ""


def _file_size_limit(path: Path) -> int:
    """The process's file size limit when the database or its WAL is within a page or
    so of it (a write there fails), else 0."""
    try:
        import resource
    except ImportError:  # not on this platform
        return 0
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit == resource.RLIM_INFINITY:
        return 0
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):
        try:
            if os.stat(path.with_name(name)).st_size + _NEARLY_FULL >= limit:
                return int(limit)
        except OSError:
            continue
    return 0


def _free_space(folder: Path) -> int:
    try:
        found = os.statvfs(folder)
    except (OSError, AttributeError):  # no statvfs on this platform: not known
        return _NEARLY_FULL
    return found.f_bavail * found.f_frsize


def write_probe(conn: sqlite3.Connection) -> None:
    """Write once, in the open transaction (the header's own value, unchanged):
    ``BEGIN IMMEDIATE`` succeeds on a file SQLite may only read, and every later write
    would fail instead."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    conn.execute(f"PRAGMA user_version = {version}")


class Connection:
    """The store's connection to one SQLite file (autocommit; transactions explicit).

    A file whose schema version is past ``newest_schema`` is refused before anything
    in it is changed (see :func:`newer_schema_error`).
    """

    def __init__(self, path: Path, *, busy_timeout: float,
                 newest_schema: int | None = None) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self.newest_schema = newest_schema
        #: Set once a wait for the write lock has run out (see the module docstring).
        self.gave_up: str = ""
        self._batch_depth = 0
        #: Why SQLite rolled the open batch back itself (a full disk), if it did.
        self._lost: StoreError | None = None
        # One thread at a time on the connection: a write from another thread while a
        # batch is open would become a savepoint of that batch and share its fate (a
        # batch that failed took a write the other thread had seen succeed), and a read
        # would see the batch's writes before they are committed (a change-feed cursor
        # past changes a rollback then takes back). Either waits instead.
        self._writing = threading.RLock()
        #: Work to run at the end of the open transaction, before it commits (see
        #: :meth:`before_commit`).
        self._deferred: list[Callable[[sqlite3.Connection], None]] = []
        #: The file is known to be in WAL mode (see :meth:`_use_wal`).
        self._wal = False
        if kind := not_a_file(path):
            raise DatabaseUnavailableError(f"cannot open database {path}: it is {kind}, "
                                           "not a database file")
        with self.errors("cannot open database"):
            self.conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None,
                                        check_same_thread=False)
        try:
            with self.errors("cannot use database"):
                self._configure()
        except StoreError:
            self.conn.close()
            raise
        self.checkpointer = Checkpointer(path, busy_timeout)

    def _configure(self) -> None:
        conn = self.conn
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        self._retry_busy(self._check_file)
        # WAL + NORMAL: a crash can lose the last commits, never corrupt the file.
        conn.execute("PRAGMA synchronous = NORMAL")
        # Each response is a savepoint inside a batch: SQLite keeps the pages a
        # savepoint may roll back in a sub-journal, by default a temporary file,
        # one pwrite per page. In memory, it costs no system calls.
        conn.execute("PRAGMA temp_store = MEMORY")
        # Index pages are touched at random; SQLite's default 2 MB cache re-reads
        # them from the file. A fixed cap keeps memory independent of the file size.
        conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        # Checkpoints (copying the WAL into the file, with its fsyncs) happen on a
        # thread of their own, not inside whichever commit crosses the threshold.
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")

    def _retry_busy(self, step: Callable[[], None]) -> None:
        """Run ``step``, again while SQLite says "locked" at once without waiting (two
        processes opening a new file together), until the busy timeout."""
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                step()
                return
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _check_file(self) -> None:
        """Refuse another program's file, whatever its journal mode or the user_version
        its program keeps: the look before opening cannot wait for a file someone holds,
        so the store looks again here, before anything is changed. Nor a newer Signal's:
        a write (the switch to WAL included) rewrites its header."""
        if tables := foreign_tables(user_tables(self.conn)):
            raise StoreError(f"cannot use database {self.path}: it is "
                             f"{foreign_reason(tables)}; it is left as it is")
        self._check_schema()

    def _use_wal(self) -> None:
        """Switch the file to WAL before its first write transaction, not on opening: a
        rollback-journal copy (``VACUUM INTO`` makes one) is read in place, on read-only
        storage too, and a read leaves its bytes alone. A switch needs an exclusive lock
        and may be refused at once: retried until the busy timeout."""
        if self._wal:
            return

        def switch() -> None:
            if self.conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                self.conn.execute("PRAGMA journal_mode = WAL")

        self._retry_busy(switch)
        self._wal = True

    @contextmanager
    def errors(self, what: str, source_id: str | None = None) -> Iterator[None]:
        """Translate ``sqlite3`` errors raised inside into :class:`StoreError`
        ("<what> in <path>: <SQLite's message>"). Holds the connection for the
        thread (see ``_writing``)."""
        try:
            with self._writing:
                yield
        except sqlite3.Error as exc:
            detail = str(exc) or type(exc).__name__
            if _is_busy(exc):
                if not self.gave_up:
                    log.info("gave up waiting for the lock on %s after %g s",
                                self.path, self.busy_timeout)
                self.gave_up = detail
                detail = f"{detail} (another program holds it; waited {self.busy_timeout:g} s)"
            hint = _setup_hint(exc, self.path)
            # With a hint, not one source's problem: every write of the run would fail.
            error = (DatabaseUnavailableError(f"{what} in {self.path}: {detail} ({hint})",
                                              source_id=source_id) if hint else
                     StoreError(f"{what} in {self.path}: {detail}", source_id=source_id))
            if self._batch_depth and not self.conn.in_transaction and not self._lost:
                self._lost = error
            raise error from exc

    def close(self) -> None:
        """Stop the checkpointer and close (closing the last connection folds the WAL
        into the file)."""
        self.checkpointer.close()
        with self.errors("cannot close database"):
            self.conn.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction committed on exit, or, inside
        :meth:`batch`, a savepoint released on exit. Either is undone on an error.
        Another thread's write waits until this one (or the batch) has ended."""
        with self._writing:
            if self._batch_depth:
                yield from self._savepoint()
                return
            yield from self._transaction()

    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self._use_wal()
        if self.gave_up:
            # Try once without waiting: free again, writing resumes; still held, this
            # write fails at once instead of waiting out the timeout again.
            self.conn.execute("PRAGMA busy_timeout = 0")
            try:
                self.conn.execute("BEGIN IMMEDIATE")
            finally:
                self.conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            self.gave_up = ""
        else:
            self.conn.execute("BEGIN IMMEDIATE")
        try:
            self._check_schema()
            yield self.conn
            self._run_deferred()
            self.conn.execute("COMMIT")
            self.checkpointer.committed(self.conn)
        except BaseException:
            self._deferred.clear()
            # A failed COMMIT (disk full, I/O error) can leave the transaction open; an
            # error SQLite already rolled back leaves none. Either way: no transaction
            # survives, and the original error is the one raised.
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise

    def _check_schema(self) -> None:
        """Refuse to write once a newer Signal has upgraded the file: a run that opened
        it at the older version (an upgrade installed while it ran, or another host's
        newer Signal) would write rows without the columns and tables it does not know.
        Read under the write lock, so no upgrade commits between the look and the write."""
        if self.newest_schema is not None and (found := int(self.conn.execute(
                "PRAGMA user_version").fetchone()[0])) > self.newest_schema:
            raise newer_schema_error(self.path, found, self.newest_schema)

    def before_commit(self, work: Callable[[sqlite3.Connection], None]) -> None:
        """Run ``work`` in the open transaction just before it commits, after every
        write of a batch (in the order given); dropped if the write that gave it is
        undone. Outside a transaction, run it now.

        For the full-text index: FTS5 writes its pending terms to disk whenever a
        savepoint opens, so index rows written inside each response's savepoint made a
        small segment per response (a sixth of the writer's time in a cold run). Written
        once per batch they make one, and they still commit with their entries or not at
        all: if this work fails, the whole batch is rolled back.
        """
        if self.conn.in_transaction:
            self._deferred.append(work)
        else:
            work(self.conn)

    def _run_deferred(self) -> None:
        while self._deferred:
            self._deferred.pop(0)(self.conn)

    def _savepoint(self) -> Iterator[sqlite3.Connection]:
        if not self.conn.in_transaction:
            # SQLite rolled the batch back: a savepoint now would begin a transaction of
            # its own, committed on release, while the batch is reported lost.
            raise self._rolled_back()
        self.conn.execute("SAVEPOINT signal_write")
        deferred = len(self._deferred)
        try:
            yield self.conn
            self.conn.execute("RELEASE signal_write")
        except BaseException:
            del self._deferred[deferred:]
            # Undo this write alone; the batch's other writes stay. (If SQLite has rolled
            # back the whole transaction, there is nothing left to undo.)
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK TO signal_write")
                self.conn.execute("RELEASE signal_write")
            raise

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction around the writes made inside, each under its own savepoint."""
        with self.transaction():
            self._batch_depth += 1
            self._lost = None
            try:
                yield
            finally:
                self._batch_depth -= 1
            if not self.conn.in_transaction:  # SQLite rolled everything back itself
                raise self._rolled_back()

    def _rolled_back(self) -> StoreError:
        """The error of a batch SQLite rolled back: what made it do so (a full disk
        stops the run), else that it did."""
        if self._lost is not None:
            return type(self._lost)(self._lost.message)
        return StoreError(f"the batch's transaction in {self.path} was rolled back by "
                          "SQLite")
