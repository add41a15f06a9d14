"""One run over the source list: due? -> fetch -> parse -> identify -> store -> report.

Sources are fetched concurrently over httpx (:mod:`signal_feeds.http`), with a global
limit and a per-host limit that every redirect hop counts against; parsing happens in
worker processes; the store is written from one thread of its own
(:mod:`signal_feeds.run.writer`), each response under its own savepoint and many
responses per commit. A failure is reported for its source and the run goes on. What
each response means (state, fetch row, report line, what to write) is decided by
:class:`signal_feeds.decide.decider.Decider`; this module does the I/O.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from signal_feeds.config.source_list import Config, Source
from signal_feeds.decide.decider import (
    Decider,
    Decision,
    FetchFailure,
    ParseFacts,
    ResponseFacts,
)
from signal_feeds.decide.report import RunReport, SourceReport
from signal_feeds.errors import ConfigError, FetchError, SignalError, StoreError
from signal_feeds.http.clients import Clients, SharedClient, TransportPool, new_client
from signal_feeds.http.fetch import FetchLimits, FetchResponse, Resolver, fetch
from signal_feeds.http.slots import HostSlots
from signal_feeds.identity.keys import EntryRow, Identified
from signal_feeds.identity.matching import MatchKeys
from signal_feeds.parse.processes import ParseJob, ParserPool
from signal_feeds.parse.rows import NORMALIZER_VERSION
from signal_feeds.parse.settings import ParseSettings
from signal_feeds.records import SourceState
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

    def _decider(self, src: Source, started: dt.datetime | None = None) -> Decider:
        settings = self.config.effective(src)
        now = self.clock()
        return Decider(source_id=src.id, now=now, started=started or now,
                       min_interval=settings.min_interval, max_interval=settings.max_interval,
                       jitter=random.random(), force=self.force,
                       normalizer_version=NORMALIZER_VERSION)

    async def _source(self, src: Source) -> SourceReport:
        state = self.states[src.id]
        decider = self._decider(src)
        skip = decider.before_fetch(state, expired=src.is_expired(decider.now.date()),
                                    review_by=src.review_by, owner=src.owner)
        if skip is not None:
            return skip.report
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
                return await self._carry_out(self._decider(src, started).after_fetch(
                    state, FetchFailure(url, failure.message, failure.reason)))
        try:
            return await self._handle(src, state, response, started)
        finally:
            self.backlog.refund(size)

    async def _handle(self, src: Source, state: SourceState, response: FetchResponse,
                      started: dt.datetime) -> SourceReport:
        """Parse the body if the decider needs it, then carry out its decision."""
        facts = _response_facts(response)
        decider = self._decider(src, started)
        if not decider.must_parse(state, facts):
            return await self._carry_out(decider.after_fetch(state, facts))
        # Parsed rows take more memory than their body: when the writer falls behind,
        # parsing waits rather than piling them up.
        size = await self.unstored.take(len(response.body))
        try:
            parsed = await self.parser.parse(ParseJob(
                source_id=src.id, body=response.body, url=response.url,
                content_type=response.headers.get("content-type", ""),
                settings=ParseSettings.from_settings(self.config.effective(src))))
            identified = parsed.identified if isinstance(parsed.identified, Identified) \
                else None
            rows = identified.rows if identified is not None else ()
            facts_parsed = ParseFacts(
                entries=len(rows), skipped=identified.skipped if identified else 0,
                skip_reasons=identified.skip_reasons if identified else (),
                ttl_seconds=parsed.ttl_seconds, warnings=parsed.warnings,
                error=parsed.message)
            decision = self._decider(src, started).after_fetch(state, facts, facts_parsed)
            return await self._carry_out(decision, rows, parsed.match_keys)
        finally:
            self.unstored.refund(size)

    async def _carry_out(self, decision: Decision, rows: Sequence[EntryRow] = (),
                         match_keys: Mapping[str, MatchKeys] | None = None) -> SourceReport:
        """Write what the decision says; return its report line."""
        if decision.record is None or decision.write == "nothing":
            return decision.report
        record = decision.record
        if decision.write == "save_attempt":
            await self.writer.call(lambda: self.store.save_attempt(decision.state, record))
            return decision.report
        try:
            now = self.clock()
            counts = await self.writer.call(
                lambda: self.store.apply_response(decision.state, rows, record, now,
                                                  match_keys=match_keys))
        except StoreError as exc:
            return decision.store_failed(exc.message)
        return decision.with_counts(counts)


def _response_facts(response: FetchResponse) -> ResponseFacts:
    return ResponseFacts(status=response.status, url=response.url, headers=response.headers,
                         permanent_url=response.permanent_url,
                         body_digest=response.body_digest, wire_bytes=response.wire_bytes)


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
        # The write lock is taken once on opening, off the event loop: a database another
        # program holds fails here, after the busy timeout, before any source is fetched.
        store = await asyncio.to_thread(Store, db_path,
                                        busy_timeout=config.settings.busy_timeout,
                                        check_writable=True)
        with store:
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
                config: Config | None = None) -> Iterator[dict[str, Any]]:
    """Dry run over local files: parse and identify each in a worker process.

    With ``config``, the files are read with the effective settings of the source
    ``source_id`` when the config has it (and its URL resolves relative links, as the
    response's URL does in a fetch), else with the config's ``[settings]``; without
    one, with the defaults. The parse settings reach the parser exactly as in
    :func:`run_fetch`, so the rows are the rows a fetch of the same bytes would store.
    Yields one JSON-ready dict per file: ``{"file", "ok": True, "entries", "skipped",
    "skipped_reasons", "warnings"}`` or ``{"file", "ok": False, "error"}``. Nothing is
    stored.
    """
    settings, base = ParseSettings(), ""
    if config is not None:
        known = {s.id: s for s in config.sources}
        src = known.get(source_id)
        settings = ParseSettings.from_settings(
            config.effective(src) if src is not None else config.settings)
        base = src.url if src is not None else ""
    pool = ParserPool()
    try:
        for path in paths:
            try:
                body = path.read_bytes()
            except OSError as exc:
                yield {"file": str(path), "ok": False, "error": f"cannot read: {exc.strerror}"}
                continue
            job = ParseJob(source_id=source_id, body=body, url=base, content_type="",
                           settings=settings)
            outcome = asyncio.run(pool.parse(job))
            if outcome.message or not isinstance(outcome.identified, Identified):
                yield {"file": str(path), "ok": False, "error": outcome.message}
                continue
            found = outcome.identified
            yield {"file": str(path), "ok": True, "skipped": found.skipped,
                   "skipped_reasons": list(found.skip_reasons),
                   "warnings": list(outcome.warnings),
                   "entries": [{"id": r.key, "remote_id": r.remote_id, "url": r.url,
                                "title": r.title, "published": r.published,
                                "updated": r.updated, "fingerprint": r.fingerprint}
                               for r in found.rows]}
    finally:
        pool.close()
