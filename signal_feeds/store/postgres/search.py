"""Full-text search in PostgreSQL: SQLite FTS5's query syntax on a ``tsvector``.

Signal builds each entry's vector itself, as a ``tsvector`` literal, instead of running
a text-search configuration over the text: words are split and folded as FTS5's
``unicode61 remove_diacritics 2`` tokenizer does (runs of letters and digits, lower
case, no diacritics), and the query's words go through the same function, so both
backends find the same entries, except that here the diacritics of every script go
(FTS5 removes only those of Latin letters: ``ελληνικα`` finds ``Ελληνικά`` here only)
and compatibility forms are read as their plain letters (NFKD: ``ﬁ``, ``Ｆ``).
Title words carry weight A, summary B, content C; a column filter is a weight
restriction, and ``ts_rank`` weighs a title match :data:`TITLE_WEIGHT` times a match in
the text. Fields are placed
:data:`_FIELD_GAP` positions apart so that a phrase never spans two of them.

The query is parsed here (:func:`to_tsquery`): words (implicit AND), ``"phrases"``,
``AND``/``OR``/``NOT`` (NOT binds tightest, then AND, then OR, as in FTS5), parentheses,
``prefix*``, ``a + b`` (a phrase), ``NEAR(a b, N)`` (here: all of the words anywhere,
a superset of FTS5's hits), ``^word`` (here: the word anywhere, since a vector keeps no
column starts) and column filters ``title:``, ``{title summary}:``, ``-title:``;
a word with punctuation in it (``covid-19``) is a phrase, as on SQLite (see
:func:`signal_feeds.store.fulltext.quote_punctuated_words`).
Snippets are cut from the stored text in Python, where FTS5's ``snippet()`` cuts them
(see :mod:`signal_feeds.store.postgres.snippets`).
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from dataclasses import dataclass
from typing import NoReturn

from signal_feeds.errors import QueryError
from signal_feeds.store.fulltext import (
    END_OF_QUERY,
    SearchText,
    check_query_text,
    column_hint,
    quote_punctuated_words,
    syntax_hint,
    visible_query,
)

__all__ = ["COLUMNS", "RANK_WEIGHTS", "TITLE_WEIGHT", "WORD", "Query", "fold", "search_vector",
           "to_tsquery", "words"]

#: ts_rank weight of the title relative to summary and content (as SQLite's bm25 weights).
TITLE_WEIGHT = 4.0
#: ts_rank's weights array, in its order {D, C, B, A}: content C, summary B, title A.
RANK_WEIGHTS = [0.25, 0.25, 0.25, 0.25 * TITLE_WEIGHT]
#: Column name -> tsvector weight.
COLUMNS = {"title": "A", "summary": "B", "content": "C"}
_FIELD_GAP = 64
_MAX_POSITION = 16383  # PostgreSQL's largest position
_MAX_POSITIONS_PER_WORD = 256  # PostgreSQL keeps at most this many per lexeme
#: A word as the index counts them: letters and digits.
WORD = re.compile(r"[^\W_]+")


# The combining diacritical-mark blocks (what "without diacritics" means for Latin,
# Greek and Cyrillic letters once decomposed). A class of every combining mark in
# Unicode (300 ranges) made the substitution 20 times slower.
_DIACRITICS = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff"
                         "\ufe20-\ufe2f]")


def fold(text: str) -> str:
    """Lower case, compatibility-decomposed, without combining marks (diacritics)."""
    text = text.lower()
    if text.isascii():
        return text
    if not unicodedata.is_normalized("NFKD", text):
        text = unicodedata.normalize("NFKD", text)
    return _DIACRITICS.sub("", text)


#: PostgreSQL's longest lexeme, in bytes; to_tsvector() leaves longer words out too.
_MAX_LEXEME_BYTES = 2046
# A run of letters that may be past it (4 bytes per character at most).
_LONG_WORD = re.compile(rf"[^\W_]{{{_MAX_LEXEME_BYTES // 4 + 1}}}")


def words(text: str) -> list[str]:
    """The folded words of ``text``, in order (FTS5 unicode61 with diacritics removed),
    without any too long for PostgreSQL to index (682 CJK characters with no space or
    punctuation between them failed the whole response).

    The whole text is folded, then split, in C: word by word in Python this cost 3 ms
    for an entry of 1-2 KB, more than the rest of writing it."""
    folded = fold(text)
    found = WORD.findall(folded)
    if _LONG_WORD.search(folded) is None:
        return found
    return [word for word in found if len(word.encode()) <= _MAX_LEXEME_BYTES]


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def search_vector(title: str | None, summary: str | None, content: str | None, *,
                  text: SearchText | None = None) -> str:
    """The ``tsvector`` literal of an entry (summary and content are stored HTML;
    ``text``, when given, is their search text already)."""
    found = SearchText.of(summary, content) if text is None else text
    positions: dict[str, list[str]] = {}
    at = 1
    for weight, field in (("A", title or ""), ("B", found.summary), ("C", found.content)):
        here: dict[str, int] = {}  # positions of each word in this field
        for word in words(field):
            spot = f"{at if at < _MAX_POSITION else _MAX_POSITION}{weight}"
            count = here.get(word, 0)
            if count == 0 and word not in positions:
                positions[word] = [spot]
            elif count < _MAX_POSITIONS_PER_WORD:
                positions[word].append(spot)
            here[word] = count + 1
            at += 1
        at += _FIELD_GAP
    clamped = at > _MAX_POSITION  # the same last position may repeat: once is enough
    # Words hold only letters and digits: nothing to escape inside the quotes.
    return " ".join(f"'{w}':{','.join(_kept(p, clamped))}" for w, p in positions.items())


def _kept(spots: list[str], clamped: bool) -> list[str] | dict[str, None]:
    """The positions of a word that its vector keeps: PostgreSQL keeps at most 256, and
    the first 256 of a word a summary repeats would leave the content's out, so that
    ``content:word`` missed it; each field the word is in keeps one at least."""
    kept = dict.fromkeys(spots) if clamped else spots
    if len(kept) <= _MAX_POSITIONS_PER_WORD:
        return kept
    fields = [list(group) for _, group in itertools.groupby(kept, key=lambda s: s[-1])]
    out: list[str] = []
    room = _MAX_POSITIONS_PER_WORD
    for i, field in enumerate(fields):
        take = min(len(field), room - (len(fields) - 1 - i))
        out.extend(field[:take])
        room -= take
    return out


# -- the query -------------------------------------------------------------------------

@dataclass(frozen=True)
class Query:
    """A translated query: the ``tsquery`` text (``None``: matches nothing, e.g. only
    punctuation in quotes) and the words to highlight in snippets (prefixes end in *; a
    word under a column filter ends in ``:`` and the weights of its columns, ``harvest:A``
    for ``title:harvest``; a word after NOT is not one)."""

    tsquery: str | None
    terms: tuple[str, ...]


_TOKEN = re.compile(r'\s*(?:(")|([():,{}*+^-])|([A-Za-z0-9_\x1a\x80-\U0010ffff]+))')


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text  # as the user wrote it, for the error messages
        self.tokens: list[tuple[str, str]] = []
        self.terms: list[str] = []
        text = quote_punctuated_words(text)
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            found = _TOKEN.match(text, pos)
            if found is None:
                self._error(f'syntax error near "{text[pos:].strip()[:1]}"')
            if found.group(1):
                end = text.find('"', found.end())
                while end != -1 and text[end + 1:end + 2] == '"':  # "" is a literal quote
                    end = text.find('"', end + 2)
                if end == -1:
                    self._error("unterminated string")
                self.tokens.append(("string", text[found.end():end].replace('""', '"')))
                pos = end + 1
                continue
            if found.group(2):
                self.tokens.append(("punct", found.group(2)))
            else:
                self.tokens.append(("word", found.group(3)))
            pos = found.end()
        self.at = 0

    def _error(self, detail: str, hint: str = "") -> NoReturn:
        raise QueryError(f"search query {self.text!r} is not valid FTS5 syntax: {detail} "
                         f"({hint or syntax_hint(detail, self.text)})", query=self.text)

    def peek(self, offset: int = 0) -> tuple[str, str] | None:
        i = self.at + offset
        return self.tokens[i] if i < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            self._error(END_OF_QUERY)
        self.at += 1
        return token

    def is_op(self, name: str) -> bool:
        return self.peek() == ("word", name)

    def parse(self) -> str | None:
        if not self.tokens:
            raise QueryError("empty search query: give one or more words", query=self.text)
        result = self.or_expr(None)
        if self.peek() is not None:
            self._error(f'syntax error near "{self.peek()[1]}"')  # type: ignore[index]
        return result

    def or_expr(self, weights: str | None) -> str | None:
        parts = [self.and_expr(weights)]
        while self.is_op("OR"):
            self.take()
            parts.append(self.and_expr(weights))
        kept = [p for p in parts if p is not None]
        return None if not kept else kept[0] if len(kept) == 1 else \
            "(" + " | ".join(kept) + ")"

    def _starts_operand(self) -> bool:
        token = self.peek()
        if token is None or token in (("punct", ")"), ("word", "OR"), ("word", "AND"),
                                      ("word", "NOT")):
            return False
        return token[0] != "punct" or token[1] in "({-^"

    def and_expr(self, weights: str | None) -> str | None:
        # As FTS5 reads them: a phrase with no words ("&" once quoted) matches nothing,
        # so an explicit AND with it matches nothing; among operands written side by
        # side (an implicit AND: meetup "&" bob) it is left out.
        groups: list[list[str | None]] = [[self.not_expr(weights)]]
        while self.is_op("AND") or self._starts_operand():
            if self.is_op("AND"):
                self.take()
                groups.append([])
            groups[-1].append(self.not_expr(weights))
        parts = [[p for p in group if p is not None] for group in groups]
        if not all(parts):
            return None
        flat = [p for group in parts for p in group]
        return flat[0] if len(flat) == 1 else "(" + " & ".join(flat) + ")"

    def not_expr(self, weights: str | None) -> str | None:
        left = self.unary(weights)
        while self.is_op("NOT"):
            self.take()
            kept = len(self.terms)
            right = self.unary(weights)
            del self.terms[kept:]  # a word left out is not highlighted
            if left is not None and right is not None:
                left = f"({left} & !{right})"
        return left

    def unary(self, outer: str | None) -> str | None:
        weights = self.column_filter(outer)
        if self.peek() == ("punct", "("):
            self.take()
            inner = self.or_expr(weights)
            if self.take() != ("punct", ")"):
                self._error("syntax error: ')' expected")
            return inner
        # Phrases side by side are one operand, as FTS5 reads them: "a NOT b c" is "a NOT
        # (b c)". A phrase with no words among them is left out (see and_expr).
        parts = [self.nearset(weights)]
        while self._starts_nearset():
            parts.append(self.nearset(self.column_filter(outer)))
        kept = [p for p in parts if p is not None]
        return None if not kept else kept[0] if len(kept) == 1 else \
            "(" + " & ".join(kept) + ")"

    def nearset(self, weights: str | None) -> str | None:
        if self.peek() == ("word", "NEAR") and self.peek(1) == ("punct", "("):
            return self.near(weights)
        return self.phrase(weights)

    def _starts_nearset(self) -> bool:
        """True when a phrase or a NEAR group, with or without a column filter, comes
        next (not a parenthesized group, which FTS5 never joins side by side)."""
        at = 1 if self.peek() == ("punct", "-") else 0
        if self.peek(at) == ("punct", "{"):
            while self.peek(at) not in (None, ("punct", "}")):
                at += 1
            at += 1
        elif (self.peek(at) or ("", ""))[0] == "word" and self.peek(at + 1) == ("punct", ":"):
            at += 1
        elif at:
            return False
        if at:
            return self.peek(at) == ("punct", ":") and self.peek(at + 1) != ("punct", "(")
        token = self.peek()
        return token is not None and token not in (("word", "AND"), ("word", "OR"),
                                                   ("word", "NOT")) and (
            token[0] in ("word", "string") or token == ("punct", "^"))

    def column_filter(self, weights: str | None) -> str | None:
        token, after = self.peek(), self.peek(1)
        exclude = token == ("punct", "-")
        if exclude:
            self.take()
            token, after = self.peek(), self.peek(1)
        names: list[str] = []
        if token == ("punct", "{"):
            self.take()
            while (item := self.take()) != ("punct", "}"):
                if item[0] != "word":
                    self._error(f'syntax error near "{item[1]}"')
                names.append(item[1])
        elif token is not None and token[0] == "word" and after == ("punct", ":"):
            self.take()
            names.append(token[1])
        elif exclude and token is not None and token[0] == "word":
            # "-market": FTS5 reads it as a column filter, as a search box's minus.
            self._error(f"no such column: {token[1]}", column_hint(token[1], self.text))
        elif exclude:
            self._error('syntax error near "-"')
        else:
            return weights
        if self.take() != ("punct", ":"):
            self._error("syntax error: ':' expected after the column list")
        for name in names:
            if name.lower() not in COLUMNS:
                self._error(f"no such column: {name}", column_hint(name, self.text))
        chosen = {COLUMNS[n.lower()] for n in names}
        if exclude:
            chosen = set(COLUMNS.values()) - chosen
        if weights is not None:
            chosen &= set(weights)
        return "".join(sorted(chosen))

    def phrase(self, weights: str | None) -> str | None:
        lexemes: list[str] = []
        while True:
            if self.peek() == ("punct", "^"):
                self.take()  # "first token of the column": not kept in a tsvector
            kind, value = self.take()
            if kind not in ("word", "string") or (kind == "word"
                                                  and value in ("AND", "OR", "NOT")):
                # An operator where a word should be ("OR" alone): FTS5 refuses it too.
                self._error(f'syntax error near "{value}"')
            found = words(value)
            prefix = self.peek() == ("punct", "*")
            if prefix:
                self.take()
            for i, word in enumerate(found):
                star = prefix and i == len(found) - 1
                self.terms.append(word + ("*" if star else "")
                                  + ("" if weights is None else ":" + weights))
                suffix = ("*" if star else "") + (weights or "")
                lexemes.append(_quote(word) + (":" + suffix if suffix else ""))
            if self.peek() != ("punct", "+"):
                break
            self.take()
        if not lexemes or weights == "":
            return None
        return lexemes[0] if len(lexemes) == 1 else "(" + " <-> ".join(lexemes) + ")"

    def near(self, weights: str | None) -> str | None:
        self.take()
        self.take()
        parts: list[str | None] = []
        while self.peek() not in (("punct", ")"), ("punct", ","), None):
            parts.append(self.phrase(weights))
        if self.peek() == ("punct", ","):
            self.take()
            kind, value = self.take()
            if kind != "word" or not (value.isascii() and value.isdigit()):
                self._error(f'syntax error near "{value}"')
        if self.take() != ("punct", ")") or not parts:
            self._error("syntax error in NEAR(...)")
        if any(p is None for p in parts):
            return None
        return "(" + " & ".join(p for p in parts if p is not None) + ")"


def to_tsquery(text: str) -> Query:
    """Translate an FTS5 query; :class:`QueryError` for an empty or invalid one."""
    text = visible_query(text)
    check_query_text(text)
    parser = _Parser(text)
    tsquery = parser.parse()
    return Query(tsquery=tsquery, terms=tuple(dict.fromkeys(parser.terms)))
