"""Offsets from UTC at the end of a written date, and whether any zone has them."""

from __future__ import annotations

import re

__all__ = ["no_zone_offset"]

#: Longer than any date with an offset (the search is skipped beyond).
_LONGEST = 80

# An offset at the end, after a clock time: "10:00:00 +0530", "T1000+25:00", "UTC-5".
_END_OFFSET = re.compile(r"(?:\d:\d{2}|T\d{4})(?::?\d{2})?(?:[.,]\d+)?\s*(?:(?:GMT|UTC)\s*)?"
                         r"[+-](\d{1,2})(?::?(\d{2}))?$", re.IGNORECASE)


def _real_offset(sign: str, hours: str, minutes: str) -> bool:
    return (sign in ("+", "-") and hours.isdigit() and minutes.isdigit()
            and int(hours) <= 14 and int(minutes) <= 59)


def no_zone_offset(text: str) -> bool:
    """``text`` ends in an offset no zone has: past 14 hours, or 60 minutes (``+9999``,
    ``-2400``, ``+23:00``), which feedparser and ``fromisoformat`` apply: days off."""
    # Every date is checked: those ending in a zone name or a real +hhmm / +hh:mm are
    # let through without the search.
    if not text[-1:].isdigit() or _real_offset(text[-5:-4], text[-4:-2], text[-2:]) or (
            text[-3:-2] == ":" and _real_offset(text[-6:-5], text[-5:-3], text[-2:])):
        return False
    end = _END_OFFSET.search(text, max(0, len(text) - 18)) if len(text) <= _LONGEST else None
    return end is not None and (int(end[1]) > 14 or int(end[2] or 0) > 59)
