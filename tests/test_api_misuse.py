"""The public API given what newcomers pass: a generator for a sequence, a path for a
store, a value of the wrong type. Each is read as meant or refused at the call, naming
the argument; never a run that silently does nothing, never an error from deep inside
(found by calling every public name wrongly on purpose, 2026-12-07)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from conftest import make_config
from scenario_server import ScenarioServer

import signal_feeds
from signal_feeds import Config, ConfigError, Settings, Source


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
