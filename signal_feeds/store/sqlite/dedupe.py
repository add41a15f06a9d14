"""Duplicate markers in SQLite: the SQL side of :mod:`signal_feeds.identity.matching`.

Each channel's marker column (``dup_link``, ``dup_title``, ``dup_text``) names the
canonical row of the row's cluster; ``duplicate_of`` takes the first non-empty marker in
:data:`~signal_feeds.identity.matching.CHANNELS` order. A channel only ever writes its
own column. Candidates are found through indexes (``match_url``, ``norm_title``) and the
``dedupe_text`` token table; the decisions (what matches, which row is canonical) are the
pure functions of the matching module, and the pass that clusters and writes is
:func:`signal_feeds.store.marking.mark_clusters`, shared with the PostgreSQL store.

:func:`mark_new_entries` runs inside the store's transaction for the rows one response
created or changed; :func:`recompute` (``signal dedupe``) recomputes every cluster with
the same code, so both converge on the same markers.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from signal_feeds.identity.matching import (
    CHANNELS,
    UNLISTED_RANK,
    DedupeRow,
    match_keys,
    pack_tokens,
    posted_tokens,
    shingles,
    unpack_tokens,
)
from signal_feeds.store.marking import (
    MAX_POSTINGS,
    CommonKeys,
    mark_clusters,
    shares_tokens,
)
from signal_feeds.store.protocol import DedupeReport

__all__ = [
    "mark_new_entries",
    "recompute",
    "post_stored_tokens",
    "refresh_match_keys",
    "remark",
]

_CHUNK = 500  # bound on SQL variables per IN (...)
_T = TypeVar("_T")


def _chunks(items: Sequence[_T]) -> Iterable[Sequence[_T]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start:start + _CHUNK]


_ROW_SQL = ("SELECT id, source_id, first_seen_at, "
            "coalesce(nullif(published, ''), nullif(updated, ''), first_seen_at), "
            "match_url, norm_title, dup_link, dup_title, dup_text, text_tokens, seq, "
            "(SELECT position FROM source_order AS o WHERE o.source_id = entries.source_id) "
            "FROM entries WHERE id IN ({marks})")


class _Rows:
    """The dedupe view of the rows one pass touches, loaded on first use.

    Shingles are computed only for rows the text channel actually compares: hashing a
    summary costs more than everything else a row needs.
    """

    def __init__(self, conn: sqlite3.Connection, given: Iterable[DedupeRow] = ()) -> None:
        self.conn = conn
        self.cache: dict[str, DedupeRow] = {}
        self.texts: dict[str, frozenset[int]] = {}
        for row in given:
            self.cache[row.key] = row
            if row.shingles:  # empty: not computed (hashed again only if compared)
                self.texts[row.key] = row.shingles

    def load(self, keys: Iterable[str]) -> None:
        missing = {k for k in keys if k not in self.cache}
        if not missing:  # the common case: rows this pass has already read
            return
        for chunk in _chunks(sorted(missing)):
            for r in self.conn.execute(_ROW_SQL.format(marks=",".join("?" * len(chunk))),
                                       chunk):
                self.cache[r[0]] = DedupeRow(
                    key=r[0], source_id=r[1], first_seen_at=r[2], moment=r[3],
                    match_url=r[4], norm_title=r[5],
                    markers={"link": r[6], "title": r[7], "text": r[8]},
                    tokens=unpack_tokens(r[9]), seq=r[10] or 0,
                    rank=UNLISTED_RANK if r[11] is None else r[11])

    def get(self, key: str) -> DedupeRow:
        if key not in self.cache:
            self.load([key])
        return self.cache[key]

    def exists(self, key: str) -> bool:
        if key not in self.cache:
            self.load([key])
        return key in self.cache

    def with_text(self, keys: Sequence[str]) -> list[DedupeRow]:
        """The rows with their shingles filled in."""
        missing = sorted({k for k in keys if k not in self.texts})
        for chunk in _chunks(missing):
            marks = ",".join("?" * len(chunk))
            for key, title, summary in self.conn.execute(
                    f"SELECT id, title, summary FROM entries WHERE id IN ({marks})", chunk):
                self.texts[key] = shingles(title or "", summary or "")
        return [replace(self.get(k), shingles=self.texts.get(k, frozenset())) for k in keys]


_LINK, _TITLE = -2, -1  # labels of the link and title lookups; tokens are 0, 1, ...


@functools.lru_cache(maxsize=64)
def _candidates_sql(tokens: int) -> str:
    # Each lookup keeps its own LIMIT, so one very common key costs at most
    # MAX_POSTINGS + 1 rows; one statement per row instead of one per key.
    # The row itself is left out here, not in Python: it would be one more row per key.
    # Plain "?" placeholders, each lookup's (key, self, limit) in turn: numbered ones
    # ("?1") with a sequence of values are deprecated from Python 3.12.
    terms = [f"SELECT {_LINK}, id FROM (SELECT id FROM entries "
             "WHERE match_url = ? AND id != ? LIMIT ?)",
             f"SELECT {_TITLE}, id FROM (SELECT id FROM entries "
             "WHERE norm_title = ? AND id != ? LIMIT ?)"]
    # Token rows name their entry by seq: keys are looked up later, for the few seqs
    # that share enough tokens.
    terms += [f"SELECT {i}, entry FROM (SELECT entry FROM dedupe_text "
              "WHERE token = ? AND entry != ? LIMIT ?)" for i in range(tokens)]
    return " UNION ALL ".join(terms)


def _candidates(conn: sqlite3.Connection, row: DedupeRow,
                common: CommonKeys) -> dict[str, list[str]]:
    """Rows that share a match key with ``row``, by channel (``row`` itself excluded)."""
    limit = MAX_POSTINGS + 1
    # Lookups go by the row's own posted tokens: for texts at or above the threshold,
    # those meet the other's (see POSTED_TOKENS).
    known = common.known["text"]
    tokens = [token for token in posted_tokens(row.tokens) if token not in known]
    # A key known to be too common is looked up as NULL, which finds nothing.
    url = row.match_url if row.match_url and not common.knows("link", row.match_url) else None
    title = (row.norm_title if row.norm_title and not common.knows("title", row.norm_title)
             else None)
    # One statement per number of tokens: at most POSTED_TOKENS + 1 are prepared (and
    # cached). Padding to a fixed count cost a fifth of the lookup's time.
    args: list[object] = [url, row.key, limit, title, row.key, limit]
    for token in tokens:
        args += (token, row.seq, limit)
    hits: dict[int, list[Any]] = {}  # keys for the link and title, seqs for tokens
    for label, found in conn.execute(_candidates_sql(len(tokens)), args):
        hits.setdefault(label, []).append(found)

    def posted(label: int) -> list[Any]:
        found = hits.get(label, [])
        return [] if len(found) > MAX_POSTINGS else found

    for label, channel, key in ((_LINK, "link", url), (_TITLE, "title", title)):
        if len(hits.get(label, ())) > MAX_POSTINGS:
            common.add(channel, key)
    seqs: set[int] = set()
    for label, token in enumerate(tokens):
        if len(hits.get(label, ())) > MAX_POSTINGS:
            common.add("text", token)
        seqs.update(posted(label))
    # One chance common shingle is not worth comparing a row: two texts at or above the
    # threshold share most of their prefixes, which the rows carry. Checking that costs
    # the read of a row; comparing texts costs hashing its summary.
    texts = []
    mine = frozenset(row.tokens)
    for chunk in _chunks(sorted(seqs)):
        # (A token row whose entry is gone names no key: it is left out here.)
        for key, stored in conn.execute(
                f"SELECT id, text_tokens FROM entries WHERE seq IN "
                f"({','.join('?' * len(chunk))}) ORDER BY seq", chunk):
            if shares_tokens(mine, unpack_tokens(stored)):
                texts.append(key)
    found = {"link": posted(_LINK), "title": posted(_TITLE), "text": texts}
    return {channel: list(dict.fromkeys(keys)) for channel, keys in found.items()}


#: Rows a key still links through their channel's marker (for a key found too common).
_STALE_SQL = {
    "link": "SELECT id FROM entries INDEXED BY entries_link_marked "
            "WHERE match_url = ? AND dup_link != ''",
    "title": "SELECT id FROM entries INDEXED BY entries_title_marked "
             "WHERE norm_title = ? AND dup_title != ''",
    "text": "SELECT e.id FROM dedupe_text AS d JOIN entries AS e ON e.seq = d.entry "
            "WHERE d.token = ? AND e.dup_text != ''",
}


_KEY_COLUMNS = {"link": "match_url", "title": "norm_title"}


class _Backend:
    """:class:`~signal_feeds.store.marking.MarkingBackend` on one SQLite connection."""

    def __init__(self, conn: sqlite3.Connection, rows: _Rows, common: CommonKeys) -> None:
        self.conn, self.rows, self.common = conn, rows, common

    def candidates(self, key: str) -> dict[str, list[str]]:
        return _candidates(self.conn, self.rows.get(key), self.common)

    def old_cluster(self, column: str, row: DedupeRow, channel: str) -> list[str]:
        canon = row.markers.get(channel) or row.key
        members = [r[0] for r in self.conn.execute(
            f"SELECT id FROM entries WHERE {column} = ? AND {column} != ''", (canon,))]
        return [canon, *members]

    def stale_rows(self, channel: str, keys: Collection[Any]) -> list[str]:
        return [r[0] for key in sorted(keys)
                for r in self.conn.execute(_STALE_SQL[channel], (key,))]

    def write_markers(self, column: str, updates: Sequence[tuple[str, str]]) -> None:
        self.conn.executemany(f"UPDATE entries SET {column} = ? WHERE id = ?", updates)

    def sharing(self, channel: str, value: str) -> list[str]:
        column = _KEY_COLUMNS[channel]
        return [r[0] for r in self.conn.execute(
            f"SELECT id FROM entries WHERE {column} = ? LIMIT ?", (value, MAX_POSTINGS + 2))]


def _mark(conn: sqlite3.Connection, rows: _Rows, keys: Sequence[str], *,
          created: Collection[str], everything: bool,
          common: CommonKeys | None = None) -> DedupeReport:
    known = CommonKeys() if common is None else common
    changed, touched = mark_clusters(_Backend(conn, rows, known), rows, keys, created=created,
                                     everything=everything, common=known)
    _derive_duplicate_of(conn, sorted(touched))
    duplicates = None
    if everything:  # a whole-table count is worth it for `signal dedupe`, not per response
        duplicates = int(conn.execute("SELECT count(*) FROM entries WHERE duplicate_of != ''"
                                      ).fetchone()[0])
    return DedupeReport(rows=len(keys), changed=changed, duplicates=duplicates)


_DERIVED = " ".join(f"WHEN {col} != '' THEN {col}" for col in list(CHANNELS.values())[:-1])
_DUPLICATE_OF = f"CASE {_DERIVED} ELSE {list(CHANNELS.values())[-1]} END"


def _derive_duplicate_of(conn: sqlite3.Connection, keys: Sequence[str]) -> None:
    for chunk in _chunks(keys):
        marks = ",".join("?" * len(chunk))
        conn.execute(f"UPDATE entries SET duplicate_of = {_DUPLICATE_OF} "
                     f"WHERE id IN ({marks}) AND duplicate_of != {_DUPLICATE_OF}", chunk)


def mark_new_entries(conn: sqlite3.Connection, rows: Sequence[DedupeRow], *,
                     created: Collection[str] = (),
                     common: CommonKeys | None = None) -> DedupeReport:
    """Mark the duplicates among the clusters touched by ``rows`` (entries just created
    or updated, as written, shingles included), inside the caller's open transaction.

    ``created`` names the rows that did not exist before this transaction: they belonged
    to no cluster, so no old cluster has to be recomputed for them. ``common`` carries
    the tokens known to be too common from one response to the next.
    """
    given = list({r.key: r for r in rows}.values())
    return _mark(conn, _Rows(conn, given), [r.key for r in given],
                 created=frozenset(created), everything=False, common=common)


_REFRESH_BATCH = 500


def _entry_batches(conn: sqlite3.Connection, columns: str) -> Iterator[list[Any]]:
    """Every entry's ``id`` and ``columns``, in key order, a batch at a time."""
    last = ""
    while batch := conn.execute(f"SELECT id, {columns} FROM entries WHERE id > ? ORDER BY id "
                                "LIMIT ?", (last, _REFRESH_BATCH)).fetchall():
        yield batch
        last = batch[-1][0]


