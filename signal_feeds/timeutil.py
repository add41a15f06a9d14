"""UTC timestamps as text: one format everywhere Signal stores or prints a time."""

from __future__ import annotations

import datetime as dt

__all__ = ["format_time", "parse_since", "parse_time", "utcnow"]


def utcnow() -> dt.datetime:
    """The current time, timezone-aware UTC."""
    return dt.datetime.now(dt.UTC)


def format_time(moment: dt.datetime) -> str:
    """``2026-12-02T13:04:44.123456Z``: sortable as text, always UTC."""
    if moment.tzinfo is None:
        raise ValueError("naive datetime: Signal only stores timezone-aware times")
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str | None) -> dt.datetime | None:
    """Inverse of :func:`format_time`; ``None`` for an empty value."""
    if not text:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(dt.UTC)


def parse_since(text: str) -> dt.date | dt.datetime:
    """A "since" bound as typed: ``YYYY-MM-DD`` (a day), or an ISO 8601 time (UTC when
    it names no zone). Raises ``ValueError`` for anything else."""
    if len(text) == 10:
        return dt.date.fromisoformat(text)
    moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
