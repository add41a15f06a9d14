"""Run the asynchronous pipeline from synchronous code, with or without an event loop.

:func:`~signal_feeds.run.pipeline.run_fetch` and
:func:`~signal_feeds.run.pipeline.parse_files` are for callers that do not ``await``.
In a notebook (Jupyter, IPython) or inside an async application the calling thread
already runs an event loop, and ``asyncio.run()`` refuses to start a second one there.
Then the coroutine runs in an event loop of its own on a helper thread, and the call
still blocks until it is done, as it does everywhere else.

Ctrl-C while it waits cancels the coroutine, as ``asyncio.run()`` does on the main
thread, and waits until it has stopped: nothing goes on fetching or writing behind the
caller's back. Ctrl-C arrives in one of two ways: as ``KeyboardInterrupt`` in the
waiting thread (a notebook kernel), which is raised again; or, under ``asyncio.run()``,
as the cancellation of the caller's task, which its loop cannot deliver while the call
blocks, so the wait looks for it and raises ``CancelledError`` in its place.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, Generic, TypeVar

T = TypeVar("T")

#: How often the wait looks whether the caller's task was cancelled (seconds).
_POLL_SECONDS = 0.1


def run_blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """The result of ``coroutine``, run to completion from synchronous code."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        in_loop = False
    else:
        in_loop = True
    if not in_loop:
        # Outside the except block: an error of the run must not read as raised "during
        # handling of" the RuntimeError that said no loop runs here. A loop of its own,
        # never made the thread's current one: asyncio.run() clears that when it ends,
        # and a program that had set one (asyncio.set_event_loop) lost it.
        with asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner:
            return runner.run(coroutine)
    return _Beside(coroutine).result(asyncio.current_task())


class _Beside(Generic[T]):
    """One coroutine in an event loop of its own on a helper thread."""

    def __init__(self, coroutine: Coroutine[Any, Any, T]) -> None:
        self._coroutine = coroutine
        self._started = threading.Event()
        # Waited on instead of Thread.join(), which Ctrl-C can leave saying that a
        # thread still running has ended.
        self._done = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._value: tuple[T] | None = None
        self._error: BaseException | None = None
        self._cancelled = False
        self._thread = threading.Thread(target=self._main, name="signal-run", daemon=True)

    async def _wrapped(self) -> T:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._started.set()
        return await self._coroutine

    def _main(self) -> None:
        try:
            self._value = (asyncio.run(self._wrapped()),)
        except BaseException as exc:  # handed to the caller's thread as it is
            self._error = exc
        finally:
            self._started.set()
            self._done.set()

    def _cancel(self) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        self._started.wait()
        loop, task = self._loop, self._task
        if loop is not None and task is not None:
            # RuntimeError: the loop has already closed, nothing is left to stop.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(task.cancel)

    def result(self, caller: asyncio.Task[Any] | None) -> T:
        """Start, wait and return (or raise) what the coroutine did. ``caller`` is the
        task of the calling thread's loop that waits, if the call came from one."""
        # A cancellation already pending when the call came is not this one's to act on.
        before = caller.cancelling() if caller is not None else 0
        self._thread.start()
        stop: BaseException | None = None
        while not self._done.is_set():
            try:
                self._done.wait(_POLL_SECONDS)
            except KeyboardInterrupt as exc:
                stop = stop or exc  # a second Ctrl-C still waits for the first to end
            if stop is None and caller is not None and caller.cancelling() > before:
                stop = asyncio.CancelledError()
            if stop is not None:
                self._cancel()
        self._thread.join()
        if stop is not None:
            raise stop
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value[0]
