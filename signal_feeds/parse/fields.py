"""How each field of an entry is stored: titles and authors as plain text, summaries and
content as sanitized HTML whose relative links are made absolute, every field within its
length limit. Works on the values feedparser read (``parse.feed``) or JSON Feed gave
(``parse.jsonfeed``); nothing here parses a document.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import html
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit

from signal_feeds.graphemes import cut_text
from signal_feeds.identity.search_text import WITHOUT_INVISIBLE
from signal_feeds.parse.repairs import WITHOUT_C0
from signal_feeds.parse.sanitize import sanitize
from signal_feeds.urls import without_tracking

__all__ = [
    "DEFAULT_FIELD_LIMITS",
    "FieldLimiter",
    "as_html",
    "bounded",
    "entry_author",
    "feed_title",
    "html_base",
    "plain_text",
    "plain_title",
    "read_bound",
    "references_read",
    "text_value",
]

#: Characters kept per field; longer values are cut and a warning is reported.
DEFAULT_FIELD_LIMITS: Mapping[str, int] = {
    "remote_id": 2048,
    "title": 2048,
    "author": 512,
    "summary": 65536,
    "content": 262144,
}


def text_value(value: Any) -> str:
    """A feedparser value as stripped text (``""`` for anything but a string)."""
    return value.strip() if isinstance(value, str) else ""


# White space a title or a name is written over several lines with (pretty-printed XML's
# line breaks and indentation, tabs): a title is shown on one line, so each run is one
# space. A single space stays, and so does a no-break space, which asks for no break.
_SPACE_RUN = re.compile("[ \t\n\r\f\v\x85\u2028\u2029]{2,}|[\t\n\r\f\v\x85\u2028\u2029]")


# The characters of those tables. str.translate with a dict looks every character of a
# non-ASCII text up, and each miss raises and clears a KeyError: a title of 60 characters
# took 5 µs. A search finds the rare text that holds one.
_INVISIBLE_CHAR = re.compile("[" + re.escape("".join(map(chr, WITHOUT_INVISIBLE))) + "]")
_C0_CHAR = re.compile("[" + re.escape("".join(map(chr, WITHOUT_C0))) + "]")


def plain_text(value: str) -> str:
    """A title or author as stored: on one line (each run of white space one space,
    none at either end), without control characters."""
    # (ESC in a title is a terminal escape sequence; a JSON Feed or a leniently read
    # document can still bring one in.)
    if not value.isascii() and _INVISIBLE_CHAR.search(value):
        value = value.translate(WITHOUT_INVISIBLE)  # a soft hyphen: shown as nothing
    value = _SPACE_RUN.sub(" ", value)
    if _C0_CHAR.search(value):
        value = value.translate(WITHOUT_C0)
    return value.strip()


def _is_html(detail: Any) -> bool:
    kind = detail.get("type", "") if isinstance(detail, Mapping) else ""
    return isinstance(kind, str) and "html" in kind


#: A line break in plain text (a lone CR too, as old Mac text has them).
_LINE_BREAK = re.compile("\r\n?|[\n\u2028\u2029]")
#: One that the next line's indentation does not mark as the XML document's layout.
_UNINDENTED_LINE_BREAK = re.compile(f"(?:{_LINE_BREAK.pattern})(?![ \t])")


def as_html(value: str, detail: Any, base: str | None = None, *,
            in_markup: bool = True) -> str:
    """Sanitized HTML for a summary or content value (plain text is escaped, and its
    line breaks become ``<br>``, except in a value ``in_markup`` where the next line is
    indented: that break is the document's pretty-printing, which Atom lets a reader
    fold into a space).

    With ``base`` (an absolute http or https URL), relative links and image sources are
    made absolute against it: stored HTML is shown far from the page it came from.
    """
    if not value:
        return ""
    if not _is_html(detail):
        # Shown as HTML, a line break is a space: a video's description or a JSON Feed
        # post written as text in paragraphs would run together into one.
        breaks = _UNINDENTED_LINE_BREAK if in_markup else _LINE_BREAK
        return breaks.sub("<br>", html.escape(value, quote=False))
    if base:
        try:
            return sanitize(value, body=True,
                            url_relative=("rewrite_with_base", base)).strip()
        except ValueError:  # a base the sanitizer cannot parse: leave them relative
            pass
    return sanitize(value, body=True).strip()


def html_base(element_base: Any, document: str | None, link: str | None) -> str | None:
    """The absolute http(s) URL relative references in an entry's HTML resolve against,
    or ``None`` (they stay as written).

    The element's own ``xml:base`` first (which may itself be relative to the document);
    else the entry's link (``link`` has passed the URL policy), since in practice feeds
    write their HTML for the entry's page (``#footnote`` and ``image.png`` mean that
    page's), without its tracking parameters: a ``#footnote`` or ``?page=2`` names the
    page, not how a reader came to it, and a campaign name that rotates must not change
    the body (see :func:`signal_feeds.identity.keys.classify_change`); else the
    document's URL.
    """
    if isinstance(element_base, str) and element_base.strip():
        with contextlib.suppress(ValueError):  # a malformed xml:base is passed over
            resolved = urljoin(document or "", element_base.strip())
            if _is_web_url(resolved):
                return resolved
    if link:
        return without_tracking(link)
    return document if document and _is_web_url(document) else None


@functools.lru_cache(maxsize=256)  # one document URL per feed, asked once per entry
def _is_web_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def plain_title(value: str, detail: Any) -> str:
    """A title as text. An HTML title (Atom ``type="html"``, or what feedparser takes
    for HTML) loses its tags, and its character references are read: ``Tom &amp;
    Jerry`` and WordPress's ``It&#8217;s`` in an HTML title mean ``Tom & Jerry`` and
    ``It’s``."""
    if _is_html(detail) and ("<" in value or "&" in value):
        return _text_of_html(value)
    return value


#: Elements whose edges separate words: ``Line one<br>Line two`` is two lines' words, not
#: ``Line oneLine two``.
_BREAKING_TAGS = frozenset({"br", "p", "div", "li", "ul", "ol", "dd", "dt", "tr", "td",
                            "th", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote",
                            "hr", "pre", "section", "article", "header", "footer"})
# Those tags as the sanitizer writes them back: no attributes, so a pattern cannot be
# misled by a ">" inside one.
_BREAKING_TAG = re.compile("</?(?:" + "|".join(sorted(_BREAKING_TAGS)) + ")>")


def _no_attribute(element: str, attribute: str, value: str) -> None:
    """nh3's attribute filter that keeps none (``title`` and ``lang`` pass its lists)."""
    return None


