"""Decoding a feed document: bytes in whatever encoding, UTF-8 out.

feedparser's own decoder does the work (byte-order mark, HTTP charset, XML declaration,
fallbacks); this module decides what it is told about the response, where servers
commonly label their documents wrongly.
"""

from __future__ import annotations

import codecs
import re
from typing import Any

__all__ = ["to_utf8"]


def _xml_media_type(content_type: str) -> tuple[str, str]:
    """``content_type`` as RFC 7303 reads it, and a note ("" for none).

    A ``text/`` XML type without a charset parameter names its encoding the way
    ``application/xml`` does (byte-order mark, then the XML declaration, then UTF-8), so
    it is handed on as that type. RFC 3023, which RFC 7303 replaced and feedparser still
    follows, made it US-ASCII: every UTF-8 feed served as ``text/xml`` (nginx's type for
    ``.xml``) was decoded by a fallback and reported "declared as us-ascii".

    A feed served as another text type without a charset (``text/html`` from a
    misconfigured script, ``text/plain``) is read as XML all the same, so its encoding
    is found the same way; the note says the type is not an XML one, which is what
    feedparser says when such a type comes with a charset. (Left to feedparser, the
    note said the document "declared" US-ASCII, which no document here had done.)
    """
    media, sep, params = content_type.partition(";")
    kind = media.strip().lower()
    if not kind.startswith("text/") or _charset_and_others(params)[0] is not None:
        return content_type, ""
    if kind in ("text/xml", "text/xml-external-parsed-entity") or kind.endswith("+xml"):
        return "application/" + kind[len("text/"):] + sep + params, ""
    return ("application/xml" + sep + params,
            f"content type: {content_type.strip()} is not an XML media type")


def _charset_and_others(params: str) -> tuple[str | None, list[str]]:
    """A Content-Type's parameters (what follows the first ``;``): the charset, lower-case
    and unquoted (``None`` when there is none), and the other parameters as written."""
    charset: str | None = None
    others: list[str] = []
    for param in params.split(";"):
        name, eq, value = param.partition("=")
        if eq and name.strip().lower() == "charset":
            charset = value.strip().strip("\"'").lower()
        elif param.strip():
            others.append(param.strip())
    return charset, others


def to_utf8(body: bytes, content_type: str | None, url: str | None) -> tuple[bytes, str]:
    """Decode the document as feedparser would (BOM, XML declaration, HTTP charset,
    fallbacks; text/ types without a charset read by RFC 7303, see
    :func:`_xml_media_type`) and re-encode it as UTF-8, so that byte-level defusing sees
    the same markup the parser will: a declaration hidden in UTF-32 or UTF-7 is still a
    declaration. Returns the bytes and the notes about the encoding and content type.
    ``url`` (where the document came from) does not change how it is read."""
    headers: dict[str, str] = {}
    overruled = ""
    bom = _bom_encoding(body)
    if bom is not None:
        headers["content-type"], overruled = _bom_wins(content_type or "", body, bom)
    elif content_type:
        content_type, overruled = _overrule_latin_charset(content_type, body)
        headers["content-type"], relabelled = _xml_media_type(content_type)
        overruled = "; ".join(filter(None, (overruled, relabelled)))
    # No header for the URL: feedparser reads a document it has headers for, but no
    # Content-Type in, by HTTP's old ISO-8859-1 default instead of XML's UTF-8, and a
    # UTF-8 feed served without a type was stored as "CrÃ¨me" (a local file, without
    # headers, as "Crème"). The URL plays no part in the decoding.
    data, encoding, note = _converted(headers, body)
    note = _who_declared(note, content_type or "", body)
    if note and encoding not in _UTF8_LABELS:
        # feedparser fell back from UTF-8: maybe only a few bytes were not UTF-8. (Checked
        # here, after the fact, so that a document it reads as UTF-8 is not decoded twice.)
        # (The charset feedparser was given: a byte-order mark's, when there is one.)
        repaired, mixed = _mixed_utf8(body, headers.get("content-type"))
        if mixed:
            data, encoding, note = _converted(headers, repaired)
            overruled = "; ".join(filter(None, (mixed, overruled)))
    return data, "; ".join(filter(None, (overruled, note)))


#: Byte-order marks, longest first (UTF-32LE's begins with UTF-16LE's), as feedparser
#: tells them apart: FF FE followed by two NULs is UTF-32LE.
_BOMS = ((b"\x00\x00\xfe\xff", "utf-32be"), (b"\xff\xfe\x00\x00", "utf-32le"),
         (b"\xfe\xff", "utf-16be"), (b"\xff\xfe", "utf-16le"), (b"\xef\xbb\xbf", "utf-8"))


