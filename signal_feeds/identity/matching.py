"""Cross-source duplicate matching as pure functions: no database, no I/O.

The same story often arrives from several sources (the publisher, a mirror, a planet).
Identity keys stay per source; the store marks rows that tell the same story, one
marker column per detection channel, with the decisions made here:

- link: the same canonical link after aggressive *match* normalization (scheme,
  ``www.``, trailing slash and tracking parameters ignored; the query otherwise sorted).
  This is for matching only: the stored ``url`` keeps the link policy of ``urls.py``.
- title: the same normalized title from another source within a time window.
- text: near-identical title + summary (word-shingle Jaccard at or above 0.9),
  found through a few of each text's smallest shingle hashes (:data:`POSTED_TOKENS`).

Within a channel, rows from different sources that match are linked; a cluster is a
connected group of linked rows and its canonical row is the original: the earliest by
the entry's own date (published, else updated, else when Signal first saw it), ties
going to the source listed first in the config (:func:`canonical_order`). The order
does not depend on which source was fetched first, so every run over the same dated
feeds chooses the same rows, and a later report never displaces the post it reports
on. Every other member's marker names the canonical row, so a marker always points at
a row earlier in that one total order, and chains end.

Parser processes import this module to compute :class:`MatchKeys` next to the parse,
without importing the store; the store's dedupe SQL applies the same decisions.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import html
import math
import re
import struct
import unicodedata
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from signal_feeds.identity.search_text import INVISIBLE, searchable_text
from signal_feeds.timeutil import parse_time
from signal_feeds.urls import TRACKING_PARAMETERS, ascii_host, is_tracking_parameter

__all__ = [
    "CHANNELS",
    "DEFAULT_MIN_TEXT_WORDS",
    "DEFAULT_MIN_TITLE_CHARS",
    "DEFAULT_MIN_TWO_WORD_TITLE_CHARS",
    "DEFAULT_SHINGLE_SIZE",
    "DEFAULT_TEXT_THRESHOLD",
    "DEFAULT_TITLE_WINDOW",
    "MATCHERS",
    "POSTED_TOKENS",
    "TRACKING_PARAMETERS",
    "UNLISTED_RANK",
    "DedupeRow",
    "MatchKeys",
    "canonical_key",
    "canonical_order",
    "clusters",
    "jaccard",
    "links_match",
    "markers_for",
    "match_keys",
    "match_url",
    "normalize_title",
    "pack_tokens",
    "posted_tokens",
    "prefix_tokens",
    "sizes_may_match",
    "shingles",
    "texts_match",
    "titles_match",
    "unpack_tokens",
]

#: Detection channels in ``duplicate_of`` priority order, with their marker columns.
CHANNELS: Mapping[str, str] = {"link": "dup_link", "title": "dup_title", "text": "dup_text"}
#: Two equal titles count only if their dates are at most this far apart.
DEFAULT_TITLE_WINDOW = dt.timedelta(hours=48)
#: Shorter normalized titles ("News", "Update 3") are too generic to match on.
DEFAULT_MIN_TITLE_CHARS = 12
#: A title of only two words of letters names a recurring post more often than a story
#: ("Weekly update", "Release notes", "Open thread": two blogs' posts of one week are
#: two stories), unless it is this long ("Bundesverfassungsgericht kippt").
DEFAULT_MIN_TWO_WORD_TITLE_CHARS = 16
DEFAULT_SHINGLE_SIZE = 3
#: Texts with fewer words (words that are more than digits) have too few shingles for
#: the overlap to mean anything.
DEFAULT_MIN_TEXT_WORDS = 8
DEFAULT_TEXT_THRESHOLD = 0.9
#: The rank of a source the config no longer lists: after every listed one.
UNLISTED_RANK = 1 << 62
_WORD = re.compile(r"\w+")


# -- match keys (pure) --------------------------------------------------------------------


def match_url(url: str) -> str:
    """The link as compared for duplicates, or ``""`` when there is nothing to compare.

    Scheme, ``www.``, default ports, a trailing slash, the fragment and tracking
    parameters (``utm_*``, ``fbclid``, ``gclid``, ...) are dropped; the remaining query
    parameters are sorted. ``https://www.Example.org/a/?utm_source=x&b=2&a=1#top`` and
    ``http://example.org/a?a=1&b=2`` give the same ``example.org/a?a=1&b=2``. A path
    written as Unicode, or percent-encoded in either case (``/café``, ``/caf%C3%A9``,
    ``/caf%c3%a9``, as WordPress writes it), and a host in Unicode or in its ASCII form
    (``bücher.example``, ``xn--bcher-kva.example``) are the same link.
    """
    text = url.strip()
    if not text:
        return ""
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return ""
    if parts.scheme.lower() not in ("http", "https"):
        return ""
    host = ascii_host((parts.hostname or "").lower().rstrip("."))
    host = host.removeprefix("www.")
    if not host:
        return ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    if port is not None and port not in (80, 443):
        host = f"{host}:{port}"
    query = sorted(
        (name, value) for name, value in parse_qsl(parts.query, keep_blank_values=True)
        if not is_tracking_parameter(name)
    )
    encoded = urlencode(query)
    return host + _canonical_path(parts.path).rstrip("/") + (f"?{encoded}" if encoded else "")


#: What a path keeps unencoded (RFC 3986's unreserved and sub-delimiter characters, ":",
#: "@" and "/"); an encoded slash stays encoded, since it is not a separator.
_PATH_SAFE = "/:@!$&'()*+,;=-._~"
_ENCODED_SLASH = re.compile("%2[fF]")


def _canonical_path(path: str) -> str:
    if "%" not in path and path.isascii():
        return path
    return quote(unquote(_ENCODED_SLASH.sub("%252F", path)), safe=_PATH_SAFE + "%")


# Characters common in feed text that are not NFKC-normalized, with their NFKC forms.
# NFKC decomposes character by character, so putting the decomposition in first gives
# the same result, and most texts (a WordPress excerpt's "[…]", a "&nbsp;") then pass
# the quick check instead of a full normalization. Characters shown as nothing inside a
# word (a soft hyphen, a zero-width space: search_text.INVISIBLE) go too.
_COMPATIBILITY = (("\u2026", "..."), ("\xa0", " "), *((char, "") for char in INVISIBLE))


def _words(text: str) -> list[str]:
    """The case-folded NFKC words (``\\w+``) of ``text``."""
    if text.isascii():  # NFKC leaves ASCII as it is, and casefold() is lower() there
        text = text.lower()
    else:
        for char, form in _COMPATIBILITY:
            if char in text:
                text = text.replace(char, form)
        if not unicodedata.is_normalized("NFKC", text):
            text = unicodedata.normalize("NFKC", text)
        text = text.casefold()
    # The same list as _WORD.findall(text), faster: whitespace never belongs to a word,
    # and a whitespace-separated chunk of only alphanumerics (str.isalnum() is the
    # regular expression's definition of \\w, less the underscore) is one whole word.
    words: list[str] = []
    for chunk in text.split():
        if chunk.isalnum():
            words.append(chunk)
        else:
            words += _WORD.findall(chunk)
    return words


#: A normalized title longer than this (UTF-8 bytes) is compared by its SHA-256.
_MAX_TITLE_KEY_BYTES = 1024


def normalize_title(title: str, *, min_chars: int = DEFAULT_MIN_TITLE_CHARS) -> str:
    """Case-folded words of a title joined by single spaces; ``""`` when too generic to
    identify a story (punctuation, case and spacing never distinguish two titles).

    Too generic: shorter than ``min_chars``, or fewer than two words of letters alone,
    or only two and shorter than :data:`DEFAULT_MIN_TWO_WORD_TITLE_CHARS`.
    ``Release 1.0.0``, ``Episode 100`` or ``v2.3.1 (2026-12-05)`` name a release or an
    episode of whichever project or show the feed is about: two feeds' equal such titles
    are two stories (two repositories' releases), not one; so do ``Weekly update`` and
    ``Release notes``, a series' title.
    """
    return _title_key(_words(html.unescape(title)), min_chars)


def _title_key(words: list[str], min_chars: int = DEFAULT_MIN_TITLE_CHARS) -> str:
    norm = " ".join(words)
    lettered = sum(word.isalpha() for word in words)
    if len(norm) < min_chars or lettered < 2 or (
            lettered == 2 and len(norm) < DEFAULT_MIN_TWO_WORD_TITLE_CHARS):
        return ""
    if len(norm) > _MAX_TITLE_KEY_BYTES // 4 and len(norm.encode()) > _MAX_TITLE_KEY_BYTES:
        # The key is indexed, and PostgreSQL refuses an index entry past about 2,700
        # bytes (a long CJK title is 6 KB): a digest is equal exactly when they are.
        return "#" + hashlib.sha256(norm.encode()).hexdigest()
    return norm


_MASK63 = (1 << 63) - 1
_MIX = 0x9E3779B97F4A7C15  # odd 64-bit constant (the golden ratio): a multiplicative hash


def _window_hash(window: Sequence[int], size: int) -> int:
    value = 0
    for word in window:
        value = value << 32 | word
    # The word hashes packed side by side, times the constant: the product's upper bits
    # depend on every word. 63 bits of them fit SQLite's signed INTEGER.
    return (value * _MIX >> max(32 * size - 63, 0)) & _MASK63


def shingles(title: str, summary: str, *, size: int = DEFAULT_SHINGLE_SIZE,
             min_words: int = DEFAULT_MIN_TEXT_WORDS,
             summary_text: str | None = None) -> frozenset[int]:
    """Hashes of the word shingles (``size`` consecutive words) of the title and the
    summary's text, as non-negative 63-bit integers.

    Empty when the text has fewer than ``min_words`` words. The hashes are stable across
    processes and Python versions (CRC-32 of each word, then a fixed multiplicative mix
    of each window): they are stored as the text channel's tokens.
    """
    if summary_text is None:  # given when the search text was computed already
        summary_text = searchable_text(summary)
    # Title and summary split apart, as match_keys() splits them: NFKC, case folding
    # and the word split never reach across the space that would join the two.
    return _shingles_of(_words(html.unescape(title)) + _words(summary_text), size,
                        min_words)


def _enough_words_of_letters(words: list[str], needed: int) -> bool:
    """Whether ``needed`` of ``words`` are more than digits (``v1`` is, ``2`` is not)."""
    for word in words:
        if not word.isdigit():
            needed -= 1
            if needed <= 0:
                return True
    return needed <= 0


def _shingles_of(words: list[str], size: int = DEFAULT_SHINGLE_SIZE,
                 min_words: int = DEFAULT_MIN_TEXT_WORDS) -> frozenset[int]:
    # The words must say something besides numbers: GitHub's release notes of a release
    # without pull requests are "v1.2.3 Full Changelog: v1.2.2...v1.2.3", eleven words
    # of which five hold a letter, and two projects released in step wrote the same.
    if len(words) < max(min_words, size) or not _enough_words_of_letters(words, min_words):
        return frozenset()
    # CRC-32 of every word, repeats included: hashing a word again is cheaper than
    # looking it up in a table of the text's distinct words.
    hashed = list(map(zlib.crc32, map(str.encode, words)))
    if size == 3:  # the default, unrolled (_window_hash inline): it runs for every entry
        return frozenset([((a << 64 | b << 32 | c) * _MIX >> 33) & _MASK63
                          for a, b, c in zip(hashed, hashed[1:], hashed[2:], strict=False)])
    return frozenset(_window_hash(hashed[i:i + size], size)
                     for i in range(len(words) - size + 1))


def jaccard(a: frozenset[Any], b: frozenset[Any]) -> float:
    """Size of the intersection over size of the union (0.0 for two empty sets)."""
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def prefix_tokens(items: frozenset[int], *,
                  threshold: float = DEFAULT_TEXT_THRESHOLD) -> list[int]:
    """The prefix-filter tokens of a set of shingle hashes: its smallest values.

    In one global order (the hashes' numeric order, which is pseudo-random), two sets
    with Jaccard >= t share a token among their first ``n - ceil(t * n) + 1``. The
    product ``t * n`` is rounded down a hair before the ceiling, so that float error
    (0.9 * 30 is 27.000000000000004) can only lengthen the prefix, never shorten it.
    """
    if not items:
        return []
    count = len(items)
    keep = count - math.ceil(threshold * count - 1e-9) + 1
    # Shingle hashes are spread evenly over [0, 2**63): the ``keep`` smallest nearly
    # always lie below a bound of three times their share of that range. When at least
    # ``keep`` values do, the smallest ``keep`` are among them: sorting only those gives
    # the same list for a fifth of the work. (Any other set still gets the right answer,
    # from the full sort.)
    if 3 * keep < count:
        bound = (_MASK63 + 1) * 3 * keep // count
        low = [item for item in items if item < bound]
        if len(low) >= keep:
            low.sort()
            return low[:keep]
    return sorted(items)[:keep]


@functools.lru_cache(maxsize=4096)
def _sizes_with_prefix(length: int, threshold: float) -> tuple[int, int]:
    """The fewest and most shingles a set whose prefix (:func:`prefix_tokens`) has
    ``length`` tokens can hold (the prefix grows by one for about every ``1 / (1 - t)``
    shingles, never shrinks)."""
    def keep(count: int) -> int:
        return count - math.ceil(threshold * count - 1e-9) + 1

    low = max(1, int((length - 1) / (1 - threshold)) - 2)
    while low > 1 and keep(low - 1) >= length:
        low -= 1
    while keep(low) < length:
        low += 1
    high = low
    while keep(high + 1) == length:
        high += 1
    return low, high


def sizes_may_match(prefix_a: int, prefix_b: int, *,
                    threshold: float = DEFAULT_TEXT_THRESHOLD) -> bool:
    """Whether two shingle sets with prefixes of these lengths can have Jaccard >=
    ``threshold`` at all: it needs the smaller set to hold ``threshold`` of the larger
    one's shingles, and a prefix's length says how many a set holds, within a range.
    A filter that loses no pair, and spares comparing a post with a text three times
    its length (most candidates in a large database, found by one common shingle)."""
    if prefix_a == prefix_b:
        return True
    low_a, high_a = _sizes_with_prefix(prefix_a, threshold)
    low_b, high_b = _sizes_with_prefix(prefix_b, threshold)
    return min(high_a, high_b) >= threshold * max(low_a, low_b) - 1e-9


#: Text tokens of an entry posted to ``dedupe_text``: the smallest of its prefix. Each
#: posting is one more row at a random place in a table that grows with the database,
#: the costliest write at a million entries. Two texts at or above the threshold differ
#: in few shingles, spread at random over the order: their five smallest values have
#: one in common unless five values one of them lacks come before the first they share,
#: about once in (1 / 0.1) ** 5 = 100,000 pairs at 0.9, less the closer they are,
#: never for identical texts, and never for texts of up to about 40 shingles, whose
#: whole prefix is five tokens or fewer.
POSTED_TOKENS = 5


def posted_tokens(tokens: Sequence[int]) -> Sequence[int]:
    """The tokens (:func:`prefix_tokens`, in order) an entry is found by."""
    return tokens[:POSTED_TOKENS]


def pack_tokens(tokens: Sequence[int]) -> bytes:
    """Tokens as stored in ``entries.text_tokens``: big-endian signed 64-bit integers."""
    return struct.pack(f">{len(tokens)}q", *tokens)


def unpack_tokens(blob: bytes | None) -> tuple[int, ...]:
    """The inverse of :func:`pack_tokens` (``()`` for NULL or an empty blob)."""
    if not blob:
        return ()
    return struct.unpack(f">{len(blob) // 8}q", blob)


# -- clustering decisions (pure) ----------------------------------------------------------


@dataclass(frozen=True)
class DedupeRow:
    """What the channels compare about one stored entry."""

    key: str
    source_id: str
    first_seen_at: str
    #: The entry's own date: ``published``, else ``updated``, else ``first_seen_at``.
    moment: str
    match_url: str
    norm_title: str
    #: :func:`shingles` of the title and summary (left empty until the text channel
    #: compares this row: most rows are never compared).
    shingles: frozenset[int] = field(default=frozenset(), repr=False)
    #: The stored markers, by channel name.
    markers: Mapping[str, str] = field(default_factory=dict)
    #: :func:`prefix_tokens` of ``shingles``, as stored in ``entries.text_tokens``.
    tokens: tuple[int, ...] = field(default=(), repr=False)
    #: ``entries.seq``: how ``dedupe_text`` names the row (0 when not stored yet).
    seq: int = 0
    #: The source's position in the config (:data:`UNLISTED_RANK` when not listed).
    rank: int = UNLISTED_RANK
    #: The match URL (``link``) and title (``title``) the row had before this write and
    #: has no more: the rows still sharing one may be few enough to link again.
    left: Mapping[str, str] = field(default_factory=dict)


def links_match(a: DedupeRow, b: DedupeRow) -> bool:
    """Same match URL, different sources."""
    return a.source_id != b.source_id and bool(a.match_url) and a.match_url == b.match_url


def titles_match(a: DedupeRow, b: DedupeRow, *,
                 window: dt.timedelta = DEFAULT_TITLE_WINDOW) -> bool:
    """Same normalized title, different sources, dates at most ``window`` apart."""
    if a.source_id == b.source_id or not a.norm_title or a.norm_title != b.norm_title:
        return False
    ta, tb = parse_time(a.moment), parse_time(b.moment)
    return ta is not None and tb is not None and abs(ta - tb) <= window


def texts_match(a: DedupeRow, b: DedupeRow, *,
                threshold: float = DEFAULT_TEXT_THRESHOLD) -> bool:
    """Near-identical text (shingle Jaccard >= ``threshold``), different sources."""
    return a.source_id != b.source_id and jaccard(a.shingles, b.shingles) >= threshold


MATCHERS: Mapping[str, Callable[[DedupeRow, DedupeRow], bool]] = {
    "link": links_match, "title": titles_match, "text": texts_match,
}


def canonical_order(row: DedupeRow) -> tuple[str, int, str, str]:
    """Sort key of the canonical choice: the entry's own date (ISO 8601 UTC text, which
    sorts as time), then the source's place in the config, then when Signal first saw
    it (which decides only between sources of unknown place), then the key."""
    return (row.moment, row.rank, row.first_seen_at, row.key)


def canonical_key(rows: Iterable[DedupeRow]) -> str:
    """The cluster's canonical row: the first in :func:`canonical_order`."""
    return min(rows, key=canonical_order).key


def clusters(seeds: Iterable[str], neighbours: Callable[[str], Iterable[str]]
             ) -> list[frozenset[str]]:
    """Connected groups of ``seeds`` under ``neighbours`` (each seed in exactly one)."""
    seen: set[str] = set()
    found: list[frozenset[str]] = []
    for seed in seeds:
        if seed in seen:
            continue
        seen.add(seed)
        group, stack = {seed}, [seed]
        while stack:
            for other in neighbours(stack.pop()):
                if other not in seen:
                    seen.add(other)
                    group.add(other)
                    stack.append(other)
        found.append(frozenset(group))
    return found


def markers_for(group: Iterable[DedupeRow]) -> dict[str, str]:
    """Marker per member: ``""`` for the canonical row, its key for every other row."""
    members = list(group)
    canon = canonical_key(members)
    return {r.key: "" if r.key == canon else canon for r in members}


# -- match keys of one entry (pure) -----------------------------------------------------


@dataclass(frozen=True)
class MatchKeys:
    """What an entry is compared by, computed once when it is written."""

    match_url: str
    norm_title: str
    shingles: frozenset[int] = field(repr=False)
    #: :func:`prefix_tokens` of ``shingles``; the first (:func:`posted_tokens`) are the
    #: rows of ``dedupe_text`` for the entry.
    tokens: tuple[int, ...] = field(repr=False)


def match_keys(url: str, title: str, summary: str, *,
               summary_text: str | None = None, with_shingles: bool = True) -> MatchKeys:
    """The match URL, normalized title, shingles and text tokens of one entry
    (``summary_text``: the summary's :func:`searchable_text`, if already known;
    ``with_shingles=False`` leaves the shingles empty, the tokens computed)."""
    if summary_text is None:
        summary_text = searchable_text(summary)
    # The title's words once, for its key and for the text's (split as shingles() does).
    title_words = _words(html.unescape(title))
    text = _shingles_of(title_words + _words(summary_text))
    return MatchKeys(match_url(url), _title_key(title_words),
                     text if with_shingles else frozenset(), tuple(prefix_tokens(text)))
