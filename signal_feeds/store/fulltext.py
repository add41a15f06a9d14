"""What full-text search indexes and how a hit is shown, for every backend.

The indexed text itself (:func:`searchable_text`) is defined in
:mod:`signal_feeds.identity.search_text`, where parser processes reach it.
"""

from __future__ import annotations

import re

from signal_feeds.errors import QueryError
from signal_feeds.identity.search_text import WITHOUT_INVISIBLE, SearchText, searchable_text

__all__ = [
    "COLUMN_HINT",
    "and_beside_groups",
    "DEFAULT_SEARCH_LIMIT",
    "END_OF_QUERY",
    "SNIPPET_CLOSE",
    "SNIPPET_ELLIPSIS",
    "SNIPPET_OPEN",
    "SNIPPET_TOKENS",
    "STAR_HINT",
    "SearchText",
    "check_query_text",
    "column_hint",
    "quote_punctuated_words",
    "require_text",
    "searchable_text",
    "syntax_hint",
    "visible_query",
]

#: Hits shown by ``signal search`` unless ``--limit`` says otherwise.
DEFAULT_SEARCH_LIMIT = 20
#: Around each matched term in a snippet: plain ASCII, so they read the same in a
#: terminal, in a pipe and in JSON (no escape codes, no markup to render).
SNIPPET_OPEN = "["
SNIPPET_CLOSE = "]"
#: Where a snippet cuts the text short.
SNIPPET_ELLIPSIS = "…"
#: Words of context a snippet shows (at most; SQLite's ``snippet()`` allows 64).
SNIPPET_TOKENS = 16


#: What a query naming no column of the index is told.
COLUMN_HINT = ("the columns to search in are title:, summary: and content:; a word with a "
               "colon inside can be put in double quotes")
#: What a misplaced "*" is told: FTS5 finds words by their start only.
STAR_HINT = ("a * ends the beginning of a word: harv* finds harvest; no query finds a "
             "word by its end")
#: The detail of a query that stops where more was expected (FTS5 says 'near ""').
END_OF_QUERY = "syntax error at the end of the query"
_OPERATOR = re.compile(r'syntax error near "(AND|OR|NOT|NEAR)"')


def column_hint(column: str, query: str) -> str:
    """What to try instead, for a ``query`` told "no such column: ``column``": a search
    box's "-word" is FTS5's "NOT word" (FTS5 reads "-word" as a column filter)."""
    if re.search(rf"(?:^|\s)-{re.escape(column)}\b", query):
        return f"to leave out entries with a word, write NOT {column}"
    return COLUMN_HINT


def _unclosed(query: str) -> bool:
    """True when ``query`` opens more parentheses than it closes, outside quotes."""
    outside = "".join(query.split('"')[::2])
    return outside.count("(") > outside.count(")")


def syntax_hint(detail: str, query: str = "") -> str:
    """What to try instead, for a syntax error's ``detail`` (both backends word their
    details alike) in ``query``: a hint about punctuation is no help to 'frog OR'."""
    if detail == END_OF_QUERY and _unclosed(query):
        return "a ( is never closed"
    if detail == END_OF_QUERY:
        return ("something is missing at the end: a word after AND, OR, NOT, NEAR, a "
                "column such as title: or a +")
    operator = _OPERATOR.fullmatch(detail)
    if operator:
        word = operator.group(1)
        return (f"{word} in capitals joins two words; write {word.lower()} to search "
                "for the word")
    if detail == 'syntax error near "*"':
        return STAR_HINT
    if detail == 'syntax error near "+"':
        return ("every word must occur already, so a search box's +word is the word "
                "alone; a + between two words joins them into a phrase (a + b)")
    if detail in ('syntax error near "("', 'syntax error near ")"'):
        return "parentheses come in pairs, around words"
    if detail == "unterminated string":
        return "a double quote starts a phrase, and another must end it"
    return "put words that hold punctuation in double quotes"


# A word with punctuation inside (covid-19, e-mail, node.js, what's, AT&T) or a sign after
# it (C++, C#; C++26 with its version): what anyone types in a search box, and no valid
# FTS5 at all ("no such column: 19", 'syntax error near "."'). Characters FTS5 gives a
# meaning to (: * ^ ( ) { } , and a quote) are never part of one, so a query that is
# valid FTS5 is left as it is.
# One trailing "+" is left alone: FTS5 reads "a+ b" as the phrase "a b".
_PUNCTUATED_WORD = re.compile(
    r"[^\W_]\w*(?:(?:[-.'\u2019&@/][^\W_]\w*)+(?:\+\++|#+)?|\+\++\w*|#+)")
