"""Shared test fixtures: a real teaching server on 127.0.0.1 and real SQLite files."""

from __future__ import annotations

import datetime as dt
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scenario_server import ScenarioServer

from signal_feeds.config.source_list import Config, Settings, Source
from signal_feeds.demo.teaching_server import fixtures_dir

FIXTURES = fixtures_dir()

# A test run started in the background by a script (`pytest &`, no job control) inherits
# an ignored SIGINT, and so would every program the tests start: the Ctrl-C tests' own
# children would sit out their SIGINT and time out. Ignored is kept across exec; a
# handler is not, so with one here the children start with the default again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
TABLES = ("sources", "entries", "entry_versions", "fetches")


def dump(db: Path | str) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table, sorted: equal dumps mean equal databases (a SQLite file
    or a postgresql:// URL)."""
    if isinstance(db, str) and db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db) as pg:
            return {t: sorted(pg.execute(f"SELECT * FROM {t}").fetchall(), key=repr)
                    for t in TABLES}
    conn = sqlite3.connect(db)
    try:
        return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr)
                for t in TABLES}
    finally:
        conn.close()


def query(db: Path | str, sql: str) -> list[tuple[Any, ...]]:
    """The rows of one SQL query (plain SQL both backends accept) on a SQLite file or a
    postgresql:// URL."""
    if isinstance(db, str) and db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db) as pg:
            return pg.execute(sql).fetchall()  # type: ignore[arg-type]
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def execute(db: Path | str, *statements: str) -> None:
    """Run statements (plain SQL both backends accept) and commit."""
    if isinstance(db, str) and db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db) as pg:
            for statement in statements:
                pg.execute(statement)  # type: ignore[arg-type]
        return
    conn = sqlite3.connect(db)
    try:
        with conn:
            for statement in statements:
                conn.execute(statement)
    finally:
        conn.close()


@pytest.fixture
def server() -> Iterator[ScenarioServer]:
    with ScenarioServer() as srv:
        yield srv


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "signal.db"


#: The store backends every parametrized store and pipeline test runs on.
BACKENDS = ("sqlite", "postgresql")


@pytest.fixture(params=BACKENDS)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """A new, empty database of each backend in turn: a SQLite file path, or a
    postgresql:// URL of a fresh database on the throwaway server (see
    postgres_cluster.py: skipped without a server, except under CI=true)."""
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    return tmp_path / "signal.db"


def make_config(db: Path | str, sources: dict[str, str], **settings: object) -> Config:
    """A config with the given {id: url} sources; min_interval 0 unless given."""
    settings.setdefault("min_interval", 0.0)
    return Config(sources=tuple(Source(id=k, url=v) for k, v in sources.items()),
                  settings=Settings(database=db, **settings))  # type: ignore[arg-type]


class Clock:
    """A settable clock for runs that must not sleep."""

    def __init__(self, start: dt.datetime | None = None) -> None:
        self.now = start or dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


# The throwaway PostgreSQL server and its fixtures (postgres_cluster, postgres_url).
pytest_plugins = ["postgres_cluster"]


def sqlite_read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Open every store connection of this test with SQLite's URI ``mode=ro``: tests run
    as root, which ignores file modes, so SQLite itself must refuse the writes."""
    import signal_feeds.store.sqlite.connection as connection

    real_connect = sqlite3.connect

    def read_only(path: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        if kwargs.get("uri"):  # already a URI (the check that a file is Signal's)
            return real_connect(path, *args, **kwargs)
        return real_connect(f"file:{path}?mode=ro", *args, uri=True, **kwargs)

    monkeypatch.setattr(connection.sqlite3, "connect", read_only)
