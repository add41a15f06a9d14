"""One run over the source list: due? -> fetch -> parse -> identify -> store -> report.

Sources are fetched concurrently over httpx (:mod:`signal_feeds.http`), with a global
limit and a per-host limit that every redirect hop counts against; parsing happens in
worker processes; the store is written from one thread of its own
(:mod:`signal_feeds.run.writer`), each response under its own savepoint and many
responses per commit. A failure is reported for its source and the run goes on.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from signal_feeds.config.source_list import Config, Source
from signal_feeds.decide.schedule import PollDecision, check_due, next_poll
from signal_feeds.errors import ConfigError, FetchError, SignalError, StoreError
from signal_feeds.http.clients import Clients, SharedClient, TransportPool, new_client
from signal_feeds.http.fetch import FetchLimits, FetchResponse, Resolver, fetch
from signal_feeds.http.slots import HostSlots
from signal_feeds.identity.keys import Identified
from signal_feeds.parse.processes import ParseJob, ParserPool
from signal_feeds.parse.rows import NORMALIZER_VERSION
from signal_feeds.records import FetchRecord, SourceState
from signal_feeds.run.report import RunReport, SourceReport, SourceStatus
from signal_feeds.run.writer import StoreWriter
from signal_feeds.store import Store
from signal_feeds.timeutil import format_time, utcnow

if TYPE_CHECKING:
    import ssl

    import httpx

__all__ = ["Progress", "fetch_sources", "parse_files", "run_fetch"]

log = logging.getLogger("signal_feeds")

@dataclass(frozen=True)
class Progress:
    """A snapshot for progress displays: called after each source finishes."""

    done: int
    total: int
    failed: int
    #: Source ids still being fetched, the longest-running first.
    in_flight: tuple[str, ...]
    last: SourceReport


class _Run:
    def __init__(self, config: Config, store: Store, *, force: bool,
                 clock: Callable[[], dt.datetime], clients: Clients,
                 parser: ParserPool, progress: Callable[[Progress], None] | None,
                 sources: Sequence[Source], writer: StoreWriter) -> None:
        self.config = config
        self.store = store
        self.writer = writer
        # One query for every source's state; from here on the writer thread alone uses
        # the connection.
        self.states = store.source_states_for({s.id: s.url for s in sources})
        self.force = force
        self.clock = clock
        self.clients = clients
        self.parser = parser
        self.progress = progress
        self.total = len(sources)
        self.done = 0
        self.failed = 0
        self.in_flight: dict[str, float] = {}
        self.slots = asyncio.Semaphore(config.settings.concurrency)
        self.backlog = _Backlog(DEFAULT_BACKLOG_BYTES)
        self.unstored = _Backlog(DEFAULT_UNSTORED_BYTES)
        self.host_slots = HostSlots(config.settings.per_host)

    async def source(self, src: Source) -> SourceReport:
        t0 = time.monotonic()
        try:
            rep = await self._source(src)
        except SignalError as exc:  # a store failure outside apply_response
            rep = SourceReport(source=src.id, status="failed", error=exc.message)
        except Exception as exc:  # never let one source end the run
            log.exception("unexpected error for source %s", src.id)
            rep = SourceReport(source=src.id, status="failed",
                               error=f"internal error: {type(exc).__name__}: {exc}")
        rep = replace(rep, duration=time.monotonic() - t0)
        self.in_flight.pop(src.id, None)
        self.done += 1
        if rep.status in ("failed", "rejected"):
            self.failed += 1
        if self.progress is not None:
            flying = tuple(sorted(self.in_flight, key=self.in_flight.__getitem__))
            self.progress(Progress(self.done, self.total, self.failed, flying, rep))
        return rep

    async def _source(self, src: Source) -> SourceReport:
        state = self.states[src.id]
        now = self.clock()
        if src.is_expired(now.date()):
            owner = f" (owner {src.owner})" if src.owner else ""
            return SourceReport(source=src.id, status="expired",
                                error=f"review date {src.review_by} has passed{owner}; "
                                      "renew the approval to fetch it again")
        due = check_due(now=now, gone=state.gone, next_due_at=state.next_due_at,
                        retry_after=state.retry_after, force=self.force)
        if due.status == "gone":
            return SourceReport(source=src.id, status="gone", http_status=state.http_status,
                                error="the server answered 410 Gone; not polled until "
                                      f"'signal sources --reset {src.id}'")
        if due.status == "retry_later":
            note = "--force does not override Retry-After" if self.force else ""
            return SourceReport(source=src.id, status="retry_later", retry_after=due.until,
                                next_due=due.until, note=note, moved_to=state.moved_to)
        if due.status == "not_due":
            return SourceReport(source=src.id, status="not_due", next_due=due.until,
                                moved_to=state.moved_to)
        settings = self.config.effective(src)
        url = state.request_url
        started = self.clock()
        # The host's limit is taken before a global slot: a source waiting for its host
        # must not hold one of the slots other hosts could use. Redirects move the host
        # slot to each hop's host (inside fetch).
        async with self.host_slots.hold(urlsplit(url).hostname or "") as host_hold, \
                self.slots:
            # Checked with the slot held: at the start of a run, nothing is downloaded
            # and every slot's request goes out; later ones wait here for room.
            reservation = await self.backlog.admit()
            self.in_flight[src.id] = time.monotonic()
            failure: FetchError | None = None
            try:
                response = await fetch(self.clients, url,
                                       limits=FetchLimits.from_settings(settings),
                                       etag=state.etag, last_modified=state.last_modified,
                                       source_id=src.id, host_hold=host_hold)
                size = self.backlog.charge(len(response.body))
            except FetchError as exc:
                failure = exc
            finally:
                self.backlog.release(reservation)
            if failure is not None:
                return await self._failed(src, state, started, None, failure.message, url)
        try:
            return await self._handle(src, state, response, started)
        finally:
            self.backlog.refund(size)

    def _decide(self, src: Source, status: int | str, headers: dict[str, str] | Any,
                error_count: int, ttl: int | None = None) -> PollDecision:
        settings = self.config.effective(src)
        return next_poll(now=self.clock(), status=status,  # type: ignore[arg-type]
                         headers=headers, error_count=error_count,
                         min_interval=settings.min_interval,
                         max_interval=settings.max_interval, ttl_seconds=ttl,
                         jitter=random.random())

    async def _failed(self, src: Source, state: SourceState, started: dt.datetime,
                      response: FetchResponse | None, error: str, url: str,
                      *, status: SourceStatus = "failed") -> SourceReport:
        errors = state.error_count + 1
        http = response.status if response else None
        decision = self._decide(src, http if http is not None and status == "failed"
                                else "error", response.headers if response else {}, errors)
        new = replace(state, status=status, http_status=http, last_fetch_at=started,
                      error_count=errors, last_error=error, next_due_at=decision.next_due_at)
        await self._save(new, self._record(
            src, started, url, status, response, error=error))
        return SourceReport(source=src.id, status=status, http_status=http, error=error,
                            next_due=decision.next_due_at)

    async def _save(self, state: SourceState, record: FetchRecord) -> None:
        await self.writer.call(lambda: self.store.save_attempt(state, record))

    def _record(self, src: Source, started: dt.datetime, url: str, outcome: str,
                response: FetchResponse | None, *, error: str = "", skipped: int = 0,
                unchanged: int = 0) -> FetchRecord:
        return FetchRecord(
            source_id=src.id, started_at=started, url=url, outcome=outcome,
            http_status=response.status if response else None, error=error, skipped=skipped,
            unchanged=unchanged,
            duration_ms=(self.clock() - started).total_seconds() * 1000,
            bytes=response.wire_bytes if response else 0)

    async def _handle(self, src: Source, state: SourceState, response: FetchResponse,
                      started: dt.datetime) -> SourceReport:
        moved = response.permanent_url
        if moved:
            state = replace(state, fetch_url=moved, moved_to=moved)
        status = response.status
        if status == 410:
            new = replace(state, status="gone", gone=True, http_status=410,
                          last_fetch_at=started, next_due_at=None,
                          last_error="410 Gone")
            await self._save(new,
                          self._record(src, started, response.url, "gone", response))
            return SourceReport(source=src.id, status="gone", http_status=410,
                                error="the server answered 410 Gone; not polled until "
                                      f"'signal sources --reset {src.id}'")
        if status in (429, 503):
            errors = state.error_count + 1
            decision = self._decide(src, status, response.headers, errors)
            new = replace(state, status="retry_later", http_status=status,
                          last_fetch_at=started, error_count=errors,
                          next_due_at=decision.next_due_at, retry_after=decision.retry_after,
                          last_error=f"HTTP {status}")
            await self._save(new, self._record(
                src, started, response.url, "retry_later", response, error=f"HTTP {status}"))
            return SourceReport(source=src.id, status="retry_later", http_status=status,
                                retry_after=decision.retry_after,
                                next_due=decision.next_due_at, moved_to=state.moved_to)
        if status == 304:
            return await self._not_modified(src, state, response, started)
        if not 200 <= status < 300:
            phrase = _reason_phrase(status)
            return await self._failed(src, state, started, response,
                                      f"HTTP {status} {phrase}".strip(), response.url)
        return await self._ok(src, state, response, started)

    def _succeeded(self, src: Source, state: SourceState, response: FetchResponse,
                   started: dt.datetime, ttl: int | None) -> SourceState:
        decision = self._decide(src, response.status, response.headers, 0, ttl)
        return replace(state, status="moved" if state.moved_to else "ok",
                       http_status=response.status, last_fetch_at=started,
                       last_success_at=started, error_count=0, last_error="",
                       next_due_at=decision.next_due_at, retry_after=None)

    async def _not_modified(self, src: Source, state: SourceState, response: FetchResponse,
                            started: dt.datetime) -> SourceReport:
        # A 304 may carry fresh validators; keep the old ones it does not repeat.
        new = replace(self._succeeded(src, state, response, started, state.ttl_seconds),
                      etag=response.etag or state.etag,
                      last_modified=response.last_modified or state.last_modified)
        outcome: SourceStatus = "moved" if new.moved_to else "not_modified"
        await self._save(new,
                      self._record(src, started, response.url, outcome, response))
        return SourceReport(source=src.id, status=outcome, http_status=304,
                            moved_to=new.moved_to, next_due=new.next_due_at)

    async def _ok(self, src: Source, state: SourceState, response: FetchResponse,
                  started: dt.datetime) -> SourceReport:
        outcome: SourceStatus = "moved" if state.moved_to else "fetched"
        if (response.body_digest and response.body_digest == state.body_digest
                and state.body_normalizer_version == NORMALIZER_VERSION):
            # Byte-identical to the stored body: nothing to parse, but keep the validators.
            new = replace(self._succeeded(src, state, response, started, state.ttl_seconds),
                          etag=response.etag, last_modified=response.last_modified)
            await self._save(new, self._record(
                src, started, response.url, outcome, response, unchanged=state.body_entries))
            return SourceReport(source=src.id, status=outcome,
                                http_status=response.status, unchanged=state.body_entries,
                                moved_to=new.moved_to, next_due=new.next_due_at)
        # Parsed rows take more memory than their body: when the writer falls behind,
        # parsing waits rather than piling them up.
        size = await self.unstored.take(len(response.body))
        try:
            return await self._parse_and_store(src, state, response, started, outcome)
        finally:
            self.unstored.refund(size)

    async def _parse_and_store(self, src: Source, state: SourceState,
                               response: FetchResponse, started: dt.datetime,
                               outcome: SourceStatus) -> SourceReport:
        settings = self.config.effective(src)
        parsed = await self.parser.parse(ParseJob(
            source_id=src.id, body=response.body, url=response.url,
            content_type=response.headers.get("content-type", ""),
            allow_http_links=settings.allow_http_links))
        if parsed.error or not isinstance(parsed.identified, Identified):
            error = parsed.error or "parser returned nothing"
            if parsed.kind == "contradiction":
                error = f"{error} (key {parsed.key}, remote id {parsed.remote_id!r})"
            return await self._failed(src, state, started, response, error, response.url,
                                      status="rejected")
        identified = parsed.identified
        new = replace(self._succeeded(src, state, response, started, parsed.ttl_seconds),
                      etag=response.etag, last_modified=response.last_modified,
                      body_digest=response.body_digest,
                      body_normalizer_version=NORMALIZER_VERSION,
                      body_entries=len(identified.rows), ttl_seconds=parsed.ttl_seconds)
        record = self._record(src, started, response.url, outcome, response,
                              skipped=identified.skipped)
        try:
            now = self.clock()
            counts = await self.writer.call(
                lambda: self.store.apply_response(new, identified.rows, record, now,
                                                  match_keys=parsed.match_keys))
        except StoreError as exc:
            return SourceReport(source=src.id, status="failed", http_status=response.status,
                                error=exc.message)
        return SourceReport(source=src.id, status=outcome,
                            http_status=response.status, created=counts.created,
                            updated=counts.updated, unchanged=counts.unchanged,
                            skipped=identified.skipped, moved_to=new.moved_to,
                            next_due=new.next_due_at, warnings=parsed.warnings)


#: Memory (bytes of downloaded bodies and of what parsing makes of them) that may wait
#: for the parsers and the writer, downloads under way included, before new requests
#: pause.
DEFAULT_BACKLOG_BYTES = 16 * 1024 * 1024
#: The part of that which may be parsing or parsed and waiting for the writer.
DEFAULT_UNSTORED_BYTES = 8 * 1024 * 1024
# A response's cost while it waits: the body, and the rows parsed from it, which take
# about two and a half times the body's size as Python objects (measured on the
# benchmark corpus: 220 KB of RSS or Atom, 560 KB of rows).
_COST_PER_BODY_BYTE = 4
# What a download under way is assumed to cost until the first bodies have arrived.
_FIRST_GUESS = _COST_PER_BODY_BYTE * 64 * 1024


class _Backlog:
    """Backpressure by memory: when parsing or writing falls behind downloading,
    bodies and parsed rows pile up in memory. New requests wait while what is waiting,
    plus a guess for each download under way (the mean cost so far), is over ``limit``
    bytes; downloads under way finish. Small bodies never reach it, so a run limited by
    slow servers keeps every connection slot busy."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0  # responses downloaded, not yet stored
        self.reserved = 0  # downloads under way
        self._charged = self._responses = 0
        self._below = asyncio.Event()  # set while used + reserved < limit
        self._below.set()

    async def admit(self) -> int:
        """Wait for room; returns the reservation to :meth:`release` when the download
        ends, however it ends."""
        await self._room()
        guess = self._charged // self._responses if self._responses else _FIRST_GUESS
        self.reserved += guess
        self._update()
        return guess

    def release(self, reservation: int) -> None:
        self.reserved -= reservation
        self._update()

    async def take(self, body_bytes: int) -> int:
        """Wait for room, then :meth:`charge` a body already in hand."""
        await self._room()
        return self.charge(body_bytes)

    def charge(self, body_bytes: int) -> int:
        """Count a downloaded body until :meth:`refund`; returns what was counted."""
        size = _COST_PER_BODY_BYTE * body_bytes
        self._charged += size
        self._responses += 1
        self.used += size
        self._update()
        return size

    def refund(self, size: int) -> None:
        self.used -= size
        self._update()

    async def _room(self) -> None:
        while self.used + self.reserved >= self.limit:
            await self._below.wait()

    def _update(self) -> None:
        if self.used + self.reserved < self.limit:
            self._below.set()
        else:
            self._below.clear()


