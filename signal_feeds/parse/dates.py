"""An entry's dates, from what feedparser read and the text it read them from.

feedparser reads nearly every date a feed writes. Some it misreads, silently:
- a Unix timestamp (``1733047200``): the first four digits become a year;
- an RFC 822 date whose zone name its table lacks (``10:00:00 CET``): read as UTC;
- an ISO 8601 date and time with a space between them and no offset, or a zone name
  (``2026-12-01 10:00``, ``2026-12-01 10:00 CET``): the time is dropped; with a ``T``,
  the zone name is (``2026-12-01T10:00 CET``); in the basic format (``20261201T100000Z``)
  the time is dropped;
- an ISO 8601 offset without its colon that is not whole hours (``+0530``, India's, as
  PHP's ``DATE_ISO8601`` writes it): the minutes are dropped;
- a 12-hour clock (``Thu, 03 Dec 2026 1:05 PM EST``): ``PM`` is taken for the zone;
- an offset after ``UTC`` or ``GMT`` (``10:00:00 UTC+1``): read as UTC, or, written
  ``GMT+5:30``, as 53 hours back; after an ISO 8601 date and a space, the time is dropped;
- a numeric date with the year first and a slash or dots (``2026/12/05``): the day is
  dropped, and with the day first and dashes (``05-12-2026``): read as 20 December 2005.
These are read here, and the RFC 822 zone names are corrected for a few unambiguous
names and reported for the others. Some dates it does not read at all are read here too:
a month written out (``Saturday, December 5, 2026 9:00 AM``, ``Dec 5, 2026``), a month or
weekday named in German, French, Spanish, Italian, Portuguese or Dutch (``Sa, 05 Dez 2026
09:00:00 +0100``, a server's locale leaking into its RFC 822 dates), no space after the
weekday's comma, ``GMT+1``, dashes between day, month and year (RFC 850's ``Thursday,
03-Dec-26 10:00:00 GMT``), numeric dates with dots (``05.12.2026``, day first) or a day
over 12 (``13/12/2026``). feedparser itself is neither changed nor asked anything new.
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import re
import time
import zoneinfo
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from signal_feeds.parse.fields import text_value
from signal_feeds.parse.months import DAY_FIRST, MONTH_FIRST, MONTH_NAMES, MONTHS
from signal_feeds.parse.offsets import no_zone_offset
from signal_feeds.parsed import ParsedEntry

__all__ = ["EARLIEST", "EPOCH", "MONTH_NAMES", "ZONE_OFFSETS", "date_warnings", "dates_warning",
           "entry_date", "named_month_date", "plausible", "text_date",
           "timestamp_date", "unknown_iso_zone"]

_ISO = "%Y-%m-%dT%H:%M:%SZ"
#: Zone names feedparser's RFC 822 reader does not know, with their offsets from UTC in
#: minutes: only names that mean one zone (IST and BST each name several: reported).
ZONE_OFFSETS: Mapping[str, int] = {
    "utc": 0, "wet": 0, "west": 60, "cet": 60, "cest": 120, "eet": 120, "eest": 180,
    "msk": 180, "hkt": 480, "sgt": 480, "awst": 480, "jst": 540, "kst": 540,
    "acst": 570, "acdt": 630, "aest": 600, "aedt": 660, "nzst": 720, "nzdt": 780,
    "hst": -600, "akst": -540, "akdt": -480,
}
#: Zone names that are UTC to feedparser and here alike.
_UTC_NAMES = frozenset({"z", "ut", "gmt"})
# "Tue, 01 Dec 2026 10:00:00 CET" (or "Tue Dec 01 2026 ..."): the time and a zone name
# at the end.
_RFC822_ZONE = re.compile(
    r"^(?:[A-Za-z]{2,9},?\s+)?(?:\d{1,2}\s+[A-Za-z]{3,9}\.?|[A-Za-z]{3,9}\.?\s+\d{1,2},?)"
    r"\s+\d{2,4}\s+(\d{1,2}):(\d{2})(?::\d{2})?\s+([A-Za-z]{2,5}|"
    r"[A-Za-z]+(?:/[A-Za-z0-9_+-]+)+|[A-Z]{3}\d[A-Z]{3})$")  # or America/New_York, PST8PDT
# An ISO 8601 date and time, then maybe a zone: "2026-12-01 10:00", "2026-12-03T10:00:00
# +0530", "2026-12-01T10:00 CET". feedparser drops the time after a space when no offset
# follows, applies only the hours of an offset without its colon, and drops a zone name.
_ISO_DATE_TIME = re.compile(
    r"^(\d{4})-(\d{1,2})-(\d{1,2})[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:[.,]\d+)?)?"
    r"(?:\s*(Z|[+-]\d{2}:?\d{2}|[A-Za-z]{2,5}|"
    r"[A-Za-z]+(?:/[A-Za-z0-9_+-]+)+|[A-Z]{3}\d[A-Z]{3}))?$")  # or America/New_York, PST8PDT
# ISO 8601's basic format, "20261205T090703Z": feedparser drops the time.
_ISO_BASIC = re.compile(r"^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})?(Z|[+-]\d{2}:?\d{2})?$")
# A 12-hour clock: "1:05 PM", "9:00 a.m.".
_TWELVE_HOUR = re.compile(r"\d\s*[AaPp]\.?[Mm]\b")


# The North American names feedparser's RFC 822 reader knows, read the same way here.
_NORTH_AMERICAN = {"est": -300, "edt": -240, "cst": -360, "cdt": -300, "mst": -420,
                   "mdt": -360, "pst": -480, "pdt": -420}


def _offset_minutes(zone: str | None) -> int | None:
    """Minutes east of UTC of ``Z``, ``+01:00``, ``-0500``, ``GMT+1`` or a zone name (no
    zone: UTC, as feedparser reads a bare time); ``None`` when unknown."""
    if not zone or zone.lower() in _UTC_NAMES:
        return 0
    if zone[:3].upper() in ("GMT", "UTC") and zone[3:4] in ("+", "-"):
        zone = zone[3:]
    if zone[0] in "+-":
        digits = zone[1:].replace(":", "")
        # "+0100", "+01:00", or the hours alone ("GMT+1")
        hours, minutes = (digits, "0") if len(digits) <= 2 else (digits[:-2], digits[-2:])
        total = int(hours) * 60 + int(minutes)
        return total if zone[0] == "+" else -total
    return ZONE_OFFSETS.get(zone.lower(), _NORTH_AMERICAN.get(zone.lower()))


# "05.12.2026 10:00", "13/12/2026", "2026/12/05": numeric dates with the day or the month
# first, or the year first with a slash or dots. feedparser reads "05-12-2026" as 20
# December 2005 and "2026/12/05" and "2026.12.05" as 1 December (and drops their time),
# and does not read the others.
_NUMERIC = re.compile(
    r"^(\d{1,4})([./-])(\d{1,2})\2(\d{1,4})\.?(?:(?:,?\s+|T)(\d{1,2})[:.](\d{2})"
    r"(?:[:.](\d{2}))?(?:\s*([AaPp]\.?[Mm]\.?)|\s*Uhr)?"
    r"(?:\s*(Z|[+-]\d{2}:?\d{2}|[A-Za-z]{2,5}))?)?$")


def _on_24_hours(hour: int, marker: str | None) -> int | None:
    """``hour`` of a 12-hour clock (``marker`` AM or PM, any case or dotted) on a 24-hour
    one; ``None`` when it is no such hour. Without a marker, the hour as written."""
    if not marker:
        return hour
    if not 1 <= hour <= 12:
        return None
    return hour % 12 + (12 if marker[0] in "Pp" else 0)


def _numeric_date(text: str) -> str | None:
    """A numeric date of the forms above as ISO 8601 UTC; ``""`` when it is one of them
    but cannot be told apart (``05/12/2026``: May or December?) or names no real moment;
    ``None`` when it is not (ISO 8601's ``2026-12-05`` is feedparser's to read, and
    :func:`_iso_misread`'s).

    Dots mean the day comes first (``05.12.2026`` is 5 December, in every language that
    writes dates so); with a slash or a dash, only a day over 12 tells which is which."""
    match = _NUMERIC.match(text)
    if match is None:
        return None
    first, separator, second, last = match[1], match[2], int(match[3]), match[4]
    if len(first) == 4 and len(last) <= 2:
        if separator == "-" and not match[8]:  # ISO 8601, but not with PM, which it drops
            return None
        year, month, day = int(first), second, int(last)
    elif len(last) == 4 and len(first) <= 2:
        year, number = int(last), int(first)
        if separator == "." or number > 12 >= second:
            day, month = number, second
        elif second > 12 >= number:
            month, day = number, second
        else:
            return ""
    else:
        return None
    offset = _offset_minutes(match[9])
    hour = _on_24_hours(int(match[5] or 0), match[8])
    if hour is None or offset is None:
        return ""
    try:
        date = dt.datetime(year, month, day, tzinfo=dt.UTC)
    except ValueError:  # 31.11.2026
        return ""
    minute, second = int(match[6] or 0), int(match[7] or 0)
    if hour > 23 or minute > 59 or second > 59:  # no such time: the date alone
        return date.strftime(_ISO)
    return _in_utc(date + dt.timedelta(hours=hour, minutes=minute, seconds=second), offset)


def _iso_misread(text: str, parsed: Any) -> str | None:
    """``text`` read whole when it is an ISO 8601 date and time that feedparser misreads
    (see ``_ISO_DATE_TIME``) or did not read (``parsed`` is not a time), ``""`` when its
    offset takes it past the calendar's ends; ``None`` when it is not one. A zone name
    not known is read as UTC (:func:`date_warnings` says so), as in an RFC 822 date."""
    match = _ISO_DATE_TIME.match(text) or _ISO_BASIC.match(text)
    if match is None:
        return None
    year, month, day, hour, minute = (int(match[i]) for i in range(1, 6))
    zone = match[7] or ""
    dropped = (not isinstance(parsed, time.struct_time) or (
        (parsed.tm_year, parsed.tm_mon, parsed.tm_mday) == (year, month, day)
        and (parsed.tm_hour, parsed.tm_min, parsed.tm_sec) == (0, 0, 0)
        and (hour, minute) != (0, 0)))
    named = zone[:1].isalpha() and zone.lower() not in _UTC_NAMES
    minutes = zone[:1] in ("+", "-") and ":" not in zone and not zone.endswith("00")
    offset = _offset_minutes(zone)
    if not (dropped or named or minutes) or hour > 23 or minute > 59:
        return None
    region = _tz_region(zone) if offset is None else None
    try:
        moment = dt.datetime(year, month, day, hour, minute, min(int(match[6] or 0), 59),
                             tzinfo=region or dt.UTC)
    except ValueError:  # 2026-02-30
        return None
    if region is not None:  # with that zone's summer time on that date
        try:
            return moment.astimezone(dt.UTC).strftime(_ISO)
        except OverflowError:
            return ""
    return _in_utc(moment, offset or 0)


def _in_utc(clock: dt.datetime, offset: int) -> str:
    """``clock``, a time ``offset`` minutes east of UTC, as ISO 8601 UTC; ``""`` when the
    offset takes it past the calendar's ends (``31.12.9999 23:59 -2359``, ``0001-01-01
    00:10 CET``): one date left unread, where an OverflowError rejected the whole feed."""
    try:
        return (clock - dt.timedelta(minutes=offset)).strftime(_ISO)
    except OverflowError:
        return ""


#: Longer than any date these forms write ("Wednesday, September 30th, 2026 at 12:30
#: p.m. GMT+05:30" is 50 characters).
_LONGEST_DATE = 80


def named_month_date(text: str) -> str:
    """A date that names its month (an RFC 822 date among them), as ISO 8601 UTC: the
    forms feedparser does not read (see the module's docstring) and the RFC 822 dates a
    JSON Feed should not have; ``""`` when it is not one, or names no real moment."""
    if len(text) > _LONGEST_DATE:
        return ""
    # One space between words: the expressions' adjacent optional spaces then cannot
    # split a long run of white space in every way (quadratic backtracking).
    text = " ".join(text.split())
    match = DAY_FIRST.match(text)
    if match is not None:
        day, month, year = match[1], match[2], match[3]
    elif (match := MONTH_FIRST.match(text)) is not None:
        month, day, year = match[1], match[2], match[3]
    else:
        return ""
    number = MONTHS.get(month.lower())
    offset = _offset_minutes(match[8])
    if number is None or offset is None:
        return ""
    hour = _on_24_hours(int(match[4] or 0), match[7])
    if hour is None:
        return ""
    minute, second = int(match[5] or 0), int(match[6] or 0)
    full_year = int(year)
    if len(year) == 2:  # RFC 2822's rule for a two-digit year
        full_year += 2000 if full_year < 50 else 1900
    try:
        moment = dt.datetime(full_year, number, int(day), hour, minute, second, tzinfo=dt.UTC)
    except ValueError:  # 31 November, 24:00, minute 60
        return ""
    return _in_utc(moment, offset)


def _iso(value: Any) -> str:
    if not isinstance(value, time.struct_time):
        return ""
    try:
        return time.strftime(_ISO, value)
    except (ValueError, OverflowError):
        return ""


#: The earliest date stored. feedparser reads some scraps as a date of the first
#: millennium ("03" is the year 201), which no feed means, and which ``%Y`` writes with
#: fewer than four digits on some systems, out of order with every other date.
EARLIEST = "1000-01-01T00:00:00Z"


def _unread(parsed: Any) -> bool:
    """feedparser did not read the date, or read it as the first millennium."""
    return not isinstance(parsed, time.struct_time) or parsed.tm_year < 1000


#: The Unix epoch: what a publishing system writes for a date it never had (a zero
#: timestamp formatted). No entry was published at that second.
EPOCH = "1970-01-01T00:00:00Z"


def plausible(iso: str) -> str:
    """``iso`` if it is a date as rows store them (four-digit year, from
    :data:`EARLIEST` on, not :data:`EPOCH`), else ``""``."""
    return iso if len(iso) == len(EARLIEST) and iso >= EARLIEST and iso != EPOCH else ""


def unknown_iso_zone(text: str) -> bool:
    """An ISO 8601 date and time that ends in a zone name not known (``IST``)."""
    match = _ISO_DATE_TIME.match(text)
    zone: str = (match[7] or "") if match is not None else ""
    return (zone[:1].isalpha() and _offset_minutes(zone) is None
            and _tz_region(zone) is None)


def _read_as_utc(text: str, parsed: Any) -> str | None:
    """The zone name of an RFC 822 ``text`` that feedparser read as UTC (its clock time
    came out unchanged), else ``None``."""
    match = _RFC822_ZONE.match(text)
    if match is None or not isinstance(parsed, time.struct_time):
        return None
    hour, minute, zone = int(match[1]), int(match[2]), match[3]
    if (parsed.tm_hour, parsed.tm_min) != (hour, minute) or zone.lower() in _UTC_NAMES:
        return None
    return zone


def _in_zone(zone: str, parsed: Any) -> str | None:
    """ISO 8601 UTC of the clock time ``parsed`` in ``zone``: a name of
    :data:`ZONE_OFFSETS`, or of the tz database (``America/New_York``, ``PST8PDT``, read
    with its summer time on that date); ``None`` when the zone is not known."""
    offset = ZONE_OFFSETS.get(zone.lower())
    if offset is not None:
        return time.strftime(_ISO, time.gmtime(calendar.timegm(parsed) - offset * 60))
    region = _tz_region(zone)
    if region is None:
        return None
    try:
        year, month, day, hour, minute, second = parsed[:6]
        local = dt.datetime(year, month, day, hour, minute, second, tzinfo=region)
    except ValueError:  # a leap second
        return None
    try:
        return local.astimezone(dt.UTC).strftime(_ISO)
    except OverflowError:  # past 9999 in UTC: unread, not read as UTC
        return ""


def _tz_region(zone: str) -> zoneinfo.ZoneInfo | None:
    """The tz database's zone of that name (``America/New_York``, ``PST8PDT``), if the
    name has that form and this machine's database has it."""
    return _region(zone) if "/" in zone or zone[3:4].isdigit() else None


@functools.lru_cache(maxsize=64)
def _region(name: str) -> zoneinfo.ZoneInfo | None:
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return None  # not a zone, or no tz database on this machine: warned of


def text_date(text: str) -> str:
    """A date's text alone (no reading of feedparser's to start from, as in JSON Feed) as
    ISO 8601 UTC, or ``""``: the numeric, ISO and month-name forms above."""
    return plausible(_read(text.strip(), None))


def entry_date(raw: dict[str, Any], key: str) -> str:
    """``published`` or ``updated`` of a feedparser entry as ISO 8601 UTC (``""`` when
    unknown): feedparser's reading, but a Unix timestamp read as one (seconds, 9 or 10
    digits, or milliseconds, 12 or 13), and a zone name of :data:`ZONE_OFFSETS` applied."""
    # dict.get: FeedParserDict's own get would answer "updated" with "published".
    text = text_value(dict.get(raw, key))
    if (stamp := timestamp_date(text)) is not None:
        return stamp
    return plausible(_read(text, dict.get(raw, f"{key}_parsed")))


def timestamp_date(text: str) -> str | None:
    """A date of nine digits or more (a Unix timestamp, a compact date and time) as
    ISO 8601 UTC, ``""`` when it is no date; ``None`` for any other text (``2026``,
    ``20261205`` are ISO 8601's to read)."""
    if not (text.isascii() and text.isdigit()) or len(text) < 9:
        return None
    if len(text) in (9, 10, 13):
        seconds = int(text) / (1000 if len(text) > 10 else 1)
        return plausible(time.strftime(_ISO, time.gmtime(seconds)))
    if len(text) == 14:
        # A compact date and time, 20261205100000: feedparser kept the day alone.
        try:
            moment = dt.datetime.strptime(text, "%Y%m%d%H%M%S").replace(tzinfo=dt.UTC)
        except ValueError:
            return ""
        return plausible(moment.strftime(_ISO))
    # Seconds past the year 2286, or milliseconds before September 2001: both unlikely,
    # and feedparser's own reading is no date at all (12345678901 as 2012-12-10);
    # 253402300800, the first second of the year 10000, is a "never". Longer still
    # (microseconds): 1733047200000000 was read as 1733-02-16.
    return ""


#: The calendar date an ISO 8601 text starts with.
_ISO_DAY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?!\d)")


