"""The public API given what newcomers pass: a generator for a sequence, a path for a
store, a value of the wrong type. Each is read as meant or refused at the call, naming
the argument; never a run that silently does nothing, never an error from deep inside
(found by calling every public name wrongly on purpose, 2026-12-07)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import make_config
from scenario_server import ScenarioServer

import signal_feeds
from signal_feeds import Config, ConfigError, FeedStore, Settings, Source


def test_source_ids_given_as_a_generator_are_all_fetched(server: ScenarioServer,
                                                         tmp_path: Path) -> None:
    # The check for unknown ids used the generator up: the run fetched nothing, exit 0.
    config = make_config(tmp_path / "signal.db", {"s": server.url("/feeds/demo-rss.xml"),
                                                  "t": server.url("/feeds/demo-atom.xml")})
    report = signal_feeds.run_fetch(config, source_ids=(s.id for s in config.sources
                                                        if s.id == "t"))
    assert [r.source for r in report.sources] == ["t"]
    assert report.sources[0].status == "fetched"


def test_a_source_id_that_is_not_text_is_refused_by_name(tmp_path: Path) -> None:
    config = make_config(tmp_path / "signal.db", {"s": "https://a.example/feed.xml"})
    with pytest.raises(TypeError, match=r"source_ids holds source ids \(str\), not bytes"):
        signal_feeds.run_fetch(config, source_ids=[b"s"])  # type: ignore[list-item]


def test_a_config_given_its_sources_as_a_generator_keeps_them(server: ScenarioServer,
                                                              tmp_path: Path) -> None:
    # Its own checks used the generator up, and every run fetched no source, exit 0.
    urls = {"s": server.url("/feeds/demo-rss.xml")}
    config = Config(sources=(Source(id=k, url=v) for k, v in urls.items()),  # type: ignore[arg-type]
                    settings=Settings(database=tmp_path / "signal.db", min_interval=0.0))
    assert isinstance(config.sources, tuple)
    assert [r.status for r in signal_feeds.run_fetch(config).sources] == ["fetched"]
    assert [r.source for r in signal_feeds.run_fetch(config, force=True).sources] == ["s"]


def test_a_config_given_a_list_or_one_source_is_hashable_and_equal() -> None:
    one = Source(id="a", url="https://a.example/feed")
    listed = Config(sources=[one])  # type: ignore[arg-type]
    alone = Config(sources=one)  # type: ignore[arg-type]
    assert listed == alone == Config(sources=(one,))
    assert hash(listed) == hash(alone)


@pytest.mark.parametrize("given", [None, "https://a.example/feed", {"a": "x"}, ["a"]])
def test_a_config_of_what_is_not_sources_says_what_it_takes(given: object) -> None:
    with pytest.raises(TypeError, match="Config sources"):
        Config(sources=given)  # type: ignore[arg-type]


@pytest.mark.parametrize(("source", "said"), [
    (Source(id="My Blog", url="https://a.example/feed"), r"id: 'My Blog' is not a slug"),
    (Source(id=5, url="https://a.example/feed"), r"id: 5 is not a slug"),  # type: ignore[arg-type]
    (Source(id="a", url=None), r"url: None is not a string"),  # type: ignore[arg-type]
    (Source(id="a", url=b"https://a.example/feed"), r"url: b'https.* is not a string"),  # type: ignore[arg-type]
    (Source(id="a", url="https://a.example/feed", title=None), r"title: None is not"),  # type: ignore[arg-type]
    (Source(id="a", url="https://a.example/feed", review_by="2027-01-01"),  # type: ignore[arg-type]
     r"review_by: '2027-01-01' is not a datetime.date"),
    (Source(id="a", url="https://a.example/feed", review_by=dt.datetime(2027, 1, 1)),
     r"review_by: datetime.datetime\(2027, 1, 1, 0, 0\) is not a datetime.date"),
])
def test_a_source_made_in_code_is_checked_as_a_files_is(source: Source, said: str) -> None:
    # Each was accepted; the id stored as written, the others failed every run inside
    # ("internal error: TypeError: can't compare datetime.datetime to datetime.date").
    with pytest.raises(ConfigError, match=said):
        Config(sources=(source,))


@pytest.fixture
def fetched(server: ScenarioServer, tmp_path: Path) -> Iterator[FeedStore]:
    """A store holding the entries of one real fetch."""
    config = make_config(tmp_path / "signal.db", {"s": server.url("/feeds/demo-rss.xml")})
    assert signal_feeds.run_fetch(config).sources[0].created > 0
    with signal_feeds.open_store(tmp_path / "signal.db") as store:
        yield store


READERS: list[tuple[str, Callable[[Any], object]]] = [
    ("list_entries", lambda s: signal_feeds.list_entries(s)),
    ("search_entries", lambda s: signal_feeds.search_entries(s, "release")),
    ("entry_history", lambda s: signal_feeds.entry_history(s, "abcd")),
    ("lookup", lambda s: signal_feeds.lookup(s, "https://example.org/")),
    ("iter_export", lambda s: signal_feeds.iter_export(s)),
    ("read_changes", lambda s: signal_feeds.read_changes(s)),
]


@pytest.mark.parametrize(("name", "call"), READERS, ids=[n for n, _ in READERS])
def test_a_reading_function_given_the_database_path_asks_for_a_store(
        fetched: FeedStore, tmp_path: Path, name: str, call: Callable[[Any], object]
) -> None:
    # It was "'PosixPath' object has no attribute 'entry_views'", from inside.
    for given in (tmp_path / "signal.db", str(tmp_path / "signal.db")):
        with pytest.raises(TypeError, match=rf"{name} takes an open store \(signal_feeds"
                                            rf"\.open_store\(path\)\), not (\w*Path|str)"):
            call(given)


def test_a_source_id_of_bytes_is_refused_not_matched_to_nothing(fetched: FeedStore) -> None:
    assert signal_feeds.list_entries(fetched, source_id="s")
    # b"s" listed no entry at all, as if the source had none.
    with pytest.raises(TypeError, match=r"source_id is a str or None, not bytes: b's'"):
        signal_feeds.list_entries(fetched, source_id=b"s")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"source_id is a str or None, not list"):
        signal_feeds.read_changes(fetched, source_id=["s"])  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", [2.5, "10", True])
def test_a_limit_that_is_not_an_int_is_refused_by_name(fetched: FeedStore,
                                                       limit: object) -> None:
    # 2.5 was StoreError "datatype mismatch" (read as a damaged database), "10" a
    # comparison's TypeError, True one entry.
    with pytest.raises(TypeError, match=r"limit is an int"):
        signal_feeds.list_entries(fetched, limit=limit)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"limit is an int"):
        signal_feeds.read_changes(fetched, limit=limit)  # type: ignore[arg-type]


@pytest.mark.parametrize(("call", "said"), [
    (lambda s: signal_feeds.list_entries(s, since=2026), r"since is a date, a datetime "
     r"or ISO 8601 text, not int"),
    (lambda s: signal_feeds.list_entries(s, since=b"2026-01-01"), r"since .* not bytes"),
    (lambda s: signal_feeds.search_entries(s, b"release"), r"query is a str, not bytes"),
    (lambda s: signal_feeds.search_entries(s, None), r"query is a str, not NoneType"),
    (lambda s: signal_feeds.lookup(s, None), r"url is a str, not NoneType"),
    (lambda s: signal_feeds.lookup(s, Path("/x")), r"url is a str, not PosixPath"),
    (lambda s: signal_feeds.entry_history(s, 1234), r"key is a str, not int"),
    (lambda s: signal_feeds.read_changes(s, after=5), r"after is a str or None, not int"),
    (lambda s: signal_feeds.export_entries(s, now=dt.date(2026, 1, 1)),
     r"now is a datetime, not date"),
    (lambda s: signal_feeds.export_entries(s, format="atom", source_titles=[("s", "S")]),
     r"source_titles is a mapping"),
])
def test_a_reading_argument_of_the_wrong_type_is_named(
        fetched: FeedStore, call: Callable[[FeedStore], object], said: str) -> None:
    with pytest.raises(TypeError, match=said):
        call(fetched)


def test_a_naive_now_is_refused_when_the_export_is_asked_for(fetched: FeedStore) -> None:
    # iter_export handed back a generator and failed at the first piece, with "naive
    # datetime: Signal only stores timezone-aware times", which named no argument.
    with pytest.raises(ValueError, match=r"now is a naive datetime \(2026-01-01T00:00:00\)"):
        signal_feeds.iter_export(fetched, now=dt.datetime(2026, 1, 1))
    aware = dt.datetime(2026, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert '"2026-01-01T00:00:00.000000Z"' in signal_feeds.export_entries(fetched, now=aware)
