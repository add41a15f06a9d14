"""Answers to the exercises at the end of README.md."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from signal_lesson.fetch import new_client
from signal_lesson.pipeline import update_source
from signal_lesson.schedule import schedule
from signal_lesson.server import TeachingServer
from signal_lesson.store import SourceState, Store

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


# Exercise 1: 5 minutes doubled 7 times is 640 minutes; doubled 8 times it hits the cap.
def test_exercise_1_count_the_doubling() -> None:
    eighth = schedule(NOW, 500, errors=7, rand=lambda: 1.0)
    ninth = schedule(NOW, 500, errors=8, rand=lambda: 1.0)
    assert eighth.next_due - NOW == timedelta(hours=10, minutes=40)
    assert ninth.next_due - NOW == timedelta(hours=12)  # backoff_cap


# Exercise 2: an Expires before Date means "already stale": the floor decides.
def test_exercise_2_a_stale_response() -> None:
    decision = schedule(NOW, 200, {"Date": "Sun, 01 Mar 2026 12:00:00 GMT",
                                   "Expires": "Sun, 01 Mar 2026 11:00:00 GMT"})
    assert decision.next_due == NOW + timedelta(minutes=30)  # Policy.min_interval


# Exercise 3: clearing a source's schedule state makes it due again.
def reset(store: Store, source_id: str) -> None:
    with store.transaction() as conn:
        conn.execute("UPDATE sources SET next_due = NULL, retry_after = NULL, errors = 0, "
                     "gone = 0 WHERE id = ?", (source_id,))


def test_exercise_3_un_gone(tmp_path: Path) -> None:
    with (TeachingServer() as server, new_client() as client,
          Store(tmp_path / "signal.db", clock=lambda: NOW) as store):
        url = server.url("/scenario/gone")
        assert update_source(store, client, "old", url).outcome == "gone"
        assert update_source(store, client, "old", url).outcome == "gone"
        assert len(server.log) == 1
        reset(store, "old")
        assert store.source_state("old") == SourceState()
        assert update_source(store, client, "old", url).http_status == 410
        assert len(server.log) == 2
