"""The store's contract: the SQLite store is a FeedStore, and whatever SQLite reports,
every public method raises only Signal's own errors, naming the database. A database
another process holds makes ``signal fetch`` and ``signal dedupe`` give up after the
configured busy timeout with one clean line."""

from __future__ import annotations

import datetime as dt
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import pytest
from _hostile import write_config
from conftest import FIXTURES, sqlite_read_only
from scenario_server import ScenarioServer

from signal_feeds.config.source_list import DEFAULT_BUSY_TIMEOUT as CONFIG_BUSY_TIMEOUT
from signal_feeds.config.source_list import parse_config
from signal_feeds.errors import ConfigError, StoreError
from signal_feeds.identity.keys import identify
from signal_feeds.parse.feed import parse_feed
from signal_feeds.records import FetchRecord, SourceState
from signal_feeds.store import DEFAULT_BUSY_TIMEOUT, FeedStore, Store, open_store

NOW = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)
STATE = SourceState(source_id="demo", url="https://example.org/feed")
RECORD = FetchRecord(source_id="demo", started_at=NOW, url=STATE.url, outcome="fetched")
ROWS = identify("demo", parse_feed((FIXTURES / "demo-rss.xml").read_bytes()).entries).rows

#: One call of every public method of the protocol (a context manager's own methods
#: are called by ``with``).
CALLS: dict[str, Callable[[FeedStore], object]] = {
    "source_state": lambda s: s.source_state("demo", STATE.url),
    "source_states_for": lambda s: s.source_states_for({"demo": STATE.url}),
    "source_states": lambda s: s.source_states(),
    "set_source_order": lambda s: s.set_source_order(["demo"]),
    "reset_source": lambda s: s.reset_source("demo"),
    "save_attempt": lambda s: s.save_attempt(STATE, RECORD),
    "apply_response": lambda s: s.apply_response(STATE, ROWS, RECORD, NOW),
    "batch": lambda s: _in_batch(s),
    "claim_sources": lambda s: s.claim_sources({"demo": STATE.url}, owner="w", now=NOW,
                                               limit=1),
    "release_sources": lambda s: s.release_sources(["demo"], owner="w"),
    "renew_leases": lambda s: s.renew_leases(owner="w"),
    "leases": lambda s: s.leases(),
    "host_gate": lambda s: s.host_gate().close(),
    "entries": lambda s: s.entries(limit=5),
    "entry": lambda s: s.entry(ROWS[0].key),
    "versions": lambda s: s.versions(ROWS[0].key),
    "entry_views": lambda s: s.entry_views(source_id=None, since=None, limit=5,
                                           include_duplicates=False),
    "entry_view": lambda s: s.entry_view(ROWS[0].key),
    "duplicates_of": lambda s: s.duplicates_of([ROWS[0].key]),
    "keys_starting_with": lambda s: s.keys_starting_with(ROWS[0].key[:8], limit=2),
    "entries_with_link": lambda s: s.entries_with_link("example.org/x", "https://x"),
    "search": lambda s: s.search("release"),
    "rebuild_search_index": lambda s: s.rebuild_search_index(),
    "changes": lambda s: s.changes(limit=5),
    "recompute_duplicates": lambda s: s.recompute_duplicates(),
    "count": lambda s: s.count("entries"),
    "table_counts": lambda s: s.table_counts(),
    "close": lambda s: s.close(),
}
WRITES = {"reset_source", "save_attempt", "apply_response", "batch", "recompute_duplicates",
          "set_source_order", "rebuild_search_index", "claim_sources", "release_sources",
          "renew_leases"}


def _in_batch(store: FeedStore) -> None:
    with store.batch():
        store.save_attempt(STATE, RECORD)


def _public(thing: object) -> set[str]:
    return {name for name in dir(thing) if not name.startswith("_")}


