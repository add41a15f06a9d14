"""One PostgreSQL connection: opening it, transactions, and error translation.

psycopg is imported here, when a store is opened with a ``postgresql://`` URL, and
nowhere else outside this package. Every psycopg error passes through
:meth:`Connection.errors` and becomes a :class:`~signal_feeds.errors.StoreError`
naming the database without its password; a server that cannot be reached, refuses
the login or went away becomes a :class:`~signal_feeds.errors.DatabaseUnavailableError`.

Transactions are psycopg's: :meth:`Connection.transaction` is a transaction, or inside
:meth:`Connection.batch` a savepoint, so a failing write is undone alone and the batch's
other writes commit together at its end.
"""

from __future__ import annotations

import logging
import os
import secrets
import selectors
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn

from signal_feeds.dsn import display_database, redact
from signal_feeds.errors import DatabaseUnavailableError, StoreError

if TYPE_CHECKING:
    import psycopg

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "DEFAULT_DEAD_PEER_SECONDS", "INSTALL_HINT", "Connection",
           "import_psycopg"]

log = logging.getLogger("signal_feeds.store")

#: Seconds to wait for the server to accept a connection.
DEFAULT_CONNECT_TIMEOUT = 10
INSTALL_HINT = "pip install 'signal-feeds[postgres]'"


#: Seconds a connection may go without a word from the server's machine before it is
#: given up (TCP keepalives and TCP_USER_TIMEOUT): a server behind a network that
#: dropped out, or one that went away without closing, is found after this long.
DEFAULT_DEAD_PEER_SECONDS = 60