def _no_such_iso_day(text: str) -> bool:
    """``text`` starts with an ISO 8601 date that does not exist (``2026-02-30``,
    ``2026-13-01``), which feedparser rolls over into another (2 March, January 2027)."""
    match = _ISO_DAY.match(text)
    if match is None:
        return False
    try:
        dt.date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return True
    return False


# An ISO 8601 date's year, with its sign if it has one.
_ISO_YEAR = re.compile(r"^([+-]?)(\d{4,})-\d")


def _out_of_range(text: str) -> bool:
    """``text`` writes a year before 1000 or past 9999 (``-0001-01-01``, ``10000-01-01``,
    ``01 Jan 0001``), which feedparser, when it reads it at all, reads as another date:
    2000, 2010, or the year 2359 out of the offset of ``01 Jan 0001 00:00:00 +2359``; or
    an offset no zone has (:func:`no_zone_offset`)."""
    if no_zone_offset(text):
        return True
    if (iso := _ISO_YEAR.match(text)) is not None:
        return bool(iso[1]) or not 1000 <= int(iso[2]) <= 9999
    if len(text) > _LONGEST_DATE:
        return False
    words = " ".join(text.split())
    named = DAY_FIRST.match(words) or MONTH_FIRST.match(words)
    return named is not None and len(named[3]) == 4 and int(named[3]) < 1000


