"""Snippets of PostgreSQL hits, cut as SQLite FTS5's ``snippet()`` cuts them.

A ``tsvector`` keeps no text, so the snippet is cut from the stored text in Python. The
window is chosen as FTS5 chooses it (``fts5SnippetFunction`` in SQLite's fts5_aux.c), so
that a hit shows the same words on both backends: every match is a candidate; a window
of :data:`SNIPPET_TOKENS` words from it scores 1,000 for each term it shows the first
time and 1 for each repeat, and is then centred on the matches it holds; the start of
the sentence the match is in (the first word, or a word after ``.`` or ``:`` and white
space) is a candidate too, with 100 more (120 at the very start); the best score wins,
the earlier field and match among equals. The only differences left are the documented
ones: each matched word is bracketed on its own, wherever it is (``[real]-[time]``, a
phrase's words outside the phrase too), except that the parts of one word the index
splits at its combining marks (a vowel sign, a virama, niqqud or harakat: ``हिन्दी`` is
``ह``, ``न`` and ``द``) are bracketed together, marks included, as the reader sees one word.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Iterable, Sequence

from signal_feeds.store.fulltext import (
    SNIPPET_CLOSE,
    SNIPPET_ELLIPSIS,
    SNIPPET_OPEN,
    SNIPPET_TOKENS,
)
from signal_feeds.store.postgres.search import COLUMNS, WORD, fold

__all__ = ["snippet"]

#: A word as shown: a run of letters and digits with the combining marks inside it (a
#: decomposed "é" is "e" and U+0301, and FTS5 reads it as one word).
_SHOWN_WORD = re.compile(r"[^\W_](?:[^\W_]|[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff"
                         r"\u20d0-\u20ff\ufe20-\ufe2f\u3099\u309a])*")
# What FTS5's sentence finder takes for the end of a sentence: "." or ":", then white
# space up to the next word.
_SENTENCE_BREAK = re.compile(r"[.:][ \t\n\r]+")


def _term(word: str, terms: Sequence[str], weight: str) -> int:
    """The index of the first of ``terms`` that ``word`` (in the column of ``weight``)
    matches, or -1."""
    # A word as shown may fold into several indexed ones: a kana's voicing mark is a
    # separate character once decomposed (で is て and U+3099), so です was indexed as て
    # and す and its hit had no snippet.
    for part in WORD.findall(fold(word)):
        for i, term in enumerate(terms):
            term, restricted, weights = term.partition(":")
            if restricted and weight not in weights:
                continue
            if part.startswith(term[:-1]) if term.endswith("*") else part == term:
                return i
    return -1


def _score(at: list[int], hit: list[int], start: int) -> tuple[int, int, int]:
    """FTS5's score of the window of SNIPPET_TOKENS words from ``start``: (score, first
    match, end of the last match) over the matches ``at`` (positions, in order)."""
    seen: set[int] = set()
    score, first, last = 0, -1, 0
    for pos in at[bisect.bisect_left(at, start):bisect.bisect_left(at, start + SNIPPET_TOKENS)]:
        score += 1 if hit[pos] in seen else 1000
        seen.add(hit[pos])
        if first < 0:
            first = pos
        last = pos + 1
    return score, first, last


def _best_start(text: str, spans: list[re.Match[str]], hit: list[int]
                ) -> tuple[int, int]:
    """(score, first word) of the best window of one field, as FTS5 picks it."""
    at = [i for i, h in enumerate(hit) if h >= 0]
    size = len(spans)
    best = (0, 0)
    starts: list[int] | None = None
    for pos in at:
        score, first, last = _score(at, hit, pos)
        adjusted = first - (SNIPPET_TOKENS - (last - first)) // 2
        adjusted = max(min(adjusted, size - SNIPPET_TOKENS), 0)
        if score > best[0]:
            best = (score, adjusted)
        if size <= SNIPPET_TOKENS:
            continue
        if starts is None:
            breaks = {m.end() for m in _SENTENCE_BREAK.finditer(text)}
            starts = [0] + [i for i in range(1, size) if spans[i].start() in breaks]
        sentence = starts[bisect.bisect_right(starts, pos) - 1]
        if sentence < pos:
            score = _score(at, hit, sentence)[0] + (120 if sentence == 0 else 100)
            if score > best[0]:
                best = (score, sentence)
    return best


def snippet(fields: Iterable[str], terms: Sequence[str]) -> str:
    """Up to SNIPPET_TOKENS words of the field FTS5's ``snippet()`` would show, every
    match between SNIPPET_OPEN and SNIPPET_CLOSE, SNIPPET_ELLIPSIS where the text is cut;
    the text as stored. ``fields`` come in the order of :data:`COLUMNS` (title, summary,
    content)."""
    chosen: tuple[int, str, list[re.Match[str]], list[int], int] | None = None
    for weight, text in zip(COLUMNS.values(), fields, strict=False):
        spans = list(_SHOWN_WORD.finditer(text))
        hit = [_term(m.group(), terms, weight) for m in spans]
        if chosen is None:  # no match anywhere: FTS5 shows the first field's start
            chosen = (0, text, spans, hit, 0)
        score, start = _best_start(text, spans, hit)
        if score > chosen[0]:
            chosen = (score, text, spans, hit, start)
    if chosen is None:
        return ""
    _score_, text, spans, hit, start = chosen
    end = min(start + SNIPPET_TOKENS, len(spans))
    out = [] if start == 0 else [SNIPPET_ELLIPSIS]
    cursor = 0 if start == 0 else spans[start].start()
    shut = False  # the last word shown was a match, its bracket still to close
    for i in range(start, end):
        m = spans[i]
        gap = text[cursor:m.start()]
        if shut and hit[i] >= 0 and _marks_only(gap):
            out.append(gap)  # one word to the reader: "[हिन्दी]", not "[ह]ि[न]्[द]ी"
        else:
            out.append(_closed(gap) if shut else gap)
            if hit[i] >= 0:
                out.append(SNIPPET_OPEN)
        out.append(m.group())
        shut = hit[i] >= 0
        cursor = m.end()
    rest = text[cursor:] if end == len(spans) else text[cursor:spans[end].start()]
    marks = _leading_marks(rest)
    if end == len(spans):
        out.append(_closed(rest) if shut else rest)
    else:  # cut short: the marks of the last word shown stay with it
        out.append(rest[:marks] + (SNIPPET_CLOSE if shut else "") + SNIPPET_ELLIPSIS)
    return "".join(out)


def _leading_marks(text: str) -> int:
    """How many combining marks ``text`` starts with (a vowel sign, a virama, a niqqud
    or harakat point: what the index takes for the end of a word, a reader for a part
    of its letter)."""
    n = 0
    while n < len(text) and unicodedata.category(text[n]).startswith("M"):
        n += 1
    return n


def _marks_only(text: str) -> bool:
    return bool(text) and _leading_marks(text) == len(text)


def _closed(gap: str) -> str:
    """``gap``, after a matched word, with its bracket closed after the combining marks
    that belong to the word's last letter."""
    marks = _leading_marks(gap)
    return gap[:marks] + SNIPPET_CLOSE + gap[marks:]
