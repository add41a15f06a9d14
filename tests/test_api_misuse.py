"""The public API given what newcomers pass: a generator for a sequence, a path for a
store, a value of the wrong type. Each is read as meant or refused at the call, naming
the argument; never a run that silently does nothing, never an error from deep inside
(found by calling every public name wrongly on purpose, 2026-12-07)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_config
from scenario_server import ScenarioServer

import signal_feeds


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
