"""Faster, identical feedparser, for Signal's parser processes only.

Each change here leaves every parsed field exactly as it was (the corpus test compares
tuned and stock workers). :func:`tune_feedparser` is called by a parser process with
its first document (``_prepare`` in :mod:`signal_feeds.parse.processes`), never in a
process that imports Signal:
there feedparser belongs to the caller and stays exactly as it ships.

The changes rely on feedparser's internals, so they are installed only when the version
is one they were checked against and every internal has the expected shape; otherwise
the worker logs why and parses with stock feedparser.
"""

from __future__ import annotations

import copy
import logging
import types
from typing import Any

__all__ = ["TESTED_VERSIONS", "tune_feedparser", "why_not_tuned"]

log = logging.getLogger("signal_feeds.parse")

#: feedparser versions these changes were compared against (fields identical).
TESTED_VERSIONS = frozenset({"6.0.11", "6.0.12", "6.0.13", "6.0.14"})
#: Code points given an identity entry in feedparser's Windows-1252 table: Latin, Greek,
#: Cyrillic, Hebrew, Arabic, Indic scripts and general punctuation (about 1 MB).
_IDENTITY_BELOW = 0x3000
#: Characters of an author string that reach feedparser's e-mail regular expression.
AUTHOR_LIMIT = 1024
#: The SAX driver module given to feedparser first (see _sax.py).
_SAX_DRIVER = "signal_feeds.parse._sax"
_ATOMIC = (str, int, float, bool, type(None))


def why_not_tuned() -> str:
    """"" when the installed feedparser has the version and internals the changes rely
    on; else the reason (checked without changing anything)."""
    try:
        import feedparser
        import feedparser.api
        import feedparser.mixin
        from feedparser.util import FeedParserDict
    except ImportError as exc:
        return f"feedparser's modules moved ({exc})"
    version = getattr(feedparser, "__version__", "?")
    if version not in TESTED_VERSIONS:
        return f"feedparser {version} is not a version these changes were checked against"
    checks = {
        "feedparser.api.PREFERRED_XML_PARSERS is a list":
            isinstance(getattr(feedparser.api, "PREFERRED_XML_PARSERS", None), list),
        "feedparser.mixin._cp1252 is a dict":
            isinstance(getattr(feedparser.mixin, "_cp1252", None), dict),
        "feedparser.mixin uses the copy module":
            getattr(feedparser.mixin, "copy", None) is copy,
        "FeedParserDict.keymap is a dict":
            isinstance(getattr(FeedParserDict, "keymap", None), dict),
        "FeedParserDict has get, __getitem__, __contains__, __setitem__ and setdefault":
            all(callable(getattr(FeedParserDict, name, None)) for name in (
                "get", "__getitem__", "__contains__", "__setitem__", "setdefault")),
        "feedparser.mixin has _urljoin":
            callable(getattr(feedparser.mixin, "_urljoin", None)),
        "_FeedParserMixin has _sync_author_detail and _get_context":
            all(callable(getattr(getattr(feedparser.mixin, "_FeedParserMixin", None), name,
                                 None))
                for name in ("_sync_author_detail", "_get_context")),
    }
    failed = [name for name, ok in checks.items() if not ok]
    if failed:
        return f"feedparser {version}'s internals differ: not " + "; not ".join(failed)
    return ""


_installed = False


def tune_feedparser() -> bool:
    """Install the changes below in this (worker) process if feedparser is as expected;
    True when they are in place. Otherwise log why, change nothing and return False."""
    global _installed
    if _installed:
        return True
    reason = why_not_tuned()
    if reason:
        log.warning("parsing with stock feedparser: %s", reason)
        return False
    _install()
    _installed = True
    return True


