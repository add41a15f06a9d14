"""Parsing off the main process.

feedparser runs in worker processes with an address-space limit, so a feed that makes
it allocate without bound, or loop, costs one source and one worker, never the run.
There are ``min(2, cores)`` workers unless the caller asks for another number: parsing
shares the machine with the fetching process and the writer thread.

Only the workers tune feedparser (:mod:`signal_feeds.parse._speedups`); the process
that imports Signal keeps feedparser as it ships. A worker that finds feedparser's
internals changed parses with stock feedparser, and the parent logs why. A worker's
unexpected error reaches the parent's log with its traceback; a worker that dies (memory
limit, crash) has the tail of its stderr logged.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import select
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import IO, TYPE_CHECKING, Any

from signal_feeds.decide.decider import contradiction_message
from signal_feeds.errors import ContradictionError, SignalError
from signal_feeds.identity.matching import MatchKeys, match_keys
from signal_feeds.identity.search_text import SearchText, search_texts
from signal_feeds.parse.settings import ParseSettings

if TYPE_CHECKING:  # the parser processes import this module: keep asyncio out of them
    from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger("signal_feeds.parse")

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
    #: Built from the source's effective settings by ``ParseSettings.from_settings``
    #: (required: a job that quietly took defaults would normalize differently).
    settings: ParseSettings


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
    #: Duplicate-matching keys of each row by entry key, computed here on the parser's
    #: core rather than in the writer (without shingles: the writer hashes a text again
    #: only if the text channel compares it).
    match_keys: Mapping[str, MatchKeys] = field(default_factory=dict)
    #: What full-text search indexes of each row, by entry key: stripping the HTML here
    #: takes it off the writer's thread, which bounds a cold run.
    search_texts: Mapping[str, SearchText] = field(default_factory=dict)
    #: The worker's formatted traceback when parsing failed unexpectedly.
    traceback: str = ""
    #: The feed's own title (what an export names the source by, after the config's).
    feed_title: str = ""

    @property
    def message(self) -> str:
        """The error as reported, "" on success (a contradiction names its key)."""
        if self.kind == "contradiction":
            return contradiction_message(self.error, key=self.key, remote_id=self.remote_id)
        if self.error or self.identified is None:
            return self.error or "parser returned nothing"
        return ""


def parse_job(job: ParseJob) -> ParseOutcome:
    """Parse and identify one body (runs in a worker, or inline)."""
    from signal_feeds.identity.keys import identify
    from signal_feeds.parse.feed import parse_feed

    try:
        feed = parse_feed(job.body, source_id=job.source_id, url=job.url,
                          content_type=job.content_type,
                          require_https_links=job.settings.require_https_links,
                          max_entries=job.settings.max_entries)
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
    texts = search_texts(identified.rows)
    keys = {row.key: replace(match_keys(row.url, row.title, row.summary,
                                        summary_text=texts[row.key].summary),
                             shingles=frozenset())
            for row in identified.rows}
    return ParseOutcome(identified=identified, ttl_seconds=feed.ttl_seconds,
                        warnings=feed.warnings, entries=len(feed.entries), match_keys=keys,
                        search_texts=texts, feed_title=feed.title)


def _limit_self(memory: int) -> None:
    """In a worker: cap the address space, lower the priority, and die with the parent
    process (a run that is killed must not leave parser processes behind)."""
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    except (ImportError, ValueError, OSError):  # not on this platform: run unlimited
        pass
    parent = os.getppid()
    # A parent that dies closes our stdin, but a worker busy with a document would not
    # notice until it is done: a thread checks who the parent is once a second.
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True,
                     name="signal-parent-watch").start()
    if os.getppid() != parent:  # the parent died before the watch began
        os._exit(1)
    # Parsing is throughput work; the parent's event loop is latency work (a response
    # read late holds a connection slot, and the next request waits for it). On a busy
    # machine the scheduler should favour the loop.
    with contextlib.suppress(OSError, AttributeError):
        os.nice(PARSER_NICENESS)


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_SECONDS)
    os._exit(1)


_HEADER = struct.Struct(">Q")


def _read_exact(fd: int, size: int, deadline: float | None = None) -> bytes:
    """``size`` bytes from the pipe ``fd``; TimeoutError if ``deadline`` passes first."""
    chunks = []
    while size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError("worker closed its pipe")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _send(stream: IO[bytes], obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)))
    stream.write(data)
    stream.flush()


def _receive(fd: int, deadline: float | None = None) -> Any:
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    return pickle.loads(_read_exact(fd, size, deadline))


#: How often a worker checks that the process that started it still lives.
PARENT_CHECK_SECONDS = 1.0
#: How much lower a parser process's CPU priority is than the fetching process's.
PARSER_NICENESS = 5
#: What a worker sends once it can take jobs.
_READY = "signal-parse-worker-ready"
#: Seconds a new worker may take to start, apart from any document's time limit.
WORKER_START_TIMEOUT = 60.0


def serve(memory: int, *, tuned: bool = True) -> None:
    """The worker loop (``python -m signal_feeds.parse._worker_main MEMORY [stock]``):
    jobs in on stdin, outcomes out on stdout, until stdin closes."""
    _limit_self(memory)
    # Import the parser before saying "ready": a document's time limit must not be
    # spent starting Python and importing feedparser (seconds on a busy machine).
    from signal_feeds.parse import feed as parse  # noqa: F401
    from signal_feeds.parse._speedups import tune_feedparser, why_not_tuned

    # The reason goes to the parent with "ready": only the parent's log is seen.
    stock_reason = why_not_tuned() if tuned else ""
    if tuned and not stock_reason:
        tune_feedparser()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    _send(stdout, (_READY, stock_reason))
    while True:
        try:
            job = _receive(stdin.fileno())
        except EOFError:
            return
        try:
            outcome = parse_job(job)
        except Exception as exc:  # a bug, not a bad document: the parent logs the trace
            outcome = ParseOutcome(error=f"parser failed: {type(exc).__name__}: {exc}",
                                   kind="parse", traceback=traceback.format_exc())
        _send(stdout, outcome)


class _Worker:
    """One parser process, used by one job at a time. A plain subprocess (not
    multiprocessing) so that it never re-imports the caller's ``__main__``."""

    def __init__(self, memory: int, *, tuned: bool = True) -> None:
        # stderr to a file, not a pipe: nobody reads it while the worker runs, and a full
        # pipe would block it. Read when the worker dies, for the log.
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115  # closed by close()
        argv = [sys.executable, "-m", "signal_feeds.parse._worker_main", str(memory)]
        self.proc = subprocess.Popen(argv + ([] if tuned else ["stock"]),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr)
        self.killed = False
        self.ready = False

    def _answer(self, timeout: float) -> Any:
        """The worker's next message, or TimeoutError (the worker is then killed).

        A deadline checked with select() on the pipe, not a timer thread per job: a
        thread started and joined for every document showed up in the run's profile.
        """
        assert self.proc.stdout is not None
        try:
            return _receive(self.proc.stdout.fileno(), time.monotonic() + timeout)
        except TimeoutError:
            self.kill()
            raise

    def _wait_ready(self) -> None:
        try:
            answer = self._answer(WORKER_START_TIMEOUT)
        except (EOFError, TimeoutError):
            self.killed = False  # a failed start, not a document's timeout
            raise
        if not (isinstance(answer, tuple) and answer[0] == _READY):
            raise EOFError("worker did not start")
        _note_stock(str(answer[1]))
        self.ready = True

    def stderr_tail(self, size: int = 4000) -> str:
        """The end of what the worker wrote to stderr (its traceback, if it had one)."""
        try:
            self.stderr.seek(0, os.SEEK_END)
            self.stderr.seek(max(0, self.stderr.tell() - size))
            return self.stderr.read().decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""

    def call(self, job: ParseJob, timeout: float) -> ParseOutcome:
        assert self.proc.stdin is not None
        if not self.ready:
            self._wait_ready()
        _send(self.proc.stdin, job)
        outcome = self._answer(timeout)
        if not isinstance(outcome, ParseOutcome):
            raise EOFError("worker answered nonsense")
        return outcome

    def kill(self) -> None:
        self.killed = True
        self.proc.kill()

    def close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


