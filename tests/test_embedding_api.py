"""What a program that imports signal_feeds gets from plain mistakes and edge cases:
the obvious meaning or a clear error, never a stray built-in exception from deep
inside (found by using the API as an embedding developer, 2026-12-06)."""

from __future__ import annotations

import ast
import asyncio
import copy
import datetime as dt
import logging
import pickle
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import FIXTURES, make_config
from scenario_server import ScenarioServer

import signal_feeds
from signal_feeds import QueryError, RunReport, SourceReport, parse_feed, parse_files
from signal_feeds.errors import ConfigError
from signal_feeds.records import FetchRecord, SourceState
from signal_feeds.run import pipeline
from signal_feeds.store import Store
from signal_feeds.store.reading import export_entries, list_entries, lookup


def test_every_public_name_is_typed_for_a_type_checker() -> None:
    # __all__ is served lazily by __getattr__ (typed Any); the TYPE_CHECKING imports are
    # what mypy sees. DatabaseUnavailableError was missing there, so it typed as Any.
    tree = ast.parse(Path(signal_feeds.__file__).read_text(encoding="utf-8"))
    checked: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for stmt in ast.walk(node):
                if isinstance(stmt, ast.ImportFrom):
                    checked.update(a.asname or a.name for a in stmt.names)
    lazy = set(signal_feeds.__all__) - {"__version__"}
    assert sorted(lazy - checked) == []


def test_parse_config_given_a_dict_says_it_wants_text() -> None:
    # It was "AttributeError: 'dict' object has no attribute 'removeprefix'" from inside.
    with pytest.raises(TypeError, match=r"^parse_config takes a source list's TOML text, "
                                        r"not dict \(load_config reads a file\)$"):
        signal_feeds.parse_config({"sources": []})  # type: ignore[arg-type]


A = signal_feeds.Source(id="a", url="https://a.example/feed")


@pytest.mark.parametrize(("sources", "settings", "problem", "source_id"), [
    ((A, signal_feeds.Source(id="a", url="https://b.example/feed")), {},
     "sources[1] (id 'a'): id: duplicate (first at sources[0])", "a"),
    ((A,), {"concurrency": 0}, "[settings]: concurrency: must be at least 1", None),
    ((A,), {"per_host": 2.5}, "[settings]: per_host: must be a whole number, not 2.5", None),
    ((A,), {"busy_timeout": float("inf")},
     "[settings]: busy_timeout: must be a finite number, not inf", None),
    ((replace(A, min_interval=-1.0),), {},
     "sources[0] (id 'a'): min_interval: must not be negative", "a"),
])
def test_a_config_made_in_code_is_checked_as_a_file_is(
        tmp_path: Path, sources: tuple[signal_feeds.Source, ...], settings: dict[str, object],
        problem: str, source_id: str | None) -> None:
    # Unchecked, a duplicate id or concurrency = 0 made run_fetch wait for ever.
    with pytest.raises(ConfigError) as raised:
        signal_feeds.Config(sources=sources, settings=signal_feeds.Settings(
            database=tmp_path / "signal.db", **settings))  # type: ignore[arg-type]
    assert raised.value.problems == (problem,)
    assert raised.value.source_id == source_id


@pytest.mark.parametrize("given", ["signal.toml", Path("signal.toml")])
def test_run_fetch_given_a_path_says_it_wants_a_config(given: object) -> None:
    # It was "AttributeError: 'str' object has no attribute 'sources'" from inside.
    message = (rf"^run_fetch takes a Config, not {type(given).__name__} "
               r"\(signal_feeds\.load_config\(path\) reads one\)$")
    with pytest.raises(TypeError, match=message):
        signal_feeds.run_fetch(given)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=message.replace("run_fetch", "fetch_sources")):
        asyncio.run(signal_feeds.fetch_sources(given))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=message.replace("run_fetch", "parse_files")):
        list(parse_files([FIXTURES / "demo-rss.xml"], config=given))  # type: ignore[arg-type]


def test_one_source_id_given_as_a_string_is_one_id(tmp_path: Path) -> None:
    config = make_config(tmp_path / "signal.db", {"dates": "https://a.example/feed.xml",
                                                  "other": "https://b.example/feed.xml"})
    # It was "unknown source id(s): d, a, t, e, s".
    assert [s.id for s in pipeline._select(config, "dates")] == ["dates"]
    with pytest.raises(ConfigError, match=r"unknown source id\(s\): dats"):
        pipeline._select(config, "dats")


