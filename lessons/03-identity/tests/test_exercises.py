"""Answers to the exercises at the end of README.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from signal_lesson.identity import Row, digest, identify
from signal_lesson.parse import parse_feed

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"


def rows(name: str, source_id: str) -> tuple[Row, ...]:
    return identify(source_id, parse_feed((FIXTURES / name).read_bytes())).rows


# Exercise 1: the publisher corrects one title.
def test_exercise_1_corrected_title() -> None:
    before = {row.remote_id: row for row in rows("demo-rss.xml", "demo-rss")}
    after = {row.remote_id: row for row in rows("variants/demo-rss-corrected.xml", "demo-rss")}
    changed = [rid for rid in before if before[rid].fingerprint != after[rid].fingerprint]
    assert changed == ["release-1"]
    assert after["release-1"].title == "Заметки о выпуске 1.0"
    assert all(before[rid].key == after[rid].key for rid in before)


# Exercise 2: one external id, two sources, two rows.
def test_exercise_2_same_id_in_two_sources() -> None:
    ours = rows("demo-rss.xml", "demo-rss")
    theirs = rows("variants/other-source-same-id.xml", "harbour-tools")
    table = {row.key: row for row in (*ours, *theirs) if row.remote_id == "release-1"}
    assert len(table) == 2
    assert sorted(row.source_id for row in table.values()) == ["demo-rss", "harbour-tools"]
    assert digest(["harbour-tools", "release-1"]) in table


# Exercise 3: hash() changes between runs of Python; digest() does not.
def run(code: str, seed: str) -> str:
    env = {"PYTHONHASHSEED": seed, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, check=True)
    return result.stdout


def test_exercise_3_hash_is_not_an_identity() -> None:
    code_hash = "print(hash(('demo-rss', 'release-1')))"
    code_digest = ("from signal_lesson.identity import digest; "
                   "print(digest(['demo-rss', 'release-1']))")
    assert run(code_hash, "1") != run(code_hash, "2")
    assert run(code_digest, "1") == run(code_digest, "2")
