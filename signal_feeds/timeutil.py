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
    # isoformat, not strftime: "%Y" writes the year 999 as "999", which sorts as text
    # after every four-digit year.
    return moment.astimezone(dt.UTC).isoformat(timespec="microseconds")[:-6] + "Z"


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
    moment = moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
    try:
        moment.astimezone(dt.UTC)
    except OverflowError as exc:  # 0001-01-01T00:00+05:00 is before the year 1 in UTC
        raise ValueError(f"{text!r} is out of range in UTC") from exc
    return moment