#: Connection parameters Signal sets where the operator did not: name -> (the libpq
#: variable that also sets it, or "" for none, Signal's value). libpq's own keepalives
#: wait for the system's idle time (two hours on Linux) before asking: a cron run whose
#: server vanished behind a firewall waited that long on its next answer.
_DEFAULTS: dict[str, tuple[str, str | int]] = {
    "connect_timeout": ("PGCONNECT_TIMEOUT", DEFAULT_CONNECT_TIMEOUT),
    "application_name": ("PGAPPNAME", "signal"),
    "keepalives_idle": ("", DEFAULT_DEAD_PEER_SECONDS // 2),
    "keepalives_interval": ("", DEFAULT_DEAD_PEER_SECONDS // 6),
    "keepalives_count": ("", 3),
    "tcp_user_timeout": ("", DEFAULT_DEAD_PEER_SECONDS * 1000),
}

#: SQLSTATEs that are the setup's problem, not one write's: what to check.
_SETUP_STATES = {"25006": "the database or server is read-only",
                 "42501": "this role may not write here: grant it INSERT, UPDATE and "
                          "DELETE on Signal's tables"}
#: The tables a run writes to.
_WRITTEN_TABLES = ("sources", "entries", "entry_versions", "fetches", "source_order",
                   "dedupe_text", "changes", "change_log")


def import_psycopg() -> Any:
    """The psycopg module, or a clear error saying how to install it."""
    try:
        import psycopg
    except ImportError as exc:
        raise DatabaseUnavailableError(
            "a postgresql:// database needs the PostgreSQL driver, which is not installed: "
            f"{INSTALL_HINT}") from exc
    return psycopg


class Connection:
    """The store's connection to one PostgreSQL database (autocommit; transactions
    explicit). ``url`` is kept for connecting; only :attr:`name` is ever shown."""

    def __init__(self, url: str, *, busy_timeout: float) -> None:
        self.url = url
        #: The database as messages name it: the URL without its password.
        self.name = display_database(url)
        self.busy_timeout = busy_timeout
        self._psycopg = import_psycopg()
        self._batch_depth = 0
        #: Run at the start of every outermost transaction (the store's schema check).
        self.on_begin: Callable[[psycopg.Connection[Any]], None] | None = None
        #: Set by :meth:`close`: reconnecting is for a lost session, never a closed store.
        self.closed = False
        self.conn: psycopg.Connection[Any] = self._connect()

    def _open(self) -> psycopg.Connection[Any]:
        """A new connection, or DatabaseUnavailableError saying why there is none."""
        try:
            conn: psycopg.Connection[Any] = self._psycopg.connect(
                self.url, autocommit=True, **self._defaults())
        except (self._psycopg.Error, ValueError) as exc:
            # Whatever the reason (refused, login, a URL libpq cannot parse), the
            # database cannot be used.
            self._raise("cannot connect to", exc, unavailable=True)
        return conn

    def _defaults(self) -> dict[str, str | int]:
        """Signal's connection parameters that the operator did not choose (in the URL
        or the libpq variable): psycopg's keywords override the URL's, and a
        ``?connect_timeout=2`` waited 10 s for a server that does not answer."""
        try:
            given = self._psycopg.conninfo.conninfo_to_dict(self.url)
        except (self._psycopg.Error, ValueError):
            given = {}  # connecting says what is wrong with it
        return {name: value for name, (variable, value) in _DEFAULTS.items()
                if name not in given and not (variable and os.environ.get(variable))
                # libpq before 12 refuses a parameter it does not know
                and (name != "tcp_user_timeout" or self._psycopg.pq.version() >= 120000)}

    def _connect(self) -> psycopg.Connection[Any]:
        conn = self._open()
        self.conn = conn
        with self.errors("cannot configure the connection to"):
            # A lock another writer holds is waited for at most busy_timeout, as in SQLite.
            conn.execute(f"SET lock_timeout = {max(int(self.busy_timeout * 1000), 1)}")
            conn.execute("SET TIME ZONE 'UTC'")
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
        if row is not None and row[0] != conn.info.backend_pid:
            self._check_session_kept(conn)
        return conn

    def _check_session_kept(self, conn: psycopg.Connection[Any]) -> None:
        """Refuse a pooler that hands each transaction to any server session.

        The server's process id differs from the one the connection was given: a pooler
        (pgbouncer) stands between. In session mode the connection keeps one server
        session; in transaction or statement mode the ``SET``s above, host slots'
        advisory locks and prepared statements would land on sessions other clients
        then use (a slot held for nobody, kept after the run, taken twice). A mark is
        set on this connection's session, then looked for from a second connection: a
        pooler that passes sessions between clients shows it this mark (it gives out
        the session used last first) or another Signal connection's; a session pool
        resets a session (``DISCARD ALL``) before another client gets it."""
        mark = secrets.token_hex(16)
        with self.errors("cannot configure the connection to"):
            conn.execute("SELECT set_config('signal.session_mark', %s, false)", (mark,))
        probe = self._open()
        try:
            with self.errors("cannot configure the connection to"):
                row = probe.execute(
                    "SELECT current_setting('signal.session_mark', true)").fetchone()
        finally:
            probe.close()
        if row is not None and row[0]:
            self._discard()
            raise DatabaseUnavailableError(
                f"cannot use {self.name}: a connection pooler there hands each "
                "transaction to any server session (pgbouncer's pool_mode = transaction "
                "or statement), and Signal keeps locks and settings in its session: "
                "connect to the server itself, or through a pool in session mode "
                "(which resets a session before another client gets it)")

    def _raise(self, what: str, exc: BaseException, source_id: str | None = None, *,
               unavailable: bool = False) -> NoReturn:
        detail = redact(" ".join(str(exc).split()), self.url) or type(exc).__name__
        unavailable = unavailable or self._is_unavailable(exc)
        if unavailable:
            self._discard()
        # A role that may not write, or a read-only database: every write of the run
        # would fail the same, so it is the setup's problem (exit 2), not one source's.
        hint = _SETUP_STATES.get(str(getattr(exc, "sqlstate", "") or ""), "")
        if hint:
            detail += f" ({hint})"
        cls = DatabaseUnavailableError if unavailable or hint else StoreError
        raise cls(f"{what} {self.name}: {detail}" if what.endswith(" to")
                  else f"{what} in {self.name}: {detail}", source_id=source_id) from exc

    def write_probe(self, conn: psycopg.Connection[Any]) -> None:
        """Try every kind of write a run makes, on no rows, in the open transaction: a
        role without the rights, or a read-only database or server, fails here, before
        any source is fetched, rather than every source failing after it."""
        with self.errors("cannot write to"):
            for table in _WRITTEN_TABLES:
                conn.execute(f"INSERT INTO {table} SELECT * FROM {table} WHERE false")
            conn.execute("UPDATE sources SET id = id WHERE false")
            conn.execute("UPDATE entries SET id = id WHERE false")
            conn.execute("DELETE FROM dedupe_text WHERE false")

    def _is_unavailable(self, exc: BaseException) -> bool:
        if self.gone:
            return True
        sqlstate = getattr(exc, "sqlstate", None)
        if sqlstate:
            # The server answered: only its "connection" class (08) and the shutdown
            # states (57P: admin or crash shutdown, cannot connect now, database dropped,
            # idle timeout) mean it is gone. A deadlock, a serialization failure, a lock
            # or statement timeout or a full disk fails this write, not the database.
            return str(sqlstate).startswith(("08", "57P"))
        return isinstance(exc, self._psycopg.OperationalError | self._psycopg.InterfaceError)

    def _discard(self) -> None:
        """Close a connection an unavailable error came from. libpq may not have seen
        the socket close yet (a terminated backend's notice can arrive as an ordinary
        error result), and a connection left half in a command fails the next one with
        "another command is already in progress"; closed, the next transaction opens a
        new one."""
        conn = getattr(self, "conn", None)
        if conn is not None and not conn.closed:
            try:
                conn.close()
            except self._psycopg.Error as exc:
                log.debug("closing the lost connection to %s: %s", self.name, exc)

    @property
    def gone(self) -> bool:
        """True once the connection is closed or was lost (the server went away)."""
        return bool(self.conn.closed or self.conn.broken)

    @contextmanager
    def errors(self, what: str, source_id: str | None = None) -> Iterator[None]:
        """Translate psycopg errors raised inside into StoreError (``what`` says what
        failed; the database is named after it, without its password)."""
        try:
            yield
        except StoreError:
            raise
        except self._psycopg.Error as exc:
            self._raise(what, exc, source_id)

    def ready(self) -> psycopg.Connection[Any]:
        """The connection, for the next statement or transaction: connected again
        first if the session ended since the last one (a restart, pg_terminate_backend,
        ``idle_session_timeout``), as long as no transaction of it is open."""
        self.check_open()
        if self._batch_depth or (not self.gone and self.conn.info.transaction_status
                                 != self._psycopg.pq.TransactionStatus.IDLE):
            if self.gone:  # the open transaction went with the connection
                raise DatabaseUnavailableError(f"the connection to {self.name} was lost")
            return self.conn
        if self.gone or self._ended_while_idle():
            # Between transactions nothing is lost with the old connection: a server
            # back after a restart takes the next response (one attempt; else an error,
            # which says all there is to say).
            self._discard()
            self._connect()
            log.warning("the connection to %s was lost; connected again", self.name)
        return self.conn

    def _ended_while_idle(self) -> bool:
        """Whether the server ended this idle session. libpq learns it only from the
        next statement, which then failed (and a run stopped on it); but a server ending
        a session says why first, so an idle connection with something to read is
        probed, at the cost of one round trip and only then."""
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self.conn.fileno(), selectors.EVENT_READ)
                if not selector.select(0):
                    return False
            self.conn.execute("SELECT 1")
        except (OSError, ValueError, self._psycopg.Error) as exc:
            return self.gone or self._is_unavailable(exc)
        return False

    @contextmanager
    def transaction(self, *, checked: bool = True) -> Iterator[psycopg.Connection[Any]]:
        """A transaction committed on exit, or inside :meth:`batch` a savepoint released
        on exit; either is undone on an error. ``checked=False`` skips :attr:`on_begin`
        (a read-only snapshot, whose first statement must set its isolation level)."""
        outermost = checked and not self._batch_depth
        with self.ready().transaction():
            if outermost and self.on_begin is not None:
                self.on_begin(self.conn)
            yield self.conn

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction around the writes made inside, each under its own savepoint."""
        with self.transaction():
            self._batch_depth += 1
            try:
                yield
            finally:
                self._batch_depth -= 1

    def check_open(self) -> None:
        """Refuse use after :meth:`close`: the store once reconnected silently (warning
        of a lost connection) and left that new connection open."""
        if self.closed:
            raise StoreError(f"cannot use {self.name}: the store was closed")

    def close(self) -> None:
        """Close the connection (a closed or broken one is fine; closing twice too)."""
        self.closed = True
        if not self.conn.closed:
            with self.errors("cannot close the connection to"):
                self.conn.close()
