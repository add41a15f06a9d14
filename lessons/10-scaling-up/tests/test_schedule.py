"""schedule() is pure: a table of (response, clock) -> decision, and no test ever waits."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from signal_lesson.schedule import Policy, due, parse_http_date, schedule

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
POLICY = Policy(min_interval=timedelta(minutes=30), max_interval=timedelta(days=1),
                backoff_base=timedelta(minutes=5), backoff_cap=timedelta(hours=12))


def minutes(n: float) -> datetime:
    return NOW + timedelta(minutes=n)


TABLE = [
    # (name, status, headers, errors before, expected status, next due, errors after)
    ("plain 200", 200, {}, 0, "ok", minutes(30), 0),
    ("304 counts as success", 304, {}, 3, "ok", minutes(30), 0),
    ("max-age above the minimum", 200, {"Cache-Control": "max-age=7200"}, 0, "ok",
     minutes(120), 0),
    ("max-age below the minimum", 200, {"Cache-Control": "public, max-age=60"}, 0, "ok",
     minutes(30), 0),
    ("Age is subtracted", 200, {"Cache-Control": "max-age=7200", "Age": "3600"}, 0, "ok",
     minutes(60), 0),
    ("max-age wins over Expires", 200,
     {"Cache-Control": "max-age=3600", "Expires": "Sun, 01 Mar 2026 20:00:00 GMT"}, 0, "ok",
     minutes(60), 0),
    ("Expires minus the server's Date", 200,
     {"Date": "Sun, 01 Mar 2026 11:00:00 GMT", "Expires": "Sun, 01 Mar 2026 14:00:00 GMT"},
     0, "ok", minutes(180), 0),
    ("Expires: 0 is already stale", 200, {"Expires": "0"}, 0, "ok", minutes(30), 0),
    ("no-cache ignores max-age", 200, {"Cache-Control": "no-cache, max-age=9000"}, 0, "ok",
     minutes(30), 0),
    ("a year of max-age is capped", 200, {"Cache-Control": "max-age=31536000"}, 0, "ok",
     minutes(24 * 60), 0),
    ("Retry-After in seconds", 429, {"Retry-After": "7200"}, 0, "retry_later",
     minutes(120), 1),
    ("Retry-After as an HTTP date", 503, {"Retry-After": "Sun, 01 Mar 2026 15:00:00 GMT"}, 0,
     "retry_later", minutes(180), 1),
    ("Retry-After sooner than the minimum", 429, {"Retry-After": "10"}, 0, "retry_later",
     minutes(30), 1),
    ("503 without Retry-After backs off", 503, {}, 0, "backoff", minutes(30), 1),
    ("first 500: base, floored at the minimum", 500, {}, 0, "backoff", minutes(30), 1),
    ("fifth 500: 5 * 2**4 = 80 minutes", 500, {}, 4, "backoff", minutes(80), 5),
    ("network error counts like a 5xx", None, {}, 5, "backoff", minutes(160), 6),
    ("backoff is capped at 12 hours", 502, {}, 20, "backoff", minutes(12 * 60), 21),
    ("404 backs off too", 404, {}, 0, "backoff", minutes(30), 1),
    ("410 stops polling", 410, {}, 0, "gone", None, 1),
]


@pytest.mark.parametrize(("name", "status", "headers", "before", "outcome", "due", "after"),
                         TABLE, ids=[row[0] for row in TABLE])
def test_schedule_table(name, status, headers, before, outcome, due, after) -> None:
    # rand=1.0 takes the whole backoff, so the table can state exact times
    decision = schedule(NOW, status, headers, errors=before, policy=POLICY, rand=lambda: 1.0)
    assert (decision.status, decision.next_due, decision.errors) == (outcome, due, after)


def test_never_before_retry_after_whatever_the_jitter() -> None:
    retry_at = NOW + timedelta(hours=5)
    for seed in range(50):
        rng = random.Random(seed)
        decision = schedule(NOW, 503, {"retry-after": "Sun, 01 Mar 2026 17:00:00 GMT"},
                            errors=seed, policy=POLICY, rand=rng.random)
        assert decision.retry_after == retry_at
        assert decision.next_due is not None and decision.next_due >= retry_at


def test_jitter_stays_between_half_and_all_of_the_backoff() -> None:
    rng = random.Random(7)
    waits = {schedule(NOW, 500, errors=6, policy=POLICY, rand=rng.random).next_due - NOW
             for _ in range(200)}
    full = timedelta(minutes=5 * 2**6)  # 320 minutes
    assert min(waits) >= full / 2 and max(waits) <= full
    assert len(waits) > 100  # jitter spreads sources that failed together


def test_success_resets_the_error_count() -> None:
    failing = schedule(NOW, 500, errors=3, policy=POLICY)
    assert failing.errors == 4
    assert schedule(NOW, 200, errors=failing.errors, policy=POLICY).errors == 0


def test_permanent_redirect_is_recorded_as_moved() -> None:
    decision = schedule(NOW, 200, {}, moved_to="https://example.org/new.xml", policy=POLICY)
    assert (decision.status, decision.moved_to) == ("moved", "https://example.org/new.xml")
    assert decision.next_due == minutes(30)


def test_http_dates() -> None:
    assert parse_http_date("Sun, 01 Mar 2026 12:00:00 GMT") == NOW
    assert parse_http_date("Sunday, 01-Mar-26 12:00:00 GMT") == NOW
    assert parse_http_date("soon") is None


@pytest.mark.parametrize(
    ("state", "force", "answer"),
    [
        ({"next_due": None}, False, "due"),
        ({"next_due": minutes(10)}, False, "not_due"),
        ({"next_due": minutes(10)}, True, "due"),
        ({"next_due": minutes(-1)}, False, "due"),
        ({"next_due": minutes(10), "retry_after": minutes(10)}, True, "retry_later"),
        ({"next_due": None, "gone": True}, True, "gone"),
    ],
)
def test_due(state, force, answer) -> None:
    assert due(NOW, force=force, **state) == answer


def test_absurd_retry_after_does_not_overflow() -> None:
    decision = schedule(NOW, 429, {"Retry-After": "9" * 40}, policy=POLICY)
    assert decision.retry_after == NOW + timedelta(days=3650)


def test_retry_after_date_in_the_past_means_now() -> None:
    # "a date in the past means now": not before now, and not refused either
    decision = schedule(NOW, 503, {"Retry-After": "Sun, 01 Mar 2026 11:00:00 GMT"},
                        policy=POLICY)
    assert (decision.status, decision.retry_after) == ("retry_later", NOW)
    assert decision.next_due == minutes(30)
    assert due(NOW, next_due=None, retry_after=decision.retry_after) == "due"