# A column filter at the start of a piece: a column of the index, "-column", or nothing
# (after "{title summary}", whose brace ends the piece before it).
_COLUMN_FILTER = re.compile(r"(?:-?(?:title|summary|content))?:", re.IGNORECASE)
# ASCII that FTS5 gives no meaning to: a piece holding one (#rust, @bob, $x, 10?, a URL's
# "/", "&" alone) is a syntax error as written. FTS5 reads anything past ASCII as part of
# a word, and the tokenizer then splits it. Written as the ASCII it refuses (all but
# letters, digits, "_", "\x1a", "*^+-:"): the negated class with every code point past
# ASCII took 5 ms to compile, at every start of the signal command.
_NOT_FTS5 = re.compile(r"[\x00-\x19\x1b-\x29\x2c\x2e-\x2f\x3b-\x40\x5b-\x5d\x60\x7b-\x7f]")
# A colon that no FTS5 column filter has: a time (10:30), "::" (std::vector), ":/" (a
# URL), or one at the end. A filter with a mistyped column (titel:rust) is left to fail
# as one, with the columns named.
_COLON_IN_WORD = re.compile(r"(?:^|[-+])\d[^:]*:|::|:/|:$")
# A double-quoted string (its "" is a quote inside it) or a run of text without white
# space, quotes, parentheses, braces and commas (which stay as they are around it), with
# an empty pair of parentheses right after it: a function's name as typed, print().
_QUERY_PIECE = re.compile(r'"(?:[^"]|"")*"?|[^\s"(){},]+(?:\(\))?')
# What may follow FTS5's minus on its own ("- title:" or "- {title summary}:"): anything
# else after a lone "-" (a headline's dash, "Harvest festival - photos") is no FTS5.
_COLUMN_AHEAD = re.compile(r"\s*(?:\{|(?:title|summary|content)\s*:)", re.IGNORECASE)


