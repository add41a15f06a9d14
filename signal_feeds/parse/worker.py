"""The worker side of the parser pool (:mod:`signal_feeds.parse.processes`): what runs
in a parser process. The executor's initializer (:func:`start_worker`) caps the worker's
address space, lowers its priority, ties its life to the parent's and resets the
signal handlers it inherited; :func:`parse_in_worker` parses one document under the
time limit and hands its outcome over in a file, which :func:`taken` (in the parent)
reads.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import os
import pickle
import signal
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import replace
from types import FrameType
from typing import Any

from signal_feeds.parse.jobs import ParseJob, ParseOutcome, parse_job

#: How often a worker checks that the process that started it still lives.
PARENT_CHECK_SECONDS = 1.0
#: How much lower a parser process's CPU priority is than the fetching process's.
PARSER_NICENESS = 5
#: Allocations between two young-generation collections in a parser process (the
#: ``signal`` command sets the same in its own process: ``cli.commands.GC_YOUNG_THRESHOLD``).
WORKER_GC_YOUNG_THRESHOLD = 10_000


class _Overrun(BaseException):
    """Raised into the parsing code by the time limit's alarm (a BaseException, so that
    feedparser's ``except Exception`` clauses cannot swallow it)."""


#: Set with the worker's first document.
_stock_reason = ""
_overran = False


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    global _overran
    _overran = True
    raise _Overrun


def _address_space() -> int:
    """This process's address space in bytes (0 where /proc does not say)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def limit_self(memory: int, parent: int | None = None) -> None:
    """In a worker: cap the address space, lower the priority, and die with the parent
    process (a run that is killed must not leave parser processes behind).

    ``parent`` is the process id of the program that made the pool, taken there: one
    read here (the default) is the process that adopted the worker when the program was
    killed between the fork and this call, and the worker would wait for that one."""
    try:
        import resource

        # A forked worker starts with its parent's address space mapped (thread stacks,
        # allocator arenas), most of it shared and untouched: the cap is on what it adds.
        limit = _address_space() + memory
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):  # not on this platform: run unlimited
        pass
    if parent is None:
        parent = os.getppid()
    # The executor's pipes stay open in the worker (a forked child holds both ends), so
    # a dead parent is not noticed through them: a thread checks once a second.
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


def start_worker(memory: int, stderr_fd: int, pids: Any, parent: int) -> None:
    """The executor's initializer, run once in each new parser process."""
    # stderr goes to the pool's file (a crash's faulthandler trace lands there, read
    # when the worker dies); Ctrl-C is the parent's to handle: it shuts the pool down.
    os.dup2(stderr_fd, 2)
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace",  # noqa: SIM115
                      buffering=1, closefd=False)
    faulthandler.enable()
    # The signal handlers and the wakeup descriptor of the program that embeds Signal
    # are its own: forked, a worker would run the host's SIGTERM handler (the executor
    # sends SIGTERM to end its workers), and write each signal into the host's event
    # loop, which then shut down as if the host had been told to.
    with contextlib.suppress(ValueError):
        signal.set_wakeup_fd(-1)
    for signum in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError):
            if callable(signal.getsignal(signum)):
                signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGALRM, _on_alarm)
    # What the worker inherited from the parent stays as it is: the collector leaves it
    # out, so collections neither walk it nor copy the pages it lies in.
    gc.freeze()
    # A document's parse makes tens of thousands of short-lived containers: at Python's
    # default (700) the young generation was collected every few entries. The worker is
    # Signal's own process, whatever the embedding program's setting.
    gc.set_threshold(WORKER_GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    limit_self(memory, parent)
    pids.put(os.getpid())


def import_parser() -> None:
    """Import what a worker parses with (feedparser, nh3, Signal's parse modules)."""
    from signal_feeds.parse import feed  # noqa: F401
    from signal_feeds.parse._speedups import why_not_tuned  # noqa: F401


def ready() -> None:
    """The first job: it makes the executor start its workers."""


_prepared = False


def _prepare(tuned: bool) -> None:
    """Import (and tune) feedparser with the worker's first document, before its time
    limit starts: a run where nothing needs parsing never pays for it, and a document's
    limit is never spent importing (seconds on a busy machine)."""
    global _prepared, _stock_reason
    if _prepared:
        return
    import_parser()
    from signal_feeds.parse._speedups import tune_feedparser, why_not_tuned

    _stock_reason = why_not_tuned() if tuned else ""
    if tuned and not _stock_reason:
        tune_feedparser()
    _prepared = True


def parse_in_worker(job: ParseJob, timeout: float, tuned: bool, handover: str) -> str:
    """One document, under the time limit (in a worker): the file in ``handover`` that
    holds its pickled outcome.

    The outcome (rows of a whole feed, often hundreds of kilobytes) does not travel
    through the executor's result pipe: a worker killed while writing to it (the OOM
    killer, a kill after an overrun) leaves half a message there, which the executor's
    manager thread then waits for without end, and the run hangs. Only the file's name
    goes through the pipe, in one write too short to be cut.
    """
    data = pickle.dumps(_outcome_in_worker(job, timeout, tuned),
                        protocol=pickle.HIGHEST_PROTOCOL)
    fd, path = tempfile.mkstemp(dir=handover)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return path


def taken(path: str) -> ParseOutcome:
    """The outcome a worker left in ``path`` (in the parent), the file removed."""
    try:
        with open(path, "rb") as handed:
            outcome = pickle.load(handed)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    if not isinstance(outcome, ParseOutcome):
        raise TypeError(f"a parser process handed over {type(outcome).__name__}")
    return outcome


def _outcome_in_worker(job: ParseJob, timeout: float, tuned: bool) -> ParseOutcome:
    global _overran
    _prepare(tuned)
    _overran = False
    try:
        try:
            signal.setitimer(signal.ITIMER_REAL, timeout)
            outcome = parse_job(job)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _Overrun:
        outcome = overrun_outcome(timeout)
    except Exception as exc:  # a bug, not a bad document: the parent logs the trace
        outcome = ParseOutcome(error=f"parser failed: {type(exc).__name__}: {exc}",
                               kind="parse", traceback=traceback.format_exc())
    if _overran:  # the alarm rang, and something in the parser swallowed it
        outcome = overrun_outcome(timeout)
    return replace(outcome, stock_reason=_stock_reason) if _stock_reason else outcome


def overrun_outcome(timeout: float) -> ParseOutcome:
    return ParseOutcome(error=f"parsing took longer than {timeout:g} s", kind="parse")
