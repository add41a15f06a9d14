"""Dates that write their month as a word, in English and in the languages a server's
locale most often leaks into feeds (German, French, Spanish, Italian, Portuguese, Dutch):
the names, and the two orders they come in (read by :mod:`signal_feeds.parse.dates`)."""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["DAY_FIRST", "MONTHS", "MONTH_FIRST", "MONTH_NAMES"]

#: Names and abbreviations by month; no name is in two months (a test checks).
MONTH_NAMES = (
    "january jan janvier janv enero ene gennaio gen janeiro januar januari jänner jän",
    "february feb février fevrier févr fevr fév febrero febbraio fevereiro fev februar "
    "februari",
    "march mar märz maerz mär mrz mars marzo março marco maart mrt",
    "april apr avril avr abril abr aprile",
    "may mai mayo maggio mag maio mei",
    "june jun juin junio giugno giu junho juni",
    "july jul juillet juil julio luglio lug julho juli",
    "august aug août aout agosto ago augustus",
    "september sep sept septembre septiembre setiembre set settembre setembro",
    "october oct octobre octubre ottobre ott outubro out oktober okt",
    "november nov novembre noviembre novembro",
    "december dec décembre decembre déc diciembre dic dicembre dezembro dezember dez",
)

#: Each name of :data:`MONTH_NAMES` with its month's number.
MONTHS: Mapping[str, int] = {name: number for number, names in enumerate(MONTH_NAMES, start=1)
                             for name in names.split()}
# Drupal's medium date: "Saturday, December 5, 2026 - 10:00".
_CLOCK = (r"(?:,?\s+(?:at\s+|um\s+|à\s+|a las\s+|alle\s+|às\s+|om\s+|-\s+)?(\d{1,2})[:.](\d{2})"
          r"(?:[:.](\d{2}))?\s*([AaPp]\.?[Mm]\.?)?)?")
_ZONE = r"(?:\s*(Z|[+-]\d{2}:?\d{2}|(?:GMT|UTC)[+-]\d{1,2}(?::?\d{2})?|[A-Za-z]{1,5}))?"
_WEEKDAY = r"(?:[^\W\d_]{2,12}\.?(?:,\s*|\s+))?"
# "Sa, 05 Dez 2026 09:00:00 +0100", "Sat,05 Dec 2026 09:00 GMT", "5. Dezember 2026",
# "Thursday, 03-Dec-26 10:00:00 GMT"
DAY_FIRST = re.compile(rf"^{_WEEKDAY}(\d{{1,2}})(?:\.?\s*|-)(?:de\s+)?([^\W\d_]{{3,10}})"
                       rf"(?:\.?,?\s+|-)(?:de\s+)?(\d{{4}}|\d{{2}}){_CLOCK}{_ZONE}$")
# "Saturday, December 5, 2026 9:00 AM", "Dec 5th, 2026"
MONTH_FIRST = re.compile(rf"^{_WEEKDAY}([^\W\d_]{{3,10}})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+"
                         rf"(\d{{4}}){_CLOCK}{_ZONE}$")