def _text_of_html(value: str) -> str:
    kept = sanitize(value, tags=set(_BREAKING_TAGS), attribute_filter=_no_attribute,
                    link_rel=None)
    return html.unescape(_BREAKING_TAG.sub(" ", kept)).strip()


_ADDRESS = r"[^\s@()<>]+@[^\s@()<>]+"
#: RSS's ``jane@example.org (Jane Doe)``.
_ADDRESS_THEN_NAME = re.compile(rf"^({_ADDRESS})\s*\((.+)\)$")
#: ``Jane Doe <jane@example.org>``, and Atom's name and address as feedparser joins them,
#: ``Jane Doe (jane@example.org)``.
_NAME_THEN_ADDRESS = re.compile(rf"^(.+?)\s*(?:<{_ADDRESS}>|\({_ADDRESS}\))$")


def entry_author(raw: dict[str, Any], *, lenient: bool = False,
                 structured: bool = False) -> str:
    """A feedparser entry's (or feed's) authors as stored: by name, as JSON Feed's are (``Jane Doe,
    John Roe``), as text, without control characters. ``lenient``: the document was read
    by feedparser's lenient parser, which leaves character references in names (see
    :func:`references_read`). ``structured``: an Atom document, whose authors are
    elements with a name apart from the address."""
    return plain_text(_plain_author(_names(raw, lenient, structured)))


# A character reference as XML writes one: with its semicolon. (html.unescape alone
# would also read HTML's legacy forms without one, and the bare "&" of a malformed
# feed's "?a=1&copy=2" would become "?a=1©=2".)
_REFERENCE = re.compile(r"&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")