def test_the_sqlite_store_is_a_feed_store(db_path: Path) -> None:
    store: FeedStore = Store(db_path)  # mypy checks the shape; isinstance the names
    with store:
        assert isinstance(store, FeedStore)
        # The calls below cover the whole protocol, and Store offers nothing more (no
        # connection, no transaction: the interface stays narrow).
        assert set(CALLS) == _public(FeedStore)
        assert _public(store) == _public(FeedStore) | {"path", "busy_timeout"}
    with open_store(db_path) as opened:
        assert isinstance(opened, Store)
    assert DEFAULT_BUSY_TIMEOUT == CONFIG_BUSY_TIMEOUT <= 60


def test_every_method_works_on_a_healthy_database(database: Path | str) -> None:
    for name, call in CALLS.items():
        with open_store(database) as store:
            call(store)  # raises nothing
            if name == "apply_response":
                assert store.count("entries") == len(ROWS)


def test_a_closed_store_refuses_every_call_and_opens_nothing(database: Path | str) -> None:
    """After close() a call is a StoreError naming the database; the PostgreSQL store
    used to connect again, warn of a "lost" connection and leave that one open."""
    store = open_store(database)
    store.close()
    store.close()  # closing twice is fine
    for name, call in CALLS.items():
        if name in ("close", "host_gate"):  # a gate has a connection of its own
            continue
        with pytest.raises(StoreError) as raised:
            call(store)
        assert str(store.path) in str(raised.value), name
        assert "closed" in str(raised.value).lower(), name


@pytest.mark.parametrize("limit", [10**20, -1])
def test_any_int_limit_is_a_row_count_on_both_backends(database: Path | str,
                                                       limit: int) -> None:
    """A limit past 64 bits was SQLite's OverflowError and PostgreSQL's "bigint out of
    range"; a negative one listed every key on SQLite and failed on PostgreSQL."""
    with open_store(database) as store:
        store.apply_response(STATE, ROWS, RECORD, NOW)
        want = len(ROWS) if limit > 0 else 0
        assert len(store.entries(limit=limit)) == want
        assert len(store.entry_views(source_id=None, since=None, limit=limit,
                                     include_duplicates=True)) == want
        assert len(store.changes(limit=limit)) == want
        assert len(store.keys_starting_with("", limit=limit)) == want
        assert len(store.search("release", limit=limit, include_duplicates=True)) == (
            len(store.search("release", limit=99, include_duplicates=True)) if want else 0)


@pytest.mark.parametrize(("timeout", "error"), [
    (float("inf"), ValueError), (float("nan"), ValueError), (-1, ValueError),
    ("5", TypeError)])
def test_a_busy_timeout_that_cannot_be_waited_is_refused_plainly(
        database: Path | str, timeout: object, error: type[Exception]) -> None:
    # inf ("wait for ever") was an OverflowError from setting up the connection.
    with pytest.raises(error, match="busy_timeout"):
        open_store(database, busy_timeout=timeout)  # type: ignore[arg-type]
    if isinstance(database, Path):
        with pytest.raises(error, match="busy_timeout"):
            Store(database, busy_timeout=timeout)  # type: ignore[arg-type]


def test_the_postgresql_store_is_a_feed_store_as_narrow_as_sqlites(postgres_url: str) -> None:
    from signal_feeds.store.postgres.store import PostgresStore

    with open_store(postgres_url) as store:
        assert isinstance(store, PostgresStore) and isinstance(store, FeedStore)
        assert _public(store) == _public(FeedStore) | {"path", "busy_timeout"}
        # The password is never part of the name a store goes by.
        assert "***" in store.path and postgres_url.split(":")[2].split("@")[0] not in repr(store)


def test_both_backends_answer_every_call_alike(tmp_path: Path, postgres_url: str) -> None:
    """The same calls on a new SQLite file and a new PostgreSQL database give the same
    answers (cursors and times aside)."""
    answers: list[dict[str, object]] = []
    for database in (tmp_path / "signal.db", postgres_url):
        seen: dict[str, object] = {}
        with open_store(database) as store:
            for name, call in CALLS.items():
                if name in ("close", "changes"):
                    continue
                seen[name] = call(store)
            seen["changes"] = [(c.kind, c.key, c.fingerprint) for c in store.changes(limit=9)]
        answers.append(seen)
    sqlite_answers, pg_answers = answers
    for name in sqlite_answers:
        if name == "search":
            got = [(h.entry.key, h.snippet) for h in pg_answers[name]]  # type: ignore[attr-defined]
            want = [(h.entry.key, h.snippet) for h in sqlite_answers[name]]  # type: ignore[attr-defined]
            assert sorted(got) == sorted(want), name
            continue
        assert pg_answers[name] == sqlite_answers[name], name


