"""Header values that cannot be turned into a time, over real HTTP on 127.0.0.1."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from _hostile import rows
from conftest import Clock, make_config
from scenario_server import ScenarioServer, ScriptedResponse

from signal_feeds import run_fetch
from signal_feeds.decide.schedule import freshness_lifetime, parse_http_date, parse_retry_after
from signal_feeds.demo.teaching_server import fixtures_dir

#: Past 9999 in UTC: astimezone raised OverflowError out of parse_http_date.
FAR = "Fri, 31 Dec 9999 23:59:59 -2359"
FEED = (("Content-Type", "application/rss+xml"),)
NOW = dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize("value", [FAR, "Fri, 31 Dec 99999 23:59:59 GMT",
                                   "Wed, 02 Dec 2026 12:00:00 +9999"])
def test_a_date_that_cannot_be_read_is_no_date(value: str) -> None:
    assert parse_http_date(value) is None
    # An Expires that cannot be read means "already expired" (RFC 9111 §5.3); a
    # Retry-After that cannot be read says nothing.
    assert freshness_lifetime({"expires": value}, NOW) == 0.0
    assert freshness_lifetime({"expires": "Wed, 02 Dec 2026 13:00:00 GMT", "date": value},
                              NOW) == 3600.0
    assert parse_retry_after(value, NOW) is None


def test_huge_numbers_in_cache_headers_do_not_overflow() -> None:
    huge = "9" * 5000  # past int()'s digit limit as well
    assert freshness_lifetime({"cache-control": f"max-age={huge}"}, NOW) == float("inf")
    assert freshness_lifetime({"cache-control": f"max-age={huge}", "age": huge}, NOW) == 0.0
    assert freshness_lifetime({"cache-control": "max-age=60", "age": huge}, NOW) == 0.0
    assert parse_retry_after(huge, NOW) == NOW + dt.timedelta(days=30)


def _feed() -> bytes:
    return (fixtures_dir() / "demo-rss.xml").read_bytes()


@pytest.mark.parametrize(("headers", "status"), [
    ((("Expires", FAR),), 200),
    ((("Date", FAR), ("Expires", FAR)), 200),
    ((("Date", FAR), ("Cache-Control", "max-age=" + "9" * 400), ("Age", "9" * 400)), 200),
    ((("Retry-After", FAR),), 503),
])
def test_a_far_future_date_in_a_header_is_read_as_no_date(
        server: ScenarioServer, db_path: Path, headers: tuple[tuple[str, str], ...],
        status: int) -> None:
    # It failed the run's handling of the source ("internal error: OverflowError") and
    # wrote nothing: the source stayed new, without backoff, asked again on every run.
    server.script("/far.xml", [ScriptedResponse(status, FEED + headers,
                                                _feed() if status == 200 else b"")])
    clock = Clock()
    config = make_config(db_path, {"far": server.url("/far.xml")}, min_interval=3600.0)
    rep = run_fetch(config, force=True, clock=clock).get("far")
    assert "internal error" not in (rep.error or "")
    ((state, errors, due),) = rows(db_path, "SELECT status, error_count, next_due_at "
                                            "FROM sources WHERE id = 'far'")
    assert rows(db_path, "SELECT count(*) FROM fetches WHERE source_id = 'far'") == [(1,)]
    if status == 200:
        # Expired at once: the source's own interval holds.
        assert (rep.status, rep.created, state, errors) == ("fetched", 3, "ok", 0), rep
        assert rep.next_due == clock.now + dt.timedelta(hours=1)
    else:
        # A 503 without a Retry-After that can be read: a failure, backed off.
        assert (rep.status, rep.http_status, rep.retry_after) == ("failed", 503, None), rep
        assert (state, errors) == ("failed", 1) and due is not None
