"""The poll schedule as a table of plain cases: no network, no database, no sleeping."""

from __future__ import annotations

import datetime as dt

import pytest

from signal_feeds.decide.schedule import (
    DEFAULT_BACKOFF_CAP,
    LONGEST_RETRY_AFTER,
    check_due,
    due_slack,
    freshness_lifetime,
    next_poll,
    parse_retry_after,
    scheduled_due,
)

NOW = dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.UTC)
HOUR = 3600.0


def at(seconds: float) -> dt.datetime:
    return NOW + dt.timedelta(seconds=seconds)


def poll(status: int | str, headers: dict[str, str] | None = None, *, errors: int = 0,
         min_interval: float = HOUR, max_interval: float = 7 * 24 * HOUR,
         ttl: int | None = None, jitter: float = 0.0):  # type: ignore[no-untyped-def]
    return next_poll(now=NOW, status=status, headers=headers or {},  # type: ignore[arg-type]
                     error_count=errors, min_interval=min_interval,
                     max_interval=max_interval, ttl_seconds=ttl, jitter=jitter)


CASES = [
    # (name, status, headers, kwargs, next_due offset in seconds or None, retry_after, reason)
    ("200 plain: min interval", 200, {}, {}, HOUR, None, "ok"),
    ("304 plain", 304, {}, {}, HOUR, None, "ok"),
    ("max-age longer than interval", 200, {"cache-control": "public, max-age=7200"}, {},
     7200, None, "ok"),
    ("max-age minus Age", 200, {"cache-control": "max-age=7200", "age": "1800"}, {},
     5400, None, "ok"),
    ("max-age shorter than interval never shortens", 200, {"cache-control": "max-age=60"},
     {}, HOUR, None, "ok"),
    ("no-cache: interval only", 200, {"cache-control": "no-cache, max-age=99999"}, {},
     HOUR, None, "ok"),
    ("no-store: interval only", 304, {"cache-control": "no-store"}, {}, HOUR, None, "ok"),
    # no-cache naming a field is about that field alone (RFC 9111 §5.2.2.4).
    ("no-cache=field keeps max-age", 200,
     {"cache-control": 'max-age=14400, no-cache="Set-Cookie"'}, {}, 4 * HOUR, None, "ok"),
    ("Expires minus Date", 200, {"expires": "Wed, 02 Dec 2026 15:00:00 GMT",
                                 "date": "Wed, 02 Dec 2026 12:00:00 GMT"}, {},
     3 * HOUR, None, "ok"),
    ("invalid Expires is already expired", 200, {"expires": "0"}, {}, HOUR, None, "ok"),
    ("max-age wins over Expires", 200, {"cache-control": "max-age=7200",
                                        "expires": "Thu, 03 Dec 2026 12:00:00 GMT"}, {},
     7200, None, "ok"),
    ("feed ttl", 200, {}, {"ttl": 3 * 3600}, 3 * HOUR, None, "ok"),
    ("upper cap", 200, {"cache-control": "max-age=99999999"}, {"max_interval": 86400},
     86400, None, "ok"),
    # Retry-After is a floor on top of the backoff: a short one (even 0, or a date
    # gone by) made the source due on the very next run, however often it failed.
    ("429 Retry-After seconds", 429, {"retry-after": "120"}, {"errors": 1}, HOUR, 120,
     "retry_later"),
    ("503 Retry-After date", 503, {"retry-after": "Wed, 02 Dec 2026 14:00:00 GMT"},
     {"errors": 1}, 2 * HOUR, 2 * HOUR, "retry_later"),
    ("429 Retry-After in the past", 429, {"retry-after": "Wed, 02 Dec 2026 10:00:00 GMT"},
     {"errors": 1}, HOUR, 0, "retry_later"),
    ("503 Retry-After 0, third failure", 503, {"retry-after": "0"}, {"errors": 3},
     4 * HOUR, 0, "retry_later"),
    ("503 Retry-After past the cap", 503, {"retry-after": "Fri, 31 Dec 9999 23:59:59 GMT"},
     {"errors": 1}, LONGEST_RETRY_AFTER, LONGEST_RETRY_AFTER, "retry_later"),
    ("429 without Retry-After backs off", 429, {}, {"errors": 1}, HOUR, None, "backoff"),
    ("500 first error", 500, {}, {"errors": 1}, HOUR, None, "backoff"),
    ("500 third error doubles twice", 500, {}, {"errors": 3}, 4 * HOUR, None, "backoff"),
    ("backoff jitter stretches", 502, {}, {"errors": 2, "jitter": 0.5}, 2 * HOUR * 1.125,
     None, "backoff"),
    ("backoff is capped", 500, {}, {"errors": 40}, DEFAULT_BACKOFF_CAP, None, "backoff"),
    # A weekly source that fails waits its week, not the day the cap allows.
    ("a failing source waits min_interval past the cap", 500, {},
     {"errors": 1, "min_interval": 7 * 24 * HOUR}, 7 * 24 * HOUR, None, "backoff"),
    ("network error", "error", {}, {"errors": 2}, 2 * HOUR, None, "backoff"),
    ("404 backs off", 404, {}, {"errors": 1}, HOUR, None, "backoff"),
    ("410 gone", 410, {}, {"errors": 0}, None, None, "gone"),
]


