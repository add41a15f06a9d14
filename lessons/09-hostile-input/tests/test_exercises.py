"""Answers to the exercises at the end of README.md."""

from __future__ import annotations

import json
from pathlib import Path

from signal_lesson.cli import main
from signal_lesson.hostile import amplifier, measure
from signal_lesson.parse import parse_feed

LESSON_DIR = Path(__file__).resolve().parents[1]


# Exercise 1: s * r characters from about s + 3r bytes (plus a constant frame).
def test_exercise_1_the_arithmetic_of_blowup() -> None:
    for size, refs in [(100, 50), (500, 200)]:
        result = measure(amplifier(size, refs))
        assert result is not None and result.chars == size * refs
        frame = len(amplifier(0, 0))
        assert len(amplifier(size, refs)) == frame + size + 3 * refs
    # Maximise s * r under s + 3r = B: s = B / 2 and r = B / 6, so s * r = B**2 / 12.
    budget = 160_000 - len(amplifier(0, 0))
    best = max(s * ((budget - s) // 3) for s in range(1, budget))
    half = budget // 2
    assert half * ((budget - half) // 3) >= 0.999 * best
    assert best > 2_000_000_000  # over two billion characters from 160 KB


# Exercise 2: defuse turns the DTD's HTML references into numeric ones.
def test_exercise_2_an_old_feed() -> None:
    old = (b'<?xml version="1.0"?>\n'
           b'<!DOCTYPE rss PUBLIC "-//Netscape Communications//DTD RSS 0.91//EN"\n'
           b' "http://my.netscape.com/publish/formats/rss-0.91.dtd">\n'
           b'<rss version="0.91"><channel><title>Old</title><link>https://example.org/</link>'
           b"<item><title>caf&eacute;&nbsp;au&nbsp;lait</title>"
           b"<link>https://example.org/cafe</link></item></channel></rss>")
    assert parse_feed(old)[0].title == "café\u00a0au\u00a0lait"


# Exercise 3: blowup declares 2,164 bytes, refused before a byte of the body is read.
def test_exercise_3_a_smaller_cap(tmp_path: Path, capsys) -> None:
    main(["fetch", "--config", str(LESSON_DIR / "hostile.toml"), "--db",
          str(tmp_path / "h.db"), "--teaching-server", "--json", "--max-bytes", "2000",
          "--source", "blowup", "--source", "demo-rss"])
    by_id = {s["source"]: s for s in json.loads(capsys.readouterr().out)["sources"]}
    assert by_id["demo-rss"]["status"] == "fetched"  # 1,525 bytes fit
    assert by_id["blowup"]["status"] == "failed"
    assert by_id["blowup"]["error"] == "declared body of 2164 bytes is over the cap"
