"""Entries as readers see them: what the reading functions return, for every backend."""

from __future__ import annotations

import dataclasses
import datetime as dt
import reprlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from signal_feeds.errors import QueryError
from signal_feeds.records import StoredVersion
from signal_feeds.timeutil import format_time, parse_since

__all__ = ["MOST_ROWS", "VIEW_FIELDS", "EntryHistory", "EntryView", "LookupResult", "SearchHit",
           "collapsed_hits", "limit_argument", "row_limit", "searched", "stored_since",
           "text_argument"]


@dataclass(frozen=True)
class EntryView:
    """One stored entry as a reader sees it."""

    key: str
    source_id: str
    remote_id: str
    url: str
    title: str
    published: str
    updated: str
    author: str
    summary: str
    content: str = field(repr=False)
    first_seen_at: str
    last_seen_at: str
    #: The older row this one duplicates (``""``: it is canonical), and the per-channel
    #: markers it was derived from.
    duplicate_of: str = ""
    dup_link: str = ""
    dup_title: str = ""
    dup_text: str = ""
    #: Keys of the rows collapsed into this one, and their sources (collapsed reads).
    duplicates: tuple[str, ...] = ()
    also_in: tuple[str, ...] = ()

    @property
    def date(self) -> str:
        """The date it is listed and shown by: published, else updated, else when
        Signal first saw it. A date later than when Signal first saw it (a typo such as
        2099, a wrong time zone) gives way to that moment; ``published`` and ``updated``
        keep what the feed said."""
        return min(self.published or self.updated or self.first_seen_at, self.first_seen_at)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``key`` is also given as ``id``, as in ``signal parse``;
        ``date`` is :attr:`date`)."""
        data = dataclasses.asdict(self)
        data["duplicates"] = list(self.duplicates)
        data["also_in"] = list(self.also_in)
        return {"id": self.key, **data, "date": self.date}


@dataclass(frozen=True)
class EntryHistory:
    """An entry and every version (fingerprint) it has had, oldest first."""

    entry: EntryView
    versions: tuple[StoredVersion, ...]
    #: Which of ``versions`` the entry has now (the one seen last), or -1 when there are
    #: none: after an entry went back to an earlier version, that one, not the newest.
    current: int = -1

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; each version says whether it is the ``current`` one."""
        return {"entry": self.entry.to_dict(),
                "versions": [{**dataclasses.asdict(v), "current": i == self.current}
                             for i, v in enumerate(self.versions)]}


@dataclass(frozen=True)
class LookupResult:
    """Answer to "do we know this link?"."""

    query: str
    match_url: str
    #: The canonical entry of the story, even when the link matched a marked duplicate.
    canonical: EntryView
    #: The rows whose link matched.
    matches: tuple[EntryView, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"query": self.query, "match_url": self.match_url,
                "canonical": self.canonical.to_dict(),
                "matches": [m.to_dict() for m in self.matches]}


@dataclass(frozen=True)
class SearchHit:
    """One full-text search hit: the entry, and where the query matched in it."""

    entry: EntryView
    #: A short passage of the title, summary or content with each matched term between
    #: ``[`` and ``]`` (:data:`~signal_feeds.store.fulltext.SNIPPET_OPEN` / ``_CLOSE``),
    #: ``…`` where the text is cut.
    snippet: str
    #: The backend's relevance score, for information only (SQLite: bm25, lower is
    #: better); hits always come best first.
    score: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: the entry's fields, ``snippet`` and ``score``."""
        return {**self.entry.to_dict(), "snippet": self.snippet, "score": self.score}


#: The fields of :class:`EntryView` a backend fills from one stored row (the others are
#: filled by the reading functions).
VIEW_FIELDS = tuple(f.name for f in dataclasses.fields(EntryView)
                    if f.name not in ("duplicates", "also_in"))


def stored_since(since: str | dt.date | dt.datetime | None) -> str | None:
    """A "since" bound in the form rows store times, to compare as text: a day as
    ``YYYY-MM-DD`` (before any time of that day), a time as :func:`format_time` (a naive
    one read as UTC). Text is read as :func:`parse_since` reads it (so "+05:00" is a
    time, not text); :class:`~signal_feeds.errors.QueryError` when it is not a date or
    a time. The same for the reading functions and the stores' own methods."""
    if since is None:
        return None
    if isinstance(since, dt.datetime):
        moment = since if since.tzinfo else since.replace(tzinfo=dt.UTC)
        try:
            return format_time(moment)
        except OverflowError as exc:
            raise QueryError(f"since: {since.isoformat()} is out of range in UTC",
                             query=since.isoformat()) from exc
    if isinstance(since, dt.date):
        return since.isoformat()
    if not isinstance(since, str):  # 2026 or b"2026-01-01" failed inside the parser
        raise TypeError(f"since is a date, a datetime or ISO 8601 text, not "
                        f"{type(since).__name__}: {reprlib.repr(since)}")
    try:
        return stored_since(parse_since(since.strip()))
    except ValueError as exc:
        reason = (str(exc) if "out of range" in str(exc)
                  else f"{since!r} is not a date (YYYY-MM-DD) or an ISO 8601 time")
        raise QueryError(f"since: {reason}", query=since) from exc


