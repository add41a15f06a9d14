"""The pipeline asks only when a source is due, and remembers what each answer implies.

A fixed clock stands in for time: the store's clock is a variable the test moves, so
"two hours later" costs nothing and nothing ever sleeps.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from signal_lesson.fetch import new_client
from signal_lesson.pipeline import update_source
from signal_lesson.server import TeachingServer
from signal_lesson.store import Store

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def world(tmp_path):
    clock = Clock()
    with (TeachingServer() as server, new_client() as client,
          Store(tmp_path / "signal.db", clock=clock) as store):
        yield server, client, store, clock


def update(world, path: str, *, force: bool = False, source_id: str = "s"):
    server, client, store, _ = world
    return update_source(store, client, source_id, server.url(path), force=force,
                         rand=lambda: 1.0)


def requests(world) -> list[str]:
    return [f"{r.status} {r.path}" for r in world[0].log]


def test_a_source_that_is_not_due_is_not_asked(world) -> None:
    first = update(world, "/feeds/demo-rss.xml")
    assert (first.outcome, first.next_due) == ("fetched", START + timedelta(minutes=30))
    world[3].advance(minutes=29)
    assert update(world, "/feeds/demo-rss.xml").outcome == "not_due"
    assert requests(world) == ["200 /feeds/demo-rss.xml"]
    assert update(world, "/feeds/demo-rss.xml", force=True).outcome == "not_modified"
    world[3].advance(minutes=31)
    assert update(world, "/feeds/demo-rss.xml").outcome == "not_modified"
    assert len(requests(world)) == 3


def test_max_age_sets_the_next_poll(world) -> None:
    assert update(world, "/scenario/cached").next_due == START + timedelta(hours=2)


def test_retry_after_holds_even_against_force(world) -> None:
    busy = update(world, "/scenario/busy")
    assert (busy.outcome, busy.http_status) == ("retry_later", 429)
    assert busy.retry_after == START + timedelta(hours=1)
    world[3].advance(minutes=59, seconds=59)
    assert update(world, "/scenario/busy", force=True).outcome == "retry_later"
    assert len(requests(world)) == 1
    world[3].advance(seconds=1)
    assert update(world, "/scenario/busy").http_status == 429  # asked again, on time
    assert len(requests(world)) == 2


def test_backoff_grows_with_each_failure_and_success_resets_it(world) -> None:
    server, _, store, clock = world
    waits = []
    for _ in range(6):
        result = update(world, "/feeds/later.xml")  # 404 until published
        assert result.outcome == "failed"
        waits.append((result.next_due - clock.now) // timedelta(minutes=1))
        clock.now = result.next_due
    assert waits == [30, 30, 30, 40, 80, 160]  # 5 min doubling, never below 30 min
    assert store.source_state("s").errors == 6
    server.publish("/feeds/later.xml", server.document("/feeds/demo-rss.xml").body)
    assert update(world, "/feeds/later.xml").outcome == "fetched"
    assert store.source_state("s").errors == 0


def test_gone_stops_polling_until_a_person_acts(world) -> None:
    assert update(world, "/scenario/gone").outcome == "gone"
    world[3].advance(days=30)
    assert update(world, "/scenario/gone", force=True).outcome == "gone"
    assert requests(world) == ["410 /scenario/gone"]


def test_permanent_redirect_is_recorded_temporary_is_not(world) -> None:
    store = world[2]
    moved = update(world, "/scenario/moved", source_id="moved")
    assert moved.outcome == "moved" and moved.counts.created == 2
    assert moved.moved_to.endswith("/feeds/demo-atom.xml")
    assert store.source_state("moved").moved_to == moved.moved_to
    assert store.db.execute("SELECT url FROM sources WHERE id = 'moved'").fetchone()[0] \
        .endswith("/scenario/moved")  # the list stays as the reviewer wrote it
    detour = update(world, "/scenario/detour", source_id="detour")
    assert (detour.outcome, detour.moved_to) == ("fetched", "")
    assert store.source_state("detour").moved_to == ""


def test_a_network_error_backs_off_too(world) -> None:
    result = update(world, "/scenario/redirect/9")
    assert (result.outcome, result.http_status) == ("failed", 0)
    assert result.next_due == START + timedelta(minutes=30)
    assert world[2].source_state("s").errors == 1


def test_a_308_counts_as_moved_like_a_301(world) -> None:
    moved = update(world, "/scenario/moved-308", source_id="m308")
    assert (moved.outcome, moved.http_status) == ("moved", 200)
    assert moved.moved_to.endswith("/feeds/demo-rss.xml")
