"""Fill a Signal database with many entries quickly, straight into its own schema.

The schema is not written down here: a real ``signal fetch`` of one small feed creates the
database, and the rows it stored serve as templates. Filler rows copy every column of the
template row except the ones that make an entry distinct (key, source, remote id, link,
title, fingerprints, seq), which are generated inside SQLite from a counter; each also
gets random text-token postings. Keys are SHA-256 hex digests like the real ones, so new
keys land all over the primary-key B-tree, as in real use. Secondary indexes are dropped
for the bulk insert and rebuilt from their own DDL.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

from signal_feeds.identity.matching import POSTED_TOKENS

__all__ = ["FILLER_PREFIX", "fill_entries"]

FILLER_PREFIX = "filler-"


def _hex(salt: str, n: int) -> str:
    return hashlib.sha256(f"{salt}:{n}".encode()).hexdigest()


def _columns(conn: sqlite3.Connection, table: str) -> list[tuple[str, bool]]:
    """(name, is the INTEGER PRIMARY KEY rowid alias) for each column of ``table``."""
    rows = conn.execute(f"PRAGMA table_info({table})").fetchall()
    return [(r[1], bool(r[5]) and str(r[2]).upper() == "INTEGER") for r in rows]


def _insert_select(
    conn: sqlite3.Connection,
    table: str,
    overrides: dict[str, str],
    source: str,
    params: tuple[object, ...],
) -> int:
    """INSERT INTO table SELECT ... where each column is an override or the template's."""
    names, exprs = [], []
    for name, rowid_alias in _columns(conn, table):
        if rowid_alias:
            continue  # let SQLite number the rows
        names.append(f'"{name}"')
        exprs.append(overrides.get(name, f't."{name}"'))
    sql = f"INSERT INTO {table} ({', '.join(names)}) SELECT {', '.join(exprs)} FROM {source}"
    return conn.execute(sql, params).rowcount


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                        (name,)).fetchone() is not None


def fill_entries(database: Path, total: int, *, per_source: int = 1000) -> int:
    """Add filler entries (and sources and versions) until ``entries`` holds ``total`` rows.

    Returns the number of entries added.
    """
    conn = sqlite3.connect(database, isolation_level=None)
    try:
        conn.create_function("bench_hex", 2, _hex, deterministic=True)
        existing = int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])
        need = total - existing
        if need <= 0:
            return 0
        template_entry = conn.execute("SELECT rowid, source_id FROM entries LIMIT 1").fetchone()
        if template_entry is None:
            raise RuntimeError(f"{database} has no entry to use as a template")
        entry_rowid, template_source = template_entry
        has_versions = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'entry_versions'"
        ).fetchone() is not None
        version_rowid = None
        if has_versions:
            row = conn.execute("SELECT rowid FROM entry_versions LIMIT 1").fetchone()
            version_rowid = row[0] if row else None

        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("PRAGMA cache_size = -262144")  # 256 MB for the index rebuilds
        conn.execute("BEGIN IMMEDIATE")
        indexes = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
            "AND tbl_name IN ('entries', 'entry_versions')"
        ).fetchall()
        for name, _sql in indexes:
            conn.execute(f'DROP INDEX "{name}"')

        sources = (need + per_source - 1) // per_source
        seq = (
            "(WITH RECURSIVE seq(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq "
            "WHERE n + 1 < ?) SELECT n FROM seq)"
        )
        _insert_select(
            conn,
            "sources",
            {
                "id": f"printf('{FILLER_PREFIX}%05d', s.n)",
                "url": "printf('http://127.0.0.1:9/filler-%05d.xml', s.n)",
                "fetch_url": "printf('http://127.0.0.1:9/filler-%05d.xml', s.n)",
            },
            f"{seq} AS s, (SELECT * FROM sources WHERE id = ?) AS t",
            (sources, template_source),
        )
        entry_cols = {name for name, _ in _columns(conn, "entries")}
        overrides = {}
        if "seq" in entry_cols:  # schema 4: a unique small number per entry
            first_seq = int(conn.execute("SELECT coalesce(max(seq), 0) + 1 FROM entries"
                                         ).fetchone()[0])
            overrides["seq"] = f"{first_seq} + s.n"
        added = _insert_select(
            conn,
            "entries",
            overrides | {
                "id": "bench_hex('key', s.n)",
                "source_id": f"printf('{FILLER_PREFIX}%05d', s.n / {int(per_source)})",
                "remote_id": "printf('filler-entry-%d', s.n)",
                "url": "printf('https://filler-%05d.example.org/post/%d', "
                f"s.n / {int(per_source)}, s.n)",
                "title": "t.title || printf(' #%d', s.n)",
                "fingerprint": "bench_hex('fp', s.n)",
                "content_fingerprint": "bench_hex('cfp', s.n)",
            },
            f"{seq} AS s, (SELECT * FROM entries WHERE rowid = ?) AS t",
            (need, entry_rowid),
        )
        if "seq" in entry_cols and _has_table(conn, "dedupe_text"):
            # Duplicate detection's postings: as many tokens per entry as Signal posts
            # for a real summary, each a random 63-bit value as shingle hashes are, so
            # that new entries look their tokens up in a table of realistic size.
            conn.execute(
                "INSERT OR IGNORE INTO dedupe_text (token, entry) "
                "SELECT random() & 9223372036854775807, e.seq FROM entries AS e, "
                f"{seq.replace('?', str(POSTED_TOKENS))} AS k "
                f"WHERE e.source_id LIKE '{FILLER_PREFIX}%' "
                "ORDER BY 1, 2")  # sorted first: one pass along the B-tree
        if version_rowid is not None:
            version_overrides = {"entry_id": "e.id", "entry_seq": "e.seq"}
            for name, _alias in _columns(conn, "entry_versions"):
                if name in entry_cols and name != "id" and name not in version_overrides:
                    version_overrides[name] = f'e."{name}"'
            _insert_select(
                conn,
                "entry_versions",
                version_overrides,
                "entries AS e, (SELECT * FROM entry_versions WHERE rowid = ?) AS t "
                f"WHERE e.source_id LIKE '{FILLER_PREFIX}%'",
                (version_rowid,),
            )
        for _name, sql in indexes:
            conn.execute(sql)
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(added)
    finally:
        conn.close()