# An offset written after UTC or GMT, at the end: feedparser reads "UTC+1" as UTC,
# "GMT+5:30" as 53 hours back, and drops the time of an ISO date before either.
_NAMED_OFFSET = re.compile(r"\s*(?:GMT|UTC)([+-])(\d{1,2})(?::?(\d{2}))?$", re.IGNORECASE)


# An RFC 822 date's two-digit year: "Mon, 01 Dec 69 10:00:00 GMT".
_TWO_DIGIT_YEAR = re.compile(r"^(?:[A-Za-z]{2,9},?\s+)?\d{1,2}\s+[A-Za-z]{3,9}\.?\s+(\d{2})\s")


def _last_century(text: str, parsed: Any) -> Any:
    """``parsed`` a century back when ``text`` writes a year from 50 to 89 in two digits:
    1950 to 1989 (RFC 5322, 4.3), which feedparser reads as 2050 to 2089."""
    two = _TWO_DIGIT_YEAR.match(text)
    if two is None or int(two[1]) < 50 or _unread(parsed) or parsed.tm_year < 2050:
        return parsed
    return time.struct_time((parsed.tm_year - 100, *parsed[1:]))


def _read(text: str, parsed: Any) -> str:
    if (named := _NAMED_OFFSET.search(text)) is not None and (
            int(named[2]) <= 14 and int(named[3] or 0) < 60):
        # Read with the plain offset it names (+05:30), as the other forms are.
        return _read(f"{text[:named.start()]} {named[1]}{int(named[2]):02d}:"
                     f"{named[3] or '00'}", None)
    if (numeric := _numeric_date(text)) is not None:
        return numeric
    if _no_such_iso_day(text) or _out_of_range(text):
        return ""
    parsed = _last_century(text, parsed)
    if _unread(parsed):
        misread = _iso_misread(text, None)
        return misread if misread is not None else named_month_date(text)
    if (misread := _iso_misread(text, parsed)) is not None:
        return misread
    if _TWELVE_HOUR.search(text) and (read := named_month_date(text)):
        return read
    zone = _read_as_utc(text, parsed)
    if zone is not None and (moment := _in_zone(zone, parsed)) is not None:
        return moment
    return _iso(parsed)


