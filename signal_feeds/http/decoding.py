"""Content-Encoding decoding with a hard cap on the decoded size.

httpx decodes gzip and deflate itself, but without a bound on what comes out: a 32 KB
gzip bomb inflates to gigabytes. The fetcher reads the raw bytes (``aiter_raw``) and
decodes them here, a piece at a time, never producing more than one byte past the cap.
"""

from __future__ import annotations

import zlib

from signal_feeds.errors import FetchError, shown

__all__ = ["CappedDecoder", "body_too_large", "gunzipped_again"]


def body_too_large(cap: int, *, declared: str = "") -> FetchError:
    """The error for a body past the cap (or one whose ``Content-Length`` says it will
    be); it names the setting that raises the cap."""
    what = f"Content-Length {declared} is" if declared else "body"
    return FetchError(f"{what} larger than the cap of {cap} bytes (the max_body_bytes "
                      "setting)", reason="too_large")

#: zlib's window bits that accept both a gzip and a zlib header.
_GZIP_OR_ZLIB = 47
#: zlib's window bits for a raw deflate stream (some servers send that for "deflate").
_RAW_DEFLATE = -15
#: How much of a body's start is kept until it decodes to something: a compressed stream
#: that is not one fails in its first bytes (a gzip header's file name can be longer).
_HEAD = 64 * 1024
_BOM = b"\xef\xbb\xbf"


_UNDONE = ("gzip", "x-gzip", "deflate")


class CappedDecoder:
    """Decodes identity, gzip (x-gzip) or deflate into :attr:`out`; raises
    ``FetchError(reason="too_large")`` once the decoded body passes ``cap`` bytes.

    Several codings (``gzip, gzip``: applied in that order, RFC 9110 8.4) are undone in
    turn: the last one as the body streams in, the others by :meth:`finish`, each under
    the same cap. A body labelled with a coding that it does not have, or one Signal
    cannot undo, is taken as it came when it begins as a document (:attr:`uncompressed`
    says so), and is refused with ``FetchError(reason="encoding")`` otherwise."""

    def __init__(self, encoding: str, cap: int) -> None:
        codings = [c.strip().lower() for c in encoding.split(",") if c.strip()]
        codings = [c for c in codings if c != "identity"]
        #: A coding Signal cannot undo (br, compress, "utf-8" for a charset): the body is
        #: read as it came only if it begins as a document.
        self._unsupported = encoding if any(c not in _UNDONE for c in codings) else ""
        if self._unsupported:
            codings = []
        #: Codings applied before the last one, undone by finish().
        self._inner = codings[:-1]
        self._zlib: zlib._Decompress | None = None
        self._raw_fallback = False
        #: The body was labelled compressed but came as it is (see :meth:`feed`).
        self.uncompressed = False
        #: Bytes after the last compressed member that begin no other: left out, as
        #: ``gzip -d`` leaves them ("trailing garbage ignored").
        self.trailing = 0
        self._members = 0  # members ended so far (RFC 1952 2.2: a file may hold several)
        self._member_at = 0  # where the current member began in the body, and its output
        self._member_out = 0
        self._received = bytearray()  # the body's first bytes as received (to _HEAD)
        self._seen = 0
        if codings:
            self._zlib = zlib.decompressobj(_GZIP_OR_ZLIB)
            self._raw_fallback = codings[-1] == "deflate"
        self.cap = cap
        self.out = bytearray()

    def feed(self, chunk: bytes) -> None:
        """Decode one chunk of the body as received."""
        if self._unsupported:
            if not _is_document_start(chunk):
                raise FetchError("unsupported Content-Encoding "
                                 f"{shown(self._unsupported, 80)!r}", reason="encoding")
            self._unsupported = ""
            self.uncompressed = True
        if self.trailing:
            self.trailing += len(chunk)
            return
        if self._zlib is None:
            self._append(chunk)
            return
        self._seen += len(chunk)
        if len(self._received) < _HEAD:
            self._received += chunk
        data = chunk
        while data:
            if self._zlib.eof:  # another member follows: gzip -d decodes them all
                self._members += 1
                self._member_at, self._member_out = self._seen - len(data), len(self.out)
                self._zlib = zlib.decompressobj(_GZIP_OR_ZLIB)
            room = self.cap - len(self.out) + 1  # one byte past the cap proves the excess
            try:
                piece = self._zlib.decompress(data, room)
            except zlib.error as exc:
                if self._members:  # what follows the last member begins no other
                    self.trailing = self._seen - self._member_at
                    return
                whole_start = self._seen == len(self._received)
                if self._raw_fallback and not self.out and whole_start:
                    self._raw_fallback = False
                    self._zlib = zlib.decompressobj(_RAW_DEFLATE)
                    data = bytes(self._received)  # from the start, with earlier chunks
                    continue
                if whole_start and _is_document_start(self._received):
                    # A server (or a cache before it) that labels a body it never
                    # compressed: no compressed stream starts like a document.
                    self._zlib = None
                    self.uncompressed = True
                    self.out = bytearray()  # what a raw deflate reading made of it
                    self._append(bytes(self._received))
                    return
                raise FetchError(f"corrupt compressed body: {exc}", reason="encoding") from exc
            self._append(piece)
            # Stopping at the end of the first member cut the body short without a word.
            data = self._zlib.unused_data if self._zlib.eof else self._zlib.unconsumed_tail

    def finish(self) -> bytes:
        """The decoded body once every chunk is fed, with the codings applied before the
        last one undone too (none of them if the body came uncompressed)."""
        body = bytes(self.out)
        if self.uncompressed:
            return body
        if (self._members and not self.trailing and self._zlib is not None
                and not self._zlib.eof and len(self.out) == self._member_out):
            # Too short to be found wrong ("\n"), yet no member either.
            self.trailing = self._seen - self._member_at
        for coding in reversed(self._inner):
            body, trailing = _undone(coding, body, self.cap)
            self.trailing += trailing
        return body

    def _append(self, piece: bytes) -> None:
        self.out += piece
        if len(self.out) > self.cap:
            raise body_too_large(self.cap)


def _is_document_start(data: bytes | bytearray) -> bool:
    """Could ``data`` begin an XML or JSON document (after a byte order mark, or the part
    of one received so far, and white space)? A gzip stream begins with 1f 8b and a zlib
    stream with a header byte that is no such character."""
    head = bytes(data[:64]).lstrip()
    if head.startswith(_BOM):
        head = head[len(_BOM):].lstrip()
    elif _BOM.startswith(head):  # nothing yet, or a BOM cut short
        return True
    return head[:1] in (b"", b"<", b"{")


_GZIP_MAGIC = b"\x1f\x8b"


def gunzipped_again(body: bytes, cap: int) -> bytes:
    """A body still gzip-compressed once its Content-Encoding is undone (a ``.xml.gz``
    served as the file itself, an object stored compressed without its
    Content-Encoding, compression applied twice), decompressed once more under the
    same cap: no feed document starts with those two bytes. Any other body as it is."""
    if not body.startswith(_GZIP_MAGIC):
        return body
    return _undone("gzip", body, cap)[0]


def _undone(coding: str, body: bytes, cap: int) -> tuple[bytes, int]:
    """``body`` with one ``coding`` undone, under ``cap``, and how many bytes after its
    compressed data were left out (see :attr:`CappedDecoder.trailing`)."""
    decoder = CappedDecoder(coding, cap)
    decoder.feed(body)
    return decoder.finish(), decoder.trailing
