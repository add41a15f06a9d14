"""History: one version row per fingerprint, first and last seen, normalizer versions."""

# Since lesson 08 these tests ask again at the same instant, so they pass force=True:
# asking before the schedule allows is the exception now, and it says so.

from __future__ import annotations

from pathlib import Path

import pytest
from signal_lesson.fetch import Validators, new_client
from signal_lesson.identity import Identified, digest, identify
from signal_lesson.parse import NORMALIZER_VERSION, parse_feed
from signal_lesson.pipeline import update_source
from signal_lesson.server import FIXTURES, TeachingServer
from signal_lesson.store import Counts, Store
from signal_lesson.story import StepClock, normalizer_v2

V = Validators('"v"', "")


def feed(name: str, source_id: str = "demo-rss") -> Identified:
    return identify(source_id, parse_feed((FIXTURES / name).read_bytes()))


@pytest.fixture
def clock() -> StepClock:
    return StepClock()


@pytest.fixture
def store(tmp_path: Path, clock: StepClock):
    with Store(tmp_path / "signal.db", clock=clock) as opened:
        for source_id in ("demo-rss", "demo-atom"):
            opened.add_source(source_id, f"https://example.org/{source_id}.xml")
        yield opened


def by_remote_id(store: Store, source_id: str = "demo-rss") -> dict[str, dict[str, object]]:
    return {str(e["remote_id"]): e for e in store.entries(source_id)}


def test_created_entries_get_one_version_and_first_equals_last(store: Store) -> None:
    store.apply(feed("demo-rss.xml"), V)
    for entry in store.entries("demo-rss"):
        assert entry["first_seen_at"] == entry["last_seen_at"] == "2026-03-25T08:00:00Z"
        versions = store.versions(str(entry["id"]))
        assert [v["fingerprint"] for v in versions] == [entry["fingerprint"]]


def test_unchanged_moves_last_seen_only(store: Store, clock: StepClock) -> None:
    store.apply(feed("demo-rss.xml"), V)
    clock.advance(3)
    assert store.apply(feed("demo-rss.xml"), V) == Counts(unchanged=3)
    entry = by_remote_id(store)["release-1"]
    assert (entry["first_seen_at"], entry["last_seen_at"]) == (
        "2026-03-25T08:00:00Z", "2026-03-25T11:00:00Z")
    [version] = store.versions(str(entry["id"]))
    assert version["last_seen_at"] == "2026-03-25T11:00:00Z"


def test_an_edit_adds_a_version_and_keeps_the_old_one(store: Store, clock: StepClock) -> None:
    store.apply(feed("demo-rss.xml"), V)
    clock.advance()
    assert store.apply(feed("variants/demo-rss-corrected.xml"), V) == Counts(
        updated=1, unchanged=2)
    entry = by_remote_id(store)["release-1"]
    assert entry["title"] == "Заметки о выпуске 1.0"
    assert entry["first_seen_at"] == "2026-03-25T08:00:00Z"
    titles = [v["title"] for v in store.versions(str(entry["id"]))]
    assert titles == ["Заметки о выпуске", "Заметки о выпуске 1.0"]


def test_fingerprint_holds_no_fetch_time_and_no_db_id(store: Store, clock: StepClock) -> None:
    store.apply(feed("demo-rss.xml"), V)
    entry = by_remote_id(store)["release-1"]
    expected = digest({"title": entry["title"], "url": entry["url"],
                       "published": entry["published"], "updated": entry["updated"]})
    assert entry["fingerprint"] == expected
    clock.advance(24)
    store.apply(feed("demo-rss.xml"), V)
    assert by_remote_id(store)["release-1"]["fingerprint"] == expected


def test_normalizer_bump_changes_fingerprints_and_the_data_says_so(
        store: Store, clock: StepClock) -> None:
    store.apply(feed("demo-atom.xml", "demo-atom"), V)
    clock.advance()
    counts = store.apply(normalizer_v2(feed("demo-atom.xml", "demo-atom")), V)
    assert counts == Counts(updated=1, unchanged=1)  # the publisher changed nothing
    entries = by_remote_id(store, "demo-atom")
    line = entries["tag:example.org,2026:line-length"]
    assert line["normalizer_version"] == NORMALIZER_VERSION + 1
    versions = store.versions(str(line["id"]))
    assert [v["normalizer_version"] for v in versions] == [NORMALIZER_VERSION,
                                                           NORMALIZER_VERSION + 1]
    assert [v["updated"] for v in versions] == ["2026-03-19T13:00:00Z", ""]
    layout = entries["urn:signal:layout-1"]
    assert layout["normalizer_version"] == NORMALIZER_VERSION + 1  # same fingerprint
    assert len(store.versions(str(layout["id"]))) == 1


def test_a_failed_transaction_adds_no_version(store: Store, monkeypatch) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("simulated crash before commit")

    monkeypatch.setattr(store, "_log_fetch", broken)
    with pytest.raises(RuntimeError):
        store.apply(feed("demo-rss.xml"), V)
    count = store.db.execute("SELECT count(*) FROM entry_versions").fetchone()[0]
    assert count == 0


def test_unconditional_request_after_an_upgrade(tmp_path: Path) -> None:
    with (TeachingServer() as server, new_client() as client,
          Store(tmp_path / "signal.db", clock=StepClock()) as store):
        url = server.url("/feeds/demo-atom.xml")
        update_source(store, client, "demo-atom", url, force=True)
        assert update_source(store, client, "demo-atom", url, force=True).outcome == "not_modified"
        upgraded = update_source(store, client, "demo-atom", url, normalize=normalizer_v2,
                                 conditional=False, force=True)
        assert "If-None-Match" not in server.log[-1].headers
        assert (upgraded.outcome, upgraded.counts) == ("fetched", Counts(updated=1, unchanged=1))
