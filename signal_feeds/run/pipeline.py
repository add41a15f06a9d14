"""One run over the source list: due? -> fetch -> parse -> identify -> store -> report.

The public entry points: :func:`fetch_sources` (in the caller's event loop),
:func:`run_fetch` (its synchronous wrapper) and :func:`parse_files` (the dry run). The
run itself is three stages joined by bounded queues (:mod:`signal_feeds.run.stages`);
what each response means is decided by :class:`signal_feeds.decide.decider.Decider`. A
failure is reported for its source and the run goes on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import functools
import logging
import threading
import time
import weakref
from collections.abc import Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from signal_feeds.config.source_list import DEFAULT_MAX_BODY_BYTES, Config, Source
from signal_feeds.config.values import as_tuple
from signal_feeds.decide.report import Progress, RunReport
from signal_feeds.dsn import as_database, display_database
from signal_feeds.errors import ConfigError, FetchError, ResourceLimitError, did_you_mean
from signal_feeds.http.clients import Clients, DirectTransport, SharedClient, TransportPool
from signal_feeds.http.decoding import body_too_large, gunzipped_again
from signal_feeds.http.fetch import Resolver
from signal_feeds.identity.keys import Identified
from signal_feeds.limits import bounded_concurrency, refused
from signal_feeds.parse.processes import STARTING, ParseJob, ParserPool
from signal_feeds.parse.settings import ParseSettings
from signal_feeds.run.blocking import run_blocking
from signal_feeds.run.stages import Run
from signal_feeds.store import open_store
from signal_feeds.timeutil import format_time, utcnow

if TYPE_CHECKING:
    import ssl

    import httpx

    from signal_feeds.store.protocol import FeedStore

__all__ = ["Progress", "fetch_sources", "parse_files", "run_fetch"]

log = logging.getLogger("signal_feeds.run")


def _check_config(config: object, caller: str) -> None:
    """A path where the Config belongs was "'str' object has no attribute 'sources'".
    (A Config checks its own sources and settings when it is made.)"""
    if not isinstance(config, Config):
        raise TypeError(f"{caller} takes a Config, not {type(config).__name__} "
                        "(signal_feeds.load_config(path) reads one)")


def _select(config: Config, source_ids: Sequence[str] | None) -> list[Source]:
    # None is every source; an empty list is none (code that filters its ids down to
    # nothing must not fetch them all).
    if source_ids is None:
        return list(config.sources)
    # One id is not its letters ("unknown: d, a, t, e, s"); read once: a generator was
    # consumed by the check below and the run fetched nothing.
    source_ids = as_tuple(source_ids, str, "source_ids", "source ids (str)")
    known = {s.id for s in config.sources}
    unknown = [s for s in source_ids if s not in known]
    if unknown:
        hint = did_you_mean(unknown[0], known) if len(unknown) == 1 else ""
        raise ConfigError(f"unknown source id(s): {', '.join(unknown)}{hint}",
                          path=str(config.path) if config.path else None)
    wanted = set(source_ids)
    return [s for s in config.sources if s.id in wanted]


def _in_utc(clock: Callable[[], dt.datetime]) -> Callable[[], dt.datetime]:
    """The caller's clock, its times in UTC; a naive time is refused at once (it failed
    every source deep inside, each with a traceback)."""
    def now() -> dt.datetime:
        moment = clock()
        if moment.tzinfo is None or moment.utcoffset() is None:
            raise ValueError(f"the clock gave a naive datetime ({moment.isoformat()}); "
                             "it must say its time zone (e.g. datetime.now(timezone.utc))")
        return moment.astimezone(dt.UTC)

    return clock if clock is utcnow else now


async def _opened_beside(open_it: Callable[[], FeedStore]) -> FeedStore:
    """``open_it()`` on a thread of its own. Ctrl-C while it waits for a lock another
    program holds (up to ``busy_timeout``) stops the run at once: the thread is left to
    end its wait and close what it opened, where ``asyncio.to_thread``'s pool would be
    waited for when the event loop ends."""
    loop = asyncio.get_running_loop()
    opened: asyncio.Future[FeedStore] = loop.create_future()

    def deliver(store: FeedStore | None, error: BaseException | None) -> None:
        if opened.cancelled():
            if store is not None:
                store.close()
        elif error is not None:
            opened.set_exception(error)
        elif store is not None:
            opened.set_result(store)

    def work() -> None:
        store: FeedStore | None = None
        error: BaseException | None = None
        try:
            store = open_it()
        except BaseException as exc:  # noqa: BLE001  # handed to the waiting task
            error = exc
        try:
            loop.call_soon_threadsafe(deliver, store, error)
        except RuntimeError:  # the loop has closed: nobody waits for it any more
            if store is not None:
                store.close()

    threading.Thread(target=work, name="signal-open", daemon=True).start()
    return await opened


def _clients(config: Config, *, client: httpx.AsyncClient | None,
             transport: httpx.AsyncBaseTransport | None, resolver: Resolver | None,
             ssl_context: ssl.SSLContext | None) -> Clients:
    if client is not None and transport is not None:
        raise ValueError("pass either an httpx client or a transport, not both")
    if client is not None:
        return SharedClient(client)  # the caller's: the caller closes it
    if transport is not None:
        return DirectTransport(transport, owned=True)
    settings = config.settings
    return TransportPool(settings.concurrency, resolver=resolver, ssl_context=ssl_context,
                      proxy=settings.proxy)


async def fetch_sources(
    config: Config,
    *,
    database: str | Path | None = None,
    source_ids: Sequence[str] | None = None,
    force: bool = False,
    refresh: bool = False,
    clock: Callable[[], dt.datetime] = utcnow,
    resolver: Resolver | None = None,
    progress: Callable[[Progress], None] | None = None,
    parser: ParserPool | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    client: httpx.AsyncClient | None = None,
    ssl_context: ssl.SSLContext | None = None,
    worker: str | None = None,
) -> RunReport:
    """Fetch the due sources of ``config`` into the database, in the running event loop.

    ``database`` overrides the configured path; ``source_ids`` limits the run to those
    sources (``None``: every source; an empty list: none); ``force`` ignores the poll
    schedule (never a pending ``Retry-After``, never a gone source); ``refresh`` implies
    it, sends no validators and parses every body again, even one identical to the last
    stored (after a parse setting changed).

    HTTP goes through Signal's own httpx clients unless ``client`` (a ready
    ``httpx.AsyncClient``, left open) or ``transport`` (e.g. ``httpx.MockTransport``) is
    given; ``ssl_context`` replaces certifi's CA bundle and ``resolver`` the system's
    name resolution for Signal's clients. ``clock`` is injectable for tests.

    ``worker`` names this run in the leases it takes on the sources it fetches (see
    :mod:`signal_feeds.run.claims`; default ``host:pid:N``), so that several runs, on one
    host or many, share one database's due sources; runs at the same time need
    different names.
    """
    _check_config(config, "fetch_sources")
    sources = _select(config, source_ids)
    db_path = as_database(database) if database is not None else config.settings.database
    clock = _in_utc(clock)
    started_at = clock()
    t0 = time.monotonic()
    own_parser = parser is None
    try:
        pool = parser or ParserPool()
    except (OSError, RuntimeError, MemoryError) as exc:
        if (refusal := refused(exc, STARTING)) is None:
            raise
        raise refusal from exc
    try:
        # Each request in flight holds a socket: fewer at once than the open-file limit
        # leaves room for (a warning says so), not most of them failing.
        concurrency = bounded_concurrency(config.settings.concurrency)
    except ResourceLimitError:
        if own_parser:
            pool.close()
        raise
    if concurrency != config.settings.concurrency:
        config = dataclasses.replace(config, settings=dataclasses.replace(
            config.settings, concurrency=concurrency))
    clients = _clients(config, client=client, transport=transport, resolver=resolver,
                       ssl_context=ssl_context)
    try:
        # The write lock is taken once on opening, off the event loop: a database another
        # program holds fails here, after the busy timeout, before any source is fetched.
        store = await _opened_beside(functools.partial(
            open_store, db_path, busy_timeout=config.settings.busy_timeout,
            check_writable=True))
        with store:
            try:
                run = Run(config, store, sources, force=force, refresh=refresh, clock=clock,
                          clients=clients, parser=pool, progress=progress, owner=worker,
                          started_at=started_at)
                reports = await run.execute()
            finally:
                await clients.aclose()
    except ResourceLimitError:  # refused a thread or a descriptor midway (see below)
        pool.kill()
        raise
    except (OSError, RuntimeError, MemoryError) as exc:
        if (refusal := refused(exc, STARTING)) is None:
            raise
        # Workers waiting for jobs that will never come would keep the program from
        # ending (it joins them at exit): stopped, not shut down.
        pool.kill()
        raise refusal from exc
    finally:
        if own_parser:
            pool.close()
    report = RunReport(sources=tuple(reports), started_at=started_at,
                       duration=time.monotonic() - t0,
                       database=display_database(db_path))
    log.info("run finished at %s: %s", format_time(clock()), dict(report.totals))
    return report


#: Clients a :func:`run_fetch` call has used (see its docstring).
_LENT_CLIENTS: weakref.WeakSet[httpx.AsyncClient] = weakref.WeakSet()


def run_fetch(
    config: Config,
    *,
    database: str | Path | None = None,
    source_ids: Sequence[str] | None = None,
    force: bool = False,
    refresh: bool = False,
    clock: Callable[[], dt.datetime] = utcnow,
    resolver: Resolver | None = None,
    progress: Callable[[Progress], None] | None = None,
    parser: ParserPool | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    client: httpx.AsyncClient | None = None,
    ssl_context: ssl.SSLContext | None = None,
    worker: str | None = None,
) -> RunReport:
    """:func:`fetch_sources` in an event loop of its own, blocking until it is done.

    For callers that do not ``await``. In a thread that already runs an event loop (a
    notebook, an async application) the run gets a loop on a helper thread; Ctrl-C
    still stops it (see :mod:`signal_feeds.run.blocking`). Async code should ``await``
    :func:`fetch_sources` instead, so that its own loop goes on while feeds download.

    A ``client`` serves one call: its connections belong to the event loop they were
    opened in, which ends with the call, so the next call would fail every source with
    "Event loop is closed". The call therefore closes the client before its loop ends
    (kept open, its idle sockets stayed open with nothing able to use them); given
    again, it is refused at once (``ValueError``). Pass a ``transport`` for repeated
    calls, or await :func:`fetch_sources` in a loop of your own, where the client can
    serve every run and stays yours to close.
    """
    _check_config(config, "run_fetch")
    if client is not None:
        if client in _LENT_CLIENTS:
            raise ValueError("this httpx client has served a run_fetch call already: its "
                             "connections belong to that call's event loop, which has "
                             "ended; pass transport= instead, or await fetch_sources() "
                             "in an event loop of your own")
        _LENT_CLIENTS.add(client)
    run = fetch_sources(
        config, database=database, source_ids=source_ids, force=force, refresh=refresh,
        clock=clock,
        resolver=resolver, progress=progress, parser=parser, transport=transport,
        client=client, ssl_context=ssl_context, worker=worker)
    return run_blocking(run if client is None else _closing(run, client))


async def _closing(run: Coroutine[Any, Any, RunReport], client: httpx.AsyncClient
                   ) -> RunReport:
    """``run``, then ``client`` closed while the loop its connections belong to still runs."""
    try:
        return await run
    finally:
        await client.aclose()


def _read_capped(path: Path, cap: int) -> bytes:
    """The file's bytes, refused as a fetch refuses a body over ``max_body_bytes``."""
    with path.open("rb") as handle:
        data = handle.read(cap + 1)
    if len(data) > cap:
        raise body_too_large(cap)
    return data


