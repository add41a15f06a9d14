"""Content-Encoding decoding with a hard cap on the decoded size.

httpx decodes gzip and deflate itself, but without a bound on what comes out: a 32 KB
gzip bomb inflates to gigabytes. The fetcher reads the raw bytes (``aiter_raw``) and
decodes them here, a piece at a time, never producing more than one byte past the cap.
"""

from __future__ import annotations

import zlib

from signal_feeds.errors import FetchError

__all__ = ["CappedDecoder"]

#: zlib's window bits that accept both a gzip and a zlib header.
_GZIP_OR_ZLIB = 47
#: zlib's window bits for a raw deflate stream (some servers send that for "deflate").
_RAW_DEFLATE = -15


class CappedDecoder:
    """Decodes identity, gzip (x-gzip) or deflate into :attr:`out`; raises
    ``FetchError(reason="too_large")`` once the decoded body passes ``cap`` bytes."""

    def __init__(self, encoding: str, cap: int) -> None:
        codings = [c.strip().lower() for c in encoding.split(",") if c.strip()]
        codings = [c for c in codings if c != "identity"]
        if len(codings) > 1 or (codings and codings[0] not in ("gzip", "x-gzip", "deflate")):
            raise FetchError(f"unsupported Content-Encoding {encoding!r}", reason="encoding")
        self._zlib: zlib._Decompress | None = None
        self._raw_fallback = False
        if codings:
            self._zlib = zlib.decompressobj(_GZIP_OR_ZLIB)
            self._raw_fallback = codings[0] == "deflate"
        self.cap = cap
        self.out = bytearray()

    def feed(self, chunk: bytes) -> None:
        """Decode one chunk of the body as received."""
        if self._zlib is None:
            self._append(chunk)
            return
        data = chunk
        while data:
            room = self.cap - len(self.out) + 1  # one byte past the cap proves the excess
            try:
                piece = self._zlib.decompress(data, room)
            except zlib.error as exc:
                if self._raw_fallback and not self.out:
                    self._raw_fallback = False
                    self._zlib = zlib.decompressobj(_RAW_DEFLATE)
                    continue
                raise FetchError(f"corrupt compressed body: {exc}", reason="encoding") from exc
            self._append(piece)
            data = self._zlib.unconsumed_tail
            if self._zlib.eof:
                break

    def _append(self, piece: bytes) -> None:
        self.out += piece
        if len(self.out) > self.cap:
            raise FetchError(f"body larger than the cap of {self.cap} bytes",
                             reason="too_large")