def _each_call(open_store_: Callable[[], Store]) -> Iterator[tuple[str, Any]]:
    """Every method on its own freshly opened store: (name, what it raised or None)."""
    for name, call in CALLS.items():
        try:
            store = open_store_()
        except Exception as exc:
            yield name, exc
            continue
        try:
            call(store)
            yield name, None
        except Exception as exc:
            yield name, exc
        finally:
            try:
                store.close()
            except Exception as exc:
                yield f"{name} (close)", exc


def _assert_only_store_errors(results: Iterator[tuple[str, Any]], db: Path,
                              must_fail: set[str]) -> None:
    failed = set()
    for name, exc in results:
        if exc is None:
            continue
        assert isinstance(exc, StoreError), (name, repr(exc))
        assert str(db) in str(exc), (name, str(exc))
        failed.add(name)
    assert must_fail <= failed, must_fail - failed


class _holding:
    """``with _holding(db):`` another process holds the database's write lock; with
    ``readers=False`` it holds the file in exclusive locking mode, so that no other
    connection can even read it (in WAL mode readers go on beside a plain write lock)."""

    def __init__(self, db: Path, *, readers: bool = True) -> None:
        self.db = db
        self.readers = readers

    def __enter__(self) -> None:
        code = ("import sqlite3, sys\n"
                "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
                + ("" if self.readers else "conn.execute('PRAGMA locking_mode=EXCLUSIVE')\n")
                + "conn.execute('BEGIN EXCLUSIVE')\n"
                + ("" if self.readers else "conn.execute('DELETE FROM fetches WHERE 0')\n")
                + "print('locked', flush=True)\n"
                "sys.stdin.read()\n")
        self.holder = subprocess.Popen([sys.executable, "-c", code, str(self.db)],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       text=True)
        assert self.holder.stdout is not None
        assert self.holder.stdout.readline() == "locked\n"

    def __exit__(self, *exc_info: object) -> None:
        assert self.holder.stdin is not None and self.holder.stdout is not None
        self.holder.stdin.close()
        self.holder.wait(timeout=60)
        self.holder.stdout.close()


@pytest.fixture
def filled(db_path: Path) -> Path:
    with Store(db_path) as store:
        store.apply_response(STATE, ROWS, RECORD, NOW)
    return db_path


@pytest.fixture
def locked(filled: Path) -> Iterator[Path]:
    """The database, held by another process inside ``BEGIN EXCLUSIVE``."""
    with _holding(filled):
        yield filled


def test_a_locked_database_raises_store_errors_only(locked: Path) -> None:
    # Readers go on in WAL mode; every write gives up after the busy timeout.
    _assert_only_store_errors(_each_call(lambda: Store(locked, busy_timeout=0.2)),
                              locked, must_fail=WRITES)
    with pytest.raises(StoreError, match="database is locked"):
        Store(locked, busy_timeout=0.2, check_writable=True)


def test_after_one_wait_runs_out_later_writes_do_not_wait_again(locked: Path) -> None:
    with Store(locked, busy_timeout=0.2) as store:
        with pytest.raises(StoreError, match="locked"):
            store.save_attempt(STATE, RECORD)
        assert store._db.gave_up  # later writes try once, without the busy handler
        with pytest.raises(StoreError, match="locked"):
            store.save_attempt(STATE, RECORD)