def _reference(match: re.Match[str]) -> str:
    return html.unescape(match.group())


def references_read(value: str, lenient: bool) -> str:
    """A plain-text value (an id, a name) as the strict parser gives it. feedparser's
    lenient parser, used for a document that is not well-formed, leaves named character
    references in such values (``Tom &amp; Jerry``, ``tag:x,2026:a&amp;b``), so one
    stray character in a feed changed the key of every entry whose id holds an ``&``."""
    return _REFERENCE.sub(_reference, value) if lenient and "&" in value else value


def _names(raw: dict[str, Any], lenient: bool = False, structured: bool = False) -> str:
    """The authors by name.

    feedparser's ``author`` keeps only the last of several (``<dc:creator>`` twice) and
    joins an address to the name (``Jane (noreply@blogger.com)``). Its ``authors`` list
    has them apart, but splits text by an address pattern that ends the domain after four
    letters (``jane@blog.example (Jane)`` becomes ``jane@blog.exam`` and ``ple (Jane``):
    the list is used only when no one in it has an address, and the name is otherwise
    read from the text here. An author given as an address alone stays one. Atom's
    authors (``structured``) are elements with the name apart, so their list is used
    whether they give an address or not."""
    people = dict.get(raw, "authors")
    if isinstance(people, list) and len(people) > 1:
        if structured:
            given = [name for p in people if isinstance(p, Mapping)
                     if (name := text_value(p.get("name")) or text_value(p.get("email")))]
            if given:
                return ", ".join(dict.fromkeys(references_read(n, lenient) for n in given))
        names = [references_read(text_value(p.get("name")), lenient) for p in people
                 if isinstance(p, Mapping) and not p.get("email")]
        if len(names) == len(people) and all(names):
            return ", ".join(dict.fromkeys(names))
    text = references_read(text_value(dict.get(raw, "author")), lenient)
    if "@" not in text:
        return text
    if (match := _ADDRESS_THEN_NAME.match(text)) is not None:
        return match[2].strip() or text
    if (match := _NAME_THEN_ADDRESS.match(text)) is not None:
        return match[1].strip() or text
    return text


#: Characters of an author read as HTML. Names are short (512 are stored), and the
#: sanitizer's time grows with the square of a text's length; an Atom name in CDATA, or
#: thousands of names joined, reach here uncut.
_AUTHOR_HTML_BOUND = 16_384


def _plain_author(value: str) -> str:
    """An author as text. Some feeds (arXiv's, among others) give the names as links,
    ``<a href="...">Jane Doe</a>, <a ...>John Roe</a>``; that reads ``Jane Doe, John
    Roe``. Only a value with an end tag is taken for HTML: ``John <john@example.org>``
    is a name and an address, as written. A name escaped once more than XML needs has
    its character references read, as an HTML title has: WordPress saves a display name
    through ``esc_html`` and writes ``Tom &amp; Jerry`` for ``Tom & Jerry`` (a name is
    never meant to show ``&amp;``); an ``&`` that starts no reference stays."""
    if "</" not in value:
        return _REFERENCE.sub(_reference, value) if "&" in value else value
    return " ".join(_text_of_html(bounded(value, _AUTHOR_HTML_BOUND)).split())


