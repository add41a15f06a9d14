"""Faster, identical feedparser, for Signal's parser processes only.

Each change here leaves every parsed field exactly as it was (the tests compare); they
are installed by :func:`signal_feeds.workers.serve`, never in a process that embeds
Signal, where feedparser belongs to the caller.
"""

from __future__ import annotations

import copy
import types
from typing import Any

import feedparser.api
import feedparser.mixin
from feedparser.util import FeedParserDict

#: Code points given an identity entry in feedparser's Windows-1252 table: Latin, Greek,
#: Cyrillic, Hebrew, Arabic, Indic scripts and general punctuation (about 1 MB).
_IDENTITY_BELOW = 0x3000

# Keys that FeedParserDict looks up by a rule of its own (an alias, a derived value, a
# fallback with a warning). Every other key is a plain dict lookup.
_SPECIAL_KEYS = frozenset(FeedParserDict.keymap) | {
    "category", "enclosures", "license", "updated", "updated_parsed"}
_ATOMIC = (str, int, float, bool, type(None))
_plain_get = FeedParserDict.get


def _get(self: FeedParserDict, key: Any, default: Any = None) -> Any:
    # FeedParserDict.get() goes through __getitem__'s chain of special cases (and a
    # KeyError for every miss): feedparser calls it about 25 times per entry.
    if key in _SPECIAL_KEYS:
        return _plain_get(self, key, default)
    return dict.get(self, key, default)


def _deepcopy(value: Any) -> Any:
    # feedparser deep-copies its content parameters (type, language, base, ...) for
    # every summary, title and content element: a dict of strings and flags, whose copy
    # is a new dict with the same items. Anything else goes to copy.deepcopy.
    if (type(value) is FeedParserDict
            and all(isinstance(item, _ATOMIC) for item in value.values())
            and not any(key in FeedParserDict.keymap for key in value)):
        return FeedParserDict(value)
    return copy.deepcopy(value)


def tune_feedparser() -> None:
    """Install the changes below (idempotent)."""
    # Same fields, fewer callbacks: see signal_feeds/_sax.py.
    if "signal_feeds.parse._sax" not in feedparser.api.PREFERRED_XML_PARSERS:
        feedparser.api.PREFERRED_XML_PARSERS.insert(0, "signal_feeds.parse._sax")
    # feedparser runs str.translate(_cp1252) on every element's text, to map C1 control
    # characters to what Windows-1252 means by them. The table has 27 entries; every
    # other character misses it, and a miss raises (and clears) a KeyError inside
    # translate, character by character. With identity entries for the characters that
    # mostly occur, the result is the same and a 2 KB summary costs a third of the time.
    table = getattr(feedparser.mixin, "_cp1252", None)
    if isinstance(table, dict) and len(table) < _IDENTITY_BELOW:
        full: dict[int, object] = {code: code for code in range(_IDENTITY_BELOW)}
        full.update(table)
        feedparser.mixin._cp1252 = full
    FeedParserDict.get = _get
    # The mixin module uses copy for deepcopy() alone.
    feedparser.mixin.copy = types.SimpleNamespace(deepcopy=_deepcopy)
