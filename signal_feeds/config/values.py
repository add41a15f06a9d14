"""Checks of one setting's value: its type, and the range in which it can work."""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from signal_feeds.urls import UrlRejected, canonical_source_url, without_credentials

__all__ = ["NOT_A_SLUG", "SETTING_TYPES", "SLUG", "SOURCE_OVERRIDES", "as_tuple",
           "as_written", "built_problems", "checked_setting", "out_of_bounds", "typed"]

T = TypeVar("T")

#: A source id.
SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
NOT_A_SLUG = ("is not a slug (lowercase letters, digits and '-', starting and ending "
              "with a letter or digit, at most 64 characters)")

#: Each setting of ``[settings]`` and the type its value must have.
SETTING_TYPES: dict[str, type] = {
    "database": str,
    "user_agent": str,
    "connect_timeout": float,
    "read_timeout": float,
    "deadline": float,
    "max_body_bytes": int,
    "max_redirects": int,
    "min_interval": float,
    "max_interval": float,
    "concurrency": int,
    "per_host": int,
    "busy_timeout": float,
    "require_https_links": bool,
    "allow_private_redirects": bool,
    "max_entries": int,
    "proxy": str,
    "lease_seconds": float,
}
#: Settings a source may override with a key of the same name.
SOURCE_OVERRIDES = ("min_interval", "require_https_links", "max_body_bytes")

#: Settings that must be at least 1 (0 would stop every run, or read nothing).
_AT_LEAST_ONE = ("concurrency", "per_host", "max_entries", "lease_seconds")
#: Settings that must be more than 0: at 0 every request fails.
_ABOVE_ZERO = ("connect_timeout", "read_timeout", "deadline", "max_body_bytes")
_TYPE_NAMES = {float: "a number", int: "a whole number", str: "a string",
               bool: "a boolean (true or false)"}


_DAY = 24 * 3600.0
#: The longest a duration setting may be, in seconds: past these no schedule means
#: anything, and far past them the date arithmetic overflows (min_interval = 1e12 made
#: every run fail with an OverflowError).
_AT_MOST = {"min_interval": 366 * _DAY, "max_interval": 366 * _DAY,
            "lease_seconds": _DAY, "busy_timeout": _DAY, "connect_timeout": _DAY,
            "read_timeout": _DAY, "deadline": _DAY}


def out_of_bounds(key: str, value: Any) -> str:
    """Why a well-typed setting's value cannot work, or ''."""
    if key == "user_agent":
        return _user_agent_problem(value)
    if key == "database" and "\x00" in value:
        # No file name holds one: every command ended in "ValueError: embedded null byte".
        return "must not contain a NUL character (no file name or URL can hold one)"
    if key == "database" and value != value.strip():
        # A space left inside the quotes made a file "signal.db " beside signal.db (or
        # one named "  "), which no later --db signal.db or ls shows.
        return f"must not begin or end with white space, not {value!r}"
    if key in _AT_LEAST_ONE and value < 1:
        return "must be at least 1"
    if key in _ABOVE_ZERO and value <= 0:
        return "must be more than 0 (at 0 every request fails)"
    most = _AT_MOST.get(key)
    if most is not None and value > most:
        days = most / _DAY
        return f"must be at most {most:.0f} seconds ({days:g} day{'s' if days != 1 else ''})"
    return ""


def _user_agent_problem(value: str) -> str:
    """Why a ``User-Agent`` cannot go out as one header line, or is no name at all."""
    if not value.strip():
        return ("must name the client (an empty User-Agent is the first thing bot checks "
                "refuse); leave the setting out to send Signal's own")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return (f"must be one line without control characters, not {value!r} (a line "
                "break would end the header)")
    if value != value.strip():
        return f"must not begin or end with white space, not {value!r}"
    return ""