def _install() -> None:
    import feedparser.api
    import feedparser.mixin
    from feedparser.util import FeedParserDict

    # Same fields, fewer callbacks: see _sax.py.
    feedparser.api.PREFERRED_XML_PARSERS.insert(0, _SAX_DRIVER)
    # feedparser runs str.translate(_cp1252) on every element's text, to map C1 control
    # characters to what Windows-1252 means by them. The table has 27 entries; every
    # other character misses it, and a miss raises (and clears) a KeyError inside
    # translate, character by character. With identity entries for the characters that
    # mostly occur, the result is the same and a 2 KB summary costs a third of the time.
    table: dict[int, Any] = feedparser.mixin._cp1252
    if len(table) < _IDENTITY_BELOW:
        full: dict[int, Any] = {code: code for code in range(_IDENTITY_BELOW)}
        full.update(table)
        feedparser.mixin._cp1252 = full

    # Keys that FeedParserDict looks up by a rule of its own (an alias, a derived value,
    # a fallback with a warning). Every other key is a plain dict lookup.
    special = frozenset(FeedParserDict.keymap) | {
        "category", "enclosures", "license", "updated", "updated_parsed"}
    plain_get = FeedParserDict.get
    plain_getitem = FeedParserDict.__getitem__
    plain_contains = FeedParserDict.__contains__
    plain_setdefault = FeedParserDict.setdefault
    # Where __setitem__ stores each alias (the first of a list).
    stored_as = {key: alias[0] if isinstance(alias, list) else alias
                 for key, alias in FeedParserDict.keymap.items()}

    # FeedParserDict's get, [], in and setdefault go through __getitem__'s chain of
    # special cases (with a KeyError raised and caught for every miss): feedparser uses
    # them about 70 times per entry. For any other key, each is the plain dict's.
    def get(self: Any, key: Any, default: Any = None) -> Any:
        if key in special:
            return plain_get(self, key, default)
        return dict.get(self, key, default)

    def getitem(self: Any, key: Any) -> Any:
        if key in special:
            return plain_getitem(self, key)
        return dict.__getitem__(self, key)

    def contains(self: Any, key: Any) -> bool:
        if key in special:
            return bool(plain_contains(self, key))
        return dict.__contains__(self, key)

    def setitem(self: Any, key: Any, value: Any) -> None:
        dict.__setitem__(self, stored_as.get(key, key), value)

    def setdefault(self: Any, key: Any, default: Any) -> Any:
        if key in special:
            return plain_setdefault(self, key, default)
        return dict.setdefault(self, key, default)

    def deepcopy(value: Any) -> Any:
        # feedparser deep-copies its content parameters (type, language, base, ...) for
        # every summary, title and content element: a dict of strings and flags, whose
        # copy is a new dict with the same items. Anything else goes to copy.deepcopy.
        if (type(value) is FeedParserDict
                and all(isinstance(item, _ATOMIC) for item in value.values())
                and not any(key in FeedParserDict.keymap for key in value)):
            return FeedParserDict(value)
        return copy.deepcopy(value)

    FeedParserDict.get = get
    FeedParserDict.__getitem__ = getitem
    FeedParserDict.__contains__ = contains
    FeedParserDict.__setitem__ = setitem
    FeedParserDict.setdefault = setdefault
    # Every start tag joins the document's base (none: Signal gives feedparser no
    # content-location) with the element's own (mostly none) through urllib.
    feedparser.mixin._urljoin = _fast_urljoin(feedparser.mixin._urljoin)
    # The mixin module uses copy for deepcopy() alone.
    feedparser.mixin.copy = types.SimpleNamespace(deepcopy=deepcopy)
    _guard_author_regex(feedparser.mixin._FeedParserMixin)


def _fast_urljoin(plain: Any) -> Any:
    def urljoin(base: Any, uri: Any) -> Any:
        # feedparser's _urljoin(base, "") is urllib's urljoin(base, ""): base, or "".
        if isinstance(uri, str) and not uri:
            return base or uri
        return plain(base, uri)

    return urljoin


def _guard_author_regex(mixin: Any) -> None:
    """Cut an author string before feedparser's e-mail regular expression sees it.

    That expression takes quadratic time on a long string, and ``defuse`` can cut only
    plain element text: an author inside CDATA, split by a comment or wrapped in a child
    element reaches feedparser whole. feedparser looks for the address in
    ``_sync_author_detail``; this wrapper shortens the string first.
    """
    original = mixin._sync_author_detail

    def guarded(self: Any, key: str = "author") -> Any:
        context = self._get_context()
        value = context.get(key)
        if isinstance(value, str) and len(value) > AUTHOR_LIMIT:
            context[key] = value[:AUTHOR_LIMIT]
        return original(self, key)

    mixin._sync_author_detail = guarded
