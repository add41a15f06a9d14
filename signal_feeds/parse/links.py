"""An entry's link: which of the links feedparser gives is the entry's page, and what an
entry without an id is known by instead of it."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from signal_feeds.parse.fields import references_read, text_value
from signal_feeds.parsed import ParsedEntry
from signal_feeds.urls import check_link

__all__ = ["distinct_name", "entry_link", "known_by"]


def entry_link(raw: dict[str, Any], lenient: bool) -> str:
    """The entry's link as the feed gives it. Without a link element feedparser uses the
    RSS guid (or the Atom id) as the link; a guid such as ``123`` or ``post-abc`` is
    no address, and resolved against the feed's URL it would make up a page
    (``https://example.org/123``): only an absolute URL or path is taken so (read as the
    id is, see :func:`references_read`), and Atom's out-of-line content (``<content
    src>``) before it. FeedBurner's original link comes first."""
    original = references_read(text_value(dict.get(raw, "feedburner_origlink")), lenient)
    if original.lower().startswith(("https://", "http://")):
        # FeedBurner's link is its own tracking redirect (feeds.feedburner.com/~r/...,
        # feedproxy.google.com): the post's address is <feedburner:origLink>.
        return original
    link = text_value(dict.get(raw, "link"))
    if link and dict.get(raw, "guidislink") and link == text_value(dict.get(raw, "id")):
        # No link element: feedparser gave the id. Out-of-line content says where the
        # entry is; an id says so only if it is an address at all.
        if source := _content_source(raw, lenient):
            return source
        if not link.startswith("/") and "://" not in link:
            return ""
        return references_read(link, lenient)
    if not link and not text_value(dict.get(raw, "id")):
        # A podcast episode with neither guid nor link: its media file is all it links
        # to, and what identifies it (it used to be skipped).
        return _enclosure(raw)
    return _redirect_target(_preferred_alternate(raw) or link or _content_source(raw, lenient))


#: Hosts whose ``/url?url=...`` is a click-counting redirect to the page given in the
#: query (Google Alerts links every result so): ``www.google.com``, ``www.google.de``, ...
_REDIRECT_HOST = re.compile(r"(?:www\.)?google(?:\.com?)?(?:\.[a-z]{2})?", re.IGNORECASE)


def _redirect_target(link: str) -> str:
    """The page a Google redirect link (``https://www.google.com/url?...&url=PAGE``) leads
    to, else ``link`` itself. Stored as the redirect, the link would name Google, not the
    page: no duplicate found, no lookup by the page's address."""
    if "/url?" not in link:
        return link
    parts = urlsplit(link)
    if (parts.scheme.lower() not in ("http", "https") or parts.path != "/url"
            or not _REDIRECT_HOST.fullmatch(parts.hostname or "")):
        return link
    query = dict(parse_qsl(parts.query))
    target = query.get("url") or query.get("q") or ""
    return target if target.lower().startswith(("https://", "http://")) else link


_PAGE_TYPES = ("text/html", "application/xhtml+xml")


def _preferred_alternate(raw: dict[str, Any]) -> str:
    """Of an Atom entry's several alternate links (feedparser keeps the last as its
    ``link``: a translation, say), the first web page in no other language than the
    entry's, else the first web page, else the first; ``""`` for fewer than two."""
    links = dict.get(raw, "links")
    alternates = [link for link in links if isinstance(link, Mapping)
                  and link.get("rel", "alternate") == "alternate"
                  and text_value(link.get("href"))] if isinstance(links, list) else []
    if len(alternates) < 2:
        return ""
    pages = [link for link in alternates if text_value(link.get("type") or "text/html")
             .split(";")[0].strip().lower() in _PAGE_TYPES]
    for group in ([link for link in pages if not link.get("hreflang")], pages, alternates):
        if group:
            return text_value(group[0].get("href"))
    return ""


def _content_source(raw: dict[str, Any], lenient: bool) -> str:
    # Atom's out-of-line content (<content src="...">, RFC 4287 4.1.3.2): an entry that
    # has it need not have an alternate link, and the content's address is the page.
    contents = dict.get(raw, "content")
    for content in contents if isinstance(contents, list) else ():
        if isinstance(content, Mapping) and (src := text_value(content.get("src"))):
            return references_read(src, lenient)
    return ""


def _enclosure(raw: dict[str, Any]) -> str:
    # feedparser keeps <enclosure> (and Atom's rel="enclosure") among the links.
    links = dict.get(raw, "links")
    for link in links if isinstance(links, list) else ():
        if (isinstance(link, Mapping) and link.get("rel") == "enclosure"
                and (href := text_value(link.get("href")))):
            return href
    return ""


def distinct_name(raw: dict[str, Any], written: str, link: str | None, base: str | None,
              require_https: bool, home: str) -> str:
    """What an entry without an id is known by instead of its link (see
    :attr:`ParsedEntry.distinct`): the link with its fragment (a changelog's ``#v2.3``),
    or, for an entry that links to the feed's own home page (a podcast's episodes), its
    media file. Decided by the entry and the feed alone, never by the other entries, so
    that a key does not change when a second entry on the page appears."""
    if text_value(dict.get(raw, "id")):
        return ""
    return known_by(written, link, _enclosure(raw), base, require_https, home)


def known_by(written: str, link: str | None, media: str, base: str | None,
             require_https: bool, home: str) -> str:
    """:func:`distinct_name` of an entry without an id in any format: ``written`` is its
    link as the feed gives it, ``link`` that link after the URL policy, ``media`` its
    media file as written (RSS's ``<enclosure>``, a JSON Feed attachment)."""
    if not link:
        return ""
    _, hash_mark, fragment = written.partition("#")
    if hash_mark and fragment.strip():
        return f"{link}#{fragment.strip()[:2048]}"  # only digested, never stored
    if not home or link != home:
        return ""
    checked, _ = check_link(media, base=base, require_https=require_https)
    return checked if checked and checked != link else ""


def refused_link_warnings(entries: Iterable[ParsedEntry]) -> list[str]:
    """One warning per reason an entry that has an id lost its link (an entry without
    one is skipped, and its reason reported as such): the link column is empty for
    those, and the report is where the publisher's mistake can be seen."""
    refused = Counter(e.link_refused for e in entries if e.remote_id and e.link_refused)
    return [f"link left out of {count} {'entry' if count == 1 else 'entries'} ({reason})"
            for reason, count in sorted(refused.items())]
