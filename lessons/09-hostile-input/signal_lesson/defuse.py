"""Make a downloaded document harmless before feedparser reads it.

Everything happens on the raw bytes, before any XML parser runs, and in time linear in
the size of the document:

* the prolog (everything before the first element, except the XML declaration) is
  dropped, and with it any DOCTYPE and ENTITY declaration: an entity that is never
  declared can be neither expanded nor read from a file or a URL;
* references to HTML's named entities (``&nbsp;``, ``&eacute;``), which old feeds took
  from a DTD, become numeric character references, so those feeds still parse; any other
  unknown reference is left as it is and the XML parser rejects the document;
* the text of author-like elements is cut to ``MAX_AUTHOR`` characters, because
  feedparser searches author strings with a regular expression whose cost grows with
  the square of their length.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from html.entities import name2codepoint

__all__ = ["MAX_AUTHOR", "DefuseStats", "defuse"]

MAX_AUTHOR = 256

_DECLARATION = re.compile(rb"(?:\xef\xbb\xbf)?\s*<\?xml\s[^<>]{0,200}\?>")
_FIRST_ELEMENT = re.compile(rb"<[A-Za-z_]")
_AUTHOR = re.compile(
    rb"(<(?:[A-Za-z][\w.-]*:)?(?:author|name|email|creator|managingEditor|webMaster)"
    rb"(?:\s[^<>]*)?>)([^<]{%d})[^<]+" % MAX_AUTHOR
)
_REFERENCE = re.compile(rb"&([A-Za-z][A-Za-z0-9]{0,31});")
_PREDEFINED = frozenset({"amp", "lt", "gt", "quot", "apos"})

# Encodings in which "<!DOCTYPE" is not spelled with ASCII bytes, recognized by how the
# document starts (a byte order mark, or "<" padded with zero bytes). UTF-32 comes first
# because its little-endian mark begins with UTF-16's.
_WIDE = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
    (b"<\x00\x00\x00", "utf-32-le"),
    (b"\x00\x00\x00<", "utf-32-be"),
    (b"<\x00", "utf-16-le"),
    (b"\x00<", "utf-16-be"),
)


@dataclass
class DefuseStats:
    """What :func:`defuse` changed, for reports and tests."""

    doctypes: int = 0  # DOCTYPE declarations dropped with the prolog
    entities: int = 0  # ENTITY declarations dropped with the prolog
    references: int = 0  # HTML named references turned into numeric ones
    authors_cut: int = 0  # author-like texts cut to MAX_AUTHOR characters


def _numeric(match: re.Match[bytes], stats: DefuseStats) -> bytes:
    name = match.group(1).decode("ascii")
    if name in _PREDEFINED or name not in name2codepoint:
        return match.group(0)
    stats.references += 1
    return b"&#%d;" % name2codepoint[name]


def _cut(match: re.Match[bytes], stats: DefuseStats) -> bytes:
    stats.authors_cut += 1
    return match.group(1) + match.group(2)


def _clean(data: bytes, stats: DefuseStats) -> bytes:
    declaration = _DECLARATION.match(data)
    head = declaration.group(0) if declaration else b""
    first = _FIRST_ELEMENT.search(data, len(head))
    start = first.start() if first else len(data)
    prolog = data[len(head):start]
    stats.doctypes += prolog.count(b"<!DOCTYPE")
    stats.entities += prolog.count(b"<!ENTITY")
    body = data[start:]
    body = _AUTHOR.sub(lambda match: _cut(match, stats), body)
    body = _REFERENCE.sub(lambda match: _numeric(match, stats), body)
    return head + b"\n" + body if head else body


def defuse(data: bytes, stats: DefuseStats | None = None) -> bytes:
    """Return ``data`` without its prolog, with HTML references made numeric and author
    text capped. ``stats``, when given, is filled in with what was changed.

    UTF-8 and other ASCII-compatible encodings are handled on the bytes. A UTF-16 or
    UTF-32 document is decoded, cleaned and encoded again in the same encoding, so a
    declaration cannot hide between zero bytes.
    """
    stats = stats if stats is not None else DefuseStats()
    for start, encoding in _WIDE:
        if data.startswith(start):
            mark = b"" if b"<" in start else start
            text = data[len(mark):].decode(encoding, "replace").encode("utf-8")
            return mark + _clean(text, stats).decode("utf-8").encode(encoding)
    return _clean(data, stats)
