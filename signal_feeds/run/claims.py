"""A run's share of the due sources when several workers use one database.

Each source the decider would fetch asks :meth:`Claims.take` for it. The claims are
made in chunks, in the order the sources asked, as the run's fetches finish: a worker
holds at most about twice ``chunk`` leases of sources it has not fetched yet (a fetched
source keeps its lease until its write commits), so it never hoards sources it cannot
fetch before their leases expire, and the workers that start together share the
list instead of one taking it all. A chunk claims from a window of the next sources
waiting; when it gets fewer than it asked for, every other source in that window is
someone else's (leased, or already fetched in this interval) and is answered ``None``.

The store's calls go through ``call``: the run's writer thread, the one thread that uses
the store while the run lasts. While the run holds leases it renews them every third of
``lease_seconds``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from signal_feeds.errors import log_level_of
from signal_feeds.records import SourceState
from signal_feeds.store.protocol import FeedStore

__all__ = ["WINDOW_CHUNKS", "Claims", "lease_trouble"]

log = logging.getLogger("signal_feeds.run")

T = TypeVar("T")
#: A claim looks at this many chunks' worth of waiting sources.
WINDOW_CHUNKS = 4


@dataclass(frozen=True)
class _Waiting:
    url: str
    answer: asyncio.Future[SourceState | None]


class Claims:
    """Leases for one run of the worker ``owner``; run :meth:`run` as a task."""

    def __init__(self, store: FeedStore, call: Callable[[Callable[[], Any]], Awaitable[Any]],
                 *, owner: str, lease_seconds: float, chunk: int, force: bool,
                 clock: Callable[[], dt.datetime]) -> None:
        self.store = store
        self.call = call
        self.owner = owner
        self.lease_seconds = lease_seconds
        self.chunk = max(1, chunk)
        self.force = force
        self.clock = clock
        #: Sources claimed and not finished yet.
        self.held: set[str] = set()
        #: Held sources already fetched, whose lease goes back when their write commits.
        self.committing: set[str] = set()
        self.claims = 0  # claim transactions made, for tests and benchmarks
        self._waiting: dict[str, _Waiting] = {}
        self._wake = asyncio.Event()

    async def take(self, source_id: str, url: str) -> SourceState | None:
        """The source's stored state once this worker holds its lease, or ``None`` when
        another worker holds it or it is no longer due."""
        answer: asyncio.Future[SourceState | None] = (
            asyncio.get_running_loop().create_future())
        self._waiting[source_id] = _Waiting(url, answer)
        self._wake.set()
        return await answer

    def fetched(self, source_id: str) -> None:
        """A claimed source's response is in hand (or its request failed): it keeps its
        lease until its write commits, but no longer counts against what this run may
        claim ahead."""
        if source_id in self.held:
            self.committing.add(source_id)
            self._wake.set()

    def finished(self, source_id: str) -> None:
        """A claimed source is done (its lease given back with its write, or not)."""
        self.held.discard(source_id)
        self.committing.discard(source_id)
        self._wake.set()

    def _fetching(self) -> int:
        return len(self.held) - len(self.committing)

    async def run(self) -> None:
        """Claim chunks while sources wait and fewer than two chunks wait to be fetched;
        renew."""
        renewing = asyncio.create_task(self._renew())
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                # Claim ahead, and count only sources not fetched yet: a source stays
                # held until its write commits, and counting those left the fetch
                # slots idle behind the writer's batches.
                # Each claim fills the allowance, once a chunk of it is free: one
                # transaction per chunk, and the first one (made before any request
                # is out, while the writer's thread has the interpreter to itself)
                # covers two.
                while self._waiting and self._fetching() <= self.chunk:
                    await self._claim_next(2 * self.chunk - self._fetching())
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing

    async def _claim_next(self, limit: int) -> None:
        # The window alone: copying every waiting source first made a run's claims
        # quadratic in its due sources (seconds of the loop at 50,000).
        window = dict(itertools.islice(self._waiting.items(), self.chunk * WINDOW_CHUNKS))
        urls = {sid: waiting.url for sid, waiting in window.items()}
        store, owner, now = self.store, self.owner, self.clock()

        def claim() -> dict[str, SourceState]:
            return store.claim_sources(urls, owner=owner, now=now, limit=limit,
                                       force=self.force, lease_seconds=self.lease_seconds)

        try:
            claimed: dict[str, SourceState] = await self.call(claim)
        except Exception as exc:  # each waiting source reports it
            for sid, waiting in window.items():
                del self._waiting[sid]
                if not waiting.answer.done():
                    waiting.answer.set_exception(exc)
            return
        self.claims += 1
        everything = len(claimed) < limit  # the rest of the window is not ours
        for sid, waiting in window.items():
            if sid in claimed:
                self.held.add(sid)
            elif not everything:
                continue
            del self._waiting[sid]
            if not waiting.answer.done():
                waiting.answer.set_result(claimed.get(sid))
            elif sid in claimed:  # nobody waits for it any more
                self.finished(sid)

    async def _renew(self) -> None:
        store, owner, seconds = self.store, self.owner, self.lease_seconds
        while True:
            await asyncio.sleep(seconds / 3)
            if not self.held:
                continue
            try:
                await self.call(lambda: store.renew_leases(owner=owner, lease_seconds=seconds))
            except Exception as exc:  # the leases may run out; the run goes on
                lease_trouble(exc, "could not renew the leases of %s", owner)

    async def release(self, source_id: str, *, not_before: dt.datetime | None = None) -> None:
        """Give back one lease now (a claimed source that ended without a write); see
        :meth:`~signal_feeds.store.protocol.FeedStore.release_sources` for
        ``not_before``."""
        store, owner = self.store, self.owner
        try:
            await self.call(lambda: store.release_sources([source_id], owner=owner,
                                                          not_before=not_before))
        except Exception as exc:  # it expires instead
            lease_trouble(exc, "could not release the lease on %s", source_id)
        self.finished(source_id)


def lease_trouble(exc: BaseException, what: str, name: str) -> None:
    """Log a lease that could not be renewed or given back (it runs out instead), as
    loud as :func:`~signal_feeds.errors.log_level_of` says."""
    log.log(log_level_of(exc), f"{what}: %s", name, exc)
