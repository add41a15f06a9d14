"""What one request means for a source: the new state, the fetch row, the report line and
what to write. Pure: plain data in, plain data out.

The run (:mod:`signal_feeds.run.pipeline`) does the I/O — fetch, parse, write — and asks
a :class:`Decider` at each step. The decider has no clock (``now`` and ``started`` are
fields), no randomness (the backoff ``jitter`` is a field) and no I/O, so every case is a
row in a table test.

Two questions, in order:

1. :meth:`Decider.before_fetch` — may the source be requested at all (expired, gone,
   a pending ``Retry-After``, not due)? ``None`` means go.
2. :meth:`Decider.after_fetch` — given the response facts (or the fetch failure) and,
   when :meth:`Decider.must_parse` says a body needs parsing, the parse facts: a
   :class:`Decision`.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from http import HTTPStatus
from typing import Literal
from urllib.parse import urlsplit

from signal_feeds.decide.report import SourceReport, SourceStatus
from signal_feeds.decide.schedule import (
    PollDecision,
    Status,
    check_due,
    due_slack,
    next_poll,
    parse_retry_after,
    scheduled_due,
)
from signal_feeds.decide.validators import ignored_etag_warning, kept_etag, sent_validators
from signal_feeds.errors import shown
from signal_feeds.records import ApplyCounts, FetchRecord, SourceState
from signal_feeds.urls import shown_url

__all__ = ["Decider", "Decision", "FetchFailure", "ParseFacts", "ResponseFacts", "Write",
           "gone_message"]

#: What the run writes for a decision: nothing (the source was not requested), the
#: state and fetch row alone, or those with the response's entries in one transaction.
Write = Literal["nothing", "save_attempt", "apply_response"]
#: How the run's reason for a request not made begins (``HostPaused``'s message).
_NOT_ASKED = "not requested: "


def gone_message(source_id: str) -> str:
    """The report's text for a source that answered 410."""
    return f"the server answered 410 Gone; not polled until 'signal sources --reset {source_id}'"


@dataclass(frozen=True)
class ResponseFacts:
    """What the decision needs of a final HTTP response (after redirects)."""

    status: int
    #: The URL that answered.
    url: str
    #: Header names lower-case.
    headers: Mapping[str, str]
    #: Where the source now lives after an unbroken run of 301/308 from the start, or "".
    permanent_url: str = ""
    #: What the body is remembered by: its SHA-256 with the parse settings
    #: (:meth:`signal_feeds.parse.settings.ParseSettings.input_digest`; "" for no body).
    body_digest: str = ""
    wire_bytes: int = 0
    #: The title of the HTML page an error status came with (a bot check, a login wall),
    #: "" when there is none.
    page_title: str = ""
    #: What the exchange got wrong that was worked around (a body cut in transit, a
    #: redirect to plain http): reported whatever the outcome.
    warnings: tuple[str, ...] = ()

    @property
    def etag(self) -> str:
        """The ``ETag`` exactly as sent, or ``""``."""
        return self.headers.get("etag", "")

    @property
    def last_modified(self) -> str:
        """The ``Last-Modified`` exactly as sent, or ``""``."""
        return self.headers.get("last-modified", "")


@dataclass(frozen=True)
class FetchFailure:
    """A request that produced no response: a network error, a timeout, a cap."""

    url: str
    message: str
    reason: str = ""


@dataclass(frozen=True)
class ParseFacts:
    """What parsing a body produced: the entry counts and feed hints, or an error whose
    ``error`` text is complete (a contradiction already names its key)."""

    entries: int = 0
    skipped: int = 0
    ttl_seconds: int | None = None
    warnings: tuple[str, ...] = ()
    error: str = ""
    #: Why entries were skipped (see :attr:`signal_feeds.identity.keys.Identified`).
    skip_reasons: tuple[str, ...] = ()
    #: The feed's own title, kept for exports ("" when it has none).
    feed_title: str = ""
    #: The document stopped before its end: its entries are stored, but it is not
    #: remembered as the feed's current version (see :meth:`Decider.after_fetch`).
    incomplete: bool = False


