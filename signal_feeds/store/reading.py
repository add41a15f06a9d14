"""Reading the aggregate: entries, history, lookup and export.

Cross-source duplicates are collapsed by default (one row per story, the canonical one,
with the keys and sources collapsed into it) and shown with ``include_duplicates``;
nothing is ever deleted. Every function takes an open store (any
:class:`~signal_feeds.store.protocol.FeedStore`: it asks only the protocol's queries)
and returns frozen dataclasses with a ``to_dict()`` for JSON, or text for export.

```python
from signal_feeds import Store, list_entries, lookup

with Store("signal.db") as store:
    for entry in list_entries(store, limit=20):
        print(entry.title, entry.also_in)
    found = lookup(store, "https://example.org/post?utm_source=x")
```
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Literal

from signal_feeds import __version__
from signal_feeds.errors import QueryError, did_you_mean
from signal_feeds.identity.matching import CHANNELS, match_url
from signal_feeds.store.fulltext import DEFAULT_SEARCH_LIMIT, require_text
from signal_feeds.store.protocol import FeedStore, require_store
from signal_feeds.store.views import (
    MOST_ROWS,
    EntryHistory,
    EntryView,
    LookupResult,
    SearchHit,
    limit_argument,
    stored_since,
    text_argument,
)
from signal_feeds.timeutil import format_time, utcnow
from signal_feeds.urls import normalize_link

__all__ = [
    "ATOM_NS",
    "DEFAULT_EXPORT_ID",
    "DEFAULT_EXPORT_TITLE",
    "DEFAULT_LIMIT",
    "EXPORT_PAGE",
    "MAX_LISTED_CANDIDATES",
    "MIN_KEY_PREFIX",
    "EntryHistory",
    "EntryView",
    "ExportFormat",
    "LookupResult",
    "SearchHit",
    "check_source",
    "entry_history",
    "entry_urn",
    "export_entries",
    "iter_export",
    "list_entries",
    "lookup",
    "resolve_key",
    "search_entries",
]

#: Entries shown by ``signal entries`` unless ``--limit`` says otherwise.
DEFAULT_LIMIT = 50
DEFAULT_EXPORT_TITLE = "Signal"
DEFAULT_EXPORT_ID = "urn:signal-feeds:export"
ATOM_NS = "http://www.w3.org/2005/Atom"
#: Hex digits a key prefix needs: fewer are too likely to match many entries.
MIN_KEY_PREFIX = 4
#: Keys an ambiguous prefix lists.
MAX_LISTED_CANDIDATES = 10
ExportFormat = Literal["json", "atom"]

_HEX = re.compile(r"^[0-9a-f]+$")
# Characters XML 1.0 cannot carry at all; feeds read leniently sometimes contain them.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


#: Tells whether a row of a marker chain is itself listed, on another page of the
#: listing: (key, its source, its parent's source) -> listed.
Listed = Callable[[str, str, str], bool]


def _with_duplicates(store: FeedStore, views: list[EntryView],
                     listed: Listed | None = None) -> list[EntryView]:
    """Fill ``duplicates``/``also_in`` with every row whose marker chain ends at a view
    (and not at a row ``listed`` elsewhere, which collects its own)."""
    root_of = {v.key: v.key for v in views}
    source_of = {v.key: v.source_id for v in views}
    found: dict[str, list[tuple[str, str]]] = {v.key: [] for v in views}
    frontier = list(root_of)
    while frontier:  # markers point at strictly older rows, so this ends
        next_frontier: list[str] = []
        for key, source, parent in store.duplicates_of(frontier):
            if key in root_of or (listed is not None and listed(key, source,
                                                                source_of[parent])):
                continue
            root_of[key] = root_of[parent]
            source_of[key] = source
            found[root_of[key]].append((key, source))
            next_frontier.append(key)
        frontier = next_frontier
    out = []
    for v in views:
        dups = sorted(found[v.key])
        sources = sorted({s for _, s in dups} - {v.source_id})
        out.append(dataclasses.replace(v, duplicates=tuple(k for k, _ in dups),
                                       also_in=tuple(sources)))
    return out


def list_entries(
    store: FeedStore,
    *,
    source_id: str | None = None,
    since: str | dt.date | dt.datetime | None = None,
    limit: int | None = DEFAULT_LIMIT,
    include_duplicates: bool = False,
) -> list[EntryView]:
    """Entries newest first (by published date, else updated, else first seen).

    Duplicates are collapsed unless ``include_duplicates``: one row per story, the
    canonical one, listing the rows collapsed into it. With ``source_id`` a source's own
    copy of a story that another source carried first is still shown (that is what
    the source published); only duplicates within the source are collapsed.
    ``since`` is a date or time (UTC); ``limit=None`` means no limit, and one below 1
    is a :class:`ValueError` (as in :func:`~signal_feeds.store.change_feed.read_changes`).
    """
    _check_selection(store, "list_entries", source_id)
    limit = _check_limit(limit)
    views = store.entry_views(source_id=source_id, since=stored_since(since), limit=limit,
                              include_duplicates=include_duplicates)
    return views if include_duplicates else _with_duplicates(store, views)


def _check_selection(store: FeedStore, caller: str, source_id: str | None) -> None:
    require_store(store, caller)
    text_argument(source_id, "source_id", optional=True)


def _check_limit(limit: int | None) -> int | None:
    limit_argument(limit, optional=True)
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")
    return None if limit is None else min(limit, MOST_ROWS)


def resolve_key(store: FeedStore, key: str) -> str | None:
    """The full key for ``key`` or a unique prefix of it (at least
    :data:`MIN_KEY_PREFIX` hex digits, any case); ``None`` when no entry has it.

    Raises :class:`~signal_feeds.errors.QueryError` for a prefix that is too short, is
    not hexadecimal, or starts several keys (the message lists them).
    """
    text_argument(key, "key")
    text = key.strip().lower()
    if not _HEX.match(text):
        raise QueryError(f"{key!r} is not an entry key: keys are hexadecimal (0-9, a-f)",
                         query=key)
    if len(text) < MIN_KEY_PREFIX:
        raise QueryError(f"key prefix {key!r} is too short: give at least "
                         f"{MIN_KEY_PREFIX} hex digits", query=key)
    keys = store.keys_starting_with(text, limit=MAX_LISTED_CANDIDATES + 1)
    if len(keys) > 1:
        shown = keys[:MAX_LISTED_CANDIDATES]
        more = " and more" if len(keys) > MAX_LISTED_CANDIDATES else ""
        lines = "".join(f"\n  {k}" for k in shown)
        raise QueryError(f"key prefix {key!r} is ambiguous; it starts {len(shown)}"
                         f"{more} keys (give more digits):{lines}", query=key)
    return keys[0] if keys else None


def search_entries(
    store: FeedStore,
    query: str,
    *,
    source_id: str | None = None,
    since: str | dt.date | dt.datetime | None = None,
    limit: int = DEFAULT_SEARCH_LIMIT,
    include_duplicates: bool = False,
) -> list[SearchHit]:
    """Entries whose title, summary or content match ``query`` (SQLite FTS5 syntax:
    words, ``"a phrase"``, ``AND``/``OR``/``NOT``, ``prefix*``, ``title:word``), best
    first, each with a snippet whose matched terms are between ``[`` and ``]``.

    Duplicates are collapsed as in :func:`list_entries` unless ``include_duplicates``;
    ``source_id`` and ``since`` select the same way. Raises
    :class:`~signal_feeds.errors.QueryError` for an empty or invalid query, and
    :class:`ValueError` for a ``limit`` below 1.
    """
    _check_selection(store, "search_entries", source_id)
    text_argument(query, "query")
    hits = store.search(query, source_id=source_id, since=stored_since(since),
                        limit=_check_limit(limit) or DEFAULT_SEARCH_LIMIT,
                        include_duplicates=include_duplicates)
    if include_duplicates or not hits:
        return hits
    views = _with_duplicates(store, [h.entry for h in hits])
    return [dataclasses.replace(h, entry=v) for h, v in zip(hits, views, strict=True)]


def entry_history(store: FeedStore, key: str) -> EntryHistory | None:
    """The entry (by key or unique key prefix) and every version of it, with when each
    was first and last seen; ``None`` if there is no such entry."""
    require_store(store, "entry_history")
    full = resolve_key(store, key)
    if full is None:
        return None
    view = store.entry_view(full)
    if view is None:
        return None
    versions = list(store.versions(full))
    current = -1
    if versions:
        # A response that finds the entry unchanged touches only the entry's row (one
        # write fewer per entry and run): the current version, the one written last,
        # was last seen when the entry was.
        current = max(range(len(versions)), key=lambda i: versions[i].last_seen_at)
        seen = max(versions[current].last_seen_at, view.last_seen_at)
        versions[current] = dataclasses.replace(versions[current], last_seen_at=seen)
    return EntryHistory(entry=_with_duplicates(store, [view])[0], versions=tuple(versions),
                        current=current)


#: Source ids named in the message about one that is not known.
_LISTED_SOURCES = 20


def check_source(store: FeedStore, source_id: str, *,
                 configured: Collection[str] = ()) -> None:
    """Raise :class:`~signal_feeds.errors.QueryError` when neither the database nor
    ``configured`` (the source list's ids) knows ``source_id``; the message names the
    nearest id. A reading command's ``--source`` with a typo otherwise lists nothing,
    which reads as "no entries yet". A listed source never fetched is known."""
    if source_id in configured:
        return
    known = sorted({state.source_id for state in store.source_states()} | set(configured))
    if source_id in known:
        return
    hint = did_you_mean(source_id, known)
    listed = ", ".join(known[:_LISTED_SOURCES]) or "none"
    if len(known) > _LISTED_SOURCES:
        listed += f" and {len(known) - _LISTED_SOURCES} more"
    raise QueryError(f"no source {source_id!r} in this database or source list{hint} "
                     f"(known: {listed})", query=source_id)


def _root(store: FeedStore, view: EntryView) -> EntryView:
    seen = {view.key}
    while view.duplicate_of:
        parent = store.entry_view(view.duplicate_of)
        if parent is None or parent.key in seen:  # defensive: a marker to nowhere
            break
        view = parent
        seen.add(view.key)
    return view


def lookup(store: FeedStore, url: str) -> LookupResult | None:
    """Do we know this link? Matches the link the way duplicate detection does (scheme,
    ``www.``, trailing slash and tracking parameters ignored) and answers with the
    canonical entry of the story, even when the matching row is a marked duplicate."""
    require_store(store, "lookup")
    text_argument(url, "url")
    if not url.strip():  # it matched every entry without a link
        return None
    require_text(url, "link")
    key = match_url(url)
    exact = normalize_link(url, allow_http=True) or url.strip()
    matches = store.entries_with_link(key, exact)
    if not matches:
        return None
    roots = {r.key: r for r in (_root(store, m) for m in matches)}
    canonical = min(roots.values(), key=lambda v: (v.date, v.first_seen_at, v.key))
    return LookupResult(query=url, match_url=key,
                        canonical=_with_duplicates(store, [canonical])[0],
                        matches=tuple(matches))


def entry_urn(key: str) -> str:
    """The Atom id of an exported entry: stable, unique, and a valid IRI whatever the
    publisher's own id looks like."""
    return f"urn:signal-feeds:entry:{key}"


def _clean(text: str) -> str:
    return _NOT_XML.sub("", text)


def _sub(parent: ET.Element, tag: str, text: str = "", **attrs: str) -> ET.Element:
    child = ET.SubElement(parent, tag, attrs)
    if text:
        child.text = _clean(text)
    return child


def _believed(view: EntryView, stamp: str, written: str) -> str:
    """What an entry's date ``stamp`` lets the export's own ``<updated>`` claim: the
    date, unless it is later than Signal last saw the entry (an entry dated 2106, a
    typo, keeps its own date but does not make the whole export claim it); then when
    Signal first saw it. Never the moment of the export itself, which would make every
    export of unchanged data differ from the last; and never later than that moment."""
    return min(stamp if stamp <= view.last_seen_at else view.first_seen_at, written)


def _element_text(element: ET.Element, level: int) -> str:
    """One element, indented as at ``level`` of the whole document, on lines of its own."""
    ET.indent(element, level=level)
    return "  " * level + ET.tostring(element, encoding="unicode") + "\n"


def _stamp(view: EntryView) -> str:
    return view.updated or view.published or view.first_seen_at


def _atom(pages: Callable[[bool], Iterable[list[EntryView]]], *, title: str, feed_id: str,
          now: dt.datetime, source_titles: Mapping[str, str]) -> Iterator[str]:
    """The Atom document in pieces: the feed's head, then one piece per entry, so that
    a large export is written as it is made, never held whole. The head's ``<updated>``
    needs every entry's date first: ``pages(False)`` reads them once without their
    duplicates, then ``pages(True)`` again for the entries."""
    written = format_time(now)
    head = ET.Element("feed")
    _sub(head, "id", feed_id)
    _sub(head, "title", title)
    _sub(head, "updated", max((_believed(v, _stamp(v), written) for page in pages(False)
                               for v in page), default=written))
    _sub(_sub(head, "author"), "name", title)
    _sub(head, "generator", "Signal", version=__version__,
         uri="https://github.com/signal-feeds/signal")
    yield f'<?xml version="1.0" encoding="utf-8"?>\n<feed xmlns="{ATOM_NS}">\n'
    yield "".join(_element_text(child, 1) for child in head)
    for view in (view for page in pages(True) for view in page):
        entry = ET.Element("entry")
        _sub(entry, "id", entry_urn(view.key))
        _sub(entry, "title", view.title, type="text")
        _sub(entry, "updated", _stamp(view))
        if view.published:
            _sub(entry, "published", view.published)
        if view.url:
            _sub(entry, "link", rel="alternate", href=_clean(view.url))
        if view.author:
            _sub(_sub(entry, "author"), "name", view.author)
        if view.summary and (view.url or view.content):
            _sub(entry, "summary", view.summary, type="html")
        if view.content or not view.url:
            # RFC 4287 4.1.1: an entry without an alternate link must have a content, or
            # validators refuse the whole export: the summary stands as it (or nothing).
            _sub(entry, "content", view.content or view.summary, type="html")
        source = _sub(entry, "source")
        _sub(source, "id", f"urn:signal-feeds:source:{view.source_id}")
        # atom:source may omit its title: better none than the id posing as one.
        if source_titles.get(view.source_id):
            _sub(source, "title", source_titles[view.source_id], type="text")
        yield _element_text(entry, 1)
    yield "</feed>\n"


def _json(pages: Iterable[list[EntryView]], *, now: dt.datetime,
          include_duplicates: bool) -> Iterator[str]:
    """The JSON document in pieces, one per entry (the text ``json.dumps(indent=2)``
    gives the whole document)."""
    head = json.dumps({"generator": f"signal-feeds {__version__}",
                       "exported_at": format_time(now), "collapsed": not include_duplicates,
                       "channels": list(CHANNELS)}, ensure_ascii=False, indent=2)
    first = True
    for view in (view for page in pages for view in page):
        if first:
            yield head[:-2] + ',\n  "entries": [\n'
        # A JSON text holds no raw line break inside a string: each line is indented.
        text = json.dumps(view.to_dict(), ensure_ascii=False, indent=2)
        yield ("" if first else ",\n") + textwrap.indent(text, "    ")
        first = False
    yield head[:-2] + ',\n  "entries": []\n}\n' if first else "\n  ]\n}\n"


def export_entries(
    store: FeedStore,
    *,
    format: ExportFormat = "json",
    source_id: str | None = None,
    since: str | dt.date | dt.datetime | None = None,
    limit: int | None = None,
    include_duplicates: bool = False,
    title: str = DEFAULT_EXPORT_TITLE,
    feed_id: str = DEFAULT_EXPORT_ID,
    now: dt.datetime | None = None,
    source_titles: Mapping[str, str] | None = None,
) -> str:
    """The selection of :func:`list_entries` (collapsed by default, no limit) as a JSON
    document or a valid Atom feed (entry ids from :func:`entry_urn`).

    In Atom, each entry's ``<source>`` is titled with ``source_titles[source_id]`` (the
    config's ``title``), else the feed's own title as last fetched, else left untitled:
    never the source id.
    """
    return "".join(iter_export(store, format=format, source_id=source_id, since=since,
                               limit=limit, include_duplicates=include_duplicates,
                               title=title, feed_id=feed_id, now=now,
                               source_titles=source_titles))


def iter_export(
    store: FeedStore,
    *,
    format: ExportFormat = "json",
    source_id: str | None = None,
    since: str | dt.date | dt.datetime | None = None,
    limit: int | None = None,
    include_duplicates: bool = False,
    title: str = DEFAULT_EXPORT_TITLE,
    feed_id: str = DEFAULT_EXPORT_ID,
    now: dt.datetime | None = None,
    source_titles: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """:func:`export_entries` in pieces (the document's head, then one piece per entry),
    to be written as they come: the whole text of a large export is never held, nor
    (without ``limit``) its entries: they are read :data:`EXPORT_PAGE` at a time, while
    the pieces are taken, so ``store`` must stay open until the last one."""
    if format not in ("atom", "json"):
        raise ValueError(f"unknown export format {format!r}")
    _check_selection(store, "iter_export", source_id)
    # Refused now, not at the first piece (or, for a naive now, read as UTC unasked).
    if now is not None and not isinstance(now, dt.datetime):
        raise TypeError(f"now is a datetime, not {type(now).__name__}")
    if now is not None and now.utcoffset() is None:
        raise ValueError(f"now is a naive datetime ({now.isoformat()}); it must say its "
                         "time zone (e.g. datetime.now(timezone.utc))")
    if not isinstance(source_titles, Mapping | None):
        raise TypeError("source_titles is a mapping of source id to title, not "
                        f"{type(source_titles).__name__}")
    bound = stored_since(since)  # a bad one is refused now, not at the first piece
    limit = _check_limit(limit)
    if limit is not None:  # as many as asked for, read at once
        views = list_entries(store, source_id=source_id, since=bound, limit=limit,
                             include_duplicates=include_duplicates)

    def pages(filled: bool) -> Iterable[list[EntryView]]:
        if limit is not None:
            return [views]
        return _pages(store, source_id=source_id, since=bound,
                      include_duplicates=include_duplicates, filled=filled)

    moment = now or utcnow()
    if format == "atom":
        titles = {s.source_id: s.feed_title for s in store.source_states() if s.feed_title}
        titles.update({k: v for k, v in (source_titles or {}).items() if v})
        return _atom(pages, title=title, feed_id=feed_id, now=moment, source_titles=titles)
    return _json(pages(True), now=moment, include_duplicates=include_duplicates)


#: Entries an export reads and holds at a time.
EXPORT_PAGE = 500


def _pages(store: FeedStore, *, source_id: str | None, since: str | None,
           include_duplicates: bool, filled: bool) -> Iterator[list[EntryView]]:
    """The whole selection of :func:`list_entries` a page at a time, each page after the
    last one's final entry (a seek in the order's index, not a walk from the top);
    ``filled``: with the rows collapsed into each entry, as :func:`list_entries` gives
    them."""
    def listed(key: str, source: str, parent_source: str) -> bool:
        # A source's copy of another source's row is listed too (see list_entries): on
        # another page, it collects its own duplicates, as in a single listing.
        if source != source_id or parent_source == source_id:
            return False
        view = store.entry_view(key) if since is not None else None
        return since is None or (view is not None and view.date >= since)

    after: str | None = None
    while True:
        views = store.entry_views(source_id=source_id, since=since, limit=EXPORT_PAGE,
                                  include_duplicates=include_duplicates, after=after)
        if views:
            yield (_with_duplicates(store, views, listed if source_id is not None else None)
                   if filled and not include_duplicates else views)
        if len(views) < EXPORT_PAGE:
            return
        after = views[-1].key
