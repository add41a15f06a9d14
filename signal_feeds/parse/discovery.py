"""The feeds an HTML page names, and its title, for the error that says a source is a
web page.

A new user often gives the address of a site rather than of its feed. Such a page
usually names its feeds (``<link rel="alternate" type="application/rss+xml"
href="...">`` in its head), so the error can say which address to use. Nothing is
fetched and the source list is not changed: the user decides. A page that names no
feed is often not the site's at all (a bot check, a login wall, an error page): its
title says which.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

from signal_feeds.errors import shown
from signal_feeds.urls import check_link

__all__ = ["FEED_TYPES", "MAX_SCANNED_BYTES", "feed_links", "misplaced_feed_root",
           "other_xml", "page_title", "web_page"]

#: The link types that name a feed.
FEED_TYPES = frozenset({"application/rss+xml", "application/atom+xml",
                        "application/feed+json", "application/json"})
#: Only the start of a page is read: its head, where the links are.
MAX_SCANNED_BYTES = 256 * 1024
_MAX_LINKS = 5


#: A ``<link>`` start tag, bounded: the page is untrusted, and html.parser has taken
#: quadratic time on some malformed markup, so it only ever reads these tags.
_LINK_TAG = re.compile(rb"<link\b[^<>]{0,2048}>", re.IGNORECASE)
_MAX_TAGS = 200


class _FeedLinks(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "link":
            return
        values = {name.lower(): (value or "") for name, value in attrs}
        rels = values.get("rel", "").lower().split()
        kind = values.get("type", "").split(";")[0].strip().lower()
        if "alternate" in rels and kind in FEED_TYPES and values.get("href", "").strip():
            self.found.append(values["href"].strip())

    handle_startendtag = handle_starttag


def _page_head(body: bytes) -> bytes:
    """The part of a page that is read: its start, up to ``<body`` if that comes first."""
    head = body[:MAX_SCANNED_BYTES]
    end = head.lower().find(b"<body")
    return head if end < 0 else head[:end]


#: A relative reference a saved page may name its feed by (no scheme, no spaces).
_RELATIVE = re.compile(r"^(?![A-Za-z][A-Za-z0-9+.-]*:)[^\s<>\"]{1,500}$")


def feed_links(body: bytes, base: str | None) -> list[str]:
    """The absolute http(s) feed addresses an HTML page names in its head, in page order
    and at most five (``[]`` when it names none, or is not HTML). Without ``base`` (a
    saved page) a relative address is given as written: it still names a feed."""
    parser = _FeedLinks()
    for count, match in enumerate(_LINK_TAG.finditer(_page_head(body))):
        if count == _MAX_TAGS:
            break
        parser.feed(match.group().decode("utf-8", "replace"))
    parser.close()
    links: list[str] = []
    for href in parser.found:
        link, _ = check_link(href, base=base)
        if link is None and not base and _RELATIVE.match(href.strip()):
            link = href.strip()
        if link and link not in links:
            links.append(link)
    return links[:_MAX_LINKS]


#: The start of an HTML document: a doctype or an ``<html>`` tag, after at most a BOM,
#: white space, an XML declaration and comments (bounded: the page is untrusted).
_HTML_START = re.compile(
    rb"\A(?:\xef\xbb\xbf)?\s*(?:<\?xml[^>]{0,200}>\s*)?(?:<!--.{0,2000}?-->\s*){0,5}"
    rb"<(?:!doctype\s+html|html)\b", re.IGNORECASE | re.DOTALL)
_TITLE = re.compile(rb"<title\b[^<>]{0,200}>([^<]{0,1000})</title", re.IGNORECASE)
_TITLE_SHOWN = 80


def page_title(body: bytes) -> str | None:
    """The title of an HTML document, as shown (unescaped, one line, no control
    characters, at most 80 characters): ``""`` when it has none, ``None`` when ``body``
    is not an HTML document."""
    if not _HTML_START.match(body[:4096]):
        return None
    match = _TITLE.search(_page_head(body))
    if match is None:
        return ""
    return shown(html.unescape(match.group(1).decode("utf-8", "replace")), _TITLE_SHOWN)


def web_page(body: bytes) -> str:
    """``"a web page"``, with its title when it has one (``a web page titled 'Just a
    moment...'``), when ``body`` is an HTML document; ``""`` otherwise."""
    title = page_title(body)
    if title is None:
        return ""
    return f"a web page titled {title!r}" if title else "a web page"


#: The root element's name of an XML document, after a BOM, white space, the XML
#: declaration, comments, processing instructions and a doctype (bounded: untrusted).
_XML_ROOT = re.compile(
    rb"\A(?:\xef\xbb\xbf)?\s*(?:<\?xml[^>]{0,200}>\s*)?"
    rb"(?:(?:<!--.{0,2000}?-->|<\?[^>]{0,200}>|<!doctype[^>\[]{0,500}(?:\[.{0,5000}?\])?\s*>)"
    rb"\s*){0,8}<([a-z_][\w.:-]{0,100})", re.IGNORECASE | re.DOTALL)
#: Root elements of feeds: a document with one of these is a feed, however broken.
_FEED_ROOTS = frozenset({"rss", "feed", "rdf:rdf", "rdf", "channel"})
#: Documents a feed's address is often confused with, and what to do instead.
_KNOWN_ROOTS = {
    "opml": "an OPML subscription list (add the feeds it names with "
            "'signal sources import-opml')",
    "urlset": "a sitemap, which lists a site's pages, not its news",
    "sitemapindex": "a sitemap index, which lists a site's sitemaps, not its news",
}


def _root_name(body: bytes) -> tuple[str, str] | None:
    """The root element's name as written and its lower-case local part, or None when
    ``body`` does not begin as XML."""
    match = _XML_ROOT.match(body[:16384])
    if match is None:
        return None
    name = match.group(1).decode("ascii", "replace")
    return name, name.lower().rpartition(":")[2]


def other_xml(body: bytes) -> str:
    """What an XML document that is not a feed is (``an OPML subscription list ...``,
    ``an XML document whose root element is <error>``); ``""`` when ``body`` does not
    begin as XML or its root is a feed's."""
    root = _root_name(body)
    if root is None:
        return ""
    name, local = root
    if name.lower() in _FEED_ROOTS or local in _FEED_ROOTS or local == "html":
        return ""
    return _KNOWN_ROOTS.get(local, f"an XML document whose root element is <{name}>")


#: Where RSS 1.0 keeps its channel: an RDF document without it is no feed.
RSS_10_NAMESPACE = "http://purl.org/rss/1.0/"


def misplaced_feed_root(body: bytes) -> str:
    """Why a well-formed document whose root element looks like a feed's is none, for
    the roots the feed parser gives no format (``""`` for any other document)."""
    root = _root_name(body)
    if root is None:
        return ""
    name, local = root
    if local == "channel":  # a bare channel, a CDF channel, RSS 1.1
        return (f"its root element is <{name}>, but an RSS channel sits inside <rss> "
                "(RSS 2.0) or <rdf:RDF> (RSS 1.0)")
    if local == "rdf":
        return (f"an RDF document with no RSS 1.0 <channel> (its elements belong to the "
                f"namespace {RSS_10_NAMESPACE})")
    return ""