def test_an_empty_list_of_source_ids_fetches_nothing(server: ScenarioServer,
                                                     tmp_path: Path) -> None:
    # Code that filters its ids down to none fetched every source (with force=True, even
    # those not due): an empty list was taken for "no filter". None still means all.
    config = make_config(tmp_path / "signal.db", {"s": server.url("/feeds/demo-rss.xml")})
    report = signal_feeds.run_fetch(config, source_ids=[], force=True)
    assert report.sources == () and server.requests_for("/feeds/demo-rss.xml") == []
    report = signal_feeds.run_fetch(config, source_ids=None, force=True)
    assert [r.source for r in report.sources] == ["s"]


def test_parse_files_takes_paths_as_strings_too() -> None:
    # It raised AttributeError: 'str' object has no attribute 'read_bytes'.
    (result,) = parse_files([str(FIXTURES / "demo-rss.xml")], source_id="demo-rss")
    assert result["ok"] is True and len(result["entries"]) == 3


@pytest.mark.parametrize("one", [str, Path])
def test_parse_files_given_one_path_reads_that_file(one: type[str] | type[Path]) -> None:
    # A str is a sequence of str to Python and to mypy: parse_files(".../feed.xml")
    # yielded one "cannot read" result per character ('/', 't', 'm', ...), and a Path
    # was "TypeError: 'PosixPath' object is not iterable".
    (result,) = parse_files(one(FIXTURES / "demo-rss.xml"), source_id="demo-rss")
    assert result["ok"] is True and len(result["entries"]) == 3
    assert result["file"] == str(FIXTURES / "demo-rss.xml")


def test_parse_feed_given_text_says_it_wants_bytes() -> None:
    # It was "TypeError: removeprefix() argument must be str, not bytes" from inside.
    with pytest.raises(TypeError, match=r"^parse_feed takes the document's bytes .*not str$"):
        parse_feed("<rss/>")  # type: ignore[arg-type]
    assert parse_feed(bytearray(b'<rss version="2.0"><channel><title>t</title><item>'
                                b"<guid>g</guid></item></channel></rss>")).entries


@pytest.fixture
def store(tmp_path: Path) -> Store:
    db = Store(tmp_path / "signal.db")
    state = SourceState(source_id="a", url="https://a.example/feed.xml")
    record = FetchRecord(source_id="a", url=state.url, outcome="fetched",
                         started_at=dt.datetime(2026, 12, 1, tzinfo=dt.UTC))
    body = ('<rss version="2.0"><channel><title>t</title>'
            "<item><guid>now</guid><title>On time</title><link>https://a.example/1</link>"
            "<pubDate>Mon, 30 Nov 2026 10:00:00 GMT</pubDate></item>"
            "<item><guid>typo</guid><title>Dated 2106</title><link>https://a.example/2</link>"
            "<pubDate>Sun, 07 Feb 2106 06:28:15 GMT</pubDate></item>"
            "<item><guid>note</guid><description>A note with no link</description></item>"
            "</channel></rss>")
    rows = signal_feeds.identify("a", parse_feed(body.encode()).entries).rows
    db.apply_response(state, rows, record, dt.datetime(2026, 12, 1, tzinfo=dt.UTC))
    return db


def test_lookup_of_nothing_finds_nothing(store: Store) -> None:
    # "" matched every entry without a link, and answered with one of them.
    with store:
        assert lookup(store, "") is None
        assert lookup(store, "   ") is None


def test_since_as_text_is_read_as_a_time_or_refused(store: Store) -> None:
    with store:
        everything = list_entries(store)
        assert everything
        # The same instant written two ways selects the same entries (it compared as
        # text: "+05:00" and "Z" gave 42 and 44 entries).
        assert list_entries(store, since="2000-01-01T05:00:00+05:00") == \
            list_entries(store, since="2000-01-01T00:00:00Z") == everything
        assert list_entries(store, since="2000-01-01") == everything
        for bad in ("yesterday", "29/06/2005"):  # silently selected nothing
            with pytest.raises(QueryError, match="is not a date"):
                list_entries(store, since=bad)


