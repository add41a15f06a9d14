"""What full-text search indexes of an entry: the words of its stored HTML.

Summaries and contents are stored as sanitized HTML; an index holds their text as a
browser shows it: tags that break a line become spaces, inline ones nothing, character
references are decoded, runs of whitespace become one space
(so that a snippet is one line in a terminal). Sanitized HTML has no comments, scripts
or ``>`` inside attribute values that survive as text, so regular expressions over
tags are exact here and cost a few microseconds per entry.

Pure, so that parser processes compute it next to the parse (as they compute match
keys) and the store's writer only writes it.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from signal_feeds.identity.keys import EntryRow

__all__ = ["INVISIBLE", "WITHOUT_INVISIBLE", "SearchText", "search_texts", "searchable_text"]

#: Characters a browser shows as nothing inside a word (a soft hyphen, the zero-width
#: space, the word joiner, a stray byte-order mark), removed: German sites write
#: "Bundes&shy;verfassungs&shy;gericht", which the index and the title comparison
#: otherwise read as three words. (Zero-width joiners and non-joiners stay: they change
#: how a Persian word or an emoji is drawn.)
INVISIBLE = "\u00ad\u200b\u2060\ufeff"
WITHOUT_INVISIBLE = dict.fromkeys(map(ord, INVISIBLE))
_INVISIBLE = re.compile(f"[{INVISIBLE}]")

_TAG = re.compile(r"<[^>]*>")
#: Elements a browser lays out inside a line of text: their tags separate no words.
_INLINE_TAG = re.compile(r"</?(?:a|abbr|b|bdi|bdo|cite|code|data|del|dfn|em|font|i|ins|kbd|"
                         r"mark|q|s|samp|small|span|strike|strong|sub|sup|time|tt|u|var|"
                         r"wbr)\b[^>]*>", re.IGNORECASE)


def searchable_text(markup: str) -> str:
    """The text of an HTML fragment as a browser shows it, as one line of plain text.

    Inline tags (``<a>``, ``<span>``, ``<b>``, ...) separate no words, so a Mastodon
    hashtag ``#<span>rss</span>`` reads ``#rss`` and a link before a full stop leaves
    no space in front of it (a snippet read ``the <a>docs</a> .`` when every tag was a
    space); every other tag is a space.
    """
    if not markup:
        return ""
    if "<" in markup:
        markup = _TAG.sub(" ", _INLINE_TAG.sub("", markup))
    if "&" in markup:
        markup = html.unescape(markup)
    if not markup.isascii() and _INVISIBLE.search(markup):
        markup = markup.translate(WITHOUT_INVISIBLE)
    return " ".join(markup.split())


class SearchText(NamedTuple):
    """The indexed text of an entry's summary and content (its title is indexed as is)."""

    summary: str
    content: str

    @classmethod
    def of(cls, summary: str | None, content: str | None) -> SearchText:
        """The search text of stored summary and content HTML."""
        return cls(searchable_text(summary or ""), searchable_text(content or ""))


def search_texts(rows: Iterable[EntryRow]) -> Mapping[str, SearchText]:
    """The search text of each row, by entry key."""
    return {row.key: SearchText.of(row.summary, row.content) for row in rows}