@pytest.mark.parametrize(("name", "status", "headers", "kwargs", "due", "retry", "reason"),
                         CASES, ids=[c[0] for c in CASES])
def test_next_poll(name: str, status: int | str, headers: dict[str, str],
                   kwargs: dict[str, object], due: float | None, retry: float | None,
                   reason: str) -> None:
    decision = poll(status, headers, **kwargs)  # type: ignore[arg-type]
    assert decision.reason == reason
    assert decision.next_due_at == (None if due is None else at(due))
    assert decision.retry_after == (None if retry is None else at(retry))


def test_retry_after_forms() -> None:
    assert parse_retry_after("120", NOW) == at(120)
    assert parse_retry_after(" 0 ", NOW) == NOW
    assert parse_retry_after("Wed, 02 Dec 2026 12:02:00 GMT", NOW) == at(120)
    assert parse_retry_after("soon", NOW) is None
    assert parse_retry_after("-5", NOW) is None
    assert parse_retry_after("", NOW) is None
    # Header values are read as Latin-1, where "²" is a digit to str.isdigit() that
    # int() refuses: a hostile server must not turn it into an internal error.
    assert parse_retry_after("\u00b2", NOW) is None
    assert parse_retry_after("9" * 5000, NOW) == NOW + dt.timedelta(days=30)
    assert parse_retry_after("99999999999", NOW) == NOW + dt.timedelta(days=30)
    # Sent twice, the values arrive joined (a 503 read as a plain failure before).
    assert parse_retry_after("120, 120", NOW) == at(120)
    assert parse_retry_after("120,600", NOW) == at(120)
    assert parse_retry_after("Wed, 02 Dec 2026 12:02:00 GMT, Wed, 02 Dec 2026 12:05:00 GMT",
                             NOW) == at(120)
    assert parse_retry_after("soon, 120", NOW) is None


@pytest.mark.parametrize(("name", "retry_after", "date", "wait"), [
    ("clocks agree", "Wed, 02 Dec 2026 12:02:00 GMT", "Wed, 02 Dec 2026 12:00:00 GMT", 120),
    # A server five minutes slow asks for two minutes: read on our clock, its date was
    # three minutes past and the pause over before it began.
    ("server clock slow", "Wed, 02 Dec 2026 11:57:00 GMT", "Wed, 02 Dec 2026 11:55:00 GMT",
     120),
    # A server an hour fast asks for two minutes, not an hour and two minutes.
    ("server clock fast", "Wed, 02 Dec 2026 13:02:00 GMT", "Wed, 02 Dec 2026 13:00:00 GMT",
     120),
    ("a date before its Date", "Wed, 02 Dec 2026 12:00:00 GMT",
     "Wed, 02 Dec 2026 12:05:00 GMT", 0),
    ("past the cap on its clock", "Fri, 31 Dec 9999 23:59:59 GMT",
     "Wed, 02 Dec 2026 13:00:00 GMT", 30 * 86400),
    # Without a readable Date there is only our clock.
    ("no Date", "Wed, 02 Dec 2026 12:02:00 GMT", None, 120),
    ("an unreadable Date", "Wed, 02 Dec 2026 12:02:00 GMT", "yesterday", 120),
    # Seconds are a delay whatever the clocks say.
    ("seconds", "120", "Wed, 02 Dec 2026 08:00:00 GMT", 120),
])
def test_a_retry_after_date_is_read_on_the_servers_clock(name: str, retry_after: str,
                                                        date: str | None, wait: int) -> None:
    assert parse_retry_after(retry_after, NOW, date) == at(wait), name