def test_the_export_claims_no_update_in_the_future(store: Store) -> None:
    now = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)
    with store:
        text = export_entries(store, format="atom", now=now)
    # The entry keeps the date its feed gave; the export's own <updated> is no later
    # than the export (it was 2106-02-07T06:28:15Z, taken from that entry): it is when
    # Signal saw that entry, not the moment of the export, so that an export of
    # unchanged data is the same document every time.
    assert "<updated>2106-02-07T06:28:15Z</updated>" in text
    updated = ET.fromstring(text).findtext("{http://www.w3.org/2005/Atom}updated") or ""
    assert updated == "2026-12-01T00:00:00.000000Z"


def test_a_run_report_cannot_be_changed_after_the_fact() -> None:
    report = RunReport(sources=(SourceReport(source="a", status="fetched", created=1),),
                       started_at=dt.datetime(2026, 12, 6, tzinfo=dt.UTC))
    with pytest.raises(TypeError):
        report.totals["created"] = 999  # type: ignore[index]
    assert report.lines()[-1].startswith("1 source: 1 created")
    assert hash(report) == hash(report) and report.to_dict()["totals"]["created"] == 1


def test_a_run_report_can_be_pickled_and_copied() -> None:
    # A program that runs run_fetch in a worker process (ProcessPoolExecutor, a task
    # queue) gets the report back pickled: it was "TypeError: cannot pickle
    # 'mappingproxy' object" (the read-only totals), and so was copy.deepcopy(report).
    report = RunReport(sources=(SourceReport(source="a", status="fetched", created=1),
                                SourceReport(source="b", status="failed", error="HTTP 500")),
                       started_at=dt.datetime(2026, 12, 6, tzinfo=dt.UTC), duration=1.5,
                       database="signal.db")
    for again in (pickle.loads(pickle.dumps(report)), copy.deepcopy(report), copy.copy(report)):
        assert again == report and again.to_dict() == report.to_dict()
        assert dict(again.totals) == dict(report.totals)
        with pytest.raises(TypeError):
            again.totals["created"] = 999  # type: ignore[index]


def test_a_run_report_finds_each_source_by_id_without_walking_the_list() -> None:
    # A program going through a run of thousands of sources asks get() once for each:
    # a walk of the list per call made that quadratic (25 million comparisons at 5,000).
    class Counted(SourceReport):
        reads = 0

        def __getattribute__(self, name: str) -> object:
            if name == "source":
                type(self).reads += 1
            return super().__getattribute__(name)

    reports = tuple(Counted(source=f"s{i}", status="fetched") for i in range(2000))
    report = RunReport(sources=reports, started_at=dt.datetime(2026, 12, 6, tzinfo=dt.UTC))
    Counted.reads = 0
    assert [report.get(f"s{i}").source for i in range(2000)] == [f"s{i}" for i in range(2000)]
    assert Counted.reads <= 2 * 2000  # one read per answer, not one per source passed
    with pytest.raises(KeyError):
        report.get("nope")
    plain = tuple(SourceReport(source=f"s{i}", status="fetched") for i in range(3))
    again = pickle.loads(pickle.dumps(RunReport(sources=plain, started_at=report.started_at)))
    assert again.get("s2") == plain[2]


def test_an_error_of_a_blocking_run_does_not_read_as_raised_inside_another(
        tmp_path: Path) -> None:
    config = make_config(tmp_path / "signal.db", {"a": "https://a.example/f"})
    with pytest.raises(ConfigError) as raised:
        signal_feeds.run_fetch(config, source_ids=["b"])
    # Every error carried "RuntimeError: no running event loop" as its context.
    chain: list[BaseException] = []
    exc: BaseException | None = raised.value
    while exc is not None and len(chain) < 20:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    assert not [e for e in chain if "no running event loop" in str(e)], chain


#: A source that has failed three times, and its failed fetch: what the threads below
#: reset and read while another thread's batch is open.
_FAILING = SourceState(source_id="a", url="https://a.example/feed.xml")
_FAILED_FETCH = FetchRecord(source_id="a", url=_FAILING.url, outcome="failed", error="x",
                            started_at=dt.datetime(2026, 12, 1, tzinfo=dt.UTC))


