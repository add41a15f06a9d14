"""Blocking calls off the event loop, on threads of Signal's own.

``asyncio.to_thread`` runs on the event loop's default executor, which in a program that
embeds Signal belongs to the program: an application that offloads its own slow calls
there had every run wait behind them (a review's run took 7.9 s instead of 0.3 s). The
calls Signal makes this way are short (reading a parse outcome back, a host slot taken
or given back in the database, leases given back at the end of a run) or name lookups,
and a few threads of each kind serve every run of the process.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar

__all__ = ["MAX_THREADS", "in_thread"]

T = TypeVar("T")

Lane = Literal["short", "lookup"]
#: Threads at most per lane: ``short`` calls return at once and wait for nothing;
#: ``lookup`` is name resolution, which may wait seconds for a slow DNS server, and so
#: has threads of its own that a short call never queues behind.
MAX_THREADS: dict[Lane, int] = {"short": 8, "lookup": 16}

_lock = threading.Lock()
_pools: dict[Lane, ThreadPoolExecutor] = {}
_pools_pid = 0


def _threads(lane: Lane) -> ThreadPoolExecutor:
    global _pools_pid
    with _lock:
        # A forked child has the pool objects but none of their threads: it makes its own.
        if _pools_pid != os.getpid():
            _pools.clear()
            _pools_pid = os.getpid()
        if lane not in _pools:
            _pools[lane] = ThreadPoolExecutor(max_workers=MAX_THREADS[lane],
                                              thread_name_prefix=f"signal-{lane}")
        return _pools[lane]


async def in_thread(function: Callable[..., T], /, *args: Any, lane: Lane = "short") -> T:
    """``function(*args)`` on one of Signal's threads of ``lane`` (with the caller's
    context variables, as ``asyncio.to_thread`` passes them)."""
    call = functools.partial(contextvars.copy_context().run, function, *args)
    return await asyncio.get_running_loop().run_in_executor(_threads(lane), call)
