"""What full-text search indexes and how a hit is shown, for every backend.

The indexed text itself (:func:`searchable_text`) is defined in
:mod:`signal_feeds.identity.search_text`, where parser processes reach it.
"""

from __future__ import annotations

from signal_feeds.identity.search_text import SearchText, searchable_text

__all__ = [
    "DEFAULT_SEARCH_LIMIT",
    "SNIPPET_CLOSE",
    "SNIPPET_ELLIPSIS",
    "SNIPPET_OPEN",
    "SNIPPET_TOKENS",
    "SearchText",
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
