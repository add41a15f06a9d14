"""Answers to the exercises at the end of README.md."""

from __future__ import annotations

from pathlib import Path

from signal_lesson.fetch import Validators
from signal_lesson.identity import identify
from signal_lesson.parse import parse_feed
from signal_lesson.server import FIXTURES
from signal_lesson.store import Store
from signal_lesson.story import StepClock, normalizer_v2

V = Validators('"v"', "")


def apply(store: Store, name: str, source_id: str = "demo-rss", v2: bool = False) -> None:
    identified = identify(source_id, parse_feed((FIXTURES / name).read_bytes()))
    store.apply(normalizer_v2(identified) if v2 else identified, V)


# Exercise 1: a title corrected and then reverted: two versions, not three.
def test_exercise_1_revert(tmp_path: Path) -> None:
    clock = StepClock()
    with Store(tmp_path / "signal.db", clock=clock) as store:
        store.add_source("demo-rss", "https://example.org/rss.xml")
        for name in ("demo-rss.xml", "variants/demo-rss-corrected.xml", "demo-rss.xml"):
            apply(store, name)
            clock.advance()
        entry = next(e for e in store.entries("demo-rss") if e["remote_id"] == "release-1")
        versions = store.versions(str(entry["id"]))
    assert len(versions) == 2
    assert versions[0]["fingerprint"] == entry["fingerprint"]
    assert versions[0]["last_seen_at"] == "2026-03-25T10:00:00Z"
    assert versions[1]["last_seen_at"] == "2026-03-25T09:00:00Z"


# Exercise 2: read the same feed a day later; nothing but last_seen_at moves.
def test_exercise_2_a_day_later(tmp_path: Path) -> None:
    clock = StepClock()
    with Store(tmp_path / "signal.db", clock=clock) as store:
        store.add_source("demo-rss", "https://example.org/rss.xml")
        apply(store, "demo-rss.xml")
        before = {e["id"]: e for e in store.entries("demo-rss")}
        clock.advance(24)
        apply(store, "demo-rss.xml")
        after = {e["id"]: e for e in store.entries("demo-rss")}
        versions = store.db.execute("SELECT count(*) FROM entry_versions").fetchone()[0]
    assert versions == 3
    for key, entry in after.items():
        moved = {name for name in entry if entry[name] != before[key][name]}
        assert moved == {"last_seen_at"}


# Exercise 3: entries whose fingerprint changed because of Signal, not the publisher.
CHANGED_BY_NORMALIZER = """
SELECT entry_id FROM entry_versions
GROUP BY entry_id HAVING COUNT(DISTINCT normalizer_version) > 1
"""


def test_exercise_3_changes_without_a_publisher_edit(tmp_path: Path) -> None:
    with Store(tmp_path / "signal.db", clock=StepClock()) as store:
        for source_id in ("demo-rss", "demo-atom"):
            store.add_source(source_id, f"https://example.org/{source_id}.xml")
        apply(store, "demo-rss.xml")
        apply(store, "variants/demo-rss-corrected.xml")  # a real edit by the publisher
        apply(store, "demo-atom.xml", "demo-atom")
        apply(store, "demo-atom.xml", "demo-atom", v2=True)  # only our rules changed
        rows = store.db.execute(CHANGED_BY_NORMALIZER).fetchall()
        remote_ids = [store.db.execute("SELECT remote_id FROM entries WHERE id = ?",
                                       [entry_id]).fetchone()[0] for (entry_id,) in rows]
    assert remote_ids == ["tag:example.org,2026:line-length"]