def read_bound(limit: int) -> int:
    """How much of a value is rendered (sanitized, escaped) for a field of ``limit``
    characters: the limit and a quarter more (at least 16,384), for the markup that
    rendering removes. nh3 takes time quadratic in the length of a text holding many
    ``&`` (2 MB of ``"& "`` took 15 s), so it must never see a whole hostile value."""
    return limit + max(limit // 4, 16_384)


#: A character reference the end of a cut may have split (the longest is 33 long).
_SPLIT_REFERENCE = re.compile(r"&[#\w]{0,32}\Z")
#: An address attribute holding a long quoted ``data:`` URL (an image pasted into a
#: post), inside a tag: the sanitizer drops every ``data:`` address, so the attribute goes
#: before the cut, which would otherwise spend the bound on it and lose the text after
#: it. Text, alt texts and titles that mention "data:" are not addresses.
_TAG = re.compile(r"<[A-Za-z][^<>]*>")
_LONG_DATA_ADDRESS = re.compile(
    r"""\s(?:src|href|poster|srcset|data-src|data-lazy-src|data-original)\s*=\s*"""
    r"""(["'])\s*data:[^"']{1024,}\1""", re.IGNORECASE)


def _without_long_data_addresses(value: str) -> str:
    return _TAG.sub(lambda tag: _LONG_DATA_ADDRESS.sub("", tag.group())
                    if "data:" in tag.group().lower() else tag.group(), value)


def bounded(value: str, bound: int) -> str:
    """At most ``bound`` characters of ``value``, not ending inside a character
    reference. (A tag the cut goes through needs nothing: the sanitizer drops a tag
    the text ends inside, and closes the elements left open.)"""
    if len(value) <= bound:
        return value
    value = value[:bound]
    split = _SPLIT_REFERENCE.search(value, max(0, bound - 33))
    return value[:split.start()] if split is not None else value


class FieldLimiter:
    """Cuts a field to its limit (``DEFAULT_FIELD_LIMITS``) and counts the cuts by field,
    for the warning a parse reports."""

    def __init__(self, limits: Mapping[str, int]) -> None:
        self.limits = limits
        self.cut: dict[str, int] = {}

    def __call__(self, field: str, value: str,
                 render: Callable[[str], str] | None = None) -> str:
        """``value`` within the field's limit; with ``render``, ``render(value)``, given
        at most :func:`read_bound` characters of ``value`` (the field is then counted
        as cut whatever the length rendered)."""
        limit = self.limits.get(field)
        early = False
        if render is not None:
            bound = read_bound(limit) if limit is not None else len(value)
            if len(value) > bound:
                value = _without_long_data_addresses(value)
                if len(value) > bound:
                    early, value = True, bounded(value, bound)
            value = render(value)
        if limit is None or (len(value) <= limit and not early):
            return value
        self.cut[field] = self.cut.get(field, 0) + 1
        if len(value) <= limit:
            return value
        if field == "remote_id":
            # Two ids that differ past the limit are two entries: the digest of the
            # whole id ends the kept part, so their keys still differ.
            whole = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
            return f"{value[:max(0, limit - len(whole) - 2)]}…#{whole}"
        if field in _HTML_FIELDS:
            return _html_cut(value, limit)
        return cut_text(value, limit)  # not through a flag, an emoji family, an "é"


def feed_title(value: str, limits: Mapping[str, int],
               render: Callable[[str], str]) -> tuple[str, str]:
    """A feed's own title, rendered and held to an entry title's limit (unlimited, a
    hostile HTML title kept nh3 busy for seconds and was stored whole), and the warning
    when it was cut (``""`` when not)."""
    limit = FieldLimiter(limits)
    title = limit("title", value, render)
    return title, (f"the feed's title cut to {limits['title']} characters" if limit.cut
                   else "")


#: Fields stored as sanitized HTML: a cut must leave whole HTML.
_HTML_FIELDS = frozenset({"summary", "content"})


def _html_cut(value: str, limit: int) -> str:
    """Sanitized HTML cut to at most ``limit`` characters and sanitized again: a tag the
    cut went through is dropped and open elements are closed. (A value cut inside
    ``alt="`` would otherwise take in the markup of whatever is shown after it, the
    next entry's included, as the attribute's text, and its quotes could open a new
    attribute there: an ``onerror``.)"""
    kept = value[:limit]
    for _ in range(2):  # each pass costs a sanitizer's run: hostile nesting is slow
        whole = sanitize(kept, body=True)
        if len(whole) <= limit:
            return whole
        kept = kept[:len(kept) - (len(whole) - limit) - 64]
        if len(kept) < limit // 2:
            break
    # Closing what the cut left open keeps adding more than it takes (thousands of
    # nested elements, a hostile value): the cut's text, escaped, is whole HTML too.
    text = html.escape(" ".join(_text_of_html(value[:limit]).split()), quote=False)
    if len(text) > limit:
        text = text[:limit]
        amp = text.rfind("&")
        if amp != -1 and ";" not in text[amp:]:  # not in the middle of a reference
            text = text[:amp]
    return text