#: The largest row count asked of a backend: its 64-bit integers hold it, and no
#: database has more rows (a larger --limit was an OverflowError's traceback).
MOST_ROWS = 1 << 62


def text_argument(value: object, name: str, *, optional: bool = False) -> None:
    """Refuse a ``value`` of ``name`` that is not a ``str`` (or ``None``, if
    ``optional``): a source id of b"a" silently matched nothing, a list was the
    database's "Error binding parameter", None an AttributeError from inside."""
    if not isinstance(value, str) and not (optional and value is None):
        raise TypeError(f"{name} is a str{' or None' if optional else ''}, not "
                        f"{type(value).__name__}: {reprlib.repr(value)}")


def limit_argument(limit: object, *, optional: bool = False) -> None:
    """Refuse a ``limit`` that is not an ``int``: 2.5 was the database's "datatype
    mismatch" (which reads as a damaged file), "10" a failed comparison, True a 1."""
    if (isinstance(limit, bool) or not isinstance(limit, int)) and not (
            optional and limit is None):
        raise TypeError(f"limit is an int{' or None' if optional else ''}, not "
                        f"{type(limit).__name__}: {reprlib.repr(limit)}")


def row_limit(limit: int) -> int:
    """``limit`` as a backend's ``LIMIT``: none below 0, and every row above
    :data:`MOST_ROWS` (a larger one was SQLite's OverflowError, PostgreSQL's "bigint out
    of range", from ``Store.entries(limit=...)``)."""
    return min(max(limit, 0), MOST_ROWS)


def searched(search: Callable[..., list[SearchHit]],
             entry_view: Callable[[Any, str], EntryView | None], conn: Any, query: str, *,
             source_id: str | None, since: str | None, limit: int,
             include_duplicates: bool) -> list[SearchHit]:
    """A backend's ``Store.search``: its ``search`` over every row (``search(conn,
    query, source_id=, since=, limit=, include_duplicates=True)``), collapsed by
    :func:`collapsed_hits` unless ``include_duplicates``."""
    def best(n: int) -> list[SearchHit]:
        return search(conn, query, source_id=source_id, since=since, limit=n,
                      include_duplicates=True)

    if include_duplicates:
        return best(limit)
    return collapsed_hits(best, lambda key: entry_view(conn, key), source_id=source_id,
                          since=since, limit=limit)


def collapsed_hits(search: Callable[[int], list[SearchHit]],
                   entry_view: Callable[[str], EntryView | None], *,
                   source_id: str | None, since: str | None, limit: int) -> list[SearchHit]:
    """One hit per story, best first, for a backend's collapsed search.

    ``search(n)`` gives the best ``n`` hits over every row, duplicates included. A
    marked duplicate's hit goes to the entry it duplicates (with the duplicate's
    snippet), so a story is found by words only one of its copies holds (a short excerpt
    first, an aggregator's full text later); only a story's best hit counts. The story
    is then selected as the collapsed listing selects its canonical entry: with
    ``source_id``, a copy stands for its canonical entry only when that one is of the
    same source; with ``since`` (as stored times compare), a story whose canonical entry
    is older is left out, as ``signal entries --since`` leaves it out.
    """
    if limit <= 0:
        return []
    wanted = min(max(2 * limit, limit + 10), MOST_ROWS)
    roots: dict[str, EntryView | None] = {}
    while True:
        hits = search(wanted)
        found: dict[str, SearchHit | None] = {}  # None: the story is not selected
        chosen = 0
        for hit in hits:
            entry = hit.entry
            if entry.duplicate_of:
                if entry.duplicate_of not in roots:
                    roots[entry.duplicate_of] = entry_view(entry.duplicate_of)
                root = roots[entry.duplicate_of]
                if root is not None and (source_id is None or root.source_id == source_id):
                    entry = root
            if entry.key in found:
                continue
            selected = since is None or entry.date >= since
            found[entry.key] = dataclasses.replace(hit, entry=entry) if selected else None
            chosen += selected
            if chosen == limit:
                return [h for h in found.values() if h is not None]
        if len(hits) < wanted or wanted == MOST_ROWS:  # every hit there is
            return [h for h in found.values() if h is not None]
        wanted = min(wanted * 4, MOST_ROWS)