def test_writes_resume_once_the_lock_is_free(filled: Path) -> None:
    with Store(filled, busy_timeout=0.2) as store:
        other = sqlite3.connect(filled, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        with pytest.raises(StoreError):
            store.save_attempt(STATE, RECORD)
        other.execute("ROLLBACK")
        other.close()
        store.save_attempt(STATE, RECORD)
        assert store.count("fetches") == 2


def test_a_read_only_database_raises_store_errors_only(
        filled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests run as root, which ignores file modes: SQLite's own read-only mode refuses.
    sqlite_read_only(monkeypatch)
    _assert_only_store_errors(_each_call(lambda: Store(filled)), filled,
                              must_fail=WRITES)


def test_a_corrupt_file_raises_store_errors_only(tmp_path: Path) -> None:
    db = tmp_path / "signal.db"
    db.write_bytes(b"this is not a database\n" * 400)
    _assert_only_store_errors(_each_call(lambda: Store(db)), db, must_fail=set(CALLS))
    assert db.read_bytes() == b"this is not a database\n" * 400


def test_a_file_damaged_under_an_open_store_raises_store_errors_only(filled: Path) -> None:
    with closing(sqlite3.connect(filled)) as conn, conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()

    def damaged() -> Store:
        store = Store(filled)
        data = bytearray(filled.read_bytes())
        for start in range(4096, len(data), 4096):  # every page after the header page
            data[start:start + 4096] = b"\xa5" * min(4096, len(data) - start)
        filled.write_bytes(bytes(data))
        return store

    _assert_only_store_errors(_each_call(damaged), filled, must_fail={"entries"})


def test_a_path_with_a_nul_or_an_unknown_table_is_a_store_error(database: Path | str,
                                                                tmp_path: Path) -> None:
    # sqlite3 raises ValueError for either; the protocol promises StoreErrors only.
    with pytest.raises(StoreError, match="NUL character"):
        Store(f"{tmp_path}/a\0b.db")
    with pytest.raises(StoreError, match="NUL character"):
        open_store(f"{tmp_path}/a\0b.db")
    with open_store(database) as store, pytest.raises(StoreError, match="'nope'"):
        store.count("nope")  # type: ignore[arg-type]


def test_a_directory_is_not_a_database(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=str(tmp_path)):
        Store(tmp_path)


def test_a_database_from_a_newer_signal_is_refused_and_left_alone(filled: Path) -> None:
    # A newer schema has tables and columns this code would not keep up to date (a
    # schema-6 Signal writing into a schema-7 file would leave its change log silent).
    with closing(sqlite3.connect(filled)) as conn, conn:
        conn.execute("PRAGMA user_version = 99")
    conn.close()
    before = filled.read_bytes()
    with pytest.raises(StoreError, match=r"newer Signal made it \(schema version 99;"):
        Store(filled)
    result = _signal("entries", "--db", str(filled))
    # A setup problem (exit 2), as another program's file is; not a source's failure.
    assert result.returncode == 2 and result.stdout == "", result
    assert result.stderr.startswith("signal: error: cannot use database ")
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert filled.read_bytes() == before


def test_a_newer_database_in_rollback_journal_mode_is_not_switched_to_wal(
        filled: Path) -> None:
    # Opening switched the file to WAL before its version was looked at, so a refused
    # database (a newer Signal's that does not use WAL, or one a backup tool rewrote in
    # rollback-journal mode) still had its header changed: "left alone" it was not.
    with closing(sqlite3.connect(filled, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("PRAGMA user_version = 99")
    before = filled.read_bytes()
    with pytest.raises(StoreError, match=r"newer Signal made it \(schema version 99;"):
        Store(filled)
    result = _signal("entries", "--db", str(filled))
    assert result.returncode == 2 and result.stdout == "", result
    assert "newer Signal made it" in result.stderr
    assert filled.read_bytes() == before
    assert sorted(p.name for p in filled.parent.iterdir()) == [filled.name]
    with closing(sqlite3.connect(filled)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_busy_timeout_is_a_setting() -> None:
    assert parse_config("[settings]\nbusy_timeout = 2.5\n").settings.busy_timeout == 2.5
    assert parse_config("").settings.busy_timeout == CONFIG_BUSY_TIMEOUT
    with pytest.raises(ConfigError, match="busy_timeout"):
        parse_config("[settings]\nbusy_timeout = -1\n")


def _signal(*args: str) -> subprocess.CompletedProcess[str]:
    # Generous: a hang is what this guards against, not a slow machine.
    return subprocess.run([sys.executable, "-m", "signal_feeds", *args], capture_output=True,
                          text=True, timeout=120, check=False)


# Writers give up on a write lock (readers go on beside it in WAL mode); every command
# gives up on a file nobody may even read. The checks made before opening a store once
# waited Python's default 5 s each on their own, on top of busy_timeout: a reading
# command took 13 s with busy_timeout = 3.
@pytest.mark.parametrize(("command", "readers"), [
    *((c, True) for c in (["fetch", "--force"], ["dedupe"])),
    *((c, False) for c in (["entries"], ["search", "demo"], ["export"], ["changes"],
                           ["dedupe"], ["fetch", "--force"], ["sources"]))])
def test_commands_give_up_on_a_locked_database_with_one_line(
        command: list[str], readers: bool, server: ScenarioServer, tmp_path: Path) -> None:
    db = tmp_path / "signal.db"
    config = write_config(tmp_path / "signal.toml", db,
                          {"demo": server.url("/feeds/demo-rss.xml")}, busy_timeout=1)
    assert _signal("fetch", "--config", str(config)).returncode == 0
    with _holding(db, readers=readers):
        started = time.monotonic()
        result = _signal(*command, "--config", str(config))
        took = time.monotonic() - started
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("signal: error: "), result.stderr
    assert str(db) in lines[0] and "locked" in lines[0], lines
    # Not a speed claim: the checks' own waits added ten seconds; start-up takes one.
    assert took < 1 + 7, took


# -- the same hits, shown alike, on both backends ------------------------------------------

def _store_items(database: Path | str, items: list[tuple[str, str]],
                 source_id: str = "demo") -> list[str]:
    """Store one response of RSS items (title, description); their keys, in order."""
    body = "".join(f"<item><guid>{n}</guid><title>{escape(title)}</title>"
                   f"<link>https://example.org/{n}</link>"
                   f"<description>{escape(text)}</description></item>"
                   for n, (title, text) in enumerate(items))
    feed = (f"<?xml version='1.0' encoding='utf-8'?><rss version='2.0'><channel><title>t"
            f"</title><link>https://example.org/</link>{body}</channel></rss>").encode()
    rows = identify(source_id, parse_feed(feed).entries).rows
    state = SourceState(source_id=source_id, url=f"https://example.org/{source_id}")
    with open_store(database) as store:
        store.apply_response(state, rows, FetchRecord(source_id=source_id, started_at=NOW,
                                                      url=state.url, outcome="fetched"), NOW)
    return [row.key for row in rows]


def _snippets(database: Path | str, query: str) -> dict[str, str]:
    with open_store(database) as store:
        return {hit.entry.key: hit.snippet for hit in store.search(query)}


def test_a_snippet_shows_the_words_fts5_shows(database: Path | str) -> None:
    # PostgreSQL cut its own window, from the first words with the most matches: past
    # the first words of a summary it showed other words than SQLite's snippet() for
    # one hit in two.
    story = " ".join(f"Paragraph {n}: the harvest market grew crowded while late buses "
                     "brought every family to the festival fair." for n in range(3))
    filler = "while the late buses brought every family from the hills to the valley for the day"
    spread = f"{filler} harvest. {filler} harvest again."
    keys = _store_items(database, [("Notes from the valley", story),
                                   ("Harvest notes", spread)])
    assert _snippets(database, "harvest") == {
        # The window starts where the match's sentence does ("0: the"), as in FTS5.
        keys[0]: "…the [harvest] market grew crowded while late buses brought every "
                 "family to the festival fair. Paragraph…",
        # One match in the title wins over two in the summary that no window holds
        # together (PostgreSQL counted the matches of each field: two won).
        keys[1]: "[Harvest] notes",
    }
    assert _snippets(database, "bus* fair") == {
        keys[0]: "…the harvest market grew crowded while late [buses] brought every "
                 "family to the festival [fair]. Paragraph…"}


def test_a_snippet_quotes_the_text_as_stored(database: Path | str) -> None:
    # PostgreSQL showed decomposed text (e and U+0301, as some tools write "é") composed:
    # the snippet was not a piece of the stored title any more.
    title = "Un e\u0301te\u0301 au marche\u0301"
    (key,) = _store_items(database, [(title, "")])
    assert _snippets(database, "ete") == {key: "Un [e\u0301te\u0301] au marche\u0301"}
    assert _snippets(database, "marche") == {key: "Un e\u0301te\u0301 au [marche\u0301]"}


def test_a_column_filter_finds_a_word_an_earlier_field_repeats_often(
        database: Path | str) -> None:
    # A tsvector keeps 256 positions of a word: PostgreSQL kept the first 256, all in
    # the summary, so "content:harvest" missed a long post whose content (feedparser
    # copies a lone <content:encoded> into the summary) says "harvest" 300 times.
    text = " ".join(f"Day {n}: the harvest went on." for n in range(300))
    feed = ("<?xml version='1.0' encoding='utf-8'?><rss version='2.0' xmlns:content="
            "'http://purl.org/rss/1.0/modules/content/'><channel><title>t</title><link>"
            "https://example.org/</link><item><guid>long</guid><title>Diary</title><link>"
            f"https://example.org/long</link><content:encoded>{escape(text)}"
            "</content:encoded></item></channel></rss>").encode()
    (row,) = identify("demo", parse_feed(feed).entries).rows
    assert row.summary.count("harvest") == row.content.count("harvest") == 300
    with open_store(database) as store:
        store.apply_response(STATE, [row], RECORD, NOW)
        for query in ("harvest", "summary:harvest", "content:harvest",
                      "{title content}:harvest", "-summary:harvest", "content:day"):
            assert [h.entry.key for h in store.search(query)] == [row.key], query
        assert store.search("title:harvest") == []


def test_a_group_of_signs_alone_is_left_out_beside_words(database: Path | str) -> None:
    # A sign on its own is left out (README, "Searching"): PostgreSQL left a group of
    # nothing else out too, while SQLite joined it with AND and found nothing at all.
    keys = _store_items(database, [("Release notes for the harbour app", "")])
    for query in ("release (&)", "release ( - )", "(&) release", "release ((&)) notes",
                  "release (&) (notes OR nothing)"):
        assert list(_snippets(database, query)) == keys, query
    assert _snippets(database, "release AND (&)") == {}  # AND says it must match


# -- a second backend's URLs ----------------------------------------------------------------

def test_a_scheme_added_to_url_schemes_is_a_database_url_everywhere(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # docs/architecture.md, "Adding a store backend": a backend's scheme is listed in
    # dsn.URL_SCHEMES and chosen in open_store. Everything that reads a location agreed
    # only on is_postgres_url, so a new scheme had to be passed off as PostgreSQL's (and
    # was then opened as PostgreSQL) or a config's `database = "memory://x"` became the
    # file memory:/x next to the config.
    import signal_feeds.dsn as dsn
    from signal_feeds.cli.common import database_path

    url = "memory://ana:hunter22@here/signal"
    assert dsn.not_a_location(url)  # unknown until listed
    monkeypatch.setattr(dsn, "URL_SCHEMES", (*dsn.URL_SCHEMES, "memory://"))
    assert dsn.not_a_location(url) == "" and dsn.as_database(url) == url
    assert dsn.display_database(url) == "memory://ana:***@here/signal"
    config = parse_config(f'[settings]\ndatabase = "{url}"\n', path=tmp_path / "signal.toml")
    assert config.settings.database == url
    assert database_path(config, None) == url and database_path(None, url) == url
    with pytest.raises(ConfigError, match="Store is the SQLite store"):
        Store(url)
    assert not dsn.is_postgres_url(url)
