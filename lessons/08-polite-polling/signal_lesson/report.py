"""The run report: what happened to each source, and what the run as a whole means.

A report is plain data. The command line turns it into text or JSON and into an exit
code; tests read it directly. Durations are kept for callers that want them but left out
of both renderings, so the same run prints the same thing every time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

#: Every outcome a source can have in one run.
STATUSES = (
    "fetched",  # 200: the body was parsed and stored
    "not_modified",  # 304: nothing new; the validators still count
    "not_due",  # not asked: the schedule says not yet (lesson 08)
    "moved",  # fetched through a permanent redirect (lesson 08)
    "gone",  # 410: stop asking until a person acts (lesson 08)
    "retry_later",  # 429 or 503 with Retry-After: the server asked us to wait (lesson 08)
    "expired",  # the approval of the source has run out
    "rejected",  # a response arrived but was not stored
    "failed",  # no usable response: network error, timeout, a cap, an HTTP error
)
#: Outcomes that make the run exit with 1.
FAILING = frozenset({"failed", "rejected"})
COUNTS = ("created", "updated", "unchanged", "skipped")
EXTRAS = ("moved_to", "retry_after", "next_due")


@dataclass
class SourceResult:
    source: str
    status: str
    http_status: int | None = None
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    skipped: int = 0
    error: str | None = None
    moved_to: str | None = None
    retry_after: str | None = None
    next_due: str | None = None
    duration: float = field(default=0.0, compare=False)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {"source": self.source, "status": self.status,
                                   "http_status": self.http_status}
        data.update((name, getattr(self, name)) for name in COUNTS)
        data["error"] = self.error
        data.update((name, getattr(self, name)) for name in EXTRAS
                    if getattr(self, name) is not None)
        return data


@dataclass
class Report:
    sources: list[SourceResult] = field(default_factory=list)

    def add(self, result: SourceResult) -> SourceResult:
        self.sources.append(result)
        return result

    @property
    def totals(self) -> dict[str, int]:
        """Sources, entry counts, and how many sources ended in each status (if any)."""
        totals = {"sources": len(self.sources)}
        for name in COUNTS:
            totals[name] = sum(getattr(result, name) for result in self.sources)
        for status in STATUSES:
            count = sum(result.status == status for result in self.sources)
            if count:
                totals[status] = count
        return totals

    @property
    def exit_code(self) -> int:
        """0 when no source failed or was rejected, else 1 (2 belongs to the CLI)."""
        return 1 if any(result.status in FAILING for result in self.sources) else 0

    def to_json(self) -> str:
        """One JSON object, laid out with one source per line so a person can read it."""
        rows = ",\n".join("    " + json.dumps(result.to_dict(), ensure_ascii=False)
                          for result in self.sources)
        totals = json.dumps(self.totals)
        return f'{{\n  "sources": [\n{rows}\n  ],\n  "totals": {totals}\n}}'

    def to_text(self) -> str:
        lines = []
        for result in self.sources:
            code = "-" if result.http_status is None else str(result.http_status)
            counts = ", ".join(f"{getattr(result, name)} {name}" for name in COUNTS)
            lines.append(f"{result.source:<14} {result.status:<12} {code:>3}  {counts}")
            lines.extend(f"{'':<14} {name} {getattr(result, name)}" for name in EXTRAS
                         if getattr(result, name) is not None)
            if result.error:
                lines.append(f"{'':<14} error: {result.error}")
        totals = self.totals
        statuses = ", ".join(f"{totals[s]} {s}" for s in STATUSES if s in totals)
        counts = ", ".join(f"{totals[name]} {name}" for name in COUNTS)
        lines.append(f"{totals['sources']} sources ({statuses or 'none'}); {counts}")
        return "\n".join(lines)
