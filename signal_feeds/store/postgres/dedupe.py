"""Duplicate markers in PostgreSQL: the same clusters as the SQLite store, in SQL of its own.

The decisions (what matches, which row is canonical) are the pure functions of
:mod:`signal_feeds.identity.matching` and the pass of :mod:`signal_feeds.store.marking`,
shared with SQLite; this module only finds the candidates (by ``match_url``,
``norm_title`` and the ``dedupe_text`` token table) and writes each channel's marker
column and the derived ``duplicate_of``. Lists of keys go to the server as one array
parameter (``= ANY(%s)``), never one statement per key.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

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
    released_rows,
    shares_tokens,
)
from signal_feeds.store.protocol import DedupeReport

__all__ = ["mark_new_entries", "post_stored_tokens", "recompute", "refresh_match_keys"]

_ROW_SQL = ("SELECT id, source_id, first_seen_at, "
            "coalesce(nullif(published, ''), nullif(updated, ''), first_seen_at), "
            "match_url, norm_title, dup_link, dup_title, dup_text, text_tokens, seq, "
            "(SELECT position FROM source_order AS o WHERE o.source_id = entries.source_id) "
            "FROM entries WHERE id = ANY(%s)")


class _Rows:
    """The dedupe view of the rows one pass touches, loaded on first use."""

    def __init__(self, conn: Any, given: Iterable[DedupeRow] = ()) -> None:
        self.conn = conn
        self.cache: dict[str, DedupeRow] = {}
        self.texts: dict[str, frozenset[int]] = {}
        for row in given:
            self.cache[row.key] = row
            if row.shingles:
                self.texts[row.key] = row.shingles

    def load(self, keys: Iterable[str]) -> None:
        missing = sorted({k for k in keys if k not in self.cache})
        if not missing:
            return
        for r in self.conn.execute(_ROW_SQL, (missing,)):
            self.cache[r[0]] = DedupeRow(
                key=r[0], source_id=r[1], first_seen_at=r[2], moment=r[3],
                match_url=r[4], norm_title=r[5],
                markers={"link": r[6], "title": r[7], "text": r[8]},
                tokens=unpack_tokens(bytes(r[9]) if r[9] is not None else None),
                seq=r[10] or 0, rank=UNLISTED_RANK if r[11] is None else r[11])

    def get(self, key: str) -> DedupeRow:
        if key not in self.cache:
            self.load([key])
        return self.cache[key]

    def exists(self, key: str) -> bool:
        self.load([key])
        return key in self.cache

    def with_text(self, keys: Sequence[str]) -> list[DedupeRow]:
        """The rows with their shingles filled in."""
        missing = sorted({k for k in keys if k not in self.texts})
        if missing:
            for key, title, summary in self.conn.execute(
                    "SELECT id, title, summary FROM entries WHERE id = ANY(%s)", (missing,)):
                self.texts[key] = shingles(title or "", summary or "")
        return [replace(self.get(k), shingles=self.texts.get(k, frozenset())) for k in keys]


# Each lookup keeps its own LIMIT, so one very common key costs at most MAX_POSTINGS + 1
# rows; one statement per row (link, title and every token together).
_CANDIDATES = """
SELECT -2, id::text FROM (SELECT id FROM entries WHERE match_url = %(url)s AND id != %(key)s
                          LIMIT %(limit)s) AS l
UNION ALL
SELECT -1, id::text FROM (SELECT id FROM entries WHERE norm_title = %(title)s
                          AND id != %(key)s LIMIT %(limit)s) AS t
UNION ALL
SELECT t.i::int - 1, d.entry::text FROM unnest(%(tokens)s::bigint[]) WITH ORDINALITY AS t(token, i)
CROSS JOIN LATERAL (SELECT entry FROM dedupe_text WHERE token = t.token AND entry != %(seq)s
                    LIMIT %(limit)s) AS d
