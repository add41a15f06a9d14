"""DOCTYPE and ENTITY declarations taken out of a document before feedparser reads it.

No entity can then be defined, expanded or fetched (feedparser 6 expands a plain internal
entity referenced many times). A declaration means something only in the prolog, before
the root element: after it, ``<!DOCTYPE`` inside a CDATA section or a comment is a post's
text (a lesson on HTML, a pasted page), and cutting from there to the next ``>`` outside
quotes took the rest of the document with it when the text had an apostrophe.
"""

from __future__ import annotations

import re

__all__ = ["without_declarations"]

_DOCTYPE_OR_ENTITY = re.compile(rb"<!\s*(?:DOCTYPE|ENTITY)", re.IGNORECASE)
# Inside a declaration: a quoted string, a comment, a bracket or the closing '>'.
_DECL_TOKEN = re.compile(rb"\"[^\"]*\"?|'[^']*'?|<!--.*?(?:-->|\Z)|[\[\]>]", re.DOTALL)
# The prolog runs to the root element's start: a "<" and a name character outside a
# comment or a processing instruction. Every declaration before it goes, also one inside
# such a comment, since feedparser takes its entities from the text before the first "<"
# and name character, wherever that stands.
_IN_PROLOG = re.compile(rb"(?i:<!\s*(?:DOCTYPE|ENTITY))|<!--|-->|<\?|\?>|<\w")
_CLOSERS = {b"<!--": b"-->", b"<?": b"?>"}
_IN_BODY = re.compile(rb"(?i:<!\s*(?:DOCTYPE|ENTITY))|<!\[CDATA\[.*?(?:\]\]>|\Z)"
                      rb"|<!--.*?(?:-->|\Z)|<\?.*?(?:\?>|\Z)", re.DOTALL)


def _declaration_end(data: bytes, pos: int) -> int:
    depth = 0
    for match in _DECL_TOKEN.finditer(data, pos):
        token = match.group()
        if token == b"[":
            depth += 1
        elif token == b"]":
            depth -= 1
        elif token == b">" and depth <= 0:
            return match.end()
    return len(data)


def without_declarations(data: bytes) -> tuple[bytes, bool]:
    """``data`` without its DOCTYPE (internal subset included) and stray ENTITY
    declarations, and whether there were any."""
    if not _DOCTYPE_OR_ENTITY.search(data):
        return data, False
    parts: list[bytes] = []
    pos = kept = 0
    pattern, inside = _IN_PROLOG, b""  # inside: the end of the prolog's open comment or PI
    while (match := pattern.search(data, pos)) is not None:
        token = match.group()
        pos = match.end()
        if token[:2] == b"<!" and _DOCTYPE_OR_ENTITY.match(token):
            parts.append(data[kept:match.start()])
            pos = kept = _declaration_end(data, match.end())
        elif pattern is _IN_BODY:
            continue  # text of a CDATA section, a comment or a processing instruction
        elif token in _CLOSERS:
            inside = inside or _CLOSERS[token]
        elif token in (b"-->", b"?>"):
            inside = b"" if token == inside else inside
        elif not inside:  # the root element: the prolog ends here
            pattern, pos = _IN_BODY, match.start()
    if not parts:
        return data, False
    parts.append(data[kept:])
    return b"".join(parts), True