def parse_files(paths: str | Path | Sequence[str | Path], *, source_id: str = "local",
                config: Config | None = None) -> Iterator[dict[str, Any]]:
    """Dry run over local files (or one file): parse and identify each in a worker
    process.

    With ``config``, the files are read with the effective settings of the source
    ``source_id`` when the config has it (and its URL resolves relative links, as the
    response's URL does in a fetch), else with the config's ``[settings]``; without
    one, with the defaults. The parse settings reach the parser exactly as in
    :func:`run_fetch`, so the rows are the rows a fetch of the same bytes would store.
    Yields one JSON-ready dict per file: ``{"file", "ok": True, "entries", "skipped",
    "skipped_reasons", "warnings"}`` or ``{"file", "ok": False, "error"}``. Nothing is
    stored.
    """
    settings, base, cap = ParseSettings(), "", DEFAULT_MAX_BODY_BYTES
    if config is not None:
        _check_config(config, "parse_files")
        known = {s.id: s for s in config.sources}
        src = known.get(source_id)
        effective = config.effective(src) if src is not None else config.settings
        settings = ParseSettings.from_settings(effective)
        base = src.url if src is not None else ""
        cap = effective.max_body_bytes
    if isinstance(paths, str | Path):  # one file, not a str's characters, one per path
        paths = [paths]
    pool = ParserPool()
    try:
        for path in map(Path, paths):
            try:
                # A saved .xml.gz is read as a fetch of those bytes would read it.
                body = gunzipped_again(_read_capped(path, cap), cap)
            except OSError as exc:
                yield {"file": str(path), "ok": False, "error": f"cannot read: {exc.strerror}"}
                continue
            except FetchError as exc:
                yield {"file": str(path), "ok": False, "error": exc.message}
                continue
            job = ParseJob(source_id=source_id, body=body, url=base, content_type="",
                           settings=settings)
            outcome = run_blocking(pool.parse(job))
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