_noted: set[str] = set()


def _note_stock(reason: str) -> None:
    """Log, once per reason, that the workers parse with stock feedparser."""
    if reason and reason not in _noted:
        _noted.add(reason)
        log.warning("parser processes use stock feedparser: %s", reason)


class ParserPool:
    """Parser processes started on demand, one document each at a time.

    A document that overruns the time limit gets its worker killed; a worker that dies
    (memory limit, crash) is replaced. Either way only that document fails. The pool
    is not tied to an event loop, so one pool can serve several runs.
    """

    def __init__(self, *, workers: int | None = None, memory: int = DEFAULT_PARSE_MEMORY,
                 timeout: float = DEFAULT_PARSE_TIMEOUT, tuned: bool = True) -> None:
        #: At most two by default (see the module's docstring).
        self.workers = workers or max(1, min(2, os.cpu_count() or 1))
        #: False: workers parse with stock feedparser (to compare against).
        self.tuned = tuned
        self.memory = memory
        self.timeout = timeout
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._threads: ThreadPoolExecutor | None = None

    def _parse_blocking(self, job: ParseJob) -> ParseOutcome:
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        if worker is None:
            worker = _Worker(self.memory, tuned=self.tuned)
        try:
            outcome = worker.call(job, self.timeout)
        except Exception as exc:  # EOF, a broken pipe, a garbled answer: worker is done
            timed_out = worker.killed
            worker.kill()
            code = worker.proc.wait()
            tail = worker.stderr_tail()
            worker.close()
            if timed_out:
                return ParseOutcome(error=f"parsing took longer than {self.timeout:g} s",
                                    kind="parse")
            log.error("parser process for source %s died (exit code %s, %s); its stderr "
                      "ends with:\n%s", job.source_id, code, exc, tail or "(nothing)")
            return ParseOutcome(error="parser process died (memory limit or crash)",
                                kind="parse")
        with self._lock:
            self._idle.append(worker)
        if outcome.traceback:
            log.error("parser failed on source %s:\n%s", job.source_id, outcome.traceback)
        return outcome

    async def parse(self, job: ParseJob) -> ParseOutcome:
        """Parse one body in a worker; errors come back as a :class:`ParseOutcome`."""
        import asyncio
        from concurrent.futures import ThreadPoolExecutor

        if self._threads is None:
            self._threads = ThreadPoolExecutor(max_workers=self.workers,
                                               thread_name_prefix="signal-parse")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._threads, self._parse_blocking, job)

    def close(self) -> None:
        """Stop the workers."""
        if self._threads is not None:
            self._threads.shutdown(wait=True)
            self._threads = None
        with self._lock:
            idle, self._idle = self._idle, []
        # Idle workers hold no state: stop them all at once rather than waiting for each
        # interpreter to wind down in turn.
        for worker in idle:
            worker.kill()
        for worker in idle:
            worker.close()


