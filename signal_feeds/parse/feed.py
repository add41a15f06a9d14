"""Parse and normalize: feed bytes in, plain frozen rows out.

feedparser reads the bytes Signal downloaded (it is never allowed to fetch anything),
after :func:`defuse` has removed what makes XML dangerous. No feedparser object leaves
this module.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from typing import Any
from xml.sax import SAXParseException

import feedparser

from signal_feeds.errors import ParseError
from signal_feeds.parse.captions import caption, set_captions_aside
from signal_feeds.parse.dates import date_warnings, entry_date
from signal_feeds.parse.declarations import without_declarations
from signal_feeds.parse.decoding import to_utf8
from signal_feeds.parse.discovery import feed_links, misplaced_feed_root, other_xml, web_page
from signal_feeds.parse.fields import (
    DEFAULT_FIELD_LIMITS,
    FieldLimiter,
    as_html,
    entry_author,
    feed_title,
    html_base,
    plain_text,
    plain_title,
    references_read,
    text_value,
)
from signal_feeds.parse.links import distinct_name, entry_link, refused_link_warnings
from signal_feeds.parse.repairs import (
    ampersands,
    from_declaration,
    long_bases,
    valid_char_refs,
    without_controls,
)
from signal_feeds.parse.settings import DEFAULT_MAX_ENTRIES, entries_cut
from signal_feeds.parsed import NORMALIZER_VERSION, ParsedEntry, ParsedFeed
from signal_feeds.urls import check_link, normalize_link

__all__ = [
    "DEFAULT_FIELD_LIMITS",
    "DEFAULT_MAX_ENTRIES",
    "NORMALIZER_VERSION",
    "ParsedEntry",
    "ParsedFeed",
    "defuse",
    "parse_feed",
]

#: Raw characters allowed inside an author-like element before feedparser sees it:
#: feedparser's e-mail regular expression is slow on long strings.
_AUTHOR_RAW_LIMIT = 1024

_AUTHOR_TEXT = re.compile(
    rb"(<(?:[\w.-]+:)?(?:author|name|email|managingEditor|webMaster|creator|contributor|uri)"
    rb"\b[^>]{0,512}>)([^<]{%d,})" % _AUTHOR_RAW_LIMIT,
    re.IGNORECASE,
)
_ENTRY_END = re.compile(rb"</(?:[\w.-]+:)?(?:item|entry)\s*>", re.IGNORECASE)
#: More attributes on one element than any feed writes. feedparser reads each attribute
#: through the standard library's SAX attributes, which find a name by a linear search:
#: 100,000 attributes on one element (1 MB) took almost three minutes.
MAX_ATTRIBUTES = 1000
# A start tag long enough to hold that many (an attribute takes at least 4 bytes: a="").
_LONG_TAG = re.compile(rb"<[A-Za-z_][^<>]{%d,}>" % (MAX_ATTRIBUTES * 4))
_ATTRIBUTE = re.compile(rb"""\s+[^\s=<>/"']+\s*=\s*(?:"[^"]*"|'[^']*')""")
#: More namespace prefixes than any feed declares (a few dozen at most). feedparser's
#: strict parser names each element of a namespace it does not know by a linear search
#: over every prefix declared so far: 20,000 elements declaring one each (0.9 MB) took
#: 9 s, 100,000 over a minute.
MAX_NAMESPACES = 100
# One declaration and the space before it. An unclosed value runs to the end, so each
# byte is read once (such a declaration is never removed).
_NAMESPACE = re.compile(rb"""\sxmlns:([^\s=<>/"':]+)\s*=\s*("[^"]*"?|'[^']*'?)""")
# What feedparser is told about bytes that defuse() has already decoded to UTF-8.
_UTF8_HEADERS = {"content-type": "application/xml; charset=utf-8"}


def _cut_utf8(text: bytes, limit: int) -> bytes:
    """At most ``limit`` bytes of UTF-8 text, never ending inside a character or an
    entity reference."""
    text = text[:limit].decode("utf-8", "ignore").encode("utf-8")
    amp = text.rfind(b"&")
    return text[:amp] if amp >= 0 and b";" not in text[amp:] else text


def _fewer_attributes(data: bytes) -> tuple[bytes, int]:
    """The document with each element's attributes past :data:`MAX_ATTRIBUTES` removed;
    and how many elements lost some."""
    cut = 0

    def shorten(match: re.Match[bytes]) -> bytes:
        nonlocal cut
        tag = match.group()
        found = list(_ATTRIBUTE.finditer(tag))
        if len(found) <= MAX_ATTRIBUTES:
            return tag
        cut += 1
        end = b"/>" if tag.rstrip(b" \t\r\n>").endswith(b"/") else b">"
        return tag[:found[MAX_ATTRIBUTES - 1].end()] + end

    return _LONG_TAG.sub(shorten, data), cut


def _fewer_namespaces(data: bytes) -> tuple[bytes, int]:
    """The document without the declarations of prefixes past the first
    :data:`MAX_NAMESPACES`; and how many were removed. An element that uses such a
    prefix is then not well-formed, and the document is read leniently."""
    seen: set[bytes] = set()
    removed = 0

    def keep(match: re.Match[bytes]) -> bytes:
        nonlocal removed
        prefix, value = match.group(1, 2)
        if prefix in seen or len(seen) < MAX_NAMESPACES:
            seen.add(prefix)
        elif len(value) > 1 and value.endswith(value[:1]):  # closed: the tag goes on
            removed += 1
            return b""
        return match.group()

    return _NAMESPACE.sub(keep, data), removed


def defuse(body: bytes, *, content_type: str | None = None,
           url: str | None = None) -> tuple[bytes, tuple[str, ...]]:
    """Remove what makes a feed dangerous to parse; return UTF-8 bytes and warnings.

    - blank lines or script warnings before the XML declaration, character references
      to no character, a bare ``&`` and HTML's named references such as ``&nbsp;`` (see
      :mod:`signal_feeds.parse.repairs`), each of which made the whole document
      malformed;
    - the document is decoded the way feedparser decodes it (``content_type`` is the
      response header) and re-encoded as UTF-8, so nothing hides in another encoding;
    - NUL bytes and the other C0 controls but tab and line breaks, which no XML
      document may contain (removed first: a UTF-16 document without a byte-order mark
      must not hide a declaration between NULs);
    - every ``<!DOCTYPE …>`` (with its internal subset) and stray ``<!ENTITY …>``:
      no entity can be defined, expanded or fetched (a post's text in a CDATA section
      or a comment after the root element is left alone, see :mod:`.declarations`);
    - author-like element text past a limit (a slow regular expression in feedparser);
    - attributes past :data:`MAX_ATTRIBUTES` on one element (a slow lookup);
    - an ``xml:base`` longer than a link may be (joined again at every later tag);
    - declarations of namespace prefixes past :data:`MAX_NAMESPACES` (a slow search).
    """
    warnings: list[str] = []
    body, lead = from_declaration(body)
    if lead:
        warnings.append(lead)
    data, note = to_utf8(body, content_type, url)
    if note:
        warnings.append(note)
    if b"\x00" in data:
        data = data.replace(b"\x00", b"")
        warnings.append("NUL bytes removed")
    data, controls = without_controls(data)
    if controls:
        warnings.append(f"{controls} control character(s) removed (XML allows none)")
    data, repaired = valid_char_refs(data)
    if repaired:
        warnings.append(f"{repaired} character reference(s) to no character repaired")
    data, declared = without_declarations(data)
    if declared:
        warnings.append("DOCTYPE/ENTITY declarations removed")
    data, bare, named = ampersands(data)
    if bare:
        warnings.append(f"{bare} bare '&' read as text (XML writes it '&amp;')")
    if named:
        warnings.append(f"{named} HTML character reference(s) such as '&nbsp;' read as "
                        "the characters they name (XML defines none of them)")
    if len(data) > MAX_ATTRIBUTES * 4:  # one linear pass, about 1.5 ns a byte
        data, cut = _fewer_attributes(data)
        if cut:
            warnings.append(f"attributes past the first {MAX_ATTRIBUTES} removed from "
                            f"{cut} element(s)")
    data, long_base = long_bases(data)
    if long_base:
        warnings.append(long_base)
    if data.count(b"xmlns:") > MAX_NAMESPACES:
        data, removed = _fewer_namespaces(data)
        if removed:
            warnings.append(f"{removed} namespace declaration(s) of prefixes past the first "
                            f"{MAX_NAMESPACES} removed")
    if len(data) > _AUTHOR_RAW_LIMIT:
        data, count = _AUTHOR_TEXT.subn(
            lambda m: m.group(1) + _cut_utf8(m.group(2), _AUTHOR_RAW_LIMIT), data)
        if count:
            warnings.append(f"{count} author field(s) cut to {_AUTHOR_RAW_LIMIT} bytes")
    return data, tuple(warnings)


def _cap_entries(data: bytes, limit: int) -> tuple[bytes, int]:
    """Keep the first ``limit`` entries of a document; return the bytes and how many
    entry end tags it had. What follows the last entry (``</channel></rss>``,
    ``</feed>``) is kept, so a well-formed document stays well-formed."""
    if data.count(b"</") <= limit:
        return data, 0
    ends = [m.end() for m in _ENTRY_END.finditer(data)]
    if len(ends) <= limit:
        return data, len(ends)
    return data[:ends[limit - 1]] + data[ends[-1]:], len(ends)


#: What expat says when the input stops before the document does.
_ENDS_EARLY = frozenset({"no element found", "unclosed token", "unclosed CDATA section",
                         "partial character"})


def _xml_problem(bozo: BaseException, *, named: bool = False) -> str:
    """What the strict parser found, for a person; another problem with its kind when
    ``named``. An XML error's line and column are left out: they count in the document
    as re-encoded for the parser, not in the bytes the server sent."""
    if isinstance(bozo, SAXParseException):
        return f"{'XML error: ' if named else ''}{bozo.getMessage()}"
    return f"{type(bozo).__name__}: {bozo}" if named else str(bozo)


def _ends_early(bozo: object) -> bool:
    """Whether the input stopped before the document did (a response cut short)."""
    message = getattr(bozo, "getMessage", None)
    return callable(message) and message() in _ENDS_EARLY


def _cut_off(data: bytes, entries: int) -> int:
    """How many entries at the end of a document that stops early were left unclosed.

    The lenient reading keeps an entry the end of the input cut through (a title
    without its summary, half a summary); stored, it would be "updated" when the whole
    document comes. Entries the document closed are complete and are kept.
    """
    return max(0, entries - len(_ENTRY_END.findall(data)))


def _detail_base(detail: Any) -> Any:
    # feedparser records each text construct's xml:base (None or "" when there is none).
    return detail.get("base") if isinstance(detail, Mapping) else None


def _inherited_author(raw: dict[str, Any], feed_author: str | None, lenient: bool) -> str:
    if feed_author is None:
        return ""
    source = dict.get(raw, "source")
    return ((entry_author(source, lenient=lenient, structured=True)
             if isinstance(source, dict) else "") or feed_author)


#: Markup that shows something without text: an image, a player, a frame, a drawing.
_SHOWS_SOMETHING = re.compile(r"<(?:img|picture|video|audio|iframe|embed|object|svg|math)\b",
                              re.IGNORECASE)
_TAG_OR_SPACE = re.compile(r"<[^<>]*>|&nbsp;|&#160;|\s")


def _empty_markup(summary: str, detail: Any) -> bool:
    """A short HTML summary that shows nothing: tags alone (``<p></p>``, ``<br>``)."""
    if len(summary) > 200 or "<" not in summary:
        return False
    kind = text_value(detail.get("type")) if isinstance(detail, Mapping) else ""
    if "html" not in kind:
        return False
    return not _TAG_OR_SPACE.sub("", summary) and not _SHOWS_SOMETHING.search(summary)


def _entry(raw: dict[str, Any], base: str | None, require_https: bool,
           limit: FieldLimiter, feed_author: str | None, lenient: bool,
           home: str = "") -> ParsedEntry:
    """One entry. ``feed_author`` is an Atom feed's own authors (``None`` for other
    formats): an Atom entry without authors has its source's, else the feed's (RFC 4287,
    4.2.1), which feedparser does not apply. ``lenient``: read by feedparser's lenient
    parser (see :func:`references_read`)."""
    get = dict.get  # bypass FeedParserDict's aliases (and their deprecation warnings)
    summary = text_value(get(raw, "summary"))
    content_list = get(raw, "content")
    content = ""
    content_detail: Any = None
    details = [c for c in content_list if isinstance(c, Mapping)] if isinstance(
        content_list, list) else []
    if details:
        # Several bodies: after an <itunes:summary>, feedparser reads an RSS item's
        # <description> as a first content and its <content:encoded> as a second. The
        # fullest is the post (a podcast's show notes); the first of equals, as before.
        content_detail = max(details, key=lambda c: len(text_value(c.get("value"))))
        content = text_value(content_detail.get("value"))
    summary_detail = get(raw, "summary_detail")
    if not content and (not summary or _empty_markup(summary, summary_detail)):
        # A YouTube video's description, or a Mastodon picture's alt text under a post of
        # no words (``<p></p>``).
        summary, summary_detail = caption(raw)
        summary = references_read(summary, lenient)
    if summary_detail is None and content_detail is not None and summary == content:
        # feedparser copies a lone Atom <content> or RSS <content:encoded> into the summary
        # without its type; read as plain text, the copy's markup came out escaped.
        summary_detail = content_detail
    written = entry_link(raw, lenient)
    link, refused = check_link(written, base=base, require_https=require_https)
    summary_base = (html_base(_detail_base(summary_detail), base, link) if summary
                    else None)
    content_base = html_base(_detail_base(content_detail), base, link) if content else None
    return ParsedEntry(
        remote_id=limit("remote_id", references_read(text_value(get(raw, "id")), lenient)),
        url=link or "",
        title=limit("title", text_value(get(raw, "title")),
                    lambda value: plain_text(plain_title(value, get(raw, "title_detail")))),
        published=entry_date(raw, "published"),
        updated=entry_date(raw, "updated"),
        author=limit("author", entry_author(raw, lenient=lenient,
                                            structured=feed_author is not None)
                     or _inherited_author(raw, feed_author, lenient)),
        # Rendered through the limiter: the sanitizer never sees a whole hostile value.
        summary=limit("summary", summary,
                      lambda value: as_html(value, summary_detail, summary_base)),
        content=limit("content", content,
                      lambda value: as_html(value, content_detail, content_base)),
        link_refused=refused,
        distinct=distinct_name(raw, written, link, base, require_https, home),
    )


#: The longest ``<ttl>`` kept (a year, in minutes): the schedule caps the wait far below
#: it anyway, and a value of twenty digits does not fit the database's INTEGER.
_MAX_TTL_MINUTES = 366 * 24 * 60


def _ttl(feed: dict[str, Any]) -> int | None:
    raw = text_value(dict.get(feed, "ttl"))
    # isdecimal, not isdigit: int() refuses digits such as "²" that isdigit accepts.
    if raw.isdecimal():  # <ttl> is in minutes; int() refuses 4,300 digits and more
        return min(int(raw) if len(raw) < 10 else _MAX_TTL_MINUTES, _MAX_TTL_MINUTES) * 60
    return None


_JSON_TYPES = ("application/feed+json", "application/json")


def _is_json(body: bytes, content_type: str | None) -> bool:
    """JSON Feed when the body opens with ``{`` (after a BOM and whitespace), or when the
    server says JSON and the body is not markup."""
    start = body.removeprefix(b"\xef\xbb\xbf").lstrip()[:1]
    if start == b"{":
        return True
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    return mime in _JSON_TYPES and start != b"<"


def parse_feed(
    body: bytes,
    *,
    source_id: str | None = None,
    url: str | None = None,
    content_type: str | None = None,
    require_https_links: bool = False,
    field_limits: Mapping[str, int] = DEFAULT_FIELD_LIMITS,
    max_entries: int = DEFAULT_MAX_ENTRIES,
    allow_http_links: bool | None = None,
) -> ParsedFeed:
    """Parse downloaded feed bytes into a :class:`ParsedFeed`.

    Only the first ``max_entries`` entries of an RSS or Atom document are read (with a
    warning): parsing time grows with the number of entries, not only with the size.

    ``url`` (the address that answered) resolves relative links; ``content_type`` (the
    response header) helps with the encoding and names JSON Feed (see :mod:`.jsonfeed`).
    Entry links over http and https are kept unless ``require_https_links``
    (``allow_http_links`` is its older, inverted spelling; when given it wins).
    Raises :class:`ParseError` when the bytes are not an RSS, Atom or JSON feed at all;
    a feed with recoverable errors still yields its entries, with a warning.
    """
    if not isinstance(body, bytes | bytearray | memoryview):
        # The bytes as downloaded: text has lost what its encoding was.
        raise TypeError(f"parse_feed takes the document's bytes (as downloaded or read "
                        f"with open(..., 'rb')), not {type(body).__name__}")
    body = bytes(body)
    if allow_http_links is not None:
        require_https_links = not allow_http_links
    if not body.removeprefix(b"\xef\xbb\xbf").strip():  # a byte-order mark alone is empty too
        raise ParseError("empty body: no feed to parse", source_id=source_id)
    if _is_json(body, content_type):
        from signal_feeds.parse.jsonfeed import parse_jsonfeed  # feedparser does not read JSON Feed

        return parse_jsonfeed(body, source_id=source_id, url=url,
                              require_https_links=require_https_links,
                              field_limits=field_limits, max_entries=max_entries)
    data, defuse_warnings = defuse(body, content_type=content_type, url=url)
    headers = dict(_UTF8_HEADERS)  # defuse() decoded the body; the declared charset is spent
    data, total_entries = _cap_entries(set_captions_aside(data), max_entries)
    # No content-location: feedparser would resolve a relative RSS <guid> against it,
    # making the entry key depend on where the feed was fetched from. Links are resolved
    # against ``url`` by the URL policy instead.
    try:
        result = feedparser.parse(io.BytesIO(data), response_headers=headers,
                                  resolve_relative_uris=False, sanitize_html=False)
    except MemoryError as exc:  # under the worker's address-space limit
        raise ParseError("feed parser ran out of memory (the document is too large or "
                         "too complex)", source_id=source_id) from exc
    except Exception as exc:  # feedparser raises nothing documented; never let it escape
        raise ParseError(f"feed parser failed: {type(exc).__name__}: {exc}",
                         source_id=source_id) from exc
    version = result.get("version") or ""
    raw_entries = result.get("entries") or []
    # Entries never closed escape the count of end tags: the parse may find more.
    total_entries = max(total_entries, len(raw_entries))
    if total_entries > max_entries:
        defuse_warnings += (entries_cut(total_entries, max_entries),)
        raw_entries = raw_entries[:max_entries]
    bozo = result.get("bozo_exception")
    if not version and not raw_entries:
        links = feed_links(data, url)
        if links:  # a site's address given for its feed's: say which one to use
            named, use = (("its feed at", "that address") if len(links) == 1
                          else ("feeds at", "one of those addresses"))
            if not all("://" in link for link in links):  # a saved page: no address of its own
                use += ", made absolute against the page's own address,"
            raise ParseError(f"not an RSS or Atom feed: a web page that names {named} "
                             f"{', '.join(links)} (use {use} as the source's url)",
                             source_id=source_id)
        page = web_page(data)
        if page:  # the parser's complaint about HTML would say nothing useful
            raise ParseError(f"not an RSS or Atom feed: {page} that names no feed",
                             source_id=source_id)
        reason = f" ({_xml_problem(bozo, named=True)})" if bozo else ""
        other = other_xml(data)  # a sitemap, an OPML list, an API's error document
        if not other and bozo is None:  # well-formed, with a feed's root, yet no feed
            other = misplaced_feed_root(data)
        raise ParseError(f"not an RSS or Atom feed{': ' + other if other else ''}{reason}",
                         source_id=source_id)
    warnings = list(defuse_warnings)
    if bozo is not None:
        warnings.append(f"feed is not well-formed, read leniently: {_xml_problem(bozo)}")
    # A document that stops early is incomplete even when it stops between two entries:
    # the entries it closed are kept, but its validators must not earn a 304 for the
    # whole (see the decider).
    ends_early = _ends_early(bozo)
    cut = _cut_off(data, len(raw_entries)) if ends_early else 0
    if cut:  # a response cut short: its last entry would be stored half-written
        raw_entries = raw_entries[:-cut]
        what = ("its last entry, cut through, was" if cut == 1
                else f"its last {cut} entries, left open, were")
        warnings.append(f"the document ends early (cut off in transit?): {what} not read")
    elif ends_early:
        closed = len(raw_entries)
        warnings.append("the document ends early (cut off in transit?): " + (
            "it closed no entry" if closed == 0 else "the 1 entry it closed was read"
            if closed == 1 else f"the {closed} entries it closed were read"))
    limit = FieldLimiter(field_limits)
    feed: dict[str, Any] = result.get("feed") or {}
    base = url or None
    lenient = bozo is not None  # the strict parser failed: feedparser's lenient one read it
    feed_author = (entry_author(feed, lenient=lenient, structured=True)
                   if version.startswith("atom") else None)
    home = normalize_link(text_value(dict.get(feed, "link")), base=base) or ""
    entries = tuple(_entry(raw, base, require_https_links, limit, feed_author, lenient, home)
                    for raw in raw_entries)
    for field, count in sorted(limit.cut.items()):
        warnings.append(f"{field} cut to {field_limits[field]} characters in {count} entries")
    warnings.extend(date_warnings(raw_entries, entries))
    warnings.extend(refused_link_warnings(entries))
    title, title_cut = feed_title(text_value(dict.get(feed, "title")), field_limits,
                            lambda value: plain_text(plain_title(
                                value, dict.get(feed, "title_detail"))))
    if title_cut:
        warnings.append(title_cut)
    return ParsedFeed(
        title=title,
        link=home,
        version=version,
        ttl_seconds=_ttl(feed),
        entries=entries,
        warnings=tuple(warnings),
        incomplete=ends_early,
    )
