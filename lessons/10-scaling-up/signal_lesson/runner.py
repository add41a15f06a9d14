"""Many sources at once: asyncio for the waiting, worker processes for the parsing.

Requests are where a run spends its time, and almost all of it waiting. One event loop
keeps many requests open over a shared pool of connections, within two limits: how many
are in flight in all (``total``) and how many go to one host at once (``per_host``), so
that a long list of feeds on one server never turns into a burst against it. Parsing is
work for a CPU, so it can go to a pool of processes. Storing stays in this thread, one
short transaction per response, exactly as in the sequential run.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass

import httpx

from .config import Config, Source
from .errors import FetchError
from .fetch import Limits, Response, fetch_async, new_async_client
from .pipeline import (
    DEFAULT_LIMITS,
    DEFAULT_POLICY,
    Update,
    begin,
    finish,
    parse_body,
    result_of,
    select,
)
from .report import Report, SourceResult
from .schedule import Policy
from .store import Store


@dataclass(frozen=True)
class Concurrency:
    total: int = 8  # requests in flight at once, all hosts together
    per_host: int = 2  # requests in flight at once to one scheme://host:port
    workers: int = 0  # processes that parse bodies; 0 parses in this process


def origin(url: str) -> tuple[str, str, int | None]:
    parts = httpx.URL(url)
    return parts.scheme, parts.host, parts.port


async def run_async(config: Config, store: Store, *, only: Sequence[str] = (),
                    limits: Limits = DEFAULT_LIMITS, concurrency: Concurrency | None = None,
                    force: bool = False, policy: Policy = DEFAULT_POLICY,
                    rand: Callable[[], float] = random.random) -> Report:
    """Every selected source, concurrently within the limits; results in list order."""
    concurrency = concurrency or Concurrency()
    total = asyncio.Semaphore(concurrency.total)
    hosts: dict[tuple[str, str, int | None], asyncio.Semaphore] = {}
    loop = asyncio.get_running_loop()

    async def one(source: Source, client: httpx.AsyncClient,
                  pool: Executor | None) -> SourceResult:
        started = time.monotonic()
        ticket = begin(store, source.id, source.url, force=force)
        if isinstance(ticket, Update):
            return result_of(ticket)
        host = hosts.setdefault(origin(source.url), asyncio.Semaphore(concurrency.per_host))
        async with host, total:  # the host first: waiting for it holds no global slot
            try:
                response: Response | FetchError = await fetch_async(
                    client, source.url, ticket.validators, limits)
            except FetchError as exc:
                response = exc
        parsed = None
        if pool is not None and isinstance(response, Response) and response.status == 200:
            parsed = await loop.run_in_executor(pool, parse_body, source.id, response.body,
                                                response.content_type)
        update = finish(store, ticket, response, parsed=parsed, policy=policy, rand=rand)
        return result_of(update, time.monotonic() - started)

    with ExitStack() as stack:
        pool = None
        if concurrency.workers:
            pool = stack.enter_context(ProcessPoolExecutor(
                concurrency.workers, mp_context=multiprocessing.get_context("spawn")))
        async with new_async_client(limits, connections=concurrency.total) as client:
            results = await asyncio.gather(
                *(one(source, client, pool) for source in select(config, only)))
    return Report(list(results))

