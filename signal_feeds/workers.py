"""Parsing off the main process.

feedparser runs in worker processes with an address-space limit, so a feed that makes
it allocate without bound, or loop, costs one source and one worker, never the run. The
workers also let parsing use every core.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import time
from concurrent.futures import Executor, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from .errors import ContradictionError, SignalError

__all__ = ["DEFAULT_PARSE_MEMORY", "DEFAULT_PARSE_TIMEOUT", "ParseJob", "ParseOutcome",
           "ParserPool", "parse_job"]

#: Address space one parser process may use (bytes).
DEFAULT_PARSE_MEMORY = 1024 * 1024 * 1024
#: Seconds one document may take to parse.
DEFAULT_PARSE_TIMEOUT = 60.0


@dataclass(frozen=True)
class ParseJob:
    """Everything a worker needs to turn a body into rows."""

    source_id: str
    body: bytes
    url: str
    content_type: str
    allow_http_links: bool


@dataclass(frozen=True)
class ParseOutcome:
    """A worker's answer. Exceptions are returned as data: they cross the process
    boundary as plain fields."""

    identified: object | None = None  # identity.Identified (kept loose for pickling)
    ttl_seconds: int | None = None
    warnings: tuple[str, ...] = ()
    entries: int = 0
    error: str = ""
    #: ``"parse"`` or ``"contradiction"`` when ``error`` is set.
    kind: str = ""
    key: str = ""
    remote_id: str = ""


def parse_job(job: ParseJob) -> ParseOutcome:
    """Parse and identify one body (runs in a worker, or inline)."""
    from .identity import identify
    from .parse import parse_feed

    try:
        feed = parse_feed(job.body, source_id=job.source_id, url=job.url,
                          content_type=job.content_type,
                          allow_http_links=job.allow_http_links)
        identified = identify(job.source_id, feed.entries)
    except ContradictionError as exc:
        return ParseOutcome(error=exc.message, kind="contradiction", key=exc.key,
                            remote_id=exc.remote_id)
    except SignalError as exc:
        return ParseOutcome(error=exc.message, kind="parse")
    except MemoryError:
        return ParseOutcome(error="parser ran out of memory", kind="parse")
    except RecursionError:
        return ParseOutcome(error="document nested too deeply", kind="parse")
    return ParseOutcome(identified=identified, ttl_seconds=feed.ttl_seconds,
                        warnings=feed.warnings, entries=len(feed.entries))


def _init_worker(memory: int) -> None:
    """Limit the worker's memory and make it die with its parent: a run that is killed
    must not leave parser processes behind."""
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    except (ImportError, ValueError, OSError):  # not on this platform: run unlimited
        pass
    parent = os.getppid()
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG (Linux)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)
    except (OSError, AttributeError):
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


class ParserPool:
    """A lazily started pool of parser processes with a per-document time limit.

    A worker that dies (memory limit, crash) or overruns the time limit breaks the
    pool; the pool is then replaced and only the document that caused it fails.
    """

    def __init__(self, *, workers: int | None = None, memory: int = DEFAULT_PARSE_MEMORY,
                 timeout: float = DEFAULT_PARSE_TIMEOUT) -> None:
        self.workers = workers or min(2, os.cpu_count() or 1)
        self.memory = memory
        self.timeout = timeout
        self._executor: ProcessPoolExecutor | None = None
        self._generation = 0

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            self._executor = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker, initargs=(self.memory,))
            self._generation += 1
        return self._executor

    def _discard(self, generation: int) -> None:
        if self._executor is None or generation != self._generation:
            return
        executor, self._executor = self._executor, None
        for proc in list(getattr(executor, "_processes", {}).values()):
            proc.kill()  # a stuck parser does not stop on request
        executor.shutdown(wait=False, cancel_futures=True)

    async def parse(self, job: ParseJob) -> ParseOutcome:
        """Parse one body in a worker; errors come back as a :class:`ParseOutcome`."""
        loop = asyncio.get_running_loop()
        for attempt in range(2):
            pool: Executor = self._pool()
            generation = self._generation
            try:
                return await asyncio.wait_for(loop.run_in_executor(pool, parse_job, job),
                                              self.timeout)
            except TimeoutError:
                self._discard(generation)
                return ParseOutcome(error=f"parsing took longer than {self.timeout:g} s",
                                    kind="parse")
            except BrokenProcessPool:
                self._discard(generation)
                if attempt:  # broke twice with this document: it is the cause
                    return ParseOutcome(error="parser process died (memory limit or crash)",
                                        kind="parse")
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Stop the workers."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
