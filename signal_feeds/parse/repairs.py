"""Repairs a feed document needs before feedparser reads it, where one small fault would
otherwise cost every entry: XML allows it nowhere, expat gives up, and feedparser's
lenient reading either loses structure or, for some faults, fails on the whole document.

Each repair works on the raw bytes, changes only the fault, and is reported as a warning.
"""

from __future__ import annotations

import re
from html.entities import html5

from signal_feeds.urls import MAX_URL_BYTES

__all__ = ["C0_CONTROLS", "MAX_BASE_BYTES", "WITHOUT_C0", "ampersands", "from_declaration",
           "long_bases", "valid_char_refs", "without_controls"]


#: The C0 controls but tab and line breaks, NUL included (a form feed or a vertical tab
#: pasted from a word processor, a terminal's ESC): XML allows them nowhere, and one made
#: expat give up on the whole document. Removed from XML before parsing, from JSON Feed
#: strings, and from titles and names.
C0_CONTROLS = (*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20))
#: ``str.translate`` table that removes :data:`C0_CONTROLS`.
WITHOUT_C0 = dict.fromkeys(C0_CONTROLS)
# As bytes, and a reference to one (&#27;, &#x1b;, &#0;). NULs are removed before, with
# a warning of their own.
_CONTROL_BYTES = bytes(code for code in C0_CONTROLS if code)
_CONTROL_REF = re.compile(
    rb"&#(?:0*(?:[0-8]|1[124-9]|2[0-9]|3[01])|[xX]0*(?:[0-8bBcCeEfF]|1[0-9a-fA-F]));")


def without_controls(data: bytes) -> tuple[bytes, int]:
    """Control characters removed, raw or as references, and how many there were: they
    mean nothing in a title or a summary (NULs are removed before, on their own)."""
    kept = data.translate(None, _CONTROL_BYTES)  # a tenth of a regular expression's time
    raw = len(data) - len(kept)
    if b"&#" not in kept:
        return kept, raw
    kept, referenced = _CONTROL_REF.subn(b"", kept)
    return kept, raw + referenced


# A numeric character reference that may name no character (checked exactly below): a
# UTF-16 surrogate, U+FFFE or U+FFFF, or a value past U+10FFFF. XML forbids them, and
# feedparser's lenient parser then fails on the whole document (or, for U+FFFF, reads
# all of it leniently and keeps the noncharacter).
_SUSPECT_REF = re.compile(
    rb"&#(?:[xX]0*([dD][89a-fA-F][0-9a-fA-F]{2}|[fF]{3}[eEfF]|[1-9a-fA-F][0-9a-fA-F]{5,})"
    rb"|0*(5[5-7][0-9]{3}|6553[45]|[1-9][0-9]{6,}));")
_NONCHARACTERS = (0xFFFE, 0xFFFF)
_LAST_CODE_POINT = 0x10FFFF


def _invalid(match: re.Match[bytes]) -> int | None:
    """The value a reference names when it is no character, else ``None``."""
    hex_digits, decimal = match.groups()
    digits = hex_digits or decimal
    if len(digits) > 10:  # past U+10FFFF whatever it says (int() refuses 4,300 digits)
        return _LAST_CODE_POINT + 1
    value = int(digits, 16 if hex_digits else 10)
    return (value if 0xD800 <= value <= 0xDFFF or value in _NONCHARACTERS
            or value > _LAST_CODE_POINT else None)


def valid_char_refs(data: bytes) -> tuple[bytes, int]:
    """Character references that name no character made valid, and how many there were.

    Some publishers write an emoji as its UTF-16 surrogate pair (``&#55357;&#56832;``):
    a high and a low reference side by side become the one character they encode
    (``&#128512;``). Any other surrogate, U+FFFE and U+FFFF (Java's end of a stream,
    -1, written as a character), and any value past U+10FFFF become U+FFFD.
    """
    found = [(m, value) for m in _SUSPECT_REF.finditer(data)
             if (value := _invalid(m)) is not None]
    if not found:
        return data, 0
    parts: list[bytes] = []
    pos = index = 0
    while index < len(found):
        match, high = found[index]
        after, low = found[index + 1] if index + 1 < len(found) else (None, 0)
        parts.append(data[pos:match.start()])
        if (0xD800 <= high <= 0xDBFF and 0xDC00 <= low <= 0xDFFF
                and after is not None and after.start() == match.end()):
            parts.append(b"&#%d;" % (0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)))
            pos, index = after.end(), index + 2
        else:
            parts.append(b"&#xFFFD;")
            pos, index = match.end(), index + 1
    parts.append(data[pos:])
    return b"".join(parts), len(found)


#: An XML declaration (not ``<?xml-stylesheet``), looked for this far into the body.
_DECLARATION = re.compile(rb"<\?xml[ \t\r\n]")
_LEAD_LIMIT = 4096
_ROOT_ELEMENT = re.compile(rb"<(?:rss|feed|rdf:RDF)\b")