def _bom_encoding(body: bytes) -> str | None:
    """The encoding the document's byte-order mark names, or None for no mark."""
    return next((name for mark, name in _BOMS if body.startswith(mark)), None)


def _agrees(label: str, bom: str) -> bool:
    """Whether an encoding's ``label`` (a charset, a declaration) names what the
    byte-order mark ``bom`` does: ``utf-16`` agrees with either UTF-16 mark."""
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return False
    marked = codecs.lookup(bom).name  # utf-16-le
    return name in (marked, marked[:6], "utf-8-sig" if bom == "utf-8" else marked)


def _bom_wins(content_type: str, body: bytes, bom: str) -> tuple[str, str]:
    """The content type to hand feedparser for a document with a byte-order mark, and
    the note ("" for none). The mark names the encoding beyond doubt, and RFC 7303
    (section 3.3) and browsers let it win over a charset parameter; feedparser lets
    the header win (a UTF-8 document with a mark behind ``charset=windows-1251`` was
    stored as mojibake, a UTF-16 one behind a Latin charset as garbage), and without
    a charset it reads the declaration. A charset or declaration that names another
    encoding is said, since one of the two is wrong."""
    media, _, params = content_type.partition(";")
    charset, kept = _charset_and_others(params)
    bare = "; ".join([media.strip(), *kept]) if media.strip() else ""
    xml_type, relabelled = _xml_media_type(bare) if bare else ("application/xml", "")
    shown = bom.upper()
    if charset is not None and not _agrees(charset, bom):
        note = (f"character encoding: the server said charset={charset}, but the document "
                f"starts with a {shown} byte-order mark: read as {shown}")
    else:
        head = body[len(next(m for m, n in _BOMS if n == bom)):][:512 * 4]
        declared = _declared_encoding(head.decode(bom, "ignore").encode("utf-8").lstrip())
        note = ("" if declared is None or _agrees(declared, bom) else
                f"character encoding: the document declared {declared}, but it starts "
                f"with a {shown} byte-order mark: read as {shown}")
    return f"{xml_type}; charset={bom}", "; ".join(filter(None, (note, relabelled)))


_DECLARED = re.compile(r"character encoding: document declared as (\S+), but parsed as (\S+)")


def _who_declared(note: str, content_type: str, body: bytes) -> str:
    """feedparser's "document declared as utf-8, but parsed as windows-1252" when the
    server's charset said so and the document's own declaration did not: the server
    is named, not the document (which may have declared what it was read as); when
    neither said anything, the default is named as one."""
    found = _DECLARED.fullmatch(note)
    if found is None:
        return note
    charset, _ = _charset_and_others(content_type.partition(";")[2])
    declared = _declared_encoding(body[:512].lstrip())
    if charset is None and declared is None and found[1].lower() in _UTF8_LABELS:
        # Nobody declared anything: UTF-8 was XML's default, not the document's word.
        return ("character encoding: no encoding declared, and the document is not UTF-8 "
                f"(XML's default): parsed as {found[2]}")
    if charset is None or charset != found[1].lower() or declared == charset:
        return note
    return (f"character encoding: the server said charset={charset}, but the document is "
            f"not in it: parsed as {found[2]}")


def _converted(headers: dict[str, str], body: bytes) -> tuple[bytes, str, str]:
    """feedparser's decoding of ``body`` to UTF-8: the bytes, the encoding it read, and
    its note about the encoding or content type ("" when it had none)."""
    from feedparser.encodings import convert_to_utf8

    result: dict[str, Any] = {}
    try:
        data = convert_to_utf8(headers, body, result)
    except Exception as exc:  # undocumented failure modes: fall back to lossy UTF-8
        return body.decode("utf-8", "replace").encode("utf-8"), "", f"encoding unknown ({exc})"
    encoding = str(result.get("encoding") or "").lower()
    if not encoding or not isinstance(data, bytes):
        data = body.decode("utf-8", "replace").encode("utf-8")
    note = result.get("bozo_exception")
    if not note:
        return data, encoding, ""
    kind = "content type" if type(note).__name__ == "NonXMLContentType" else "character encoding"
    return data, encoding, f"{kind}: {note}"


# (Quoted or not: an unquoted name is still a declaration of another encoding.)
_DECLARATION_ENCODING = re.compile(rb"""^<\?xml[^>]*\bencoding\s*=\s*["']?([^"'\s?>]*)""",
                                   re.IGNORECASE)


def _declared_encoding(head: bytes) -> str | None:
    """The encoding the XML declaration at the start of ``head`` names, lower-case;
    None for no declaration of one."""
    found = _DECLARATION_ENCODING.match(head)
    return found[1].decode("ascii", "replace").lower() if found else None


