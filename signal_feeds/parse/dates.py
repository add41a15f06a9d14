"""An entry's dates, from what feedparser read and the text it read them from.

feedparser reads nearly every date a feed writes. Two kinds it misreads, silently:
- a Unix timestamp (``1733047200``): the first four digits become a year;
- an RFC 822 date whose zone name its table lacks (``10:00:00 CET``): read as UTC.
The first is read here; the second is corrected for a few unambiguous zone names, and
reported for the others. feedparser itself is neither changed nor asked anything new.
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["ZONE_OFFSETS", "date_warnings", "entry_date"]

_ISO = "%Y-%m-%dT%H:%M:%SZ"
#: Zone names feedparser's RFC 822 reader does not know, with their offsets from UTC in
#: minutes: only names that mean one zone (IST and BST each name several: reported).
ZONE_OFFSETS: Mapping[str, int] = {
    "utc": 0, "wet": 0, "west": 60, "cet": 60, "cest": 120, "eet": 120, "eest": 180,
    "msk": 180, "hkt": 480, "sgt": 480, "awst": 480, "jst": 540, "kst": 540,
    "acst": 570, "acdt": 630, "aest": 600, "aedt": 660, "nzst": 720, "nzdt": 780,
    "hst": -600, "akst": -540, "akdt": -480,
}
# "Tue, 01 Dec 2026 10:00:00 CET": the time and a zone name at the end.
_RFC822_ZONE = re.compile(
    r"^(?:[A-Za-z]{2,9},?\s+)?\d{1,2}\s+[A-Za-z]{3,9}\.?\s+\d{2,4}\s+(\d{1,2}):(\d{2})"
    r"(?::\d{2})?\s+([A-Za-z]{2,5})$")


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _iso(value: Any) -> str:
    if not isinstance(value, time.struct_time):
        return ""
    try:
        return time.strftime(_ISO, value)
    except (ValueError, OverflowError):
        return ""


def _read_as_utc(text: str, parsed: Any) -> str | None:
    """The zone name of an RFC 822 ``text`` that feedparser read as UTC (its clock time
    came out unchanged), else ``None``."""
    match = _RFC822_ZONE.match(text)
    if match is None or not isinstance(parsed, time.struct_time):
        return None
    hour, minute, zone = int(match[1]), int(match[2]), match[3].lower()
    if (parsed.tm_hour, parsed.tm_min) != (hour, minute) or zone in ("gmt", "ut", "z"):
        return None
    return zone


def entry_date(raw: dict[str, Any], key: str) -> str:
    """``published`` or ``updated`` of a feedparser entry as ISO 8601 UTC (``""`` when
    unknown): feedparser's reading, but a Unix timestamp read as one (seconds, 9 or 10
    digits, or milliseconds, 12 or 13), and a zone name of :data:`ZONE_OFFSETS` applied."""
    # dict.get: FeedParserDict's own get would answer "updated" with "published".
    text = _text(dict.get(raw, key))
    if text.isascii() and text.isdigit() and len(text) in (9, 10, 12, 13):
        seconds = int(text) / (1000 if len(text) > 10 else 1)
        return time.strftime(_ISO, time.gmtime(seconds))
    parsed = dict.get(raw, f"{key}_parsed")
    zone = _read_as_utc(text, parsed)
    if zone is not None and zone in ZONE_OFFSETS and isinstance(parsed, time.struct_time):
        moment = calendar.timegm(parsed) - ZONE_OFFSETS[zone] * 60
        return time.strftime(_ISO, time.gmtime(moment))
    return _iso(parsed)


def date_warnings(raw_entries: Iterable[dict[str, Any]]) -> list[str]:
    """At most two warnings for a document: the dates feedparser could not read (left
    empty, so those entries are listed by when Signal first saw them), and the zone
    names read as UTC; each with its first example and how many more."""
    unread: list[str] = []
    unknown: list[str] = []
    for raw in raw_entries:
        for key in ("published", "updated"):
            text = _text(dict.get(raw, key))
            if not text:
                continue
            parsed = dict.get(raw, f"{key}_parsed")
            if not parsed:
                unread.append(text)
            elif (zone := _read_as_utc(text, parsed)) and zone not in ZONE_OFFSETS:
                unknown.append(text)
    warnings = []
    for found, template in ((unread, "date {} not understood; left empty"),
                            (unknown, "time zone of date {} not known; read as UTC")):
        if found:
            more = f" and {len(found) - 1} more" if len(found) > 1 else ""
            warnings.append(template.format(f"{found[0][:40]!r}{more}"))
    return warnings
