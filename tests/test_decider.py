"""The decider as a table: one row per case, plain data in and out (no network, no
database, no clock)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from signal_feeds.decide.decider import (
    Decider,
    Decision,
    FetchFailure,
    ParseFacts,
    ResponseFacts,
)
from signal_feeds.decide.schedule import DEFAULT_BACKOFF_CAP
from signal_feeds.records import ApplyCounts, SourceState

STARTED = dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.UTC)
NOW = STARTED + dt.timedelta(seconds=2)
HOUR = 3600.0
URL = "https://feeds.example.org/a.xml"
NEW_URL = "https://feeds.example.org/b.xml"
HTTP_DATE = "Wed, 02 Dec 2026 15:00:00 GMT"  # three hours after STARTED


def at(seconds: float) -> dt.datetime:
    return NOW + dt.timedelta(seconds=seconds)


def sent(seconds: float) -> dt.datetime:
    """A time counted from when the request went out, as the schedule counts."""
    return STARTED + dt.timedelta(seconds=seconds)


def decider(**kw: Any) -> Decider:
    options: dict[str, Any] = {"source_id": "s", "now": NOW, "started": STARTED,
                               "min_interval": HOUR, "max_interval": 24 * HOUR,
                               "jitter": 0.0, "normalizer_version": 7}
    options.update(kw)
    return Decider(**options)


STORED = SourceState(source_id="s", url=URL, etag='"old"', last_modified="Mon, 1 Jan 2024",
                     body_digest="d1", body_normalizer_version=7, body_entries=12,
                     status="ok", http_status=200)


def resp(status: int, headers: dict[str, str] | None = None, **kw: Any) -> ResponseFacts:
    return ResponseFacts(status=status, url=kw.pop("url", URL), headers=headers or {},
                         wire_bytes=100, **kw)


FRESH = {"etag": '"new"', "last-modified": "Tue, 2 Jan 2024"}
PARSED = ParseFacts(entries=5, skipped=1, ttl_seconds=None, warnings=("w",))


@dataclass(frozen=True)
class Case:
    name: str
    response: ResponseFacts | FetchFailure
    parsed: ParseFacts | None = None
    state: SourceState = STORED
    # Expected:
    status: str = "fetched"
    write: str = "save_attempt"
    state_fields: dict[str, Any] = field(default_factory=dict)
    report_fields: dict[str, Any] = field(default_factory=dict)
    record_fields: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case("fetched", resp(200, FRESH, body_digest="d2"), PARSED, write="apply_response",
         state_fields={"status": "ok", "etag": '"new"', "last_modified": "Tue, 2 Jan 2024",
                       "body_digest": "d2", "body_entries": 5, "error_count": 0,
                       "next_due_at": sent(HOUR), "last_success_at": STARTED},
         report_fields={"http_status": 200, "skipped": 1, "warnings": ("w",)},
         record_fields={"outcome": "fetched", "skipped": 1, "duration_ms": 2000.0}),
    Case("fetched, but the document was cut short: its entries stored, its validators not",
         resp(200, FRESH, body_digest="d2"), replace(PARSED, incomplete=True),
         write="apply_response",
         state_fields={"status": "ok", "etag": '"old"', "last_modified": "Mon, 1 Jan 2024",
                       "body_digest": "d1", "body_entries": 12, "error_count": 0,
                       "last_success_at": STARTED},
         record_fields={"outcome": "fetched"}),
    Case("fetched, the feed's ttl stretches the interval",
         resp(200, body_digest="d2"), replace(PARSED, ttl_seconds=3 * 3600),
         write="apply_response", state_fields={"ttl_seconds": 10800,
                                               "next_due_at": sent(3 * HOUR)}),
    Case("not_modified keeps validators it does not repeat", resp(304, {"etag": '"e2"'}),
         status="not_modified", state_fields={"etag": '"e2"', "last_modified":
                                              "Mon, 1 Jan 2024", "body_digest": "d1"},
         report_fields={"http_status": 304, "next_due": sent(HOUR)},
         record_fields={"outcome": "not_modified", "http_status": 304}),
    # A 200's caching headers are remembered; a 304 that repeats none keeps them in
    # force (RFC 9111 §4.3.4): it was polled again after min_interval, not max-age.
    Case("fetched, its max-age remembered for the 304s after it",
         resp(200, {"cache-control": "max-age=7200", "date": HTTP_DATE}, body_digest="d2"),
         PARSED, write="apply_response",
         state_fields={"cache_headers": (("cache-control", "max-age=7200"),),
                       "next_due_at": sent(2 * HOUR)}),
    Case("not_modified without Cache-Control keeps the stored max-age", resp(304),
         state=replace(STORED, cache_headers=(("cache-control", "max-age=7200"),)),
         status="not_modified",
         state_fields={"cache_headers": (("cache-control", "max-age=7200"),),
                       "next_due_at": sent(2 * HOUR)}),
    Case("not_modified with its own Cache-Control replaces the stored one",
         resp(304, {"cache-control": "max-age=10800"}),
         state=replace(STORED, cache_headers=(("cache-control", "max-age=7200"),
                                              ("expires", HTTP_DATE))),
         status="not_modified",
         state_fields={"cache_headers": (("cache-control", "max-age=10800"),
                                         ("expires", HTTP_DATE)),
                       "next_due_at": sent(3 * HOUR)}),
    Case("not_modified: a stored Expires counts against the 304's own Date",
         resp(304, {"date": "Wed, 02 Dec 2026 13:00:00 GMT"}),
         state=replace(STORED, cache_headers=(("expires", HTTP_DATE),)),
         status="not_modified", state_fields={"next_due_at": sent(2 * HOUR)}),
    Case("cut short, its caching headers are not kept with the old validators",
         resp(200, {"cache-control": "max-age=60"}, body_digest="d2"),
         replace(PARSED, incomplete=True), write="apply_response", state=replace(
             STORED, cache_headers=(("cache-control", "max-age=7200"),)),
         state_fields={"cache_headers": (("cache-control", "max-age=7200"),)}),
    Case("a 200 without caching headers forgets the stored ones",
         resp(200, body_digest="d1"), state=replace(
             STORED, cache_headers=(("cache-control", "max-age=7200"),)),
         state_fields={"cache_headers": (), "next_due_at": sent(HOUR)}),
    Case("moved by 301", resp(200, FRESH, permanent_url=NEW_URL, url=NEW_URL,
                              body_digest="d2"), PARSED, status="moved",
         write="apply_response",
         state_fields={"fetch_url": NEW_URL, "moved_to": NEW_URL, "status": "moved",
                       "url": URL}, report_fields={"moved_to": NEW_URL},
         record_fields={"url": NEW_URL, "outcome": "moved"}),
    Case("moved by 308, body unchanged", resp(200, FRESH, permanent_url=NEW_URL,
                                             body_digest="d1"),
         status="moved", state_fields={"moved_to": NEW_URL}, report_fields={"unchanged": 12}),
    # Reported as moved by the run that was redirected, not by every later one (cron
    # mailed the same "moved" line on every poll); the source stays moved.
    Case("a 304 after a move", resp(304),
         state=replace(STORED, fetch_url=NEW_URL, moved_to=NEW_URL, status="moved"),
         status="not_modified", state_fields={"status": "moved", "fetch_url": NEW_URL},
         report_fields={"moved_to": NEW_URL, "http_status": 304}),
    # A 301 whose target fails is not where the feed lives: it was adopted, the
    # configured address never asked again, and the error did not say where it came from.
    Case("301 to a page that is not there", resp(404, permanent_url=NEW_URL, url=NEW_URL),
         status="failed",
         state_fields={"fetch_url": "", "moved_to": "", "status": "failed"},
         report_fields={"moved_to": "",
                        "error": f"HTTP 404 Not Found (answered at {NEW_URL}, permanently "
                                 f"redirected from {URL})"}),
    Case("301 to a feed that is not a feed", resp(200, FRESH, permanent_url=NEW_URL,
                                                  url=NEW_URL, body_digest="d2"),
         ParseFacts(error="not an RSS or Atom feed"), status="rejected",
         state_fields={"fetch_url": "", "moved_to": ""}),
    Case("301 to a gone page", resp(410, permanent_url=NEW_URL, url=NEW_URL),
         status="gone", state_fields={"fetch_url": "", "gone": True}),
    Case("gone", resp(410), status="gone",
         state_fields={"gone": True, "next_due_at": None, "http_status": 410},
         report_fields={"http_status": 410}, record_fields={"outcome": "gone", "error": ""}),
    Case("retry_later: 429 with seconds", resp(429, {"retry-after": "120"}),
         status="retry_later",
         # The server's floor, under the first failure's backoff (min_interval).
         state_fields={"retry_after": at(120), "next_due_at": sent(HOUR), "error_count": 1},
         report_fields={"retry_after": at(120), "error": None},
         record_fields={"error": "HTTP 429 Too Many Requests"}),
    Case("failed: 503 without Retry-After backs off like any 5xx",
         resp(503), status="failed",
         state_fields={"error_count": 1, "next_due_at": sent(HOUR), "retry_after": None},
         report_fields={"http_status": 503, "error": "HTTP 503 Service Unavailable"}),
    Case("failed: 429 without Retry-After backs off", resp(429), status="failed",
         state_fields={"error_count": 1, "next_due_at": sent(HOUR)},
         report_fields={"http_status": 429, "error": "HTTP 429 Too Many Requests"}),
    Case("retry_later: 503 with a maintenance page says its title",
         resp(503, {"retry-after": "120"}, page_title="Down for maintenance"),
         status="retry_later",
         state_fields={"last_error": "HTTP 503 Service Unavailable: a web page titled "
                                     "'Down for maintenance'"},
         report_fields={"error": "HTTP 503 Service Unavailable: a web page titled "
                                 "'Down for maintenance'"},
         record_fields={"error": "HTTP 503 Service Unavailable: a web page titled "
                                 "'Down for maintenance'"}),
    Case("retry_later: 503 with an HTTP date", resp(503, {"retry-after": HTTP_DATE}),
         status="retry_later",
         state_fields={"retry_after": STARTED + dt.timedelta(hours=3)},
         report_fields={"http_status": 503, "retry_after": STARTED + dt.timedelta(hours=3)}),
    Case("rejected: not a feed", resp(200, FRESH, body_digest="d2"),
         ParseFacts(error="not an RSS or Atom feed"), status="rejected",
         # Nothing advances: the validators and digest stay, so the body is asked again.
         state_fields={"etag": '"old"', "body_digest": "d1", "error_count": 1,
                       "last_error": "not an RSS or Atom feed", "next_due_at": sent(HOUR)},
         report_fields={"error": "not an RSS or Atom feed", "http_status": 200},
         record_fields={"outcome": "rejected", "error": "not an RSS or Atom feed"}),
    Case("rejected: contradiction", resp(200, body_digest="d2"),
         ParseFacts(error="two versions (key k1, remote id 'r1'); the response is rejected"),
         status="rejected",
         report_fields={"error": "two versions (key k1, remote id 'r1'); the response is "
                                 "rejected"}),
    Case("failed: network error", FetchFailure(URL, "connection refused", "connect"),
         status="failed",
         state_fields={"http_status": None, "error_count": 1, "next_due_at": sent(HOUR)},
         report_fields={"http_status": None, "error": "connection refused"},
         record_fields={"http_status": None, "bytes": 0, "error": "connection refused"}),
    Case("failed: 404", resp(404), status="failed",
         report_fields={"error": "HTTP 404 Not Found", "http_status": 404}),
    Case("failed: 500", resp(500), status="failed",
         state_fields={"last_error": "HTTP 500 Internal Server Error"}),
    Case("failed: a status without a phrase", resp(599), status="failed",
         report_fields={"error": "HTTP 599"}),
    Case("failed: 403 with a bot check's page", resp(403, page_title="Just a moment..."),
         status="failed",
         report_fields={"error": "HTTP 403 Forbidden: a web page titled 'Just a moment...'"}),
    Case("failed: a page title that repeats the status", resp(404, page_title="404 Not Found"),
         status="failed", report_fields={"error": "HTTP 404 Not Found"}),
    Case("failed: a page titled by the phrase alone", resp(403, page_title="forbidden"),
         status="failed", report_fields={"error": "HTTP 403 Forbidden"}),
    Case("failed: a title with the status and filler only",
         resp(404, page_title="Error 404 (Not Found)!!1"), status="failed",
         report_fields={"error": "HTTP 404 Not Found"}),
    Case("failed: a title that says more than its status",
         resp(400, page_title="400 No required SSL certificate was sent"), status="failed",
         report_fields={"error": "HTTP 400 Bad Request: a web page titled "
                                 "'400 No required SSL certificate was sent'"}),
    Case("failed: 206 to a request that asked for no range",
         resp(206, FRESH, body_digest="d2"), status="failed",
         report_fields={"error": "HTTP 206 Partial Content to a request without Range: "
                                 "only part of the document was sent", "http_status": 206},
         state_fields={"error_count": 1, "body_digest": "d1", "etag": '"old"'}),
    Case("failed: a redirect without an address", resp(302), status="failed",
         report_fields={"error": "HTTP 302 Found without a Location header"}),
    Case("failed: a 300 is not followed, but says where it points",
         resp(300, {"location": "https://example.org/rss"}), status="failed",
         report_fields={"error": "HTTP 300 Multiple Choices: not followed (it points to "
                                 "'https://example.org/rss')"}),
    Case("failed: a 304 to a request that sent no validators",
         resp(304), state=replace(STORED, etag="", last_modified=""), status="failed",
         report_fields={"error": "HTTP 304 Not Modified to a request without validators "
                                 "(no If-None-Match or If-Modified-Since was sent): the "
                                 "server sent no feed", "http_status": 304},
         state_fields={"error_count": 1, "body_digest": "d1"},
         record_fields={"outcome": "failed", "http_status": 304}),
    Case("failed again: a redirect not followed backs off like any failure",
         resp(302), state=replace(STORED, error_count=2), status="failed",
         state_fields={"error_count": 3, "next_due_at": sent(4 * HOUR)}),
    Case("failed again: a 304 to nothing backs off too",
         resp(304), state=replace(STORED, etag="", last_modified="", error_count=2),
         status="failed", state_fields={"error_count": 3, "next_due_at": sent(4 * HOUR)}),
    Case("identical body: unchanged counts, validators still stored",
         resp(200, FRESH, body_digest="d1"),
         state_fields={"etag": '"new"', "last_modified": "Tue, 2 Jan 2024",
                       "body_digest": "d1", "body_entries": 12},
         report_fields={"unchanged": 12, "created": 0}, record_fields={"unchanged": 12}),
    Case("identical body: what its parse skipped is reported again",
         resp(200, body_digest="d1"),
         state=replace(STORED, body_skipped=2, body_skip_reasons=("no id (2 entries)",)),
         state_fields={"body_skipped": 2},
         report_fields={"skipped": 2, "skip_reasons": ("no id (2 entries)",)},
         record_fields={"skipped": 2, "skip_reasons": ("no id (2 entries)",)}),
    Case("moved by 301 to a feed that answers 304", resp(304, permanent_url=NEW_URL,
                                                         url=NEW_URL),
         status="moved", state_fields={"fetch_url": NEW_URL, "moved_to": NEW_URL},
         report_fields={"moved_to": NEW_URL, "http_status": 304},
         record_fields={"outcome": "moved", "url": NEW_URL}),
    Case("gone after a 301: the error says where", resp(410, permanent_url=NEW_URL,
                                                        url=NEW_URL),
         status="gone", state_fields={"fetch_url": ""},
         report_fields={"error": "the server answered 410 Gone; not polled until 'signal "
                                 f"sources --reset s' (answered at {NEW_URL}, permanently "
                                 f"redirected from {URL})"}),
    # Backoff steps: each consecutive failure doubles the wait from min_interval, up to
    # the cap (or min_interval when that is longer); jitter stretches it by up to a
    # quarter, never past the cap.
    Case("backoff: first failure waits min_interval", resp(500), status="failed",
         state_fields={"error_count": 1, "next_due_at": sent(HOUR)}),
    Case("backoff: third failure waits four times as long", resp(500),
         state=replace(STORED, error_count=2), status="failed",
         state_fields={"error_count": 3, "next_due_at": sent(4 * HOUR)}),
    Case("backoff: the twentieth failure waits the cap", resp(500),
         state=replace(STORED, error_count=19), status="failed",
         state_fields={"error_count": 20, "next_due_at": sent(DEFAULT_BACKOFF_CAP)}),
    Case("backoff: a network error counts", FetchFailure(URL, "timeout"),
         state=replace(STORED, error_count=1), status="failed",
         state_fields={"error_count": 2, "next_due_at": sent(2 * HOUR)},
         report_fields={"http_status": None, "error": "timeout"}),
    Case("backoff: a success resets it", resp(304), state=replace(STORED, error_count=5),
         status="not_modified", state_fields={"error_count": 0, "last_error": "",
                                              "next_due_at": sent(HOUR)}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_after_fetch(case: Case) -> None:
    decision = decider().after_fetch(case.state, case.response, case.parsed)
    assert decision.report.status == case.status
    assert decision.report.source == "s"
    assert decision.write == case.write
    assert decision.state.status == (case.status if case.status in ("failed", "rejected",
                                                                     "retry_later", "gone")
                                     else "moved" if decision.state.moved_to else "ok")
    for name, value in case.state_fields.items():
        assert getattr(decision.state, name) == value, name
    for name, value in case.report_fields.items():
        assert getattr(decision.report, name) == value, name
    assert decision.record is not None
    assert decision.record.started_at == STARTED and decision.record.source_id == "s"
    assert decision.state.last_fetch_at == STARTED
    for name, value in case.record_fields.items():
        assert getattr(decision.record, name) == value, name


def test_the_decider_asks_for_the_parse_only_for_a_changed_success() -> None:
    d = decider()
    assert d.must_parse(STORED, resp(200, body_digest="d2"))
    assert not d.must_parse(STORED, resp(200, body_digest="d1"))
    # Parsed under other rules: the identical body is parsed again.
    assert decider(normalizer_version=8).must_parse(STORED, resp(200, body_digest="d1"))
    assert not d.must_parse(STORED, resp(304))
    assert not d.must_parse(STORED, resp(500, body_digest="d2"))
    assert not d.must_parse(STORED, resp(206, body_digest="d2"))
    with pytest.raises(ValueError, match="parse facts"):
        d.after_fetch(STORED, resp(200, body_digest="d2"))


def test_a_refresh_asks_unconditionally_so_a_304_is_a_failure() -> None:
    # --refresh sends no validators: a 304 to it names no stored copy to keep.
    decision = decider(refresh=True).after_fetch(STORED, resp(304))
    assert decision.report.status == "failed"
    assert "without validators" in (decision.report.error or "")
    # Either validator alone makes the request conditional.
    for state in (replace(STORED, etag=""), replace(STORED, last_modified="")):
        assert decider().after_fetch(state, resp(304)).report.status == "not_modified"


def test_a_200_that_repeats_the_etag_asked_about_keeps_only_the_date() -> None:
    # Apache's mod_deflate: the tag sent back is ignored, the whole feed comes again.
    apache = {"etag": '"old"', "last-modified": "Tue, 2 Jan 2024"}
    for body, parsed in (("d1", None), ("d2", PARSED)):
        decision = decider().after_fetch(STORED, resp(200, apache, body_digest=body), parsed)
        assert (decision.state.etag, decision.state.last_modified) == ("", "Tue, 2 Jan 2024")
        assert any("If-Modified-Since alone" in w for w in decision.report.warnings)
    # Compared weakly, as If-None-Match is.
    weak = decider().after_fetch(STORED, resp(200, {**apache, "etag": 'W/"old"'},
                                              body_digest="d1"))
    assert weak.state.etag == ""
    # Kept: a new tag; no date to ask by; a --refresh, which sent no tag at all.
    kept = [decider().after_fetch(STORED, resp(200, FRESH, body_digest="d1")),
            decider().after_fetch(STORED, resp(200, {"etag": '"old"'}, body_digest="d1")),
            decider(refresh=True).after_fetch(STORED, resp(200, apache, body_digest="d2"),
                                              PARSED)]
    assert [d.state.etag for d in kept] == ['"new"', '"old"', '"old"']
    assert not any(d.report.warnings for d in kept[:2])


def test_counts_and_store_failures_complete_the_report() -> None:
    decision = decider().after_fetch(STORED, resp(200, body_digest="d2"), PARSED)
    done = decision.with_counts(ApplyCounts(created=3, updated=1, unchanged=1))
    assert (done.created, done.updated, done.unchanged, done.skipped) == (3, 1, 1, 1)
    failed = decision.store_failed("database is locked")
    assert (failed.status, failed.http_status, failed.error) == (
        "failed", 200, "database is locked")


# -- before the request ------------------------------------------------------------------

@pytest.mark.parametrize(("name", "state", "kw", "status", "fields"), [
    ("new source: go", SourceState("s", URL), {}, None, {}),
    ("due: go", replace(STORED, next_due_at=at(-1)), {}, None, {}),
    ("not_due", replace(STORED, next_due_at=at(61)), {}, "not_due", {"next_due": at(61)}),
    # A cron job a moment earlier than the last: due (a minute at most, or a twentieth
    # of min_interval), not one whole cron period late.
    ("due a minute early: go", replace(STORED, next_due_at=at(60)), {}, None, {}),
    ("not_due with a short interval", replace(STORED, next_due_at=at(10)),
     {"min_interval": 60.0}, "not_due", {"next_due": at(10)}),
    ("not_due, forced: go", replace(STORED, next_due_at=at(600)), {"force": True}, None, {}),
    # min_interval raised from an hour to six since the last poll was scheduled: the
    # next cron run after the hour polled it anyway, an hour after the last request.
    ("min_interval raised since the last poll: not_due until it has passed",
     replace(STORED, last_fetch_at=at(-HOUR), next_due_at=at(-1)),
     {"min_interval": 6 * HOUR}, "not_due", {"next_due": at(5 * HOUR)}),
    ("min_interval raised, forced: go",
     replace(STORED, last_fetch_at=at(-HOUR), next_due_at=at(-1)),
     {"min_interval": 6 * HOUR, "force": True}, None, {}),
    ("reset (no next poll stored): go, however recent the last poll",
     replace(STORED, last_fetch_at=at(-60), next_due_at=None), {}, None, {}),
    ("gone", replace(STORED, gone=True, http_status=410), {"force": True}, "gone",
     {"http_status": 410}),
    ("retry_later pending", replace(STORED, retry_after=at(60), next_due_at=at(60)), {},
     "retry_later", {"retry_after": at(60), "note": ""}),
    ("retry_later pending, forced", replace(STORED, retry_after=at(60)), {"force": True},
     "retry_later", {"note": "--force does not override Retry-After"}),
    ("retry_after passed: go", replace(STORED, retry_after=at(-60)), {}, None, {}),
    ("expired", STORED, {"expired": True, "review_by": dt.date(2026, 1, 1),
                         "owner": "ana@example.org"}, "expired",
     {"error": "review date 2026-01-01 has passed (owner ana@example.org); renew the "
               "approval to fetch it again"}),
    ("expired, forced, gone: expired", replace(STORED, gone=True),
     {"force": True, "expired": True, "review_by": dt.date(2026, 1, 1)}, "expired", {}),
], ids=lambda v: v if isinstance(v, str) and " " in v else "")
def test_before_fetch(name: str, state: SourceState, kw: dict[str, Any], status: str | None,
                      fields: dict[str, Any]) -> None:
    review = {k: kw.pop(k) for k in ("expired", "review_by", "owner") if k in kw}
    decision = decider(now=NOW, **kw).before_fetch(state, **review)
    if status is None:
        assert decision is None
        return
    assert isinstance(decision, Decision)
    assert (decision.report.status, decision.write, decision.record) == (status, "nothing",
                                                                        None)
    assert decision.state == state
    for key, value in fields.items():
        assert getattr(decision.report, key) == value, key


def test_expired_wins_over_everything_and_names_the_owner() -> None:
    decision = decider(force=True).before_fetch(
        replace(STORED, gone=True), expired=True, review_by=dt.date(2026, 1, 1),
        owner="ana@example.org")
    assert decision is not None and decision.report.status == "expired"
    assert "2026-01-01" in decision.report.error and "ana@example.org" in decision.report.error


# -- due, but not requested after all (nothing written) -----------------------------------

@pytest.mark.parametrize(("name", "decide", "status", "fields"), [
    ("leased by another worker", lambda d: d.leased(STORED), "leased",
     {"note": "another worker holds its lease", "error": None}),
    ("host paused in this run: says why",
     lambda d: d.host_paused(STORED, until=at(600), why="not requested: h answered 429",
                             told_this_run=True), "retry_later",
     {"retry_after": at(600), "note": "not requested: h answered 429", "http_status": None}),
    ("host paused in an earlier run: quiet",
     lambda d: d.host_paused(STORED, until=at(600), why="not requested: h answered 429",
                             told_this_run=False), "retry_later",
     {"retry_after": at(600), "note": ""}),
    ("host paused in an earlier run, under --force: says so, as its own Retry-After does",
     lambda d: decider(force=True).host_paused(
         STORED, until=at(600), why="not requested: h answered 429 to a with Retry-After",
         told_this_run=False), "retry_later",
     {"note": "--force does not override Retry-After (h answered 429 to a with Retry-After)"}),
    ("host slots held by a stopped worker", lambda d: d.host_held(STORED, "slots held"),
     "failed", {"error": "slots held", "http_status": None}),
], ids=lambda v: v if isinstance(v, str) and " " in v else "")
def test_not_requested(name: str, decide: Any, status: str, fields: dict[str, Any]) -> None:
    decision = decide(decider())
    assert (decision.report.status, decision.write, decision.record) == (status, "nothing",
                                                                        None)
    assert decision.state == STORED  # no backoff, nothing stored
    for key, value in fields.items():
        assert getattr(decision.report, key) == value, key


# -- backoff -------------------------------------------------------------------------------

def _fail(state: SourceState, jitter: float = 0.0) -> SourceState:
    return decider(jitter=jitter).after_fetch(state, resp(500)).state


def test_consecutive_failures_double_the_wait_capped_and_a_success_resets() -> None:
    state = STORED
    waits = []
    for _ in range(8):
        state = _fail(state)
        assert state.next_due_at is not None
        waits.append((state.next_due_at - STARTED).total_seconds())
    assert waits == [min(HOUR * 2 ** i, DEFAULT_BACKOFF_CAP) for i in range(8)]
    assert waits[-1] == DEFAULT_BACKOFF_CAP and state.error_count == 8
    # Jitter stretches a step by up to a quarter, never past the cap.
    stretched = _fail(replace(STORED, error_count=1), jitter=0.5)
    assert stretched.next_due_at == sent(2 * HOUR * 1.125)
    assert _fail(replace(STORED, error_count=20), jitter=0.99).next_due_at == sent(
        DEFAULT_BACKOFF_CAP)
    # A network error counts as a failure too.
    assert decider().after_fetch(state, FetchFailure(URL, "timeout")).state.error_count == 9
    ok = decider().after_fetch(state, resp(304)).state
    assert (ok.error_count, ok.last_error, ok.next_due_at) == (0, "", sent(HOUR))