@dataclass(frozen=True)
class Decision:
    """What to store and report for one source in one run."""

    state: SourceState
    report: SourceReport
    write: Write = "nothing"
    #: The ``fetches`` row; ``None`` when nothing was requested.
    record: FetchRecord | None = None

    def with_counts(self, counts: ApplyCounts) -> SourceReport:
        """The report line once the store has said what the entries were."""
        return replace(self.report, created=counts.created, updated=counts.updated,
                       unchanged=counts.unchanged)

    def store_failed(self, message: str) -> SourceReport:
        """The report line when the write failed (nothing of the response was stored)."""
        return SourceReport(source=self.report.source, status="failed",
                            http_status=self.report.http_status, error=message)


@dataclass(frozen=True)
class Decider:
    """The decisions for one source at one moment, with its effective settings."""

    source_id: str
    #: The moment of the decision (end of the request, or before it for ``before_fetch``).
    now: dt.datetime
    #: When the request began: the fetch row's start and the state's ``last_fetch_at``.
    started: dt.datetime
    min_interval: float
    max_interval: float
    #: A number in [0, 1) that stretches backoff delays (random in a run, fixed in tests).
    jitter: float = 0.0
    force: bool = False
    #: ``--refresh``: the request went without validators, and every successful body is
    #: parsed, even one identical to the last stored.
    refresh: bool = False
    #: The parser's current normalizer version: a stored body digest counts only if the
    #: same rules parsed it.
    normalizer_version: int = 0

    # -- before the request --------------------------------------------------------------

    def before_fetch(self, state: SourceState, *, expired: bool = False,
                     review_by: dt.date | None = None, owner: str = "") -> Decision | None:
        """``None`` when the source may be requested now; else why not, as a decision
        that writes nothing."""
        sid = self.source_id
        if expired:
            who = f" (owner {owner})" if owner else ""
            return Decision(state, SourceReport(
                source=sid, status="expired",
                error=f"review date {review_by} has passed{who}; renew the approval to "
                      "fetch it again"))
        next_due = scheduled_due(next_due_at=state.next_due_at,
                                 last_fetch_at=state.last_fetch_at,
                                 min_interval=self.min_interval)
        due = check_due(now=self.now, gone=state.gone, next_due_at=next_due,
                        retry_after=state.retry_after, force=self.force,
                        slack=due_slack(self.min_interval))
        if due.status == "gone":
            return Decision(state, SourceReport(source=sid, status="gone",
                                                http_status=state.http_status,
                                                error=gone_message(sid)))
        if due.status == "retry_later":
            note = "--force does not override Retry-After" if self.force else ""
            return Decision(state, SourceReport(
                source=sid, status="retry_later", retry_after=due.until, next_due=due.until,
                note=note, moved_to=state.moved_to))
        if due.status == "not_due":
            return Decision(state, SourceReport(source=sid, status="not_due",
                                                next_due=due.until, moved_to=state.moved_to))
        return None

    # -- a due source that was not requested after all --------------------------------------
    # Nothing is written for these: the source's state stays as it was, so the next run
    # asks again (or waits, where a stored Retry-After says so).

    def leased(self, state: SourceState) -> Decision:
        """Another worker holds the source's lease (and has not fetched it yet)."""
        return Decision(state, SourceReport(source=self.source_id, status="leased",
                                            note="another worker holds its lease"))

    def host_paused(self, state: SourceState, *, until: dt.datetime | None, why: str,
                    told_this_run: bool) -> Decision:
        """The source's host (or one it redirects to) asked for a pause until ``until``
        (``None``: for the rest of the run, a 429 without ``Retry-After``).
        Told in this run, the report says ``why`` (a cron line); told earlier, it waits
        the pause out as quietly as the told source's own ``Retry-After``, and under
        ``--force`` says so as that one does (a forced run left it unasked without a
        word: no line, no note, one more ``retry_later`` in the summary)."""
        note = why if told_this_run else ""
        if self.force and not told_this_run:
            note = f"--force does not override Retry-After ({why.removeprefix(_NOT_ASKED)})"
        return Decision(state, SourceReport(source=self.source_id, status="retry_later",
                                            retry_after=until, note=note))

    def host_held(self, state: SourceState, why: str) -> Decision:
        """Another worker holds every slot of the source's host and gave none back in
        time: not the source's failure (no backoff), but the run's, and reported so."""
        return Decision(state, SourceReport(source=self.source_id, status="failed",
                                            error=why))

    # -- after the request ---------------------------------------------------------------

    def must_parse(self, state: SourceState, response: ResponseFacts) -> bool:
        """True for a success whose body differs from the last one stored (or was parsed
        under other rules): :meth:`after_fetch` then needs the parse facts."""
        return (200 <= response.status < 300 and response.status != 206
                and not self._same_body(state, response))

    def after_fetch(self, state: SourceState, response: ResponseFacts | FetchFailure,
                    parsed: ParseFacts | None = None) -> Decision:
        """The decision for a response (``parsed`` given when :meth:`must_parse`), or for
        a request that failed."""
        if isinstance(response, FetchFailure):
            return self._failed(state, None, response.url, response.message, "failed")
        status = response.status
        if status == 410:
            new = replace(state, status="gone", gone=True, http_status=410,
                          last_fetch_at=self.started, next_due_at=None, last_error="410 Gone")
            return self._save(new, "gone", response, http_status=410,
                              error=gone_message(self.source_id) + _where(state, response),
                              record_error="")
        if status in (429, 503) and parse_retry_after(
                response.headers.get("retry-after"), self.now,
                response.headers.get("date")) is not None:
            # Only a stated time makes these "later" (RFC 9110 10.2.3); a bare 429 or
            # 503 is a failure like any other 5xx: reported, exit 1, backed off.
            errors = state.error_count + 1
            poll = self._poll(status, response.headers, errors)
            said = _status_text(status, response.page_title)
            new = replace(state, status="retry_later", http_status=status,
                          last_fetch_at=self.started, error_count=errors,
                          next_due_at=poll.next_due_at, retry_after=poll.retry_after,
                          retry_host=urlsplit(response.url).hostname or "",
                          last_error=said)
            # The report says more than its status only when a page came with it (a
            # maintenance page, a bot check served as 503).
            return self._save(new, "retry_later", response, http_status=status,
                              error=said if response.page_title else "", record_error=said,
                              retry_after=poll.retry_after, moved_to=state.moved_to)
        if status == 304 and not any(sent_validators(state, refresh=self.refresh)):
            # A 304 answers a conditional request only (RFC 9110 15.4.5). This request
            # named no stored copy, so there is nothing to keep: taken for "no change",
            # a source never stored would stay empty, reported ok, for good.
            return self._failed(state, response, response.url,
                                "HTTP 304 Not Modified to a request without validators "
                                "(no If-None-Match or If-Modified-Since was sent): "
                                "the server sent no feed", "failed")
        if status == 304:
            # A 304 may carry fresh validators; keep the old ones it does not repeat. It
            # freshens the stored response's caching headers, and those it does not
            # repeat stay in force (RFC 9111 §4.3.4).
            state = _moved(state, response)
            freshened = {**dict(state.cache_headers), **response.headers}
            new = replace(self._succeeded(state, response, state.ttl_seconds, freshened),
                          etag=response.etag or state.etag,
                          last_modified=response.last_modified or state.last_modified,
                          cache_headers=_stored_cache_headers(freshened))
            return self._save(new, "moved" if _moves(state, response) else "not_modified",
                              response, http_status=304, moved_to=new.moved_to)
        if status == 206:
            # Part of a document answers a Range request (RFC 9110 15.3.7), which Signal
            # never sends: parsed, the part would be stored and the source reported ok.
            return self._failed(state, response, response.url,
                                "HTTP 206 Partial Content to a request without Range: "
                                "only part of the document was sent", "failed")
        if not 200 <= status < 300:
            error = _status_text(status, response.page_title)
            if 300 <= status < 400 and error == _status_text(status, ""):
                # Redirects that reach here are not followed: 300, 305, or any without
                # an address to go to; the address a 300 suggests helps fix the url.
                location = response.headers.get("location", "")
                error += (f": not followed (it points to {shown_url(location, 200)!r})"
                          if location else " without a Location header")
            elif status == 401:
                # A private feed: what the operator must know is that no login is sent.
                error += ": the feed asks for a login, and Signal sends none to a feed's server"
            return self._failed(state, response, response.url, error, "failed")
        return self._ok(state, response, parsed)

    def _ok(self, state: SourceState, response: ResponseFacts,
            parsed: ParseFacts | None) -> Decision:
        moved = _moved(state, response)  # taken only by the outcomes that succeed
        # Reported as moved by the run whose response was redirected for good; later
        # runs go to the new address and report what they did (``moved_to`` still says
        # where the source lives, and ``signal sources`` shows it as moved).
        outcome: SourceStatus = "moved" if _moves(state, response) else "fetched"
        # A server that sends back the very ETag it was asked about ignores it: asked by
        # date alone next time (see signal_feeds.decide.validators).
        etag = kept_etag(sent_validators(state, refresh=self.refresh)[0], response.etag,
                         response.last_modified)
        if etag != response.etag:
            response = replace(response, warnings=(*response.warnings,
                                                   ignored_etag_warning(response.etag)))
        if self._same_body(state, response):
            state = moved
            # Byte-identical to the stored body: nothing to parse, but keep the validators.
            new = replace(self._succeeded(state, response, state.ttl_seconds),
                          etag=etag, last_modified=response.last_modified,
                          cache_headers=_stored_cache_headers(response.headers))
            # Its skipped entries are still in it: reported as the parse reported them.
            return self._save(new, outcome, response, http_status=response.status,
                              unchanged=state.body_entries, moved_to=new.moved_to,
                              skipped=state.body_skipped,
                              skip_reasons=state.body_skip_reasons)
        if parsed is None:
            raise ValueError("a changed body needs its parse facts (see must_parse)")
        if parsed.error:
            return self._failed(state, response, response.url, parsed.error, "rejected")
        state = moved
        new = replace(self._succeeded(state, response, parsed.ttl_seconds),
                      etag=etag, last_modified=response.last_modified,
                      body_digest=response.body_digest,
                      body_normalizer_version=self.normalizer_version,
                      body_entries=parsed.entries, body_skipped=parsed.skipped,
                      body_skip_reasons=parsed.skip_reasons, ttl_seconds=parsed.ttl_seconds,
                      feed_title=parsed.feed_title or state.feed_title,
                      cache_headers=_stored_cache_headers(response.headers))
        if parsed.incomplete:
            # Cut short: its validators would earn a 304 for the whole document, whose
            # rest was never read. The stored ones are kept, so the next run asks again.
            new = replace(new, etag=state.etag, last_modified=state.last_modified,
                          body_digest=state.body_digest,
                          body_normalizer_version=state.body_normalizer_version,
                          body_entries=state.body_entries, body_skipped=state.body_skipped,
                          body_skip_reasons=state.body_skip_reasons,
                          cache_headers=state.cache_headers)
        return Decision(
            new,
            SourceReport(source=self.source_id, status=outcome, http_status=response.status,
                         skipped=parsed.skipped, skip_reasons=parsed.skip_reasons,
                         moved_to=new.moved_to, next_due=new.next_due_at,
                         warnings=response.warnings + parsed.warnings),
            "apply_response",
            self._record(response.url, outcome, response, skipped=parsed.skipped,
                         skip_reasons=parsed.skip_reasons))

    # -- helpers -------------------------------------------------------------------------

    def _same_body(self, state: SourceState, response: ResponseFacts) -> bool:
        return bool(not self.refresh and response.body_digest
                    and response.body_digest == state.body_digest
                    and state.body_normalizer_version == self.normalizer_version)

    def _poll(self, status: Status, headers: Mapping[str, str], error_count: int,
              ttl: int | None = None) -> PollDecision:
        return next_poll(now=self.now, status=status, headers=headers,
                         error_count=error_count, min_interval=self.min_interval,
                         max_interval=self.max_interval, ttl_seconds=ttl, jitter=self.jitter,
                         sent=self.started)

    def _succeeded(self, state: SourceState, response: ResponseFacts, ttl: int | None,
                   headers: Mapping[str, str] | None = None) -> SourceState:
        poll = self._poll(response.status, response.headers if headers is None else headers,
                          0, ttl)
        return replace(state, status="moved" if state.moved_to else "ok",
                       http_status=response.status, last_fetch_at=self.started,
                       last_success_at=self.started, error_count=0, last_error="",
                       next_due_at=poll.next_due_at, retry_after=None)

    def _failed(self, state: SourceState, response: ResponseFacts | None, url: str,
                error: str, status: SourceStatus) -> Decision:
        errors = state.error_count + 1
        http = response.status if response is not None else None
        # A rejected body backs off like a network error, whatever its (2xx) status; so
        # does a redirect not followed or a 304 to nothing (a 3xx schedules as success).
        poll_status: Status = (http if http is not None and status == "failed"
                               and http >= 400 else "error")
        poll = self._poll(poll_status, response.headers if response is not None else {},
                          errors)
        if response is not None:
            error += _where(state, response)
        new = replace(state, status=status, http_status=http, last_fetch_at=self.started,
                      error_count=errors, last_error=error, next_due_at=poll.next_due_at)
        return Decision(new, SourceReport(source=self.source_id, status=status,
                                          http_status=http, error=error,
                                          next_due=poll.next_due_at,
                                          warnings=response.warnings if response else ()),
                        "save_attempt", self._record(url, status, response, error=error))

    def _save(self, new: SourceState, outcome: SourceStatus, response: ResponseFacts, *,
              http_status: int, error: str = "", record_error: str | None = None,
              unchanged: int = 0, retry_after: dt.datetime | None = None,
              moved_to: str = "", skipped: int = 0,
              skip_reasons: tuple[str, ...] = ()) -> Decision:
        report = SourceReport(source=self.source_id, status=outcome, http_status=http_status,
                              unchanged=unchanged, error=error or None, retry_after=retry_after,
                              next_due=new.next_due_at, moved_to=moved_to,
                              warnings=response.warnings, skipped=skipped,
                              skip_reasons=skip_reasons)
        record = self._record(response.url, outcome, response,
                              error=error if record_error is None else record_error,
                              unchanged=unchanged, skipped=skipped,
                              skip_reasons=skip_reasons)
        return Decision(new, report, "save_attempt", record)

    def _record(self, url: str, outcome: str, response: ResponseFacts | None, *,
                error: str = "", skipped: int = 0, unchanged: int = 0,
                skip_reasons: tuple[str, ...] = ()) -> FetchRecord:
        return FetchRecord(
            source_id=self.source_id, started_at=self.started, url=url, outcome=outcome,
            http_status=response.status if response is not None else None, error=error,
            skipped=skipped, skip_reasons=skip_reasons, unchanged=unchanged,
            duration_ms=(self.now - self.started).total_seconds() * 1000,
            bytes=response.wire_bytes if response is not None else 0)


