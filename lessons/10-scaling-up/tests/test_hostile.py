"""What feedparser does alone with hostile documents, measured in a child process."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import feedparser
import pytest
from signal_lesson.cli import main
from signal_lesson.defuse import defuse
from signal_lesson.hostile import amplifier, long_author, measure
from signal_lesson.parse import parse_feed
from signal_lesson.server import TeachingServer

FEEDS = Path(__file__).resolve().parents[1] / "feeds"


def test_a_plain_entity_is_expanded_by_feedparser_alone() -> None:
    data = (FEEDS / "quadratic-blowup.xml").read_bytes()
    alone, defused = measure(data), measure(defuse(data))
    assert alone is not None and alone.chars == 200_000 > 90 * len(data)
    assert defused is not None and defused.chars == 800


def test_expats_guard_trips_and_the_fallback_expands_anyway() -> None:
    # Past 8 MiB of expansion expat stops with "limit on input amplification factor";
    # feedparser then reads the same bytes with its lenient parser, entities included.
    alone = measure(amplifier(3000, 3000))
    assert alone is not None and alone.chars == 9_000_000


def test_nested_entities_are_dropped_by_feedparser_itself() -> None:
    alone = measure((FEEDS / "billion-laughs.xml").read_bytes())
    assert alone is not None and alone.title == "&lol9;"


def test_the_author_regex_is_stopped_by_the_time_limit_not_by_us() -> None:
    assert measure(long_author(100_000), time_limit=1.0) is None
    defused = measure(defuse(long_author(100_000)), time_limit=5.0)
    assert defused is not None and defused.chars == 256 + 2


def test_external_entities_read_nothing_and_request_nothing(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET", encoding="utf-8")
    with TeachingServer() as server:
        data = (
            '<?xml version="1.0"?>\n<!DOCTYPE rss [\n'
            f'<!ENTITY secret SYSTEM "{secret.as_uri()}">\n'
            f'<!ENTITY probe SYSTEM "{server.url("/probe")}">\n]>\n'
            '<rss version="2.0"><channel><title>x</title><item><guid>x-1</guid>'
            "<title>a &secret; b &probe; c</title></item></channel></rss>"
        ).encode()
        raw = feedparser.parse(io.BytesIO(data))
        defended = parse_feed(data)
        assert server.log == []  # no request, with or without defuse
    assert "TOP SECRET" not in raw.entries[0].title
    assert "TOP SECRET" not in defended[0].title


@pytest.fixture
def fetched(tmp_path: Path, capsys):
    code = main(["fetch", "--config", str(Path(__file__).resolve().parents[1] / "hostile.toml"),
                 "--db", str(tmp_path / "h.db"), "--teaching-server", "--json",
                 "--max-bytes", "1000000", "--read-timeout", "1", "--deadline", "1"])
    return code, {s["source"]: s for s in json.loads(capsys.readouterr().out)["sources"]}


def test_hostile_responses_fail_alone_and_the_rest_still_runs(fetched) -> None:
    code, by_id = fetched
    assert code == 1
    assert by_id["demo-rss"]["status"] == "fetched"
    assert by_id["blowup"]["status"] == "fetched" and by_id["blowup"]["created"] == 1
    assert by_id["big"]["error"] == by_id["gzip-bomb"]["error"] == \
        "body larger than 1000000 bytes"
    assert by_id["trickle"]["error"] == "no complete body within 1 s"
    assert by_id["stall"]["error"] == "timed out (ReadTimeout)"


def test_the_author_regex_costs_the_square_of_the_length() -> None:
    def best(length: int) -> float:
        data = long_author(length)
        times = []
        for _ in range(3):
            # CPU time of this process: other work on a busy machine stretches the
            # wall clock of the short parse as much as the long one's, not this.
            started = time.process_time()
            feedparser.parse(io.BytesIO(data))
            times.append(time.process_time() - started)
        return min(times)

    ratio = best(6000) / best(1500)  # four times longer
    assert ratio > 6  # linear would be about 4; the square is 16
