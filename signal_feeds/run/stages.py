"""The three stages of a run, joined by bounded queues: fetch -> parse -> write.

- **fetch**: one task per source. It asks the decider whether the source is due, claims
  it (a lease, so that other workers on the database leave it alone: see
  :mod:`signal_feeds.run.claims`), takes a slot of the source's host and one of the
  run's ``concurrency`` slots, reserves room in the parse queue, and downloads. A
  response that needs no parsing (304, an identical body, an error) is decided at once
  and goes to the write queue.
- **parse**: as many tasks as the parser pool has processes. Each takes a body from the
  parse queue, reserves room in the write queue (parsing waits while parsed rows wait
  for the writer), parses in a worker process, and queues what the decider makes of it.
- **write**: :class:`~signal_feeds.run.writer.WriteStage`, one thread, many writes per
  commit.

The two :class:`~signal_feeds.run.queues.StageQueue` limits are the run's memory bound.
What each response means is decided by :class:`~signal_feeds.decide.decider.Decider`;
this module only carries its decisions out.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from signal_feeds.config.source_list import Config, Source
from signal_feeds.decide.decider import Decider, Decision, FetchFailure, ParseFacts
from signal_feeds.decide.order import spread_by_host
from signal_feeds.decide.report import Progress, SourceReport
from signal_feeds.decide.validators import sent_validators
from signal_feeds.errors import (
    ConfigError,
    DatabaseUnavailableError,
    FetchError,
    ResourceLimitError,
    SignalError,
    StoreError,
    shown,
)
from signal_feeds.http.clients import Clients
from signal_feeds.http.fetch import FetchLimits, FetchResponse, fetch
from signal_feeds.http.slots import HostSlots, HostSlotsHeld
from signal_feeds.identity.keys import EntryRow, Identified
from signal_feeds.limits import stop_if_refused
from signal_feeds.offload import in_thread
from signal_feeds.parse.processes import ParseJob, ParseOutcome, ParserPool
from signal_feeds.parse.rows import NORMALIZER_VERSION
from signal_feeds.parse.settings import ParseSettings
from signal_feeds.records import SourceState
from signal_feeds.run.claims import Claims, lease_trouble
from signal_feeds.run.facts import response_facts
from signal_feeds.run.host_pauses import HostPaused, HostPauses
from signal_feeds.run.queues import StageQueue
from signal_feeds.run.run_hold import RunHold
from signal_feeds.run.writer import Write, WriteStage
from signal_feeds.run.written import releasing, report_when_written
from signal_feeds.store.leases import worker_id
from signal_feeds.store.protocol import FeedStore

__all__ = ["DEFAULT_PARSE_QUEUE_BYTES", "DEFAULT_WRITE_QUEUE_BYTES", "Run"]

log = logging.getLogger("signal_feeds.run")

#: Memory that downloaded bodies may hold while they wait for a parser (downloads under
#: way included), counted at :data:`COST_PER_BODY_BYTE`; new requests wait beyond it.
DEFAULT_PARSE_QUEUE_BYTES = 8 * 1024 * 1024
#: Memory that parsed responses may hold while they wait for the writer; parsing waits
#: beyond it.
DEFAULT_WRITE_QUEUE_BYTES = 8 * 1024 * 1024
#: What a response costs while it waits, per byte of body: the body, and the rows parsed
#: from it, which take about two and a half times the body's size as Python objects
#: (measured on the benchmark corpus: 220 KB of RSS or Atom, 560 KB of rows).
COST_PER_BODY_BYTE = 4
# What a download is assumed to cost until the first bodies have arrived.
_FIRST_GUESS = COST_PER_BODY_BYTE * 64 * 1024
# A write without rows (a 304, a failure): a state row and a fetch row.
_SMALL_WRITE = 1024


@dataclass(frozen=True)
class _Downloaded:
    """A body waiting in the parse queue."""

    source: Source
    state: SourceState
    response: FetchResponse
    started: dt.datetime
    report: asyncio.Future[SourceReport]


class Run:
    """One run over ``sources``: :meth:`execute` returns their reports in order."""

    def __init__(self, config: Config, store: FeedStore, sources: Sequence[Source], *,
                 force: bool, clock: Callable[[], dt.datetime], clients: Clients,
                 parser: ParserPool, progress: Callable[[Progress], None] | None,
                 refresh: bool = False, owner: str | None = None,
                 started_at: dt.datetime | None = None) -> None:
        self.config = config
        #: When the run began: what it stores is first seen then (see
        #: :func:`signal_feeds.store.protocol.first_seen_stamp`).
        self.started_at = started_at or clock()
        self.store = store
        self.sources = sources
        #: ``--refresh``: unconditional requests, and every body parsed again.
        self.refresh = refresh
        self.force = force or refresh
        self.clock = clock
        self.clients = clients
        self.parser = parser
        self.progress = progress
        self.done = self.failed = 0
        #: Sources whose write (if any) is not queued yet: the writer's "more may come".
        self.unqueued = len(sources)
        self.in_flight: dict[str, float] = {}
        self.slots = asyncio.Semaphore(config.settings.concurrency)
        #: The worker id this run's leases carry.
        self.owner = owner or worker_id()
        self.gate = store.host_gate()
        # A worker stopped while holding a host's slots shared by the database (its
        # connection or file lock lives as long as it does) would hold up every other
        # worker's requests to that host for good: the wait ends a lease and a minute
        # later (two leases, when a lease is under a minute).
        lease = config.settings.lease_seconds
        self.host_slots = HostSlots(
            config.settings.per_host, gate=self.gate, max_gate_wait=lease + min(lease, 60.0),
            refusal=lambda host: self.host_pauses.refusal(host, self.clock()))
        self.host_pauses = HostPauses()
        # Until the first bodies have arrived, a download is assumed to cost
        # _FIRST_GUESS, or less when that would keep some of the run's slots idle: the
        # first requests all go out at once.
        self.parse_queue: StageQueue[_Downloaded] = StageQueue(
            DEFAULT_PARSE_QUEUE_BYTES,
            first_guess=min(_FIRST_GUESS,
                            DEFAULT_PARSE_QUEUE_BYTES // max(1, config.settings.concurrency)))
        self.write_queue: StageQueue[Write] = StageQueue(
            DEFAULT_WRITE_QUEUE_BYTES, first_guess=_FIRST_GUESS)
        self.writer = WriteStage(store, self.write_queue, remaining=lambda: self.unqueued)
        #: Claimed sources whose write gives their lease back.
        self.released_by_write: set[str] = set()
        self.claims = Claims(store, self.writer.call, owner=self.owner,
                             lease_seconds=config.settings.lease_seconds,
                             chunk=config.settings.concurrency, force=self.force,
                             clock=clock)

    def _start_of_run(self) -> dict[str, SourceState]:
        """The state of every source of the config, not only the run's: a run over a
        few must not ask a host that one of the others was told to leave alone."""
        states = self.store.source_states_for(
            {s.id: s.url for s in (*self.config.sources, *self.sources)})
        self.store.set_source_order([s.id for s in self.config.sources])
        return states

    async def execute(self) -> list[SourceReport]:
        """Run the stages until every source has its report."""
        # One query for every source's state, and the config's order of the sources (ties
        # between copies of a story go to the one listed first), on a thread of Signal's
        # own: another program's lock on the database must not block an embedding
        # program's event loop. From here on the writer's thread uses the store, and a
        # short-lived thread gives the leases back at the end.
        every = await in_thread(self._start_of_run)
        self.host_pauses = HostPauses.from_states(every.values(), self.clock())
        states = {s.id: every[s.id] for s in self.sources}
        writing = asyncio.create_task(self.writer.run())
        claiming = asyncio.create_task(self.claims.run())
        parsing = [asyncio.create_task(self._parse_stage())
                   for _ in range(self.parser.workers)]
        # Started, so claimed, with each host spread over the run (a host's run of sources
        # in the config would fill every claim: decide/order.py); reported in order.
        hosts = [urlsplit(states[s.id].request_url).hostname or "" for s in self.sources]
        made = {i: asyncio.ensure_future(self._source(self.sources[i], states[self.sources[i].id]))
                for i in spread_by_host(hosts)}
        sourcing = [made[i] for i in range(len(self.sources))]
        reports = asyncio.gather(*sourcing)
        try:
            # The stages run until the queues close; one that ends before every source
            # has its report has failed, and waiting on would hang the run.
            watched: list[asyncio.Future[Any]] = [reports, writing, *parsing]
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
            if not reports.done():
                broken = next(t for t in (writing, *parsing) if t.done())
                reports.cancel()
                if not broken.cancelled() and isinstance(
                        stopped := broken.exception(), ResourceLimitError):
                    raise stopped  # a limit too low: the run's one line names it
                raise RuntimeError("a stage of the run ended early") from (
                    None if broken.cancelled() else broken.exception())
            return list(reports.result())
        except BaseException:
            # Stopped (Ctrl-C, a caller's timeout) or broken: a document being parsed is
            # abandoned, not parsed to the end and stored after the stop, and so are the
            # responses waiting to be written (their sources are fetched again next run).
            for parse_task in parsing:
                parse_task.cancel()
            self.writer.stop()
            raise
        finally:
            # Cancelled (Ctrl-C) or broken: the sources stop fetching now, and their
            # cancellation is collected here rather than reported as never retrieved.
            # (Each task is cancelled itself: a gather that one task's error has ended
            # no longer cancels the others.)
            for source_task in sourcing:
                source_task.cancel()
            await asyncio.gather(reports, *sourcing, return_exceptions=True)
            claiming.cancel()
            await asyncio.gather(claiming, return_exceptions=True)
            self.parse_queue.close()
            await asyncio.gather(*parsing, return_exceptions=True)
            self.write_queue.close()
            try:
                await writing
            finally:
                await in_thread(self._end_of_run)

    def _end_of_run(self) -> None:
        """Give back whatever lease is still held (a write that did not commit), and
        the host slots."""
        try:
            self.store.release_sources(None, owner=self.owner)
        except StoreError as exc:  # they expire instead
            lease_trouble(exc, "could not release the leases of %s", self.owner)
        finally:
            self.gate.close()

    # -- fetch ----------------------------------------------------------------------

    async def _source(self, src: Source, state: SourceState) -> SourceReport:
        t0 = time.monotonic()
        try:
            rep = await self._fetch_stage(src, state)
        except (DatabaseUnavailableError, ConfigError, ResourceLimitError):
            # The database went away (or may not be written), or the setup is wrong (CA
            # certificates that cannot be loaded, a limit too low): not this source's
            # failure; every later one would fail the same. The run stops with it.
            raise
        except SignalError as exc:  # a store failure outside apply_response
            rep = SourceReport(source=src.id, status="failed", error=exc.message)
        except Exception as exc:  # never let one source end the run; but a thread or a
            stop_if_refused(exc)  # descriptor refused (ulimit -u, -n) fails every one
            log.exception("unexpected error for source %s", src.id)
            rep = SourceReport(source=src.id, status="failed", error=_internal_error(exc))
        # The source's own time, from its request going out to its outcome written (as
        # the fetch row's): the wait for a slot before that is the run's, not the
        # source's, and would make every queued source look slow.
        rep = replace(rep, duration=time.monotonic() - self.in_flight.get(src.id, t0))
        if src.id in self.released_by_write:
            self.claims.finished(src.id)
        elif src.id in self.claims.held:  # ended without a write that gave the lease back
            # Not requested as its host asked for a pause: due after it, not before (or
            # another worker on the database fetches it meanwhile).
            paused = rep.status == "retry_later" and rep.http_status is None
            await self.claims.release(src.id, not_before=rep.retry_after if paused else None)
        self.in_flight.pop(src.id, None)
        self.done += 1
        if rep.status in ("failed", "rejected"):
            self.failed += 1
        if self.progress is not None:
            flying = tuple(sorted(self.in_flight, key=self.in_flight.__getitem__))
            self.progress(Progress(self.done, len(self.sources), self.failed, flying, rep))
        return rep

    async def _not_claimed(self, src: Source) -> SourceReport:
        """The report of a source another worker holds, or has fetched meanwhile."""
        store = self.store
        state = await self.writer.call(lambda: store.source_state(src.id, src.url))
        decider = self._decider(src)
        skip = decider.before_fetch(state, expired=src.is_expired(decider.now.date()),
                                    review_by=src.review_by, owner=src.owner)
        self.unqueued -= 1
        return (skip or decider.leased(state)).report

    def _decider(self, src: Source, started: dt.datetime | None = None) -> Decider:
        settings = self.config.effective(src)
        now = self.clock()
        return Decider(source_id=src.id, now=now, started=started or now,
                       min_interval=settings.min_interval, max_interval=settings.max_interval,
                       jitter=random.random(), force=self.force, refresh=self.refresh,
                       normalizer_version=NORMALIZER_VERSION)

    def _parse_settings(self, src: Source) -> ParseSettings:
        return ParseSettings.from_settings(self.config.effective(src))

    async def _fetch_stage(self, src: Source, state: SourceState) -> SourceReport:
        decider = self._decider(src)
        skip = decider.before_fetch(state, expired=src.is_expired(decider.now.date()),
                                    review_by=src.review_by, owner=src.owner)
        if skip is not None:
            self.unqueued -= 1
            return skip.report
        try:
            claimed = await self.claims.take(src.id, src.url)
        except BaseException:
            self.unqueued -= 1
            raise
        if claimed is None:
            return await self._not_claimed(src)
        # The state as stored when the lease was taken: another worker may have
        # fetched the source since the run read it.
        state = claimed
        decider = self._decider(src)
        skip = decider.before_fetch(state, expired=src.is_expired(decider.now.date()),
                                    review_by=src.review_by, owner=src.owner)
        if skip is not None:
            self.unqueued -= 1
            return skip.report
        url = state.request_url
        limits = FetchLimits.from_settings(self.config.effective(src))
        # The host's slot is taken before a global one: a source waiting for its host
        # must not hold a slot other hosts could use. Redirects move the host slot to
        # each hop's host (inside fetch).
        try:
            return await self._request(src, state, url, limits)
        except HostPaused as exc:  # the host, or one it redirects to, asked for a pause
            self.claims.fetched(src.id)
            self.unqueued -= 1
            return self._decider(src).host_paused(
                state, until=exc.pause.until, why=str(exc),
                told_this_run=not exc.pause.earlier).report
        except HostSlotsHeld as exc:
            self.claims.fetched(src.id)
            self.unqueued -= 1
            return self._decider(src).host_held(state, str(exc)).report

    async def _request(self, src: Source, state: SourceState, url: str,
                       limits: FetchLimits) -> SourceReport:
        """Request, then hand the response on (to the parser, or straight to the writer)."""
        async with RunHold(self.slots, self.parse_queue) as run_hold, self.host_slots.hold(
                urlsplit(url).hostname or "", besides=run_hold) as host_hold:
            await run_hold.take()  # later requests wait here while bodies wait for parsers
            self.in_flight[src.id] = time.monotonic()
            # When the request goes out: the fetch row's time and duration are the
            # request's, not the wait for a slot before it.
            started = self.clock()
            etag, last_modified = sent_validators(state, refresh=self.refresh)
            try:
                response = await fetch(
                    self.clients, url, limits=limits, etag=etag, last_modified=last_modified,
                    source_id=src.id, host_hold=host_hold)
            except FetchError as exc:
                self.claims.fetched(src.id)
                run_hold.give_back()
                failure = FetchFailure(url, exc.message, exc.reason)
                return await self._write(self._decider(src, started).after_fetch(
                    state, failure))
            except (HostSlotsHeld, HostPaused, SignalError):  # not the source's failure
                raise
            except Exception as exc:  # a bug: see _crashed
                self.claims.fetched(src.id)
                run_hold.give_back()
                return await self._write(self._crashed(src, state, url, started, exc))
            reservation = run_hold.keep_reservation()
        # The body is in hand: the next source may be claimed while this one is parsed.
        self.claims.fetched(src.id)
        try:
            decider = self._decider(src, started)
            # On the decider's clock: the pause ends with the told source's Retry-After.
            self.host_pauses.note(urlsplit(response.url).hostname or "",
                                  status=response.status, headers=response.headers,
                                  now=decider.now, source_id=src.id)
            facts = response_facts(response, self._parse_settings(src))
            decision = (None if decider.must_parse(state, facts)
                        else decider.after_fetch(state, facts))
        except Exception as exc:
            decision = self._crashed(src, state, response.url, started, exc)
        if decision is not None:
            self.parse_queue.cancel(reservation)
            return await self._write(decision)
        report: asyncio.Future[SourceReport] = asyncio.get_running_loop().create_future()
        self.parse_queue.put(_Downloaded(src, state, response, started, report),
                             COST_PER_BODY_BYTE * len(response.body),
                             reservation=reservation)
        return await report

    # -- parse ----------------------------------------------------------------------

    async def _parse_stage(self) -> None:
        while (taken := await self.parse_queue.get()) is not None:
            item, cost = taken
            try:
                decision, rows, derived, size = await self._parse(item, cost)
            except Exception as exc:  # never leave a source without its report
                stop_if_refused(exc)  # but the run stops (see _source)
                decision, rows, derived, size = self._crashed(
                    item.source, item.state, item.response.url, item.started, exc), (), None, 0
            # The source's task waits for its write; this task parses on. The rows are
            # counted by the body they came from (the reservation was only a guess, and
            # an average of guesses would keep the bound from ever seeing a large feed).
            write_cost = max(_SMALL_WRITE, COST_PER_BODY_BYTE * len(item.response.body)
                             if rows else 0)
            self._queue_write(decision, rows, derived, write_cost,
                              reservation=size, report=item.report)

    async def _parse(self, item: _Downloaded, cost: int
                     ) -> tuple[Decision, Sequence[EntryRow], ParseOutcome | None, int]:
        """Parse one body; the body's cost stays counted until its rows are reserved."""
        size = await self.write_queue.reserve()
        try:
            src = item.source
            parsed = await self.parser.parse(ParseJob(
                source_id=src.id, body=item.response.body, url=item.response.url,
                content_type=item.response.headers.get("content-type", ""),
                settings=self._parse_settings(src)))
            self.parse_queue.done(cost)
            cost = 0
            identified = (parsed.identified if isinstance(parsed.identified, Identified)
                          else None)
            rows = identified.rows if identified is not None else ()
            facts = ParseFacts(
                entries=len(rows), skipped=identified.skipped if identified else 0,
                skip_reasons=identified.skip_reasons if identified else (),
                ttl_seconds=parsed.ttl_seconds, warnings=parsed.warnings,
                error=parsed.message,
                feed_title=parsed.feed_title, incomplete=parsed.incomplete)
            decision = self._decider(item.source, item.started).after_fetch(
                item.state, response_facts(item.response, self._parse_settings(src)), facts)
        except BaseException:  # the reservation would be lost to the rest of the run
            self.write_queue.cancel(size)
            self.parse_queue.done(cost)
            raise
        return decision, rows, parsed, size

    def _crashed(self, src: Source, state: SourceState, url: str, started: dt.datetime,
                 exc: Exception) -> Decision:
        """A bug met while fetching or deciding: the source fails and backs off like any
        failure, with a fetch row. Only reported, it stayed as it was (a new source with
        no errors), and the host was asked again on every run."""
        log.error("unexpected error for source %s", src.id, exc_info=exc)
        try:
            return self._decider(src, started).after_fetch(
                state, FetchFailure(url, _internal_error(exc)))
        except Exception as again:  # the bug is in the decider: report it, write nothing
            log.error("unexpected error deciding the failure of source %s", src.id,
                      exc_info=again)
            return Decision(state, SourceReport(source=src.id, status="failed",
                                                error=_internal_error(exc)))

    # -- write ----------------------------------------------------------------------

    def _queue_write(self, decision: Decision, rows: Sequence[EntryRow] = (),
                     derived: ParseOutcome | None = None,
                     cost: int = _SMALL_WRITE, *, reservation: int = 0,
                     report: asyncio.Future[SourceReport] | None = None
                     ) -> asyncio.Future[SourceReport]:
        """Queue what the decision says to write; ``report`` (a new future if not
        given) gets the source's report line once the write is committed."""
        loop = asyncio.get_running_loop()
        if report is None:
            report = loop.create_future()
        self.unqueued -= 1
        if decision.record is None or decision.write == "nothing":
            self.write_queue.cancel(reservation)
            report.set_result(decision.report)
            return report
        state, record, store = decision.state, decision.record, self.store
        write: Callable[[], Any]
        if decision.write == "save_attempt":
            def write() -> Any:
                return store.save_attempt(state, record)
        else:
            clock, seen_at = self.clock, self.started_at

            def write() -> Any:
                return store.apply_response(
                    state, rows, record, clock(),
                    match_keys=derived.match_keys if derived else None,
                    search_texts=derived.search_texts if derived else None,
                    seen_at=seen_at)
        apply = write
        if state.source_id in self.claims.held:
            apply = releasing(write, store, state.source_id, self.owner)
            self.released_by_write.add(state.source_id)
        written: asyncio.Future[Any] = loop.create_future()

        def settle(done: asyncio.Future[Any]) -> None:
            report_when_written(report, decision, done)

        written.add_done_callback(settle)
        self.write_queue.put(Write(apply, written), cost, reservation=reservation)
        return report

    async def _write(self, decision: Decision) -> SourceReport:
        return await self._queue_write(decision)


def _internal_error(exc: Exception) -> str:
    return f"internal error: {type(exc).__name__}: {shown(str(exc), 200)}"

