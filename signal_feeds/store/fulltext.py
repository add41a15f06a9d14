"""What full-text search indexes and how a hit is shown, for every backend.

Summaries and contents are stored as sanitized HTML; the index holds their text: tags
become spaces, character references are decoded, runs of whitespace become one space
(so that a snippet is one line in a terminal). Sanitized HTML has no comments, scripts
or ``>`` inside attribute values that survive as text, so a regular expression over
tags is exact here and costs a few microseconds per entry.
"""

from __future__ import annotations

import html
import re

__all__ = [
    "DEFAULT_SEARCH_LIMIT",
    "SNIPPET_CLOSE",
    "SNIPPET_ELLIPSIS",
    "SNIPPET_OPEN",
    "SNIPPET_TOKENS",
    "searchable_text",
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

_TAG = re.compile(r"<[^>]*>")


def searchable_text(markup: str) -> str:
    """The words of an HTML fragment as one line of plain text."""
    if not markup:
        return ""
    if "<" in markup:
        markup = _TAG.sub(" ", markup)
    if "&" in markup:
        markup = html.unescape(markup)
    return " ".join(markup.split())