def _reason_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _select(config: Config, source_ids: Sequence[str] | None) -> list[Source]:
    if not source_ids:
        return list(config.sources)
    known = {s.id for s in config.sources}
    unknown = [s for s in source_ids if s not in known]
    if unknown:
        raise ConfigError(f"unknown source id(s): {', '.join(unknown)}",
                          path=str(config.path) if config.path else None)
    wanted = set(source_ids)
    return [s for s in config.sources if s.id in wanted]


async def _run_async(config: Config, store: Store, sources: Sequence[Source],
                     clients: Clients, **options: Any) -> list[SourceReport]:
    async with StoreWriter(store) as writer:
        run = _Run(config, store, sources=sources, writer=writer, clients=clients, **options)
        # Each source makes at most one write: once every unfinished source's write is
        # in the open batch, nothing else can come, and the writer commits at once.
        writer.pending = lambda: run.total - run.done
        try:
            return list(await asyncio.gather(*(run.source(s) for s in sources)))
        finally:
            await clients.aclose()


def _clients(config: Config, *, client: httpx.AsyncClient | None,
             transport: httpx.AsyncBaseTransport | None, resolver: Resolver | None,
             ssl_context: ssl.SSLContext | None) -> Clients:
    if client is not None and transport is not None:
        raise ValueError("pass either an httpx client or a transport, not both")
    if client is not None:
        return SharedClient(client)  # the caller's: the caller closes it
    if transport is not None:
        return SharedClient(new_client(transport), owned=True)
    settings = config.settings
    return TransportPool(settings.concurrency, resolver=resolver, ssl_context=ssl_context,
                      proxy=settings.proxy)