def test_a_write_from_another_thread_never_joins_a_batch_that_fails(tmp_path: Path) -> None:
    # It became a savepoint of the open batch: reset_source returned True, then the
    # batch failed and took the reset with it.
    import threading

    state, failed = _FAILING, _FAILED_FETCH
    with Store(tmp_path / "signal.db") as store:
        store.save_attempt(replace(state, status="failed", error_count=3), failed)
        in_batch, reset_done = threading.Event(), threading.Event()
        answers: list[bool] = []

        def other_thread() -> None:
            in_batch.wait(10)
            answers.append(store.reset_source("a"))
            reset_done.set()

        thread = threading.Thread(target=other_thread)
        thread.start()
        with pytest.raises(RuntimeError, match="the batch fails"), store.batch():
            store.save_attempt(replace(state, status="failed", error_count=4), failed)
            in_batch.set()
            # The other thread's write waits for the batch, rather than joining it.
            assert not reset_done.wait(0.5)
            raise RuntimeError("the batch fails")
        thread.join(10)
        assert answers == [True]
        (after,) = [s for s in store.source_states() if s.source_id == "a"]
        assert after.error_count == 0  # the reset stands; the failed batch is undone


def test_a_read_from_another_thread_waits_for_an_open_batch(tmp_path: Path) -> None:
    # It ran on the shared connection inside the other thread's batch: it saw writes
    # that the batch then rolled back (a change-feed cursor could pass changes that were
    # taken back and handed out again), and reads at once failed with "cannot start a
    # transaction within a transaction" or "no transaction is active".
    import threading

    from signal_feeds.store.change_feed import read_changes
    from signal_feeds.store.reading import search_entries

    with Store(tmp_path / "signal.db") as store:
        store.save_attempt(replace(_FAILING, status="failed", error_count=3), _FAILED_FETCH)
        in_batch = threading.Event()
        seen: list[int] = []

        def reader() -> None:
            in_batch.wait(10)
            seen.extend(s.error_count for s in store.source_states())

        thread = threading.Thread(target=reader)
        thread.start()
        with pytest.raises(RuntimeError, match="the batch fails"), store.batch():
            store.reset_source("a")
            in_batch.set()
            thread.join(0.5)
            raise RuntimeError("the batch fails")
        thread.join(10)
        assert seen == [3]  # what was committed, never the reset rolled back

        errors: list[BaseException] = []

        def busy(read: object) -> None:
            try:
                for _ in range(150):
                    read()  # type: ignore[operator]
            except BaseException as exc:  # noqa: BLE001  (collected for the assert)
                errors.append(exc)

        reads = [lambda: read_changes(store, limit=50), lambda: list_entries(store),
                 lambda: search_entries(store, "x")] * 2
        threads = [threading.Thread(target=busy, args=(read,)) for read in reads]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []


def test_an_injected_clock_is_read_in_utc_and_a_naive_one_refused(tmp_path: Path) -> None:
    config = make_config(tmp_path / "signal.db", {"a": "https://a.example/feed.xml"})
    plus_two = dt.timezone(dt.timedelta(hours=2))
    report = signal_feeds.run_fetch(
        config, source_ids=[], clock=lambda: dt.datetime(2026, 12, 6, 14, 0, tzinfo=plus_two),
        transport=_unreachable())
    # +02:00 times leaked into the report.
    assert report.started_at == dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)
    assert report.started_at.tzinfo is dt.UTC
    # A naive clock failed every source with "unexpected error" tracebacks, then raised.
    with pytest.raises(ValueError, match="the clock gave a naive datetime"):
        signal_feeds.run_fetch(config, clock=lambda: dt.datetime(2026, 12, 6, 12, 0),
                               transport=_unreachable())


def _unreachable() -> object:
    import httpx

    return httpx.MockTransport(lambda request: httpx.Response(404))


def test_store_given_a_postgresql_url_points_to_open_store_and_hides_the_password() -> None:
    url = "postgresql://signal:secretpw@127.0.0.1:5/signal"
    # It was read as a file path: "the folder postgresql:/signal:secretpw@... does not exist".
    with pytest.raises(ConfigError) as raised:
        signal_feeds.Store(url)
    assert "secretpw" not in str(raised.value)
    assert str(raised.value).endswith("with signal_feeds.open_store(url)")
    assert signal_feeds.open_store is signal_feeds.store.open_store