def typed(value: object, kind: type) -> tuple[Any, str]:
    """``value`` as ``kind`` (an int is a float), or the reason it is not."""
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if kind is not bool and isinstance(value, bool) or not isinstance(value, kind):
        return None, f"must be {_TYPE_NAMES.get(kind, kind.__name__)}, not {value!r}"
    if kind is float and not math.isfinite(value):  # type: ignore[arg-type]
        # TOML reads inf and nan as floats; no duration or size means either.
        return None, f"must be a finite number, not {value!r}"
    if kind in (int, float) and value < 0:  # type: ignore[operator]
        return None, "must not be negative"
    return value, ""


def as_written(value: float) -> str:
    """A number of a setting as a config file writes it: ``:g`` showed a two-week
    ``min_interval`` as 1.2096e+06, which no one wrote."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def built_problems(settings: Any, sources: Iterable[Any]) -> list[tuple[str, str | None]]:
    """What a ``Config`` made in code holds that cannot work, as ``parse_config`` would
    word it: (problem, source id or ``None``). ``database`` is a path or a URL there."""
    found: list[tuple[str, str | None]] = []
    for key, kind in SETTING_TYPES.items():
        if key != "database" and (reason := checked_setting(key, getattr(settings, key), kind)[1]):
            found.append((f"[settings]: {key}: {reason}", None))
    first: dict[str, int] = {}
    for index, source in enumerate(sources):
        sid = source.id
        label = f"sources[{index}] (id {sid!r})"
        # Unchecked, an id of 5 or "My Blog" was stored, and a url of None, a datetime
        # review_by or "2027-01-01" failed each run inside, as an "internal error".
        if not isinstance(sid, str) or not SLUG.match(sid):
            found.append((f"{label}: id: {sid!r} {NOT_A_SLUG}", None))
        elif sid in first:
            found.append((f"{label}: id: duplicate (first at sources[{first[sid]}])", sid))
        first.setdefault(sid, index)
        found.extend((f"{label}: {key}: {getattr(source, key)!r} is not a string", sid)
                     for key in ("url", "title", "owner")
                     if not isinstance(getattr(source, key), str))
        review_by = source.review_by
        if review_by is not None and (not isinstance(review_by, dt.date)
                                      or isinstance(review_by, dt.datetime)):
            found.append((f"{label}: review_by: {review_by!r} is not a datetime.date", sid))
        if not isinstance(source.url, str):
            continue
        try:
            canonical_source_url(source.url)
        except UrlRejected as exc:
            # An ftp:// url ended the run in "internal error: KeyError"; one with a
            # password was fetched without it and stored with it.
            found.append((f"{label}: url: {without_credentials(source.url)!r} refused: "
                          f"{exc}", sid))
        for key in SOURCE_OVERRIDES:
            value = getattr(source, key)
            if value is not None and (reason := checked_setting(key, value, SETTING_TYPES[key])[1]):
                found.append((f"{label}: {key}: {reason}", sid))
    return found


def checked_setting(key: str, value: object, kind: type) -> tuple[Any, str]:
    """``value`` of the setting ``key`` as ``kind`` (see :func:`typed`), or the reason
    it is not one, or cannot work (see :func:`out_of_bounds`)."""
    checked, reason = typed(value, kind)
    return checked, reason or out_of_bounds(key, checked)


def as_tuple(given: object, kind: type[T], what: str, noun: str = "") -> tuple[T, ...]:
    """``given`` (one ``kind``, or any iterable of them) as a tuple, read once: a
    generator checked and then kept was found empty at the next use. ``noun`` names
    what it holds in the message (``kind``'s objects by default)."""
    if isinstance(given, kind):
        return (given,)
    if not isinstance(given, Iterable) or isinstance(given, str | bytes | Mapping):
        raise TypeError(f"{what} is a sequence of {kind.__name__}, not "
                        f"{type(given).__name__}")
    items = tuple(given)
    if wrong := [item for item in items if not isinstance(item, kind)]:
        raise TypeError(f"{what} holds {noun or kind.__name__ + ' objects'}, not "
                        f"{type(wrong[0]).__name__}: {wrong[0]!r}")
    return items