def date_warnings(raw_entries: Iterable[dict[str, Any]],
                  entries: Iterable[ParsedEntry]) -> list[str]:
    """At most two warnings for a document: the dates that could not be read (left empty,
    so those entries are listed by when Signal first saw them), and the zone names read
    as UTC; each with its first example and how many more. ``entries`` are the entries
    read from ``raw_entries``, one for one: what was stored tells what was read."""
    unread: list[str] = []
    unknown: list[str] = []
    for raw, entry in zip(raw_entries, entries, strict=True):
        for key, stored in (("published", entry.published), ("updated", entry.updated)):
            text = text_value(dict.get(raw, key))
            if not text:
                continue
            parsed = dict.get(raw, f"{key}_parsed")
            if not stored:
                unread.append(text)
            elif not _unread(parsed) and _zone_unknown(text, parsed):
                unknown.append(text)
    return [warning for found, template in (
                (unread, "date {} not understood; left empty"),
                (unknown, "time zone of date {} not known; read as UTC"))
            if (warning := dates_warning(found, template))]


def _zone_unknown(text: str, parsed: Any) -> bool:
    """A date read as UTC for want of its zone: an RFC 822 zone name feedparser took for
    UTC and not in :data:`ZONE_OFFSETS`, or an ISO time's zone name (not a 12-hour
    clock's PM, which the numeric reader reads)."""
    zone = _read_as_utc(text, parsed)
    if zone is not None:
        return _in_zone(zone, parsed) is None
    return unknown_iso_zone(text) and _numeric_date(text) is None


def dates_warning(found: Sequence[str], template: str) -> str:
    """One warning for a document's dates in ``found``: ``template`` with its ``{}``
    naming the first date and how many more; ``""`` when there are none."""
    if not found:
        return ""
    more = f" and {len(found) - 1} more" if len(found) > 1 else ""
    return template.format(f"{found[0][:40]!r}{more}")
