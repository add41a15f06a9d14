"""JSON Feed 1.0 and 1.1 (https://jsonfeed.org/) into the same rows as RSS and Atom.

feedparser does not read JSON Feed, so this small normalizer maps ``id``, ``url``,
``title``, ``date_published``, ``date_modified``, ``author``/``authors``, ``summary``
and ``content_html``/``content_text`` onto :class:`~signal_feeds.parse.ParsedEntry`,
using parse.py's URL policy, field limits and HTML sanitizer, so identity and store
cannot tell which format a row came from.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from typing import Any

from signal_feeds.errors import ParseError
from signal_feeds.parse.dates import (
    dates_warning,
    plausible,
    text_date,
    timestamp_date,
    unknown_iso_zone,
)
from signal_feeds.parse.fields import (
    DEFAULT_FIELD_LIMITS,
    FieldLimiter,
    as_html,
    feed_title,
    html_base,
    plain_text,
    text_value,
)
from signal_feeds.parse.links import known_by, refused_link_warnings
from signal_feeds.parse.offsets import no_zone_offset
from signal_feeds.parse.repairs import WITHOUT_C0
from signal_feeds.parse.settings import DEFAULT_MAX_ENTRIES, entries_cut
from signal_feeds.parsed import ParsedEntry, ParsedFeed
from signal_feeds.urls import check_link, normalize_link

__all__ = ["JSON_FEED_VERSIONS", "parse_jsonfeed"]

#: Version URLs Signal reads, and the short version names it reports (as feedparser's
#: ``rss20`` / ``atom10``).
JSON_FEED_VERSIONS: Mapping[str, str] = {
    "https://jsonfeed.org/version/1": "json1",
    "https://jsonfeed.org/version/1.1": "json11",
}
_HTML = {"type": "text/html"}
_TEXT = {"type": "text/plain"}


# JSON may escape a surrogate alone ("\\ud83d" of an emoji cut in half): json.loads keeps
# it, and no UTF-8 text (a digest, the database) can hold it. It may escape NUL too
# ("\\u0000"), which PostgreSQL's text cannot hold, and XML cannot even write, and the
# other C0 controls ("\\u001b", a terminal's ESC; "\\f"), which an XML feed cannot hold
# either and loses before parsing (see ``parse.repairs``). Tab and line breaks stay.
_UNSTORABLE_ESCAPE = re.compile(rb"\\u(?:[dD][89a-fA-F]|00[01][0-9a-fA-F])|\\[bf]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _repair_strings(data: Any) -> tuple[int, int]:
    """Replace, in place, every lone surrogate in the strings of a decoded JSON document
    with U+FFFD (json.loads has already joined the valid pairs) and remove every C0
    control but tab and line breaks, NUL included; return how many of each."""
    surrogates = controls = 0
    stack = [data]
    while stack:  # not recursive: a document may nest as deep as json.loads allows
        node = stack.pop()
        slots = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in list(slots):
            if isinstance(value, str):  # (only a document that may need it is walked)
                without = value.translate(WITHOUT_C0)
                controls += len(value) - len(without)
                fixed, found = _LONE_SURROGATE.subn("\ufffd", without)
                surrogates += found
                if fixed != value:
                    node[key] = fixed
            elif isinstance(value, dict | list):
                stack.append(value)
    return surrogates, controls


def _integer(digits: str) -> int | str:
    """A JSON integer; one too long for Python's int (4,300 digits) as its digits, as
    the spec reads a numeric id: the whole feed was rejected, telling the reader to call
    ``sys.set_int_max_str_digits()``."""
    try:
        return int(digits)
    except ValueError:
        return digits


def _date(value: Any, unread: list[str], unknown: list[str]) -> str:
    """RFC 3339 to the row format (``2026-03-14T09:26:53Z``); ``""`` if absent or bad (and
    then the text goes to ``unread``). An RFC 822 date, which some generators write
    here as in RSS, is read too; one read as UTC for want of its zone goes to
    ``unknown``."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if value is not None and not isinstance(value, str):
        value = str(value)  # a Unix timestamp as a JSON number; true, a list: said so
    text = text_value(value)
    if not text:
        return ""
    if (stamp := timestamp_date(text)) is not None:  # as in RSS and Atom
        if not stamp:
            unread.append(text)
        return stamp
    try:
        moment = dt.datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:  # RFC 822 or another form some generators write here
        read = text_date(text)
        if read and unknown_iso_zone(text):
            unknown.append(text)
    else:
        if moment.tzinfo is None:  # RFC 3339 requires an offset; read a bare time as UTC
            moment = moment.replace(tzinfo=dt.UTC)
        try:
            # fromisoformat takes any offset under 24 hours: +23:00 is no zone's.
            read = "" if no_zone_offset(text) else plausible(
                moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        except OverflowError:  # 0001-01-01T00:00:00+01:00 is before the year 1
            read = ""
    if not read:
        unread.append(text)
    return read


def _authors(item: Mapping[str, Any]) -> str:
    # 1.1 has "authors" (a list); 1.0 has "author" (one object). An item without them
    # has the feed's (both versions say so; Atom's entries have the feed's too).
    people = item.get("authors")
    if not isinstance(people, list):
        people = [item.get("author")]
    names = [text_value(p.get("name")) for p in people if isinstance(p, Mapping)]
    return ", ".join(n for n in names if n)


def _remote_id(value: Any) -> str:
    # 1.0 feeds sometimes give numbers; the spec says to read them as strings.
    if isinstance(value, bool):
        return ""
    if isinstance(value, int | float):
        return str(value)
    return text_value(value)


def _attachment(item: Mapping[str, Any]) -> str:
    """The item's first media file, as written (``""`` for none)."""
    files = item.get("attachments")
    for file in files if isinstance(files, list) else ():
        if isinstance(file, Mapping) and (href := text_value(file.get("url"))):
            return href
    return ""


def _entry(item: Mapping[str, Any], base: str | None, require_https: bool, limit: FieldLimiter,
           unread: list[str], unknown: list[str], feed_author: str,
           home: str = "") -> ParsedEntry:
    remote_id = limit("remote_id", _remote_id(item.get("id")))
    # A link post may give only external_url (the page it is about): its link then. An
    # item without an id is known as an RSS item without a guid is (see
    # parse.links.known_by): by its link's fragment, by its media file when it links to
    # the feed's home page, and linked by its media file when it has no link at all.
    written = text_value(item.get("url")) or text_value(item.get("external_url"))
    media = "" if remote_id else _attachment(item)
    written = written or media
    link, refused = check_link(written, base=base, require_https=require_https)
    content_html = text_value(item.get("content_html"))
    content_text = text_value(item.get("content_text"))
    # Relative references in content_html: the item's page, else the feed's (as for RSS).
    # Rendered through the limiter: the sanitizer never sees a whole hostile value.
    html_base_url = html_base(None, base, link)
    content = (limit("content", content_html,
                     lambda value: as_html(value, _HTML, html_base_url)) if content_html
               else limit("content", content_text,
                          lambda value: as_html(value, _TEXT, in_markup=False)))
    summary = limit("summary", text_value(item.get("summary")),
                    lambda value: as_html(value, _TEXT, in_markup=False))
    # An item with content and no summary has the content as its summary too, as
    # feedparser gives an RSS or Atom entry with only <content:encoded> or <content>:
    # the same story gives the same row (text duplicates compare the summary) either way.
    summary = summary or limit("summary", content)
    return ParsedEntry(
        remote_id=remote_id,
        url=link or "",
        # JSON Feed titles are plain text: never markup.
        title=limit("title", plain_text(text_value(item.get("title")))),
        published=_date(item.get("date_published"), unread, unknown),
        updated=_date(item.get("date_modified"), unread, unknown),
        author=limit("author", plain_text(_authors(item) or feed_author)),
        summary=summary,
        content=content,
        link_refused=refused,
        distinct="" if remote_id else known_by(written, link, media, base, require_https,
                                               home),
    )


def parse_jsonfeed(
    body: bytes,
    *,
    source_id: str | None = None,
    url: str | None = None,
    require_https_links: bool = False,
    field_limits: Mapping[str, int] = DEFAULT_FIELD_LIMITS,
    max_entries: int = DEFAULT_MAX_ENTRIES,
) -> ParsedFeed:
    """Parse a JSON Feed document; raise :class:`ParseError` if it is not one.

    Only the first ``max_entries`` items are read (with a warning), as for RSS and Atom.
    """
    raw_controls = False
    try:
        text = body.decode("utf-8-sig")
        try:
            data = json.loads(text, parse_int=_integer)
        except json.JSONDecodeError as exc:
            if not exc.msg.startswith("Invalid control character"):
                raise
            # A line break or a tab written raw inside a string (a template that pastes
            # the post's HTML in) is not JSON, but says what it means: read it so, as an
            # XML feed that is not well-formed is read leniently.
            data = json.loads(text, strict=False, parse_int=_integer)
            raw_controls = True
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ParseError(f"not a JSON Feed: invalid JSON ({exc})"[:300],
                         source_id=source_id) from exc
    if not isinstance(data, dict):
        raise ParseError("not a JSON Feed: the document is not an object",
                         source_id=source_id)
    version_url = text_value(data.get("version"))
    items = data.get("items")
    warnings: list[str] = []
    if version_url.startswith("http://jsonfeed.org/version/"):
        # Written so by generators of version 1's time (other readers take it too).
        version_url = "https" + version_url[len("http"):]
    if not isinstance(items, list):
        raise ParseError("not a JSON Feed: no items list", source_id=source_id)
    if not version_url:
        # Required, and left out by hand-written templates: a title beside the items
        # list (the other two required members) is a feed's shape.
        if not isinstance(data.get("title"), str):
            raise ParseError("not a JSON Feed: no jsonfeed.org version, and no title",
                             source_id=source_id)
        warnings.append("no JSON Feed version given; read as 1.1")
        version_url = "https://jsonfeed.org/version/1.1"
    elif not version_url.startswith("https://jsonfeed.org/version/"):
        raise ParseError(f"not a JSON Feed: version {version_url[:80]!r} is not a "
                         "jsonfeed.org version", source_id=source_id)
    if raw_controls:
        warnings.append("control characters written raw inside JSON strings (not valid "
                        "JSON); read leniently")
    if raw_controls or _UNSTORABLE_ESCAPE.search(body):
        surrogates, controls = _repair_strings(data)
        if surrogates:
            warnings.append(f"{surrogates} unpaired UTF-16 surrogate(s) replaced with U+FFFD")
        if controls:
            warnings.append(f"{controls} control character(s) removed (as from an XML feed)")
    version = JSON_FEED_VERSIONS.get(version_url.rstrip("/"), "json")
    if version == "json":
        warnings.append(f"unknown JSON Feed version {version_url[:80]!r}; read as 1.1")
    limit = FieldLimiter(field_limits)
    home = normalize_link(text_value(data.get("home_page_url"))) or ""
    base = url or text_value(data.get("feed_url")) or home or None
    entries: list[ParsedEntry] = []
    unread: list[str] = []
    unknown: list[str] = []
    feed_author = _authors(data)
    if len(items) > max_entries:
        warnings.append(entries_cut(len(items), max_entries))
        items = items[:max_entries]
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            warnings.append(f"items[{index}] is not an object; ignored")
            continue
        entries.append(_entry(item, base, require_https_links, limit, unread, unknown,
                              feed_author, home))
    if unread:  # one warning a document, as for RSS and Atom
        warnings.append(dates_warning(unread, "date {} not RFC 3339; left empty"))
    if unknown:
        warnings.append(dates_warning(unknown, "time zone of date {} not known; read as UTC"))
    for name, count in sorted(limit.cut.items()):
        warnings.append(f"{name} cut to {field_limits[name]} characters in {count} entries")
    warnings.extend(refused_link_warnings(entries))
    # As an RSS or Atom feed's title: on one line, and within an entry title's limit.
    title, title_cut = feed_title(text_value(data.get("title")), field_limits, plain_text)
    if title_cut:
        warnings.append(title_cut)
    return ParsedFeed(title=title, link=home, version=version,
                      ttl_seconds=None, entries=tuple(entries), warnings=tuple(warnings))