def _start_postings(conn: sqlite3.Connection) -> None:
    """Empty ``dedupe_text`` for a rebuild. Rows written by other means (an older
    Signal, by hand) may have no seq yet: they are numbered after every seq in use."""
    conn.execute("UPDATE entries SET seq = (SELECT coalesce(max(seq), 0) FROM entries) "
                 "+ rowid WHERE seq IS NULL")
    conn.execute("DELETE FROM dedupe_text")


def _post(conn: sqlite3.Connection, tokens: list[tuple[int, int]]) -> None:
    conn.executemany("INSERT OR IGNORE INTO dedupe_text (token, entry) VALUES (?, ?)", tokens)


def refresh_match_keys(conn: sqlite3.Connection) -> None:
    """Recompute every entry's match keys and text tokens from its stored fields,
    rewrite those that changed, and rebuild ``dedupe_text`` (inside the caller's
    transaction). Walks the table in key order, a batch at a time."""
    _start_postings(conn)
    for batch in _entry_batches(conn, "url, title, summary, match_url, norm_title, "
                                      "text_tokens, seq"):
        updates: list[tuple[str, str, bytes, str]] = []
        tokens: list[tuple[int, int]] = []
        for key, url, title, summary, old_url, old_title, old_tokens, seq in batch:
            keys = match_keys(url or "", title or "", summary or "")
            packed = pack_tokens(keys.tokens)
            if (keys.match_url, keys.norm_title, packed) != (old_url, old_title,
                                                             old_tokens or b""):
                updates.append((keys.match_url, keys.norm_title, packed, key))
            tokens.extend((token, seq) for token in posted_tokens(keys.tokens))
        conn.executemany("UPDATE entries SET match_url = ?, norm_title = ?, text_tokens = ? "
                         "WHERE id = ?", updates)
        _post(conn, tokens)


def post_stored_tokens(conn: sqlite3.Connection) -> None:
    """Rebuild ``dedupe_text`` from the text tokens as stored (inside the caller's
    transaction): a copy keeps every row as it was, keys an older Signal computed
    included (recomputed, they made the copy differ from its source)."""
    _start_postings(conn)
    for batch in _entry_batches(conn, "text_tokens, seq"):
        _post(conn, [(token, seq) for _, blob, seq in batch
                     for token in posted_tokens(unpack_tokens(blob))])


def recompute(conn: sqlite3.Connection) -> DedupeReport:
    """Recompute every match key and every cluster (``signal dedupe``), inside the
    caller's transaction. Running it again changes nothing."""
    refresh_match_keys(conn)
    return remark(conn)


def remark(conn: sqlite3.Connection) -> DedupeReport:
    """Recompute every cluster from the stored match keys (which stay as they are),
    inside the caller's transaction: the canonical copies follow today's rule."""
    keys = [r[0] for r in conn.execute("SELECT id FROM entries ORDER BY id")]
    return _mark(conn, _Rows(conn), keys, created=(), everything=True)
