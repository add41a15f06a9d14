"""The shapes parsing produces, kept apart from the parser so that code which only needs
the shapes (identity, the store, a run of 304s) never loads feedparser.

Plain data in the lowest layer: identity computes keys from these rows, and the parse
package (which imports identity for match keys) produces them, so they can live in
neither without an import cycle between the two packages."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NORMALIZER_VERSION", "ParsedEntry", "ParsedFeed"]

#: Bumped whenever a change to normalization can change a stored field or fingerprint
#: for the same bytes; stored with every row so the data says which rules produced it.
#: 2: http entry links are kept by default. 3: a summary that feedparser copied from HTML
#: content is read as HTML (it was escaped as plain text). 4: relative links and image
#: sources in summaries and content are made absolute (see ``parse.fields.html_base``), and
#: a UTF-8 document served with a default Latin charset is read as UTF-8, and a Media RSS
#: description is no longer the content (see ``parse.captions``); titles and authors lose
#: their control characters. 5: a date given as a Unix timestamp (``1733047200``) is read
#: as one (feedparser took it for the year 1733); white space or a script's warning text
#: before the XML declaration is dropped, so the document is parsed strictly; a space in an
#: entry's link becomes %20 (the link was refused); character references to UTF-16
#: surrogates and lone surrogates in JSON are repaired (the document was rejected); an RFC
#: 822 zone name feedparser reads as UTC (CET, JST, AEST, ...) is applied (see
#: ``parse.dates``), as is the time feedparser drops from ``2026/12/01 10:00:00``; a JSON
#: Feed item with content and no summary has its content as summary, as feedparser gives
#: RSS and Atom entries. 6: an HTML title's character references are read (``Tom &amp;
#: Jerry`` is stored as ``Tom & Jerry``), the feed's own title as an entry's; an entry the
#: end of a document cut through (a response cut short) is not read; dates feedparser does
#: not read that name their month (``Dec 5, 2026``, ``Sa, 05 Dez 2026 ...``) are read (see
#: ``parse.dates``), in JSON Feed too, where an item without ``url`` is linked by its
#: ``external_url``; a guid or Atom id that is no address (``123``) no longer becomes a link
#: resolved against the feed's URL (``https://example.org/123``); a UTF-8 document with a
#: few Windows-1252 bytes has those read as Windows-1252, not itself whole. 7: an author
#: given as HTML (arXiv's ``<a href="...">Jane Doe</a>, ...``) is stored as its text, an
#: author by name without the address feedparser adds, several authors all by name, and
#: an Atom entry or JSON Feed item without authors has the feed's (as both formats say); a
#: no-break space inside a link becomes ``%C2%A0`` (it was kept raw), and a C1 control
#: character or a line separator inside one refuses it; the minutes of an offset such as
#: ``+0530`` and the PM of a 12-hour clock are applied, RFC 850 dates are read, and so are
#: numeric dates that say which number is the day (``2026/12/05`` was 1 December); a date
#: before the year 1000 (``03``, the year 201 to feedparser) is left empty; an entry with
#: neither id nor link is linked by its enclosure (it was skipped); a JSON Feed date that
#: is not RFC 3339 is read as an RSS one would be; a NUL a JSON Feed
#: escapes (``\u0000``) is removed, as XML's are. 8: a title or author written over
#: several lines is stored on one (each run of line breaks, tabs and spaces one space), and
#: an HTML title's ``<br>`` and block edges separate its words (``Line one Line two``);
#: a document read leniently (not well-formed) has the ids, names, guid links and Media
#: RSS descriptions it has read strictly (``a&amp;b`` was kept as written, so one stray
#: character gave each entry whose guid held an ``&`` a new key); an entry's link is
#: FeedBurner's ``<feedburner:origLink>`` when it gives one (its tracking redirect was
#: stored); a link longer than 2,048 bytes is refused (PostgreSQL could not index it); a
#: bare ``&`` and HTML's named references (``&nbsp;``) are read as text before parsing,
#: so such a document is read strictly (the lenient parser stored ``?p=1&lang=en`` as
#: ``?p=1\u2329=en``), and C0 control characters, raw or as references, are removed
#: before parsing. 9: an Atom entry without a link element is linked by its out-of-line
#: content (``<content src="...">``, RFC 4287 4.1.3.2) before its id (it had no link, or
#: its id as one); an ISO 8601 date that does not exist (``2026-02-30``, ``2026-13-01``)
#: is left empty, as an RFC 822 one is (feedparser rolled it over into another date); a
#: JSON Feed loses its C0 control characters as an XML one does (only NUL was removed),
#: and one with a line break or tab written raw inside a string is read (it was refused);
#: an Atom entry's several authors are all stored when they give their addresses (the
#: last one was). 10: the content of ``<noscript>``, ``<noembed>``, ``<noframes>`` and
#: ``<iframe>`` is kept as HTML (a lazy-loading plugin's fallback image was stored as its
#: markup, escaped, and an ``<iframe ... />`` written as XML turned the rest of the
#: article into such text); a ``<video>``, ``<audio>`` or ``<picture>`` is kept, with its
#: sources and controls (a post's video or sound was stored as nothing), and a lazily
#: loaded image (``data-src``) has its address (it had none, or a placeholder's);
#: Drupal's ``Saturday, December 5, 2026 - 10:00`` is read (it was left empty). 11: a
#: summary or content given as plain text keeps its line breaks, as ``<br>`` (YouTube's
#: video descriptions and JSON Feed's ``content_text`` ran their lines together), but
#: not those before an indented line in XML, which are the document's pretty-printing; a
#: lazily loaded image's address is found whatever the case of its attribute's name
#: (``DATA-SRC``). 12: ``dir`` is kept on any element (right-to-left text lost its
#: direction); a ``<noscript>`` beside a lazily loaded image is removed only when it is
#: that image's copy (it went whatever it held); of an Atom entry's several alternate
#: links the first web page not in another language is the link (it was the last); a
#: zone of the tz database after an RFC 822 time (``America/New_York``) is applied (it
#: was read as UTC); a summary or content cut at its limit is sanitized again, so that it
#: ends as whole HTML (it could end inside a tag); a remote id cut at its limit ends in
#: the digest of the whole id (two ids alike in their first 2,048 characters were one);
#: titles and authors lose soft hyphens, zero-width spaces and word joiners; a MathML
#: formula or an SVG drawing in stored HTML is kept as its text (it was removed whole).
#: 13: a Google redirect link gives the page it leads to; the Unix epoch is no date; an
#: HTML summary of tags alone gives way to a Media RSS caption; stored HTML loses control
#: characters that a feed escaped twice (``&amp;#27;``); a frame without a fallback leaves
#: a link to its address. 14: an author escaped twice (WordPress's ``Tom &amp; Jerry`` in
#: CDATA) has its character references read; an offset after UTC or GMT (``UTC+1``,
#: ``GMT+5:30``) is applied (it was dropped, or read as 53 hours); a JSON Feed date given
#: as a Unix timestamp, in a string or as a number, is read as in RSS (it was left empty).
#: 15: of an entry's several contents the longest is stored (after an
#: ``<itunes:summary>``, a podcast episode's ``<description>`` was, not its show notes).
#: 16: a drawing, a formula or a form control keeps the words beside it apart
#: ("Hello<svg>…</svg>world" was stored as "Helloiconworld"). 17: an ``xml:base`` longer
#: than 2,048 bytes is left out (relative links under it resolve against the entry's link).
#: 18: a JSON Feed's own title is held to a title's limit on one line (it was stored whole).
#: 19: a JSON Feed integer of 4,300 digits or more is read as its digits (it was rejected).
#: 20: a link whose host is not one (``[v1.fe]``, ``ex ample.org``) is refused; it was
#: stored with another host. 21: relative references in a summary or content (``#fn1``,
#: ``?page=2``) resolve against the entry's link without its tracking parameters (a
#: rotating ``utm_campaign`` made every run store a new version). 22: a JSON Feed item
#: without an id is known as an RSS item without a guid is: by its link's fragment, by
#: its first attachment when it links to the home page, and linked by that attachment
#: when it has no link (such items were one key, or skipped). 23: a document's byte-order
#: mark names its encoding over a charset parameter or a declaration that says otherwise
#: (a UTF-8 feed with a mark behind ``charset=windows-1251`` was stored as mojibake, a
#: UTF-16 one behind a Latin charset as garbage); a title or author cut at its limit ends
#: where a character as drawn ends (it could end in half a flag, a lone part of an emoji
#: family, an "e" without its accent); a character reference to U+FFFE or U+FFFF
#: (``&#65535;``) becomes U+FFFD (the document was read leniently, and the noncharacter
#: kept); a document served without a Content-Type is read by XML's default, UTF-8, not
#: HTTP's old ISO-8859-1 (a UTF-8 title with a reference beyond Latin-1 in it was stored
#: as "CrÃ¨me it’s"), and a few stray bytes in a document whose byte-order mark says
#: UTF-8 are read as Windows-1252, not the whole document; and a document of valid UTF-8
#: behind another legacy charset than a Latin default (``windows-1251``) is read as UTF-8.
#: 24: an image one pixel square (a web bug: FeedBurner's, Medium's) is left out of a
#: summary or content (FeedBurner renaming it stored the post as edited).
NORMALIZER_VERSION = 24


@dataclass(frozen=True, slots=True)
class ParsedEntry:
    """One entry, normalized. Dates are ISO 8601 UTC (``2026-03-14T09:26:53Z``) or ``""``."""

    remote_id: str
    url: str
    title: str
    published: str
    updated: str
    author: str = ""
    summary: str = ""
    content: str = ""
    #: Why the entry's link was refused by the URL policy (``""``: kept, or none given).
    link_refused: str = ""
    #: For an entry without an id, what it is known by instead of its link: the link
    #: with its fragment (``https://app.example/changes#v2``), or, when it links to the
    #: feed's own home page, its media file; ``""`` otherwise.
    distinct: str = ""


@dataclass(frozen=True, slots=True)
class ParsedFeed:
    """A parsed feed: its entries in document order and what was noticed on the way."""

    title: str
    link: str
    version: str
    ttl_seconds: int | None
    entries: tuple[ParsedEntry, ...]
    warnings: tuple[str, ...] = ()
    #: The document stopped before its end (a response cut short): the entries it
    #: closed are here, the one its end cut through is not.
    incomplete: bool = False
