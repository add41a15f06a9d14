"""The run report: what happened to each source, and the totals.

Plain data: the decider (:mod:`signal_feeds.decide.decider`) makes each line; the
run collects them.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from signal_feeds.timeutil import format_time

__all__ = ["FAILING_STATUSES", "Progress", "RunReport", "SourceReport", "SourceStatus"]

#: ``leased``: another worker on the same database holds the source (it fetches it).
SourceStatus = Literal["fetched", "not_modified", "not_due", "moved", "gone", "retry_later",
                       "expired", "rejected", "failed", "leased"]
#: Outcomes that make ``signal fetch`` exit with 1.
FAILING_STATUSES: frozenset[str] = frozenset({"rejected", "failed"})


@dataclass(frozen=True)
class SourceReport:
    """The outcome for one source in one run."""

    source: str
    status: SourceStatus
    http_status: int | None = None
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    skipped: int = 0
    #: What went wrong, or ``None`` (``null`` in JSON) when nothing did.
    error: str | None = None
    #: Seconds from the source's request going out to its outcome written; the wait
    #: for a free slot before it is not counted. For a source not requested, the time
    #: its decision took.
    duration: float = 0.0
    moved_to: str = ""
    retry_after: dt.datetime | None = None
    next_due: dt.datetime | None = None
    warnings: tuple[str, ...] = ()
    #: Set when ``--force`` was asked for but a ``Retry-After`` still held.
    note: str = ""
    #: Why entries were skipped, e.g. ``"no id and no usable link (scheme javascript:
    #: is not http or https)"``; empty when none were.
    skip_reasons: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of the ``signal fetch --json`` contract."""
        data: dict[str, Any] = {
            "source": self.source, "status": self.status, "http_status": self.http_status,
            "created": self.created, "updated": self.updated, "unchanged": self.unchanged,
            "skipped": self.skipped, "skipped_reasons": list(self.skip_reasons),
            "error": self.error or None,
            "duration_ms": round(self.duration * 1000, 1),
        }
        if self.moved_to:
            data["moved_to"] = self.moved_to
        if self.retry_after is not None:
            data["retry_after"] = format_time(self.retry_after)
        if self.next_due is not None:
            data["next_due"] = format_time(self.next_due)
        if self.warnings:
            data["warnings"] = list(self.warnings)
        if self.note:
            data["note"] = self.note
        return data


@dataclass(frozen=True)
class RunReport:
    """Every source's outcome in one run, in source-list order."""

    sources: tuple[SourceReport, ...]
    started_at: dt.datetime
    duration: float = 0.0
    database: str = ""
    #: Entries created, updated, unchanged and skipped, sources in all and per status
    #: (read-only: the report is a record of what happened).
    totals: Mapping[str, int] = field(init=False, compare=False, hash=False)
    #: Where each source's report is (for :meth:`get`, asked once per source by a
    #: program going through a run of thousands).
    _index: Mapping[str, int] = field(init=False, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        index: dict[str, int] = {}
        totals = {"sources": len(self.sources), "created": 0, "updated": 0, "unchanged": 0,
                  "skipped": 0}
        for position, rep in enumerate(self.sources):
            index.setdefault(rep.source, position)
            totals["created"] += rep.created
            totals["updated"] += rep.updated
            totals["unchanged"] += rep.unchanged
            totals["skipped"] += rep.skipped
            totals[rep.status] = totals.get(rep.status, 0) + 1
        object.__setattr__(self, "_index", index)
        object.__setattr__(self, "totals", MappingProxyType(totals))

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (a run in a worker process) and copied as what it was made from: the
        # totals' read-only view cannot be pickled, and is computed again.
        return type(self), (self.sources, self.started_at, self.duration, self.database)

    @property
    def ok(self) -> bool:
        """False when some source failed or was rejected."""
        return not any(r.status in FAILING_STATUSES for r in self.sources)

    def get(self, source_id: str) -> SourceReport:
        """The report of one source; ``KeyError`` for a source this run did not cover
        (unlike ``dict.get``, never ``None``: every source a run was given has one)."""
        return self.sources[self._index[source_id]]

    def to_dict(self) -> dict[str, Any]:
        """The report as one JSON-ready object: ``sources`` and ``totals``."""
        return {"sources": [r.to_dict() for r in self.sources], "totals": dict(self.totals),
                "started_at": format_time(self.started_at),
                "duration_ms": round(self.duration * 1000, 1), "database": self.database}

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), ensure_ascii=False)

    def lines(self) -> Sequence[str]:
        """A short human-readable summary, one line per source and one for the totals."""
        out = []
        for r in self.sources:
            counts = (f"+{r.created} ~{r.updated} ={r.unchanged}"
                      + (f" skipped {r.skipped}" if r.skipped else "")
                      + (f" ({'; '.join(r.skip_reasons)})" if r.skip_reasons else ""))
            extra = ""
            if r.warnings:  # what the parse read leniently, cut or corrected
                noun = "warning" if len(r.warnings) == 1 else f"{len(r.warnings)} warnings"
                counts += f" ({noun}: {'; '.join(r.warnings)})"
            if r.moved_to:
                extra += f" -> {r.moved_to}"
            if r.retry_after is not None:
                # The server's word is the earliest; the backoff may poll later still.
                poll = r.next_due if r.next_due and r.next_due > r.retry_after else None
                extra += (f" (retry after {format_time(r.retry_after)}"
                          + (f"; next poll {format_time(poll)}" if poll else "") + ")")
            elif r.status == "not_due" and r.next_due is not None:
                extra += f" (due {format_time(r.next_due)})"
            if r.error:
                extra += f": {r.error}"
            elif r.note:  # why nothing was asked: a lease, a pause, --force refused
                extra += f": {r.note}"
            http = f" [{r.http_status}]" if r.http_status else ""
            out.append(f"{r.source:<24} {r.status:<12}{http} {counts}{extra}")
        out.append(self.summary())
        return out

    def summary(self, *, skipped_note: str = "") -> str:
        """The totals line of :meth:`lines`; ``skipped_note`` follows the skipped count
        (where to find the reasons, when their sources' lines are not shown)."""
        t = self.totals
        by_status = ", ".join(f"{t[s]} {s}" for s in sorted(t)
                              if s not in ("sources", "created", "updated", "unchanged",
                                           "skipped"))
        noun = "source" if t["sources"] == 1 else "sources"
        # Every source has a status: none to count means the list named no source.
        return (f"{t['sources']} {noun}: {t['created']} created, {t['updated']} updated, "
                f"{t['unchanged']} unchanged, {t['skipped']} skipped{skipped_note}; "
                + (by_status or "the source list names none"))


@dataclass(frozen=True)
class Progress:
    """A snapshot for progress displays: called after each source finishes."""

    done: int
    total: int
    failed: int
    #: Source ids still being fetched, the longest-running first.
    in_flight: tuple[str, ...]
    last: SourceReport
