"""One source, one request: fetch -> parse -> identify -> store; and a run over all.

Since lesson 08 a source is asked only when it is due, and every answer (or the lack of
one) ends with a decision about when to ask again, which the store keeps for next time.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import httpx

from .config import Config, Source
from .errors import FetchError, SignalError
from .fetch import Limits, Validators, fetch
from .identity import Identified, identify
from .parse import parse_feed
from .report import Report, SourceResult
from .schedule import Decision, Policy, due, schedule
from .store import Counts, Store, stamp

DEFAULT_LIMITS = Limits()
DEFAULT_POLICY = Policy()
Normalize = Callable[[Identified], Identified]


def as_parsed(identified: Identified) -> Identified:
    """The normalizer in use: the rules of parse.py, version NORMALIZER_VERSION."""
    return identified


@dataclass(frozen=True)
class Update:
    """What happened to one source; ``outcome`` is one of the report's statuses."""

    source_id: str
    outcome: str
    http_status: int = 0
    counts: Counts = Counts()
    error: str = ""
    next_due: datetime | None = None
    retry_after: datetime | None = None
    moved_to: str = ""


def update_source(store: Store, client: httpx.Client, source_id: str, url: str,
                  limits: Limits = DEFAULT_LIMITS, *, normalize: Normalize = as_parsed,
                  conditional: bool = True, force: bool = False,
                  policy: Policy = DEFAULT_POLICY,
                  rand: Callable[[], float] = random.random) -> Update:
    """``conditional=False`` asks for the whole body, e.g. after the normalizer changed;
    ``force`` asks even when the schedule says not yet (never before a Retry-After)."""
    store.add_source(source_id, url)
    now = store.clock()
    state = store.source_state(source_id)
    answer = due(now, next_due=state.next_due, retry_after=state.retry_after,
                 gone=state.gone, force=force)
    if answer != "due":  # not asked at all: nothing to log, nothing to reschedule
        return Update(source_id, answer, next_due=state.next_due,
                      retry_after=state.retry_after)

    def decided(status: int | None, headers: dict[str, str] | None = None,
                moved_to: str = "") -> Decision:
        decision = schedule(now, status, headers, errors=state.errors, moved_to=moved_to,
                            policy=policy, rand=rand)
        store.save_schedule(source_id, decision)
        return decision

    validators = store.validators(source_id) if conditional else Validators()
    try:
        response = fetch(client, url, validators, limits)
    except FetchError as exc:
        store.failed(source_id, 0, "failed", str(exc))
        plan = decided(None)
        return Update(source_id, "failed", error=str(exc), next_due=plan.next_due)
    status = response.status
    if response.not_modified:
        store.not_modified(source_id, response.validators)
        plan = decided(status, response.headers, response.moved_to)
        outcome = "moved" if response.moved_to else "not_modified"
        return Update(source_id, outcome, status, next_due=plan.next_due,
                      moved_to=response.moved_to)
    if status != 200:
        plan = decided(status, response.headers)
        outcome = plan.status if plan.status in ("gone", "retry_later") else "failed"
        error = f"HTTP {status}"
        store.failed(source_id, status, outcome, error)
        return Update(source_id, outcome, status, error=error, next_due=plan.next_due,
                      retry_after=plan.retry_after)
    try:
        entries = parse_feed(response.body, content_type=response.content_type)
        identified = normalize(identify(source_id, entries))
    except SignalError as exc:
        # Rejected: the validators of this response are NOT saved, so the next
        # request asks without them and gets the whole body again.
        store.failed(source_id, status, "rejected", str(exc))
        plan = decided(None)  # a broken body is likely to stay broken: back off
        return Update(source_id, "rejected", status, error=str(exc), next_due=plan.next_due)
    counts = store.apply(identified, response.validators, http_status=status,
                         size=len(response.body))
    plan = decided(status, response.headers, response.moved_to)
    outcome = "moved" if response.moved_to else "fetched"
    return Update(source_id, outcome, status, counts, next_due=plan.next_due,
                  moved_to=response.moved_to)


def select(config: Config, only: Sequence[str] = ()) -> list[Source]:
    """The sources to run, in list order; an unknown id raises ConfigError."""
    wanted = {config.source(source_id).id for source_id in only}
    return [source for source in config.sources if not wanted or source.id in wanted]


def run(config: Config, store: Store, client: httpx.Client, *, only: Sequence[str] = (),
        limits: Limits = DEFAULT_LIMITS, force: bool = False, policy: Policy = DEFAULT_POLICY,
        clock: Callable[[], float] = time.monotonic) -> Report:
    """Every selected source, one after the other; one source's failure stops nothing."""
    report = Report()
    for source in select(config, only):
        started = clock()
        update = update_source(store, client, source.id, source.url, limits, force=force,
                               policy=policy)
        report.add(SourceResult(
            source=update.source_id, status=update.outcome,
            http_status=update.http_status or None,  # 0 means "no response at all"
            created=update.counts.created, updated=update.counts.updated,
            unchanged=update.counts.unchanged, skipped=update.counts.skipped,
            error=update.error or None, moved_to=update.moved_to or None,
            retry_after=update.retry_after and stamp(update.retry_after),
            next_due=update.next_due and stamp(update.next_due),
            duration=clock() - started,
        ))
    return report