async def fetch_sources(
    config: Config,
    *,
    database: str | Path | None = None,
    source_ids: Sequence[str] | None = None,
    force: bool = False,
    clock: Callable[[], dt.datetime] = utcnow,
    resolver: Resolver | None = None,
    progress: Callable[[Progress], None] | None = None,
    parser: ParserPool | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    client: httpx.AsyncClient | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> RunReport:
    """Fetch the due sources of ``config`` into the database, in the running event loop.

    ``database`` overrides the configured path; ``source_ids`` limits the run to those
    sources; ``force`` ignores the poll schedule (never a pending ``Retry-After``, never
    a gone source). HTTP goes through Signal's own httpx clients unless ``client`` (a
    ready ``httpx.AsyncClient``, left open) or ``transport`` (e.g. ``httpx.MockTransport``)
    is given; ``ssl_context`` replaces certifi's CA bundle and ``resolver`` the system's
    name resolution for Signal's clients. ``clock`` is injectable for tests.
    """
    sources = _select(config, source_ids)
    db_path = Path(database) if database is not None else config.settings.database
    started_at = clock()
    t0 = time.monotonic()
    clients = _clients(config, client=client, transport=transport, resolver=resolver,
                       ssl_context=ssl_context)
    own_parser = parser is None
    pool = parser or ParserPool()
    try:
        with Store(db_path) as store:
            reports = await _run_async(config, store, sources, clients, force=force,
                                       clock=clock, parser=pool, progress=progress)
    finally:
        if own_parser:
            pool.close()
    report = RunReport(sources=tuple(reports), started_at=started_at,
                       duration=time.monotonic() - t0, database=str(db_path))
    log.info("run finished at %s: %s", format_time(clock()), report.totals)
    return report


def run_fetch(
    config: Config,
    *,
    database: str | Path | None = None,
    source_ids: Sequence[str] | None = None,
    force: bool = False,
    clock: Callable[[], dt.datetime] = utcnow,
    resolver: Resolver | None = None,
    progress: Callable[[Progress], None] | None = None,
    parser: ParserPool | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    client: httpx.AsyncClient | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> RunReport:
    """:func:`fetch_sources` in an event loop of its own (for callers without one)."""
    return asyncio.run(fetch_sources(
        config, database=database, source_ids=source_ids, force=force, clock=clock,
        resolver=resolver, progress=progress, parser=parser, transport=transport,
        client=client, ssl_context=ssl_context))


def parse_files(paths: Sequence[Path], *, source_id: str = "local",
                allow_http_links: bool = True) -> Iterator[dict[str, Any]]:
    """Dry run over local files: parse and identify each in a worker process.

    Yields one JSON-ready dict per file: ``{"file", "ok": True, "entries", "skipped"}``
    or ``{"file", "ok": False, "error"}``. Nothing is stored.
    """
    pool = ParserPool()
    try:
        for path in paths:
            try:
                body = path.read_bytes()
            except OSError as exc:
                yield {"file": str(path), "ok": False, "error": f"cannot read: {exc.strerror}"}
                continue
            job = ParseJob(source_id=source_id, body=body, url="", content_type="",
                           allow_http_links=allow_http_links)
            outcome = asyncio.run(pool.parse(job))
            if outcome.error or not isinstance(outcome.identified, Identified):
                error = outcome.error or "parser returned nothing"
                if outcome.kind == "contradiction":
                    error = f"{error} (key {outcome.key}, remote id {outcome.remote_id!r})"
                yield {"file": str(path), "ok": False, "error": error}
                continue
            rows = outcome.identified.rows
            yield {"file": str(path), "ok": True, "skipped": outcome.identified.skipped,
                   "warnings": list(outcome.warnings),
                   "entries": [{"id": r.key, "remote_id": r.remote_id, "url": r.url,
                                "title": r.title, "published": r.published,
                                "updated": r.updated, "fingerprint": r.fingerprint}
                               for r in rows]}
    finally:
        pool.close()
