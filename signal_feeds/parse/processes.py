"""Parsing off the main process.

feedparser runs in worker processes of a :class:`concurrent.futures.ProcessPoolExecutor`
whose initializer caps each worker's address space and sets a per-document time limit,
so a feed that makes it allocate without bound, or loop, costs one source, never the
run. There are ``min(2, cores)`` workers unless the caller asks for another number:
parsing shares the machine with the fetching process and the writer thread.

The workers are forked (where the platform has ``fork``), and all of them at once when
the pool is created, before a run starts its threads. Forking is what keeps embedding
scripts without an ``if __name__ == "__main__"`` guard working: the ``spawn`` and
``forkserver`` start methods import the caller's main script again in every worker.
A forked worker only parses the bytes it is handed; it never touches the parent's
database connections, sockets or event loop.

Only the workers tune feedparser (:mod:`signal_feeds.parse._speedups`); the process
that imports Signal keeps feedparser as it ships. A worker that finds feedparser's
internals changed parses with stock feedparser, and the parent logs why. A worker's
unexpected error reaches the parent's log with its traceback; a worker that dies (a
crash, the kernel's OOM killer) breaks the executor: the documents it held are parsed
again one by one in executors of their own, so that only the culprit fails. Its death
is logged with its stderr (where :mod:`faulthandler` writes), even when every document
then parses. Outcomes come back through files,
not the executor's pipe (see :func:`parse_in_worker`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import shutil
import signal
import tempfile
import threading
import warnings
import weakref
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from signal_feeds.limits import refused
from signal_feeds.offload import in_thread
from signal_feeds.parse.handover import HandoverFolder, remove_abandoned_folders
from signal_feeds.parse.jobs import ParseJob, ParseOutcome, parse_job
from signal_feeds.parse.worker import (
    WORKER_GC_YOUNG_THRESHOLD,
    import_parser,
    limit_self,
    overrun_outcome,
    parse_in_worker,
    ready,
    start_worker,
    taken,
)

log = logging.getLogger("signal_feeds.parse")

__all__ = ["DEFAULT_PARSE_MEMORY", "DEFAULT_PARSE_TIMEOUT", "WORKER_GC_YOUNG_THRESHOLD",
           "ParseJob", "ParseOutcome", "ParserPool", "limit_self", "parse_job"]

#: Address space one parser process may use (bytes).
DEFAULT_PARSE_MEMORY = 1024 * 1024 * 1024
#: Seconds one document may take to parse.
DEFAULT_PARSE_TIMEOUT = 60.0


def default_workers() -> int:
    """How many parser processes a pool has unless asked: ``min(2, cores)``."""
    return max(1, min(2, os.cpu_count() or 1))


#: What a refused thread, process or descriptor stops (a :class:`ResourceLimitError`'s
#: message starts so).
STARTING = "cannot start the parser processes and threads a run needs"

#: Seconds past the time limit after which a worker that did not stop itself is
#: killed (its alarm cannot interrupt a long call inside C code).
KILL_GRACE_SECONDS = 5.0
#: How often a job still queued behind other documents is checked for having started.
_QUEUED_CHECK_SECONDS = 0.5


# -- in the parent ---------------------------------------------------------------------------

def _context() -> Any:
    """``fork`` where the platform has it (see the module's docstring), else ``spawn``
    (Windows: there embedding scripts need a ``__main__`` guard)."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def _remove_folder(folder: HandoverFolder, owner: int) -> None:
    """Remove ``folder``, in the process that made it only (a forked worker holds a copy
    of the executor, and must never remove the folder its parent still reads from)."""
    if os.getpid() == owner:
        shutil.rmtree(folder.path, ignore_errors=True)
        folder.release()


#: Whether this process has looked for folders that killed runs left (once is enough).
_SWEPT = threading.Event()


#: Held around the catch_warnings() block below. It saves the process's one list of
#: warning filters and puts it back when it ends: two pools starting on two threads
#: interleaved put back each other's copies, and the host kept Signal's filter.
_SILENCING = threading.Lock()


def _forked_since(before: set[int | None]) -> set[int]:
    """The process ids of this process's children not in ``before``."""
    return {p.pid for p in multiprocessing.active_children()
            if p.pid is not None and p.pid not in before}


class _Executor:
    """One ``ProcessPoolExecutor``, with its workers' process ids (to kill them when a
    document overruns inside C code) and their shared stderr file."""

    def __init__(self, workers: int, memory: int, tuned: bool) -> None:
        context = _context()
        self.tuned = tuned
        #: The process whose executor this is: a child forked later (a pre-forking
        #: server's worker) inherits the object but not its threads, and must not use it.
        self.pid = os.getpid()
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115  # closed by close()
        #: Where workers leave their outcomes (see :func:`parse_in_worker`); removed
        #: by :meth:`close`, or when the executor is collected or the program ends,
        #: or, after a SIGKILL, by the next program's first pool (see handover).
        if not _SWEPT.is_set():
            _SWEPT.set()
            remove_abandoned_folders()
        folder = HandoverFolder()
        self.handover = folder.path
        self._remove_handover = weakref.finalize(self, _remove_folder, folder, os.getpid())
        self._pids_queue = context.SimpleQueue()
        self._pids: set[int] = set()
        self.broken = False
        #: Signal killed the workers (an overrun, a parse nobody waits for): the
        #: documents' own outcomes say so, and no death is to be reported.
        self.killed = False
        self._death_noted = threading.Lock()
        if threading.active_count() > 1:
            # Another thread of the program may be importing a module at the moment of
            # the fork: the child inherits that module's import lock held by a thread it
            # does not have, and its first import of the module hangs until the time
            # limit kills it. Imported here first, the modules a worker needs are there.
            import_parser()
        before = {p.pid for p in multiprocessing.active_children()}
        try:
            self.executor = ProcessPoolExecutor(
                max_workers=workers, mp_context=context, initializer=start_worker,
                initargs=(memory, self.stderr.fileno(), self._pids_queue, self.pid))
            with _SILENCING, warnings.catch_warnings():
                # Python 3.12+ warns that forking a process with threads may deadlock the
                # child. The workers are forked here, before a run starts its threads, and
                # again only to replace a dead worker; the child takes none of the locks
                # another thread could hold (logging's locks are reset on fork, and what it
                # imports was imported above when other threads run).
                warnings.filterwarnings("ignore", message=r".*multi-threaded.*fork",
                                        category=DeprecationWarning)
                started = self.executor.submit(ready)  # a forking executor starts
            self._pids |= _forked_since(before)        # every worker now
            self._wait_for(started)
        except BaseException as exc:  # a thread or a descriptor refused (ulimit -u, -n):
            self.kill(_forked_since(before))  # the program's exit would wait for them
            self.stderr.close()
            self._remove_handover()
            if isinstance(exc, OSError | RuntimeError | MemoryError) and (
                    refusal := refused(exc, STARTING)) is not None:
                raise refusal from exc
            raise

    def _wait_for(self, started: Future[None]) -> None:
        """Wait until a worker has run the first job. The executor's manager thread
        starts its queue's feeder thread then: refused one (ulimit -u, ulimit -v), the
        manager thread ends, and every document given to the executor waited for ever."""
        while True:
            try:
                started.result(timeout=_QUEUED_CHECK_SECONDS / 10)
                return
            except BrokenProcessPool:  # a worker died: the next parse starts others
                self.broken = True
                return
            except TimeoutError:
                if not self.manager_alive():
                    raise RuntimeError("can't start new thread (the parser executor's "
                                       "manager thread ended)") from None

    def manager_alive(self) -> bool:
        """Whether the executor's manager thread still runs (only it hands documents
        to the workers; CPython keeps it in a private attribute, else assumed alive)."""
        manager = getattr(self.executor, "_executor_manager_thread", None)
        return manager is None or bool(manager.is_alive())

    def submit(self, job: ParseJob, timeout: float) -> Future[str]:
        return self.executor.submit(parse_in_worker, job, timeout, self.tuned,
                                    self.handover)

    def kill(self, forked: set[int] | None = None) -> None:
        """Kill every worker (the executor then reports itself broken)."""
        self.broken = True
        self.killed = True
        self._pids |= forked or set()
        while not self._pids_queue.empty():
            self._pids.add(self._pids_queue.get())
        for pid in self._pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def first_to_note_death(self) -> bool:
        """True for the one caller that first notices a worker that died of itself
        (a crash, the OOM killer), never after Signal killed the workers."""
        return not self.killed and self._death_noted.acquire(blocking=False)

    def stderr_tail(self, size: int = 4000) -> str:
        """What the workers last wrote to stderr: from the start of the last crash's
        trace, if any, else the end. faulthandler writes the crashing frame first; a
        deep stack's plain tail kept only the outermost frames, not even the signal."""
        try:
            self.stderr.seek(0, os.SEEK_END)
            self.stderr.seek(max(0, self.stderr.tell() - 4 * size))
            text = self.stderr.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""
        start = text.rfind("Fatal Python error")
        return (text[start:start + size] if start >= 0 else text[-size:]).strip()

    def close(self) -> None:
        if self.pid != os.getpid():
            return  # the parent's: its workers and folder are the parent's to end
        self.executor.shutdown(wait=True, cancel_futures=True)
        self._pids_queue.close()
        self.stderr.close()
        # Outcomes nobody took: a parse stopped after its worker had finished.
        self._remove_handover()


class _NoDeath(BrokenProcessPool):
    """The executor cannot take the document, though no worker of it died (closed
    meanwhile, its manager thread gone): parsed again alone, with nothing to report."""


_noted: set[str] = set()


def _note_stock(reason: str) -> None:
    """Log, once per reason, that the workers parse with stock feedparser."""
    if reason and reason not in _noted:
        _noted.add(reason)
        log.warning("parser processes use stock feedparser: %s", reason)


class ParserPool:
    """Parser processes (a ``ProcessPoolExecutor``), one document each at a time.

    A document that overruns the time limit is stopped by its worker's alarm, or, if
    the worker does not answer, the workers are killed; a worker that dies is replaced.
    Either way only that document fails. The pool is not tied to an event loop, so one
    pool can serve several runs. Its workers start when it is created; a process forked
    from the one that made it (a pre-forking server's worker) starts its own at its first
    parse.
    """

    def __init__(self, *, workers: int | None = None, memory: int = DEFAULT_PARSE_MEMORY,
                 timeout: float = DEFAULT_PARSE_TIMEOUT, tuned: bool = True) -> None:
        #: At most two by default (see the module's docstring).
        self.workers = workers or default_workers()
        #: False: workers parse with stock feedparser (to compare against).
        self.tuned = tuned
        #: Address space a worker may add to what it starts with (bytes).
        self.memory = memory
        self.timeout = timeout
        self._lock = threading.Lock()
        self._closed = False
        self._shared: _Executor | None = _Executor(self.workers, memory, tuned)

    def _executor(self) -> _Executor:
        with self._lock:
            if self._closed:
                raise RuntimeError("the parser pool is closed")
            if self._shared is not None and self._shared.pid != os.getpid():
                # Forked since it was made: the executor's manager thread stayed in
                # the parent, so a job given to it would wait for ever. New workers.
                self._shared = None
            if self._shared is None or self._shared.broken:
                old, self._shared = self._shared, _Executor(self.workers, self.memory,
                                                            self.tuned)
            else:
                old = None
            shared = self._shared
        if old is not None:
            old.close()
        return shared

    async def parse(self, job: ParseJob) -> ParseOutcome:
        """Parse one body in a worker; errors come back as a :class:`ParseOutcome`."""
        shared = self._executor()
        try:
            outcome = await self._run(shared, job)
        except BrokenProcessPool as exc:
            # A worker died, maybe over another document: parse this one again alone.
            shared.broken = True
            if not isinstance(exc, _NoDeath) and shared.first_to_note_death():
                # Said here: each document may parse fine alone (a kill from outside, a
                # crash that does not come back), and nothing else would say it died,
                # nor keep the trace faulthandler left in the executor's stderr file.
                log.warning("a parser process died (killed, out of memory or crashed) "
                            "while source %s's document was among those it held; each "
                            "is parsed again alone; its stderr ends with:\n%s",
                            job.source_id, shared.stderr_tail() or "(nothing)")
            outcome = await self._parse_alone(job)
        return self._received(job, outcome)

    async def _parse_alone(self, job: ParseJob) -> ParseOutcome:
        alone = await in_thread(_Executor, 1, self.memory, self.tuned)
        try:
            return await self._run(alone, job)
        except BrokenProcessPool:
            log.error("parser process for source %s died (killed, out of memory or "
                      "crashed); its stderr ends with:\n%s", job.source_id,
                      alone.stderr_tail() or "(nothing)")
            return ParseOutcome(error="parser process died (memory limit or crash)",
                                kind="parse")
        finally:
            await in_thread(alone.close)

    async def _run(self, executor: _Executor, job: ParseJob) -> ParseOutcome:
        """The job's outcome; BrokenProcessPool if its worker died. The time limit is
        the worker's to enforce; this kills the workers only when it did not."""
        try:
            future = executor.submit(job, self.timeout)
        except BrokenProcessPool:
            raise
        except RuntimeError as exc:  # shut down since taken
            raise _NoDeath(str(exc)) from exc
        waiting = asyncio.wrap_future(future)
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        while True:
            wait = _QUEUED_CHECK_SECONDS if deadline is None else deadline - loop.time()
            try:
                done, _ = await asyncio.wait({waiting}, timeout=max(0.0, wait))
            except asyncio.CancelledError:
                # Nobody waits for this document any more (Ctrl-C, a caller's timeout):
                # a worker already parsing it is stopped rather than waited for. The
                # wrapper is cancelled too, or the worker's end (BrokenProcessPool)
                # would reach it with nobody to retrieve it.
                waiting.cancel()
                if not future.cancel() and not future.done():
                    executor.kill()
                raise
            if done:
                try:
                    return await in_thread(taken, waiting.result())
                except FileNotFoundError as exc:
                    # The executor was closed meanwhile (another document's worker died,
                    # or the pool closed) and its folder went: parsed again alone.
                    raise _NoDeath("the outcome's file is gone") from exc
            if not future.running() and not executor.manager_alive():
                raise _NoDeath("the executor's manager thread ended")
            if deadline is None:
                # The limit counts from when a worker takes the job, not while it waits
                # behind other documents (several runs may share the pool).
                if future.running():
                    deadline = loop.time() + self.timeout + KILL_GRACE_SECONDS
                continue
            executor.kill()
            with contextlib.suppress(BrokenProcessPool):
                await waiting
            return overrun_outcome(self.timeout)

    @staticmethod
    def _received(job: ParseJob, outcome: ParseOutcome) -> ParseOutcome:
        _note_stock(outcome.stock_reason)
        if outcome.traceback:
            log.error("parser failed on source %s:\n%s", job.source_id, outcome.traceback)
        return outcome

    def kill(self) -> None:
        """Kill the workers at once (the next parse starts new ones)."""
        if (shared := self._shared) is not None:
            shared.kill()

    def close(self) -> None:
        """Stop the workers."""
        with self._lock:
            self._closed = True
            shared, self._shared = self._shared, None
        if shared is not None:
            shared.close()
