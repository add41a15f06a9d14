"""Hostile header values over real HTTP on 127.0.0.1 (dates that cannot be turned into
a time, values too long to repeat), and what a run does with a source when deciding
about it goes wrong in any other way."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from _hostile import rows
from conftest import Clock, make_config
from scenario_server import ScenarioServer, ScriptedResponse

from signal_feeds import run_fetch
from signal_feeds.decide.decider import Decider
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


def _broken(real, *, when_parsed: bool):  # type: ignore[no-untyped-def]
    def after_fetch(self, state, response, parsed=None):  # type: ignore[no-untyped-def]
        from signal_feeds.decide.decider import FetchFailure

        if not isinstance(response, FetchFailure) and (parsed is not None) == when_parsed:
            raise ZeroDivisionError("a bug")
        return real(self, state, response, parsed)
    return after_fetch


@pytest.mark.parametrize("where", ["unparsed", "parsed", "fetch"])
def test_any_bug_while_deciding_fails_the_source_and_backs_off(
        server: ScenarioServer, db_path: Path, monkeypatch: pytest.MonkeyPatch,
        where: str) -> None:
    # The run only reported "internal error" and left the source as it was: no fetch
    # row, no error counted, due again at once.
    if where == "fetch":
        async def fetch(*args: object, **kwargs: object) -> None:
            raise ZeroDivisionError("a bug")
        monkeypatch.setattr("signal_feeds.run.stages.fetch", fetch)
    else:
        monkeypatch.setattr(Decider, "after_fetch", _broken(
            Decider.after_fetch, when_parsed=where == "parsed"))
    server.script("/a.xml", [ScriptedResponse(200 if where == "parsed" else 500, FEED,
                                              _feed())])
    clock = Clock()
    config = make_config(db_path, {"a": server.url("/a.xml")}, min_interval=600.0)
    rep = run_fetch(config, clock=clock).get("a")
    assert (rep.status, rep.error) == ("failed", "internal error: ZeroDivisionError: a bug")
    assert rows(db_path, "SELECT status, error_count, last_error FROM sources WHERE id = 'a'"
                ) == [("failed", 1, rep.error)]
    assert rows(db_path, "SELECT outcome, error FROM fetches WHERE source_id = 'a'"
                ) == [("failed", rep.error)]
    assert rep.next_due is not None and rep.next_due >= clock.now + dt.timedelta(minutes=10)
    clock.advance(60)
    assert run_fetch(config, clock=clock).get("a").status == "not_due"
    # The lease went back with the write: the run holds none.
    assert rows(db_path, "SELECT count(*) FROM sources WHERE lease_owner IS NOT NULL") == [(0,)]


def test_a_bug_in_deciding_the_failure_itself_costs_one_source(
        server: ScenarioServer, db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A decider that fails for one source failed again when asked to decide that
    # failure, and the parse stage's task ended: the whole run stopped ("a stage of the
    # run ended early") and every source's report was lost.
    real = Decider.after_fetch

    def after_fetch(self: Decider, *args: object) -> object:
        if self.source_id == "bad":
            raise ZeroDivisionError("a bug")
        return real(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Decider, "after_fetch", after_fetch)
    server.script("/bad.xml", [ScriptedResponse(200, FEED, _feed())])
    server.script("/good.xml", [ScriptedResponse(200, FEED, _feed())])
    config = make_config(db_path, {"bad": server.url("/bad.xml"),
                                   "good": server.url("/good.xml")})
    report = run_fetch(config)
    assert (report.get("bad").status, report.get("bad").error) == (
        "failed", "internal error: ZeroDivisionError: a bug")
    assert report.get("good").status == "fetched"


LONG = "/x" * 10_000  # 20 KB
CODINGS = ",".join(["gzip"] * 2000) + ",br"  # 10 KB


@pytest.mark.parametrize(("status", "headers", "said"), [
    (302, ("Location", "ftp://h" + LONG), "redirect to a non-http(s) URL 'ftp://h/x/x/"),
    (302, ("Location", "http://[" + LONG), "redirect to an invalid URL 'http://[/x/x/"),
    (302, ("Location", "http://" + "a" * 20_000 + "/"), "cannot resolve host 'aaaa"),
    (302, ("Location", "/missing" + LONG), "HTTP 404 Not Found (answered at http://"),
    (300, ("Location", "http://h" + LONG), "not followed (it points to 'http://h/x/x/"),
    (200, ("Content-Encoding", CODINGS), "unsupported Content-Encoding 'gzip,gzip,"),
])
def test_a_huge_header_value_is_not_repeated_whole(
        server: ScenarioServer, db_path: Path, status: int, headers: tuple[str, str],
        said: str) -> None:
    # Each was echoed whole into the report and the source's last_error: one line of
    # 10 to 20 KB in every cron mail.
    server.script("/long.xml", [ScriptedResponse(status, (headers,), b"\x00 not a feed")])
    rep = run_fetch(make_config(db_path, {"long": server.url("/long.xml")}),
                    force=True).get("long")
    assert rep.status == "failed" and said in rep.error, rep.error
    assert len(rep.error) < 600 and "\u2026" in rep.error, len(rep.error)
    ((stored,),) = rows(db_path, "SELECT last_error FROM sources WHERE id = 'long'")
    assert stored == rep.error
