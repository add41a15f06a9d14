"""Month names, in English and in the languages a server's locale most often leaks into
feeds' dates (German, French, Spanish, Italian, Portuguese, Dutch)."""

from __future__ import annotations

__all__ = ["MONTH_NAMES"]

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
