"""Blocking calls off the event loop, on threads of Signal's own.

``asyncio.to_thread`` runs on the event loop's default executor, which in a program that
embeds Signal belongs to the program: an application that offloads its own slow calls
there had every run wait behind them (a review's run took 7.9 s instead of 0.3 s). The
calls Signal makes this way are short (reading a parse outcome back, a host slot taken
or given back in the database, leases given back at the end of a run), so a few threads
serve every run of the process.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["MAX_THREADS", "in_thread"]

T = TypeVar("T")

#: Threads at most; each call is short, and none waits for another.
MAX_THREADS = 8

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_pid = 0


def _threads() -> ThreadPoolExecutor:
    global _pool, _pool_pid
    with _lock:
        # A forked child has the pool object but none of its threads: it makes its own.
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(max_workers=MAX_THREADS, thread_name_prefix="signal-io")
            _pool_pid = os.getpid()
        return _pool


async def in_thread(function: Callable[..., T], /, *args: Any) -> T:
    """``function(*args)`` on one of Signal's threads (with the caller's context
    variables, as ``asyncio.to_thread`` passes them)."""
    call = functools.partial(contextvars.copy_context().run, function, *args)
    return await asyncio.get_running_loop().run_in_executor(_threads(), call)
