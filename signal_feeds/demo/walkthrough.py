"""``signal demo``: the whole pipeline against the teaching server, on this machine.

It starts the teaching server on 127.0.0.1, fetches the demo feeds into a local database
twice (the second run is all 304), corrects one title on the server and fetches again to
show what an update looks like, and says where the database is.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path

from signal_feeds.config.source_list import Config, Settings, Source
from signal_feeds.decide.report import RunReport
from signal_feeds.demo.teaching_server import TeachingServer, fixtures_dir
from signal_feeds.dsn import Database, display_database, is_postgres_url
from signal_feeds.errors import (
    ConfigError,
    DatabaseUnavailableError,
    FetchError,
    StoreError,
)
from signal_feeds.http.proxies import DIRECT
from signal_feeds.run.pipeline import run_fetch
from signal_feeds.store import open_store
from signal_feeds.store.sqlite.schema import not_signals

__all__ = ["DEFAULT_DEMO_DATABASE", "run_demo"]

DEFAULT_DEMO_DATABASE = "signal-demo.db"
DEMO_SOURCE_IDS = ("demo-rss", "demo-atom")
#: What every step of the demo gets from its own server when it works.
_WORKED = ("fetched", "not_modified")

try:
    import fcntl
except ImportError:  # Windows: two demos in one folder are not kept apart
    fcntl = None  # type: ignore[assignment]


@contextlib.contextmanager
def _only_demo(path: Path) -> Iterator[None]:
    """Lock ``<path>-demo`` for the whole demo: a second demo on the same file deleted
    the first one's database under it, and each then printed a wrong story."""
    if fcntl is None:
        yield
        return
    lock = Path(f"{path}-demo")
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            # A read-only folder: SQLite could not write there either (exit 2, as it).
            raise DatabaseUnavailableError(f"cannot write in {path.parent} ({exc.strerror}); "
                                           "choose another path with --db") from exc
        try:
            # A record lock, not flock: the parser processes a run forks would inherit an
            # flock and hold it for a moment after a demo killed with SIGKILL.
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StoreError(f"another signal demo is writing {path}; wait for it to end "
                             "or choose another path with --db") from None
        try:  # the holder before us may have removed the file we opened: lock it anew
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)  # still held: a waiting demo sees it gone, retries
        os.close(fd)


def _worked(report: RunReport, server_url: str) -> None:
    """Stop the demo when a step did not get its answer from the demo's own server (a
    loopback interface that is down, a firewall): the rest would tell a wrong story."""
    for source in report.sources:
        if source.status not in _WORKED:
            raise FetchError(f"the demo could not fetch from its own server at {server_url} "
                             f"({source.status}: {source.error or 'no answer'})",
                             source_id=source.source)


def _fresh_database(path: Path) -> None:
    """Remove a previous demo database (or an empty one), refusing to touch any other
    file: a Signal database that holds any source but the demo's own is someone's data."""
    if not path.exists():
        return
    # An empty file, or a SQLite file with no tables yet (a demo killed before its
    # first write leaves one), holds nobody's data: it is replaced like a demo's.
    if not_signals(path):
        raise StoreError(f"{path} exists and is not a Signal database; "
                         "choose another path with --db")
    with open_store(path) as store:
        others = sorted(s.source_id for s in store.source_states()
                        if s.source_id not in DEMO_SOURCE_IDS)
    if others:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise StoreError(f"{path} holds sources other than the demo's ({shown}); the demo "
                         "replaces only its own database: choose another path with --db")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _empty_server_database(url: str) -> None:
    """A PostgreSQL database is never emptied by the demo: it must hold nothing yet."""
    with open_store(url) as store:
        held = {table: n for table, n in store.table_counts().items() if n}
    if held:
        raise ConfigError(f"{display_database(url)} is not empty; the demo writes only to an "
                          "empty database (or give it a file path)")


def _lines(title: str, report: RunReport) -> Iterator[str]:
    yield title
    for line in report.lines():
        yield f"  {line}"


def run_demo(database: str | Path = DEFAULT_DEMO_DATABASE, *,
             echo: Callable[[str], None]) -> Database:
    """Run the demo, telling ``echo`` what happens (the CLI prints it); return the database
    (a file, replaced if it was an earlier demo's; or an empty ``postgresql://`` one)."""
    db: Database
    if is_postgres_url(database):
        db = str(database)
        _empty_server_database(db)
        return _walk(db, echo)
    db = Path(database).resolve()
    with _only_demo(db):
        _fresh_database(db)
        return _walk(db, echo)


def _walk(db: Database, echo: Callable[[str], None]) -> Database:
    feeds = fixtures_dir()
    with TeachingServer(feeds) as server:
        config = Config(
            sources=(Source(id=DEMO_SOURCE_IDS[0], url=server.url("/feeds/demo-rss.xml"),
                            title="Signal demo (RSS)"),
                     Source(id=DEMO_SOURCE_IDS[1], url=server.url("/feeds/demo-atom.xml"),
                            title="Signal demo (Atom)")),
            # Its server is on this machine: a proxy from the environment (HTTP_PROXY,
            # and no NO_PROXY for 127.0.0.1) would fail every fetch, or send it elsewhere.
            settings=Settings(database=db, min_interval=0, proxy=DIRECT),
        )
        echo(f"Teaching server on {server.base_url}")
        first = run_fetch(config)
        for line in _lines("1. First fetch: every entry is new.", first):
            echo(line)
        _worked(first, server.base_url)
        # The demo feed asks for <ttl>60</ttl> (an hour): --force skips the wait.
        second = run_fetch(config, force=True)
        for line in _lines("2. Second fetch (forced): conditional GET, the server answers 304.",
                           second):
            echo(line)
        _worked(second, server.base_url)
        corrected = (feeds / "variants" / "demo-rss-corrected.xml").read_bytes()
        server.put("/feeds/demo-rss.xml", corrected)
        third = run_fetch(config, force=True)
        for line in _lines("3. A title is corrected on the server: same key, new version.",
                           third):
            echo(line)
        _worked(third, server.base_url)
    corrected_key = ""
    with open_store(db) as store:
        for entry in store.entries(source_id="demo-rss"):
            versions = store.versions(entry.key)
            if len(versions) > 1:
                corrected_key = entry.key
                echo(f"   entry {entry.remote_id} (key {entry.key[:12]}…):")
                for version in versions:
                    echo(f"     {version.first_seen_at}  {version.title}"
                         f"  fingerprint {version.fingerprint[:12]}…")
        totals = store.table_counts()
    echo(f"Database: {display_database(db)} ({totals['entries']} entries, "
         f"{totals['entry_versions']} versions, {totals['fetches']} fetches)")
    # Commands that work exactly as printed, from any folder: the path is absolute and
    # no source list is needed to read.
    path = shlex.quote(display_database(db))
    echo("Read it:")
    echo(f"  signal entries --db {path}")
    if corrected_key:
        echo(f"  signal history {corrected_key[:12]} --db {path}")
    if isinstance(db, Path):
        echo(f"  sqlite-utils rows {path} entries --table")
    return db