"""
_LINK, _TITLE = -2, -1


def _lookup_keys(row: DedupeRow, common: CommonKeys) -> tuple[str | None, str | None]:
    """The row's match URL and title to look up; None (which finds nothing) for one that
    is empty or known to be too common."""
    url = row.match_url if row.match_url and not common.knows("link", row.match_url) else None
    title = (row.norm_title if row.norm_title and not common.knows("title", row.norm_title)
             else None)
    return url, title


def _candidates(conn: Any, row: DedupeRow, common: CommonKeys) -> dict[str, list[str]]:
    """Rows that share a match key with ``row``, by channel (``row`` itself excluded)."""
    known = common.known["text"]
    tokens = [token for token in posted_tokens(row.tokens) if token not in known]
    url, title = _lookup_keys(row, common)
    hits: dict[int, list[str]] = {}
    for label, found in conn.execute(_CANDIDATES, {
            "url": url, "key": row.key, "limit": MAX_POSTINGS + 1,
            "title": title, "tokens": tokens, "seq": row.seq}):
        hits.setdefault(label, []).append(found)

    def posted(label: int) -> list[str]:
        found = hits.get(label, [])
        return [] if len(found) > MAX_POSTINGS else found

    for label, channel, value in ((_LINK, "link", url), (_TITLE, "title", title)):
        if len(hits.get(label, ())) > MAX_POSTINGS:
            common.add(channel, value)
    seqs: set[int] = set()
    for label, token in enumerate(tokens):
        if len(hits.get(label, ())) > MAX_POSTINGS:
            common.add("text", token)
        seqs.update(int(s) for s in posted(label))
    texts = []
    if seqs:
        mine = frozenset(row.tokens)
        for key, stored in conn.execute(
                "SELECT id, text_tokens FROM entries WHERE seq = ANY(%s) ORDER BY seq",
                (sorted(seqs),)):
            if shares_tokens(mine, unpack_tokens(bytes(stored) if stored else None)):
                texts.append(key)
    found = {"link": posted(_LINK), "title": posted(_TITLE), "text": texts}
    return {channel: list(dict.fromkeys(keys)) for channel, keys in found.items()}


# The same lookups for every row of a response at once: two statements per response,
# not two per entry.
_ALL_CANDIDATES = """
WITH r AS (SELECT * FROM unnest(%(i)s::int[], %(key)s::text[], %(url)s::text[],
                                %(title)s::text[], %(seq)s::bigint[])
           AS r(i, key, url, title, seq)),
     t AS (SELECT * FROM unnest(%(ti)s::int[], %(label)s::int[], %(token)s::bigint[])
           AS t(i, label, token))
SELECT r.i, -2, l.id::text FROM r CROSS JOIN LATERAL (
    SELECT id FROM entries WHERE match_url = r.url AND id != r.key LIMIT %(limit)s) AS l
UNION ALL
SELECT r.i, -1, x.id::text FROM r CROSS JOIN LATERAL (
    SELECT id FROM entries WHERE norm_title = r.title AND id != r.key LIMIT %(limit)s) AS x
UNION ALL
SELECT t.i, t.label, d.entry::text FROM t JOIN r USING (i) CROSS JOIN LATERAL (
    SELECT entry FROM dedupe_text WHERE token = t.token AND entry != r.seq
    LIMIT %(limit)s) AS d
