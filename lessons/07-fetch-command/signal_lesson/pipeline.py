"""One source, one request: fetch -> parse -> identify -> store; and a run over all."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from .config import Config, Source
from .errors import FetchError, SignalError
from .fetch import Limits, Validators, fetch
from .identity import Identified, identify
from .parse import parse_feed
from .report import Report, SourceResult
from .store import Counts, Store

DEFAULT_LIMITS = Limits()
Normalize = Callable[[Identified], Identified]


def as_parsed(identified: Identified) -> Identified:
    """The normalizer in use: the rules of parse.py, version NORMALIZER_VERSION."""
    return identified


@dataclass(frozen=True)
class Update:
    """What happened to one source: ``fetched``, ``not_modified``, ``rejected``, ``failed``."""

    source_id: str
    outcome: str
    http_status: int = 0
    counts: Counts = Counts()
    error: str = ""


def update_source(store: Store, client: httpx.Client, source_id: str, url: str,
                  limits: Limits = DEFAULT_LIMITS, *, normalize: Normalize = as_parsed,
                  conditional: bool = True) -> Update:
    """``conditional=False`` asks for the whole body, e.g. after the normalizer changed."""
    store.add_source(source_id, url)
    validators = store.validators(source_id) if conditional else Validators()
    try:
        response = fetch(client, url, validators, limits)
    except FetchError as exc:
        store.failed(source_id, 0, "failed", str(exc))
        return Update(source_id, "failed", error=str(exc))
    if response.not_modified:
        store.not_modified(source_id, response.validators)
        return Update(source_id, "not_modified", 304)
    if response.status != 200:
        error = f"HTTP {response.status}"
        store.failed(source_id, response.status, "failed", error)
        return Update(source_id, "failed", response.status, error=error)
    try:
        entries = parse_feed(response.body, content_type=response.content_type)
        identified = normalize(identify(source_id, entries))
    except SignalError as exc:
        # Rejected: the validators of this response are NOT saved, so the next
        # request asks without them and gets the whole body again.
        store.failed(source_id, response.status, "rejected", str(exc))
        return Update(source_id, "rejected", response.status, error=str(exc))
    counts = store.apply(identified, response.validators, http_status=response.status,
                         size=len(response.body))
    return Update(source_id, "fetched", response.status, counts)


def select(config: Config, only: Sequence[str] = ()) -> list[Source]:
    """The sources to run, in list order; an unknown id raises ConfigError."""
    wanted = {config.source(source_id).id for source_id in only}
    return [source for source in config.sources if not wanted or source.id in wanted]


def run(config: Config, store: Store, client: httpx.Client, *, only: Sequence[str] = (),
        limits: Limits = DEFAULT_LIMITS,
        clock: Callable[[], float] = time.monotonic) -> Report:
    """Every selected source, one after the other; one source's failure stops nothing."""
    report = Report()
    for source in select(config, only):
        started = clock()
        update = update_source(store, client, source.id, source.url, limits)
        report.add(SourceResult(
            source=update.source_id, status=update.outcome,
            http_status=update.http_status or None,  # 0 means "no response at all"
            created=update.counts.created, updated=update.counts.updated,
            unchanged=update.counts.unchanged, skipped=update.counts.skipped,
            error=update.error or None, duration=clock() - started,
        ))
    return report
