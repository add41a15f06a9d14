"""What follows a write the run queued: the lease given back with it, and the source's
report once it is committed (or not)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from signal_feeds.decide.decider import Decision
from signal_feeds.decide.report import SourceReport
from signal_feeds.errors import DatabaseUnavailableError, StoreError
from signal_feeds.run.claims import lease_trouble
from signal_feeds.store.protocol import FeedStore

__all__ = ["releasing", "report_when_written"]


def releasing(write: Callable[[], Any], store: FeedStore, source_id: str,
               owner: str) -> Callable[[], Any]:
    """``write``, then the source's lease given back in the same transaction (the
    writer's batch): the new next poll time and the end of the lease commit together,
    so no other worker finds the source due in between. A failed write gives the lease
    back too (its failure is the source's outcome for this interval)."""

    def apply() -> Any:
        try:
            return write()
        finally:
            try:
                store.release_sources([source_id], owner=owner)
            except StoreError as exc:  # it expires instead; the response is stored
                lease_trouble(exc, "could not release the lease on %s", source_id)

    return apply


def report_when_written(report: asyncio.Future[SourceReport], decision: Decision,
            written: asyncio.Future[Any]) -> None:
    """The report line once the write is committed (or failed)."""
    # Taken first: a stopped run has cancelled the report, and a failure left unread
    # would be printed by asyncio as "Future exception was never retrieved".
    exc = written.exception() if not written.cancelled() else None
    if report.cancelled():
        return
    if written.cancelled():
        report.cancel()
    elif (isinstance(exc, StoreError) and not isinstance(exc, DatabaseUnavailableError)
          and decision.write == "apply_response"):
        report.set_result(decision.store_failed(exc.message))
    elif exc is not None:
        report.set_exception(exc)
        # Its source's task re-raises it; after a stop (the database gone) nobody waits
        # for it any more, and asyncio would print it as "never retrieved".
        report.exception()
    elif decision.write == "apply_response":
        report.set_result(decision.with_counts(written.result()))
    else:
        report.set_result(decision.report)