"""


def _all_candidates(conn: Any, rows: Sequence[DedupeRow],
                    common: CommonKeys) -> dict[str, dict[str, list[str]]]:
    """:func:`_candidates` of many rows in two statements (the same answers)."""
    known = common.known["text"]
    tokens = [[t for t in posted_tokens(row.tokens) if t not in known] for row in rows]
    flat = [(i, label, token) for i, row_tokens in enumerate(tokens)
            for label, token in enumerate(row_tokens)]
    looked_up = [_lookup_keys(row, common) for row in rows]
    hits: list[dict[int, list[str]]] = [{} for _ in rows]
    for i, label, found in conn.execute(_ALL_CANDIDATES, {
            "i": list(range(len(rows))), "key": [r.key for r in rows],
            "url": [u for u, _ in looked_up],
            "title": [t for _, t in looked_up], "seq": [r.seq for r in rows],
            "ti": [f[0] for f in flat], "label": [f[1] for f in flat],
            "token": [f[2] for f in flat], "limit": MAX_POSTINGS + 1}):
        hits[i].setdefault(label, []).append(found)

    def posted(i: int, label: int) -> list[str]:
        found = hits[i].get(label, [])
        return [] if len(found) > MAX_POSTINGS else found

    wanted: list[set[int]] = []
    for i, row_tokens in enumerate(tokens):
        for label, channel, value in zip((_LINK, _TITLE), ("link", "title"), looked_up[i],
                                         strict=True):
            if len(hits[i].get(label, ())) > MAX_POSTINGS:
                common.add(channel, value)
        seqs: set[int] = set()
        for label, token in enumerate(row_tokens):
            if len(hits[i].get(label, ())) > MAX_POSTINGS:
                common.add("text", token)
            seqs.update(int(s) for s in posted(i, label))
        wanted.append(seqs)
    every = sorted(set().union(*wanted)) if wanted else []
    stored: dict[int, tuple[str, frozenset[int]]] = {}
    if every:
        for seq, key, blob in conn.execute(
                "SELECT seq, id, text_tokens FROM entries WHERE seq = ANY(%s)", (every,)):
            stored[int(seq)] = (key, frozenset(unpack_tokens(bytes(blob) if blob else None)))
    result: dict[str, dict[str, list[str]]] = {}
    for i, row in enumerate(rows):
        mine = frozenset(row.tokens)
        texts = [stored[s][0] for s in sorted(wanted[i])
                 if s in stored and shares_tokens(mine, stored[s][1])]
        found = {"link": posted(i, _LINK), "title": posted(i, _TITLE), "text": texts}
        result[row.key] = {channel: list(dict.fromkeys(keys))
                           for channel, keys in found.items()}
    return result


#: Rows a key still links through their channel's marker (for a key found too common).
_STALE_SQL = {
    "link": "SELECT id FROM entries WHERE match_url = ANY(%s) AND dup_link != ''",
    "title": "SELECT id FROM entries WHERE norm_title = ANY(%s) AND dup_title != ''",
    "text": "SELECT e.id FROM dedupe_text AS d JOIN entries AS e ON e.seq = d.entry "
            "WHERE d.token = ANY(%s::bigint[]) AND e.dup_text != ''",
}


_KEY_COLUMNS = {"link": "match_url", "title": "norm_title"}


class _Backend:
    """:class:`~signal_feeds.store.marking.MarkingBackend` on one PostgreSQL connection;
    the rows just written have their lookups made in one go, before the pass."""

    def __init__(self, conn: Any, rows: _Rows, common: CommonKeys,
                 found: dict[str, dict[str, list[str]]]) -> None:
        self.conn, self.rows, self.common, self.found = conn, rows, common, found

    def candidates(self, key: str) -> dict[str, list[str]]:
        if key in self.found:
            return self.found.pop(key)
        return _candidates(self.conn, self.rows.get(key), self.common)

    def old_cluster(self, column: str, row: DedupeRow, channel: str) -> list[str]:
        canon = row.markers.get(channel) or row.key
        members = [r[0] for r in self.conn.execute(
            f"SELECT id FROM entries WHERE {column} = %s AND {column} != ''", (canon,))]
        return [canon, *members]

    def stale_rows(self, channel: str, keys: Collection[Any]) -> list[str]:
        return sorted(r[0] for r in self.conn.execute(_STALE_SQL[channel], (sorted(keys),)))

    def sharing(self, channel: str, value: str) -> list[str]:
        column = _KEY_COLUMNS[channel]
        return [r[0] for r in self.conn.execute(
            f"SELECT id FROM entries WHERE {column} = %s LIMIT %s", (value, MAX_POSTINGS + 2))]

    def write_markers(self, column: str, updates: Sequence[tuple[str, str]]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(f"UPDATE entries SET {column} = %s WHERE id = %s", updates)


def _mark(conn: Any, rows: _Rows, keys: Sequence[str], *, created: Collection[str],
          everything: bool, common: CommonKeys | None = None) -> DedupeReport:
    known = CommonKeys() if common is None else common
    backend = _Backend(conn, rows, known, {})
    released = None
    if not everything:  # the rows just written: their lookups in one go, after the keys
        # they left are known again where rare (see marking.released_rows)
        released = released_rows(backend, rows, [k for k in keys if k not in created], known)
        backend.found.update(_all_candidates(conn, [rows.get(k) for k in keys], known))
    changed, touched = mark_clusters(backend, rows, keys, created=created,
                                     everything=everything, common=known, released=released)
    _derive_duplicate_of(conn, sorted(touched))
    duplicates = None
    if everything:
        duplicates = int(conn.execute(
            "SELECT count(*) FROM entries WHERE duplicate_of != ''").fetchone()[0])
    return DedupeReport(rows=len(keys), changed=changed, duplicates=duplicates)


_DERIVED = " ".join(f"WHEN {col} != '' THEN {col}" for col in list(CHANNELS.values())[:-1])
_DUPLICATE_OF = f"CASE {_DERIVED} ELSE {list(CHANNELS.values())[-1]} END"


def _derive_duplicate_of(conn: Any, keys: Sequence[str]) -> None:
    if keys:
        conn.execute(f"UPDATE entries SET duplicate_of = {_DUPLICATE_OF} "
                     f"WHERE id = ANY(%s) AND duplicate_of != {_DUPLICATE_OF}", (list(keys),))


def mark_new_entries(conn: Any, rows: Sequence[DedupeRow], *, created: Collection[str] = (),
                     common: CommonKeys | None = None) -> DedupeReport:
    """Mark the duplicates among the clusters touched by ``rows`` (entries just created
    or updated, as written), inside the caller's open transaction."""
    given = list({r.key: r for r in rows}.values())
    return _mark(conn, _Rows(conn, given), [r.key for r in given],
                 created=frozenset(created), everything=False, common=common)