def _overrule_latin_charset(content_type: str, body: bytes) -> tuple[str, str]:
    """Drop a legacy charset from the header when the document is UTF-8.

    A UTF-8 feed served with ``charset=iso-8859-1`` (a server's default; or us-ascii,
    windows-1252, windows-1251, koi8-r, ...) would be decoded as the header says, and
    every accented letter stored as two (``Ã©``), every Cyrillic one as ``Р—``. When the
    bytes are valid UTF-8, contain non-ASCII text, and the document itself says UTF-8
    (its declaration, or none, whose default is UTF-8), the header is the mistake: text
    in a legacy charset almost never forms valid UTF-8 beyond ASCII. Returns the content
    type to use and the warning ("" when nothing was overruled).
    """
    media, _, params = content_type.partition(";")
    charset, kept = _charset_and_others(params)
    if charset is not None and charset.startswith(_WIDE) and _single_byte(body):
        # charset=utf-16 on a document whose "<" is one byte: decoded as the header
        # says, every character came out wrong and the feed was "not well-formed".
        return ("; ".join([media.strip(), *kept]),
                f"character encoding: the server said charset={charset}, but the document "
                "is not in it (its first character is one byte): read by its own "
                "declaration")
    if charset is None or _is_utf8(charset) or body.isascii():
        return content_type, ""
    if _declared_encoding(body[:512].lstrip()) not in (None, *_UTF8_LABELS):
        return content_type, ""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return content_type, ""
    return ("; ".join([media.strip(), *kept]),
            f"character encoding: the server said charset={charset}, but the document is "
            "valid UTF-8 and does not declare another encoding: read as UTF-8")


def _is_utf8(label: str) -> bool:
    try:
        return codecs.lookup(label).name == "utf-8"
    except LookupError:  # a charset Python does not know: not UTF-8 either
        return False


_WIDE = ("utf-16", "utf16", "utf-32", "utf32", "ucs-2", "ucs-4", "iso-10646-ucs")
_WIDE_BOMS = tuple(mark for mark, name in _BOMS if name != "utf-8")


def _single_byte(body: bytes) -> bool:
    """The document starts with a one-byte character and no UTF-16 or UTF-32 mark."""
    head = body[:4]
    return (not head.startswith(_WIDE_BOMS) and len(head) >= 2 and b"\x00" not in head[:2]
            and head[:1] in (b"<", b"\xef", b" ", b"\t", b"\r", b"\n"))


_UTF8_LABELS = frozenset({"utf-8", "utf8"})
# A byte of an invalid UTF-8 sequence, as the surrogateescape error handler leaves it.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
# Text beyond ASCII that is not such a byte: a valid multi-byte UTF-8 sequence.
_DECODED_NON_ASCII = re.compile("[^\x00-\x7f\udc80-\udcff]")


def _windows_1252(match: re.Match[str]) -> str:
    byte = bytes([ord(match.group()) - 0xDC00])
    return byte.decode("cp1252", "replace")  # 0x81, 0x8D, 0x8F, 0x90, 0x9D: U+FFFD


def _mixed_utf8(body: bytes, content_type: str | None) -> tuple[bytes, str]:
    """A UTF-8 document with some Windows-1252 bytes in it (a plugin's or a database's
    text pasted into a UTF-8 page: ``Café`` and then ``\x93quoted\x94``), made all UTF-8.

    feedparser decodes such a document whole as Windows-1252, and every valid UTF-8
    character becomes two (``CafÃ©``). When the document says UTF-8 (its declaration,
    or none, whose default is UTF-8; and no other charset in the header) and holds both
    valid multi-byte UTF-8 and bytes that are not, each stray byte is read as
    Windows-1252 instead. A document with no valid multi-byte UTF-8 is left to
    feedparser (reading it whole as Windows-1252 gives the same text).
    """
    if body.isascii() or body[:2] in (b"\xff\xfe", b"\xfe\xff") or b"\x00" in body[:512]:
        return body, ""  # ASCII, or UTF-16 or UTF-32 (with or without a byte-order mark)
    if content_type:
        charset = _charset_and_others(content_type.partition(";")[2])[0]
        if charset is not None and charset not in _UTF8_LABELS:
            return body, ""
    head = body[:512].removeprefix(b"\xef\xbb\xbf").lstrip()
    if _declared_encoding(head) not in (None, *_UTF8_LABELS):
        return body, ""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        return body, ""
    text = body.decode("utf-8", "surrogateescape")
    if not _DECODED_NON_ASCII.search(text):
        return body, ""
    text, count = _ESCAPED_BYTE.subn(_windows_1252, text)
    return (text.encode("utf-8"),
            f"character encoding: {count} byte(s) that are not UTF-8 in a UTF-8 document "
            "read as Windows-1252")