@pytest.mark.parametrize("database", ["sqlite:///signal.db", "mysql://u:secret@db/feeds"])
def test_a_database_url_of_another_kind_is_refused_not_taken_for_a_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database: str) -> None:
    # It was read as a relative path: "the folder sqlite: does not exist", and where
    # such a folder existed a database was made in it.
    monkeypatch.chdir(tmp_path)
    (tmp_path / database.partition("/")[0]).mkdir()
    config = make_config(tmp_path / "signal.db", {"a": "https://a.example/feed.xml"})
    for call in (lambda: signal_feeds.open_store(database),
                 lambda: signal_feeds.run_fetch(config, database=database)):
        with pytest.raises(signal_feeds.DatabaseUnavailableError,
                           match=r"not a database Signal can use") as raised:
            call()
        assert "secret" not in str(raised.value)
    with pytest.raises(ConfigError, match=r"\[settings\]: database: .*postgresql:// URL"):
        signal_feeds.parse_config(f'[settings]\ndatabase = "{database}"\n',
                                  path=tmp_path / "signal.toml")
    assert [p.name for p in tmp_path.rglob("*.db*")] == []


_EVERY_ERROR = [
    signal_feeds.SignalError("m", source_id="s"),
    signal_feeds.ConfigError("m", path="signal.toml", source_id="s", problems=("a", "b")),
    signal_feeds.QueryError("search query '\"x' is not valid FTS5 syntax", query='"x'),
    signal_feeds.FetchError("m", source_id="s", reason="timeout"),
    signal_feeds.ParseError("m", source_id="s"),
    signal_feeds.ContradictionError("two versions", source_id="s", key="k", remote_id="r"),
    signal_feeds.StoreError("m"),
    signal_feeds.CursorError("m"),
    signal_feeds.DatabaseUnavailableError("m"),
]


@pytest.mark.parametrize("error", _EVERY_ERROR, ids=lambda e: type(e).__name__)
def test_every_error_survives_pickling_and_copying(error: signal_feeds.SignalError) -> None:
    # A program that searches or identifies in a worker process (concurrent.futures,
    # multiprocessing, a task queue) gets the error back pickled. QueryError and
    # ContradictionError could not be rebuilt from their args (keyword-only arguments):
    # a bad search query in a ProcessPoolExecutor ended as BrokenProcessPool, the pool
    # with it, and copy.copy() of either was a TypeError.
    for again in (pickle.loads(pickle.dumps(error)), copy.copy(error), copy.deepcopy(error)):
        assert type(again) is type(error)
        assert str(again) == str(error) and again.args == error.args
        assert vars(again) == vars(error)


def test_a_program_quiets_one_stage_and_keeps_the_others(server: ScenarioServer,
                                                         tmp_path: Path) -> None:
    # The config's warnings and the run's totals came from one logger, "signal_feeds":
    # quieting one quieted both (the store's and the run's lines alike).
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    package, config_log = logging.getLogger("signal_feeds"), logging.getLogger(
        "signal_feeds.config")
    keep = Keep()
    package.addHandler(keep)
    package.setLevel(logging.INFO)
    try:
        text = (f'[settings]\ndatabase = "{tmp_path / "signal.db"}"\nmin_interval = 60\n'
                f'allow_http_links = true\n[[sources]]\nid = "rss"\n'
                f'url = "{server.url("/feeds/demo-rss.xml")}"\n')
        signal_feeds.run_fetch(signal_feeds.parse_config(text), force=True)
        first = [(r.name, r.levelname, r.getMessage()[:16]) for r in seen]
        seen.clear()
        config_log.setLevel(logging.ERROR)
        signal_feeds.run_fetch(signal_feeds.parse_config(text), force=True)
        second = [(r.name, r.levelname, r.getMessage()[:16]) for r in seen]
    finally:
        package.removeHandler(keep)
        package.setLevel(logging.NOTSET)
        config_log.setLevel(logging.NOTSET)
    deprecated = ("signal_feeds.config", "WARNING", "[settings]: allo")
    totals = ("signal_feeds.run", "INFO", "run finished at ")
    assert first == [deprecated, totals]
    assert second == [totals]