_REFRESH_BATCH = 1000


def _entry_batches(conn: Any, columns: str) -> Iterator[list[Any]]:
    """Every entry's ``id`` and ``columns``, in key order, a batch at a time."""
    last = ""
    while batch := conn.execute(f"SELECT id, {columns} FROM entries WHERE id > %s ORDER BY "
                                "id LIMIT %s", (last, _REFRESH_BATCH)).fetchall():
        yield batch
        last = batch[-1][0]


def _post(conn: Any, tokens: list[tuple[int, int]]) -> None:
    if tokens:
        conn.execute("INSERT INTO dedupe_text (token, entry) SELECT * FROM "
                     "unnest(%s::bigint[], %s::bigint[]) ON CONFLICT DO NOTHING",
                     ([t for t, _ in tokens], [s for _, s in tokens]))


def refresh_match_keys(conn: Any) -> None:
    """Recompute every entry's match keys and text tokens from its stored fields and
    rebuild ``dedupe_text`` (inside the caller's transaction), a batch at a time."""
    conn.execute("DELETE FROM dedupe_text")
    for batch in _entry_batches(conn, "url, title, summary, match_url, norm_title, "
                                      "text_tokens, seq"):
        updates: list[tuple[str, str, bytes, str]] = []
        tokens: list[tuple[int, int]] = []
        for key, url, title, summary, old_url, old_title, old_tokens, seq in batch:
            keys = match_keys(url or "", title or "", summary or "")
            packed = pack_tokens(keys.tokens)
            if (keys.match_url, keys.norm_title, packed) != (
                    old_url, old_title, bytes(old_tokens or b"")):
                updates.append((keys.match_url, keys.norm_title, packed, key))
            tokens.extend((token, seq) for token in posted_tokens(keys.tokens))
        with conn.cursor() as cur:
            cur.executemany("UPDATE entries SET match_url = %s, norm_title = %s, "
                            "text_tokens = %s WHERE id = %s", updates)
        _post(conn, tokens)


def post_stored_tokens(conn: Any) -> None:
    """Rebuild ``dedupe_text`` from the text tokens as stored (inside the caller's
    transaction): a copy keeps every row as it was, keys an older Signal computed
    included (recomputed, they made the copy differ from its source)."""
    conn.execute("DELETE FROM dedupe_text")
    for batch in _entry_batches(conn, "text_tokens, seq"):
        _post(conn, [(token, seq) for _, blob, seq in batch
                     for token in posted_tokens(unpack_tokens(
                         bytes(blob) if blob is not None else None))])


def recompute(conn: Any) -> DedupeReport:
    """Recompute every match key and every cluster (``signal dedupe``), inside the
    caller's transaction. Running it again changes nothing."""
    refresh_match_keys(conn)
    keys = [r[0] for r in conn.execute("SELECT id FROM entries ORDER BY id")]
    return _mark(conn, _Rows(conn), keys, created=(), everything=True)
