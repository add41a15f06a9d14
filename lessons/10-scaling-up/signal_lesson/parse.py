"""One shape for RSS and Atom: every entry becomes an Entry with five text fields."""

from __future__ import annotations

import io
import time
from dataclasses import dataclass

import feedparser

from .defuse import defuse
from .errors import ParseError
from .urls import normalize_link

#: Bump whenever a rule below changes what a row looks like (lesson 03 says why).
NORMALIZER_VERSION = 2  # 2 (lesson 09): titles are cut to MAX_TITLE characters
#: A field cap: one entry cannot fill the database with a title of a million characters.
MAX_TITLE = 1000


@dataclass(frozen=True)
class Entry:
    remote_id: str  # RSS <guid> or Atom <id> as given, outer whitespace removed
    url: str  # the entry link after the URL policy, or ""
    title: str
    published: str  # ISO 8601 in UTC, or "" when the feed has no such date
    updated: str


def field(entry: dict[str, object], name: str) -> object:
    # dict.get, not entry.get: feedparser's own lookup quietly answers "updated"
    # with "published" when a feed has no updated date.
    return dict.get(entry, name)


def text(entry: dict[str, object], name: str) -> str:
    value = field(entry, name)
    return value.strip() if isinstance(value, str) else ""


def utc(entry: dict[str, object], name: str) -> str:
    """feedparser turns every date it understands into a UTC struct_time."""
    value = field(entry, f"{name}_parsed")
    if not isinstance(value, time.struct_time):
        return ""  # no date is "", never the time we happened to read the feed
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", value)


def parse_feed(
    data: bytes, *, content_type: str = "", allow_http: bool = False
) -> list[Entry]:
    """Parse a feed given as bytes (and the Content-Type header, if any)."""
    headers = {"content-type": content_type} if content_type else {}
    # A BytesIO, never bare bytes: feedparser tries to open() a bytes argument
    # as a file name first, and it fetches a str argument that looks like a URL.
    # defuse() first (lesson 09): no DOCTYPE, no entity declarations, short authors.
    parsed = feedparser.parse(io.BytesIO(defuse(data)), response_headers=headers)
    if not parsed.get("version") and not parsed.entries:
        raise ParseError("not an RSS or Atom feed")
    # feedparser reads broken XML leniently (parsed.bozo is then set); whatever it
    # could recover is still checked entry by entry, like any other entry.
    entries = []
    for entry in parsed.entries:
        link = normalize_link(text(entry, "link"), allow_http=allow_http)
        entries.append(
            Entry(
                remote_id=text(entry, "id"),
                url=link or "",
                title=text(entry, "title")[:MAX_TITLE],
                published=utc(entry, "published"),
                updated=utc(entry, "updated"),
            )
        )
    return entries