def require_text(value: str, what: str) -> None:
    """Refuse, with :class:`QueryError`, a ``value`` that is not text: the undecodable
    bytes a terminal in another encoding passes through (Python keeps them as lone
    surrogates, which no database takes)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        shown = value.encode("utf-8", "backslashreplace").decode("ascii", "replace")
        raise QueryError(f"{what} {shown!r} is not UTF-8 text (is the terminal set to "
                         "another encoding?)", query=shown) from None


def visible_query(query: str) -> str:
    """``query`` without the characters the index leaves out of words (a soft hyphen, a
    zero-width space, a word joiner: see :data:`~signal_feeds.identity.search_text.INVISIBLE`).
    A query copied from a page that hyphenates "Bundes\u00adverfassungs\u00adgericht"
    keeps them, and the tokenizer split the word there: it found nothing. A NUL, which
    SQLite took for the end of the query, separates words as other control characters
    do."""
    if "\x00" in query:  # a C string's end to SQLite, which cut the query there
        query = query.replace("\x00", " ")
    return query if query.isascii() else query.translate(WITHOUT_INVISIBLE)


#: Parentheses a query may nest (SQLite's parser gives up near 100 levels).
MAX_QUERY_DEPTH = 32


def check_query_text(query: str) -> None:
    """Refuse, with :class:`QueryError`, a query no backend can search the same way:
    empty, not UTF-8 text (bytes a Latin-1 terminal passed through), nested past
    :data:`MAX_QUERY_DEPTH`, or with no word in it at all (punctuation and emoji are
    not indexed: such a query could never match, so it is a mistake, not a miss)."""
    if not query.strip():
        raise QueryError("empty search query: give one or more words", query=query)
    require_text(query, "search query")
    depth = deepest = 0
    if "(" in query:
        quoted = False
        for char in query:
            if char == '"':
                quoted = not quoted
            elif not quoted and char == "(":
                depth += 1
                deepest = max(deepest, depth)
            elif not quoted and char == ")":
                depth -= 1
    if deepest > MAX_QUERY_DEPTH:
        raise QueryError(f"search query nests parentheses {deepest} deep; at most "
                         f"{MAX_QUERY_DEPTH} are read", query=query[:200])
    if not _WORD_CHARACTER.search(query):
        raise QueryError(f"search query {query!r} has no word to search for (punctuation "
                         "and emoji are not indexed)", query=query)
    if "*" in query and (query.startswith("*") or _STAR_BEFORE_WORD.search(
            _QUOTED.sub('"', query))):
        raise QueryError(f"search query {query!r} puts a * before a word ({STAR_HINT})",
                         query=query)


_WORD_CHARACTER = re.compile(r"[^\W_]")
# A search box's "*fix" (a word by its end): FTS5 read "harvest *fest" as "harvest* fest",
# and a query starting with "*" as one of its debugging queries ("*reads" failed the
# search with "no such cursor"; "*id" matched nothing, here only).
_STAR_BEFORE_WORD = re.compile(r"(?:^|[\s(:,])\*+[^\W_]")
_QUOTED = re.compile(r'"(?:[^"]|"")*"?')


# A query's parts for and_beside_groups: a double-quoted string, a parenthesis, or a run
# of anything else without white space.
_GROUP_PART = re.compile(r'"(?:[^"]|"")*"?|[()]|[^\s"()]+')


# A group of nothing but signs once quoted ("(&)", "( - )"), not a NEAR's or a column
# filter's: side by side with words, it is a sign on its own, and left out as one (it
# becomes an empty phrase, which FTS5 leaves out among phrases side by side).
_WORDLESS_GROUP = re.compile(r'(?<![:\w])(?<!NEAR )\((?:\s*"(?:[^"]|"")*")+\s*\)')


def _without_wordless_groups(expression: str) -> str:
    while True:
        dropped = _WORDLESS_GROUP.sub(
            lambda m: m.group() if _WORD_CHARACTER.search(m.group()) else ' "" ', expression)
        if dropped == expression:
            return expression
        expression = dropped


def and_beside_groups(expression: str) -> str:
    """``expression`` with ``AND`` written between a parenthesized group and what stands
    beside it (``harvest (fair OR market)``): FTS5 joins phrases written side by side,
    but refuses a group beside anything. Not the group of a column filter
    (``title:(a)``) or a ``NEAR``; a sign on its own (``"&"``), or a group of nothing
    else (``("&")``), is left out."""
    expression = _without_wordless_groups(expression)
    out: list[str] = []
    pos = 0
    operand = closed = False  # the last part ended an operand; it was a ")"
    last = ""
    parts = list(_GROUP_PART.finditer(expression))
    for i, match in enumerate(parts):
        part = match.group()
        if part.startswith('"') and not _WORD_CHARACTER.search(part) and (
                closed or (i + 1 < len(parts) and parts[i + 1].group() == "(")):
            # A sign on its own ("&" once quoted) beside a group is left out, as side
            # by side phrases leave it out: "(a) & (b)" is both groups, not nothing.
            out.append(expression[pos:match.start()])
            pos = match.end()
            continue
        starts = part == "(" or (part != ")" and part not in ("AND", "OR", "NOT", "+"))
        if starts and (closed or (part == "(" and operand and last != "NEAR")):
            spaced = expression[match.start() - 1].isspace()
            out.append(expression[pos:match.start()] + ("AND " if spaced else " AND "))
            pos = match.start()
        last = part
        operand = part == ")" or (starts and part != "(" and not part.endswith(":")
                                  and not part.startswith("{"))
        closed = part == ")"
    out.append(expression[pos:])
    return "".join(out)


# FTS5 has a comma only inside NEAR(...): one anywhere else is a search box's. A NEAR
# group, and a stand-in for a comma inside a word (1,000), which _NOT_FTS5 flags.
_NEAR_GROUP = re.compile(r'NEAR\s*\((?:[^()"]|"(?:[^"]|"")*")*\)')
_WORD_COMMA = "\x7f"


def _commas_read(query: str) -> str:
    """``query`` with each comma outside quotes and ``NEAR()`` read as a search box
    means it: inside a word (``1,000``) a part of it, else a list's (``python, rust``),
    a space. FTS5 refused both (``syntax error near ","``)."""
    out: list[str] = []
    quoted = False
    i = 0
    while i < len(query):
        char = query[i]
        near = (None if quoted or char != "N" or (i and query[i - 1].isalnum())
                else _NEAR_GROUP.match(query, i))
        if near is not None:
            out.append(near.group())
            i = near.end()
            continue
        if char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            inside = 0 < i < len(query) - 1 and query[i - 1].isalnum() and query[i + 1].isalnum()
            char = _WORD_COMMA if inside else " "
        out.append(char)
        i += 1
    return "".join(out)


def quote_punctuated_words(query: str) -> str:
    """``query`` with each word that holds punctuation put in double quotes, as FTS5 asks
    (``covid-19 vaccine`` becomes ``"covid-19" vaccine``, a phrase of ``covid`` and
    ``19`` and a word; ``1,000`` likewise), and a comma between words (``python, rust``)
    read as a space; everything else as written, so the rest of FTS5's syntax (phrases,
    ``AND``/``OR``/``NOT``, ``prefix*``, ``title:``, ``NEAR()``) keeps its meaning, and a
    query that is wrong in another way is still refused."""
    def piece(match: re.Match[str]) -> str:
        text = match.group()
        if text.startswith('"'):
            return text
        if text.strip("-") == "":  # a dash on its own: a sign, left out once quoted
            ahead = _COLUMN_AHEAD.match(query, match.end())
            return text if text == "-" and ahead else f'"{text}"'
        column = _COLUMN_FILTER.match(text)  # title:node.js
        prefix = column.group() if column else ""
        word = text[len(prefix):]
        # A prefix query keeps its star outside the quotes: "node.js"*.
        star = "*" if word.endswith("*") and len(word) > 1 else ""
        bare = word[:len(word) - len(star)]
        if _PUNCTUATED_WORD.fullmatch(bare) or _NOT_FTS5.search(bare) or (
                ":" in bare and _COLON_IN_WORD.search(bare)):
            return f'{prefix}"{bare}"{star}'
        return text

    if "," in query and _WORD_COMMA not in query:  # (a DEL typed in would turn into ",")
        query = _commas_read(query)
    return _QUERY_PIECE.sub(piece, query).replace(_WORD_COMMA, ",")