def from_declaration(body: bytes) -> tuple[bytes, str]:
    """The body from its XML declaration on, and a warning, when something comes before
    the declaration: blank lines (the commonest WordPress feed error: a theme file that
    ends in a newline) or a server-side script's warning text. XML allows nothing there,
    so the parser gave up and feedparser read the rest leniently. Only an ASCII-compatible
    lead of at most 4 KB with no feed element in it is dropped."""
    bom = b"\xef\xbb\xbf" if body.startswith(b"\xef\xbb\xbf") else b""
    found = _DECLARATION.search(body, len(bom), len(bom) + _LEAD_LIMIT + 6)
    if found is None or found.start() == len(bom):
        return body, ""
    lead = body[len(bom):found.start()]
    if b"\x00" in lead or _ROOT_ELEMENT.search(lead):
        return body, ""
    if not lead.strip():
        return bom + body[found.start():], "white space before the XML declaration removed"
    return bom + body[found.start():], (f"{len(lead)} bytes of text before the XML "
                                        "declaration removed")


# An "&" that begins none of what XML allows: a character reference or one of the five
# entities XML defines (a document's own are gone with its DOCTYPE, see feed.defuse),
# with the name it may begin.
_ODD_AMPERSAND = re.compile(
    rb"&(?!(?:amp|lt|gt|quot|apos|#[0-9]+|#[xX][0-9a-fA-F]+);)(?:([A-Za-z][A-Za-z0-9]*);)?")
# Where a section whose "&" is no markup begins (CDATA, a comment, a processing
# instruction), and how each ends.
_LITERAL_START = re.compile(rb"<!\[CDATA\[|<!--|<\?")
_LITERAL_END = {b"<![CDATA[": b"]]>", b"<!--": b"-->", b"<?": b"?>"}


def _literal_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of every CDATA section, comment and processing instruction."""
    spans: list[tuple[int, int]] = []
    pos = 0
    while (found := _LITERAL_START.search(data, pos)) is not None:
        end = data.find(_LITERAL_END[found.group()], found.end())
        end = len(data) if end < 0 else end + len(_LITERAL_END[found.group()])
        spans.append((found.start(), end))
        pos = end
    return spans


def ampersands(data: bytes) -> tuple[bytes, int, int]:
    """A bare ``&`` escaped, and HTML's named references written as numeric ones; the
    bytes, and how many of each.

    The two commonest faults of hand-made feeds: ``?p=1&lang=en`` in a link, ``&nbsp;``
    or ``&hellip;`` in a title. Either made the whole document malformed, and
    feedparser's lenient parser then read ``&lang`` and ``&copy`` as HTML's legacy
    references: the link was stored as ``?p=1\u2329=en``. Text in CDATA sections,
    comments and processing instructions is left as it is; a name HTML does not know
    (``&custom;``) is left too, and the document is read leniently as before.
    """
    if _ODD_AMPERSAND.search(data) is None:
        return data, 0, 0
    parts: list[bytes] = []
    pos = bare = named = 0
    gap = 0  # the text between literal sections is searched, never their insides
    for start, end in [*_literal_spans(data), (len(data), len(data))]:
        for match in _ODD_AMPERSAND.finditer(data, gap, start):
            name = match.group(1)
            if name is None:
                replacement, bare = b"&amp;", bare + 1
            elif (characters := html5.get(name.decode("ascii") + ";")) is not None:
                replacement = b"".join(b"&#%d;" % ord(c) for c in characters)
                named += 1
            else:
                continue
            parts.append(data[pos:match.start()])
            parts.append(replacement)
            pos = match.end() if name is not None else match.start() + 1
        gap = end
    if not bare and not named:
        return data, 0, 0
    parts.append(data[pos:])
    return b"".join(parts), bare, named


#: The longest ``xml:base`` kept, in bytes as written: the longest link Signal keeps.
MAX_BASE_BYTES = MAX_URL_BYTES
# An attribute value longer than that (a quoted value holds no "<"), and before it the
# name of an xml:base, or of a plain "base", which feedparser reads as one (in any case:
# a lenient parse lowers attribute names). Searched for by the value, which starts with
# a literal "=": over the benchmark's 13.7 MB of short feeds 8 ms, where a search by
# the name in any case took 50.
_LONG_VALUE = re.compile(rb"""=\s*(?:"[^"<]{%d,}"|'[^'<]{%d,}')""" % (MAX_BASE_BYTES + 1,
                                                                     MAX_BASE_BYTES + 1))
_BASE_NAME = re.compile(rb"\s(?:xml:)?base\s*\Z", re.IGNORECASE)


def long_bases(data: bytes) -> tuple[bytes, str]:
    """The document without its ``xml:base`` attributes longer than
    :data:`MAX_BASE_BYTES`, and a warning when there were some. feedparser joins the
    base in effect with itself at every start tag, and, given no document address,
    keeps one an element set in effect to the end of the document: after a 1 MB
    ``xml:base`` each later tag cost 3 ms (10,000 empty elements after it took half a
    minute). Relative links under such a base are resolved as if it were not there
    (against the entry's link)."""
    if len(data) <= MAX_BASE_BYTES:
        return data, ""
    pieces: list[bytes] = []
    done = 0
    for value in _LONG_VALUE.finditer(data):
        name = _BASE_NAME.search(data, max(done, value.start() - 64), value.start())
        if name is not None:  # (not "database=", nor another attribute)
            pieces.append(data[done:name.start() + 1])
            done = value.end()
    if not pieces:
        return data, ""
    pieces.append(data[done:])
    return (b"".join(pieces), f"{len(pieces) - 1} xml:base attribute(s) longer than "
            f"{MAX_BASE_BYTES} bytes removed")