def test_a_skewed_server_s_retry_after_date_is_a_floor_for_its_time() -> None:
    slow = {"retry-after": "Wed, 02 Dec 2026 11:57:00 GMT",
            "date": "Wed, 02 Dec 2026 11:55:00 GMT"}
    decision = next_poll(now=NOW, status=429, headers=slow, error_count=1, min_interval=60,
                         max_interval=3600)
    assert (decision.reason, decision.retry_after) == ("retry_later", at(120))


def test_cache_headers_with_latin1_digits_are_ignored() -> None:
    assert freshness_lifetime({"cache-control": "max-age=\u00b2"}, NOW) is None
    assert freshness_lifetime({"cache-control": "max-age=60", "age": "\u00b3"}, NOW) == 60


def test_freshness_lifetime_says_nothing_without_headers() -> None:
    assert freshness_lifetime({}, NOW) is None
    assert freshness_lifetime({"cache-control": "max-age=\"600\""}, NOW) == 600


@pytest.mark.parametrize(("kwargs", "status", "until"), [
    ({}, "due", None),
    ({"next_due_at": at(60)}, "not_due", at(60)),
    ({"next_due_at": at(60), "force": True}, "due", None),
    ({"next_due_at": at(-1)}, "due", None),
    ({"retry_after": at(60), "force": True}, "retry_later", at(60)),
    ({"retry_after": at(-60)}, "due", None),
    ({"gone": True, "force": True}, "gone", None),
])
def test_check_due(kwargs: dict[str, object], status: str, until: dt.datetime | None) -> None:
    args: dict[str, object] = {"gone": False, "next_due_at": None, "retry_after": None,
                               "force": False}
    args.update(kwargs)
    due = check_due(now=NOW, **args)  # type: ignore[arg-type]
    assert (due.status, due.until) == (status, until)


def test_the_wait_counts_from_when_the_request_went_out() -> None:
    # Counted from the end of the exchange, an hourly source under an hourly cron job
    # was due a few seconds after the next run began, so every other run skipped it.
    sent = NOW - dt.timedelta(seconds=2)
    for status, errors in ((200, 0), (304, 0), (500, 1)):
        decision = next_poll(now=NOW, sent=sent, status=status, headers={},
                             error_count=errors, min_interval=HOUR, max_interval=24 * HOUR)
        assert decision.next_due_at == sent + dt.timedelta(hours=1), status
    # A Retry-After counts from when the answer came.
    later = next_poll(now=NOW, sent=sent, status=429, headers={"retry-after": "7200"},
                      error_count=1, min_interval=HOUR, max_interval=24 * HOUR)
    assert later.retry_after == at(7200) and later.next_due_at == at(7200)
    # The next cron run, started a moment earlier in its minute than the last one.
    next_run = sent + dt.timedelta(hours=1) - dt.timedelta(seconds=0.5)
    assert check_due(now=next_run, gone=False, next_due_at=sent + dt.timedelta(hours=1),
                     retry_after=None, force=False, slack=due_slack(HOUR)).status == "due"
    assert due_slack(HOUR) == 60 and due_slack(60) == 3


@pytest.mark.parametrize(("name", "next_due_at", "last_fetch_at", "min_interval", "due"), [
    ("never polled", None, None, HOUR, None),
    ("reset: no stored time, due whatever the last poll", None, at(-60), HOUR, None),
    ("as stored", at(60), at(60 - HOUR), HOUR, at(60)),
    ("stretched by max-age: as stored", at(HOUR), at(-HOUR), HOUR, at(HOUR)),
    # Stored under an hour's min_interval, since raised to six hours.
    ("min_interval raised since", at(60), at(60 - HOUR), 6 * HOUR, at(60 + 5 * HOUR)),
    ("min_interval lowered since: as stored", at(60), at(60 - 6 * HOUR), HOUR, at(60)),
], ids=lambda v: v if isinstance(v, str) and " " in v else "")
def test_scheduled_due(name: str, next_due_at: dt.datetime | None,
                       last_fetch_at: dt.datetime | None, min_interval: float,
                       due: dt.datetime | None) -> None:
    assert scheduled_due(next_due_at=next_due_at, last_fetch_at=last_fetch_at,
                         min_interval=min_interval) == due