def _reason_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _status_text(status: int, page_title: str) -> str:
    """``HTTP 503 Service Unavailable``, with the title of the page that came with it
    when the title says more than the status (``: a web page titled 'Just a moment...'``).
    """
    phrase = _reason_phrase(status)
    said = f"HTTP {status} {phrase}".strip()
    # What is left of the title without the status, its phrase and the usual filler
    # ("Error 404 (Not Found)!!1", "404 - Not Found", "HTTP 503"): nothing, then it
    # only repeats the status; "400 No required SSL certificate was sent" says more.
    rest = page_title.casefold().replace(phrase.casefold(), " ") if phrase else page_title
    rest = re.sub(rf"\b(?:{status}|http|error)\b", " ", rest.casefold())
    if re.search(r"[^\W\d_]", rest):
        said += f": a web page titled {page_title!r}"
    return said


def _moves(state: SourceState, response: ResponseFacts) -> bool:
    """Whether ``response`` moved the source for good to an address other than the one
    its source list gives (a moved feed redirected back to it is not moved any more)."""
    return bool(response.permanent_url) and response.permanent_url != state.url


def _moved(state: SourceState, response: ResponseFacts) -> SourceState:
    """``state`` at the address a permanent redirect gave, taken once a response from
    there succeeds: a 301 to a page that fails is not where the feed lives."""
    if not response.permanent_url:
        return state
    if not _moves(state, response):
        return replace(state, fetch_url="", moved_to="")
    return replace(state, fetch_url=response.permanent_url, moved_to=response.permanent_url)


def _where(state: SourceState, response: ResponseFacts) -> str:
    """For an error that came from another address than the one asked: which."""
    if response.url == state.request_url:
        return ""
    kind = "permanently " if response.permanent_url else ""
    return (f" (answered at {shown(response.url, 200)}, {kind}redirected from "
            f"{state.request_url})")


#: The headers of a response that say how long it stays fresh (``Date`` and ``Age``
#: belong to each response: a 304's own, or the moment it came, count).
_CACHE_HEADERS = ("cache-control", "expires")


def _stored_cache_headers(headers: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """What a state keeps of a response's caching headers, for the 304s after it."""
    return tuple((name, headers[name]) for name in _CACHE_HEADERS if name in headers)
