"""Phrase queries: what a word-pair index would buy, and what it would cost.

    .venv/bin/python benchmarks/search.py --part query --keep-db big.db   # once
    .venv/bin/python benchmarks/search_phrases.py big.db

Not a feature of Signal: a measurement of the option that ``benchmarks/README.md``
("Search") weighs for the phrase target. Three parts, on a database that
``search.py --keep-db`` built:

* **ranking form:** the ranked query as ``search_keys`` runs it (FTS5's ``rank`` column,
  sorted inside FTS5) against ``bm25()`` in a subquery sorted by SQLite, both joined to
  the duplicate filter, over the 400 title phrases of ``search.py`` and three word
  frequencies;
* **word pairs, queries:** a contentless FTS5 table ``bench_pairs`` (created in the
  database on the first run and kept: about 90 s for 1,000,000 entries) whose tokens are
  the adjacent word pairs of each entry's indexed text, joined by U+E000 (a private-use
  character, which FTS5's ``unicode61`` keeps inside a token). A two-word phrase is then
  one token. Each phrase is timed ranked (bm25, best 20) on the index and on the pairs;
* **word pairs, ingest:** 20,000 of the database's indexed rows (summaries repeated to
  about 1.2 KB, as in the cold corpus) inserted 260 per commit, as the writer commits
  them, into an FTS5 table alone and with the pairs table beside it; and the time to
  make the pair text in Python.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import corpus as corp  # noqa: E402
from search import PHRASE_CLASSES, log, p95, title_phrases  # noqa: E402

FTS = "entries_fts"
PAIRS = "bench_pairs"
_TOKENIZE = "tokenize = 'unicode61 remove_diacritics 2'"
_WORD = re.compile(r"[^\W_]+")
_JOIN = "\ue000"
_WEIGHTS = "4.0, 1.0, 1.0"


def pair_text(text: str) -> str:
    """The adjacent word pairs of ``text``, one token each."""
    words = _WORD.findall(text)
    return " ".join(a + _JOIN + b for a, b in pairwise(words))


def pair_phrase(phrase: str) -> str:
    return '"' + pair_text(phrase) + '"'


def build_pairs(conn: sqlite3.Connection) -> None:
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (PAIRS,)).fetchone():
        return
    t0 = time.perf_counter()
    conn.execute(f"CREATE VIRTUAL TABLE {PAIRS} USING fts5(title, summary, content, "
                 f"content = '', {_TOKENIZE})")
    conn.execute("BEGIN")
    last = -1
    while rows := conn.execute(f"SELECT rowid, title, summary, content FROM {FTS} "
                               "WHERE rowid > ? ORDER BY rowid LIMIT 5000",
                               (last,)).fetchall():
        conn.executemany(f"INSERT INTO {PAIRS} (rowid, title, summary, content) "
                         "VALUES (?, ?, ?, ?)",
                         [(r, pair_text(t or ""), pair_text(s or ""), pair_text(c or ""))
                          for r, t, s, c in rows])
        last = rows[-1][0]
    conn.execute(f"INSERT INTO {PAIRS} ({PAIRS}) VALUES ('optimize')")
    conn.execute("COMMIT")
    log(f"built {PAIRS} in {time.perf_counter() - t0:.0f} s")


def _timed(conn: sqlite3.Connection, sql: str, query: str) -> tuple[float, list[float]]:
    t0 = time.perf_counter()
    scores = [round(float(r[1]), 9) for r in conn.execute(sql, (query,))]
    return time.perf_counter() - t0, scores


def _row(label: str, times: Sequence[float]) -> str:
    return (f"| {label} ({len(times)}) | {statistics.median(times) * 1000:.1f} ms | "
            f"{p95(times) * 1000:.1f} ms |")


def ranking_forms(conn: sqlite3.Connection, phrases: Sequence[str]) -> list[str]:
    keep = "entries.duplicate_of = ''"
    forms = {
        "`rank`, sorted by FTS5": (
            f"SELECT {FTS}.rowid, {FTS}.rank FROM {FTS} CROSS JOIN entries "
            f"ON entries.seq = {FTS}.rowid WHERE {FTS} MATCH ? AND {keep} "
            f"ORDER BY {FTS}.rank LIMIT 20"),
        "`bm25()` in a subquery, sorted by SQLite": (
            f"SELECT hits.seq, hits.score FROM (SELECT rowid AS seq, bm25({FTS}, {_WEIGHTS}) "
            f"AS score FROM {FTS} WHERE {FTS} MATCH ? ORDER BY score) AS hits "
            f"CROSS JOIN entries ON entries.seq = hits.seq WHERE {keep} "
            "ORDER BY hits.score LIMIT 20"),
    }
    sets = {"400 title phrases": list(phrases),
            "one word, ranks 3,000–3,019": list(corp._WORDS[3000:3020]),
            "one word, ranks 300–319": list(corp._WORDS[300:320]),
            "one word, ranks 30–39": list(corp._WORDS[30:40])}
    rows = []
    for name, queries in sets.items():
        times: dict[str, list[float]] = {label: [] for label in forms}
        for q in queries:
            results = []
            for label, sql in forms.items():
                spent, scores = _timed(conn, sql, q)
                times[label].append(spent)
                results.append(scores)
            if results[0] != results[1]:
                raise AssertionError(f"the two forms rank {q!r} differently")
        for label, spent_all in times.items():
            rows.append(_row(f"{name}: {label}", spent_all))
            log(rows[-1])
    return rows


def ranked(table: str) -> str:
    """The best 20 matches by bm25, sorted by SQLite (no join, no filter)."""
    return (f"SELECT rowid, bm25({table}, {_WEIGHTS}) AS score FROM {table} "
            f"WHERE {table} MATCH ? ORDER BY score LIMIT 20")


def pair_queries(conn: sqlite3.Connection, drawn: Sequence[tuple[str, int]]) -> list[str]:
    words: list[tuple[float, int]] = []
    pairs: list[tuple[float, int]] = []
    for phrase, matches in drawn:
        for _ in range(2):  # the second run of each is kept: both sides warm
            spent_words, by_words = _timed(conn, ranked(FTS), phrase)
            spent_pairs, by_pairs = _timed(conn, ranked(PAIRS), pair_phrase(phrase))
        if matches <= 20 and len(by_words) != len(by_pairs):
            raise AssertionError(f"{phrase}: {len(by_words)} hits by words, "
                                 f"{len(by_pairs)} by pairs")
        words.append((spent_words, matches))
        pairs.append((spent_pairs, matches))
    rows = []
    for label, low, high in (("all 400", 0, 10**12), *PHRASE_CLASSES):
        for side, found in (("words (today)", words), ("word pairs", pairs)):
            times = [t for t, n in found if low <= n < high]
            if times:
                rows.append(_row(f"phrases matching {label}: {side}", times))
                log(rows[-1])
    return rows


def pair_ingest(conn: sqlite3.Connection, runs: int) -> list[str]:
    rows = conn.execute(f"SELECT rowid, title, summary, content FROM {FTS} "
                        "WHERE rowid > 500000 ORDER BY rowid LIMIT 20000").fetchall()
    data = [(r, t, ((s or "") + " ") * 4, c) for r, t, s, c in rows]
    t0 = time.perf_counter()
    pair_rows = [(r, pair_text(t or ""), pair_text(s), pair_text(c or ""))
                 for r, t, s, c in data]
    made = time.perf_counter() - t0
    spent: dict[bool, list[float]] = {False: [], True: []}
    size: dict[bool, int] = {}
    for _ in range(runs):
        for with_pairs in (False, True):
            with tempfile.TemporaryDirectory() as tmp:
                db = Path(tmp) / "ingest.db"
                took, size[with_pairs] = _insert(db, data, pair_rows if with_pairs else None)
                spent[with_pairs].append(took)
    out = [f"| making the pair text, {len(data):,} entries | {made:.2f} s | "
           f"{made / len(data) * 1e6:.0f} µs per entry |"]
    for with_pairs, label in ((False, "index alone"), (True, "index and pairs")):
        out.append(f"| inserts and commits, {label} (median of {runs}) | "
                   f"{statistics.median(spent[with_pairs]):.2f} s | "
                   f"file {size[with_pairs] / 1e6:.1f} MB |")
    for row in out:
        log(row)
    return out


def _insert(db: Path, data: Sequence[tuple[int, str, str, str]],
            pair_rows: Sequence[tuple[int, str, str, str]] | None) -> tuple[float, int]:
    """Seconds the inserts and commits took, and the file's size after them."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(title, summary, content, {_TOKENIZE})")
        conn.execute(f"CREATE VIRTUAL TABLE p USING fts5(title, summary, content, "
                     f"content = '', {_TOKENIZE})")
        t0 = time.perf_counter()
        for start in range(0, len(data), 260):
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO t (rowid, title, summary, content) "
                             "VALUES (?, ?, ?, ?)", data[start:start + 260])
            if pair_rows is not None:
                conn.executemany("INSERT INTO p (rowid, title, summary, content) "
                                 "VALUES (?, ?, ?, ?)", pair_rows[start:start + 260])
            conn.execute("COMMIT")
        took = time.perf_counter() - t0
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return took, db.stat().st_size
    finally:
        conn.close()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("db", type=Path, help="a database built by search.py --keep-db")
    p.add_argument("--runs", type=int, default=3, help="ingest runs per side")
    args = p.parse_args(argv)
    conn = sqlite3.connect(args.db, isolation_level=None)
    try:
        build_pairs(conn)
        drawn = title_phrases(conn, 400)
        rows = ["| measure (queries) | median | p95 |", "|---|---|---|"]
        rows += ranking_forms(conn, [q for q, _ in drawn])
        rows += pair_queries(conn, drawn)
        rows += ["", "| measure (ingest) | time | note |", "|---|---|---|"]
        rows += pair_ingest(conn, args.runs)
    finally:
        conn.close()
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
