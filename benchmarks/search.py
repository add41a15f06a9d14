"""Full-text search: what the index costs a cold ingest, its size, and query times.

    .venv/bin/python benchmarks/search.py                 # everything (a few minutes)
    .venv/bin/python benchmarks/search.py --part ingest   # only the ingest comparison
    .venv/bin/python benchmarks/search.py --part query --entries 1000000 --keep-db big.db

Ingest: the 200 x 100 corpus is fetched from a local server (nginx when installed)
into an empty database by ``run_fetch`` in this process, alternately with the index
written as Signal writes it and with the index writes switched off (a switch of this
script only: the write path's ``IndexChange.apply`` is replaced by a no-op here; the
user's process never is). Each side runs ``--runs`` times, the order within each pair
alternating; medians and the median of the pairs' ratios are compared, and so is the
CPU each whole run used, a figure the machine's noise blurs less. (The HTML is stripped
for the index in the parser processes, off the writer's thread; that part is in both
sides' figures.)

Query: a database of ``--entries`` entries is filled (``bench.prepopulate``), each
filler row given its own title and ~300-byte summary drawn from the corpus's Zipf
vocabulary, then indexed with ``Store.rebuild_search_index()`` (timed). One-word
queries at several word frequencies, two-word phrases taken from stored titles (a seeded
draw of 400, timed once each and, grouped by how many entries a phrase matches,
``--repeat`` times), and a one-word query restricted to one source are each run
``--repeat`` times through
``search_entries`` (what ``signal search`` calls: query check, bm25 ranking, duplicate
filter, snippets, collapsed duplicates); median and p95 per kind.
"""

from __future__ import annotations

import argparse
import random
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import corpus as corp  # noqa: E402
from bench.prepopulate import FILLER_PREFIX, fill_entries  # noqa: E402
from bench.servers import TeachingFeedServer, make_server  # noqa: E402

from signal_feeds import run_fetch  # noqa: E402
from signal_feeds.config.source_list import Config, Settings, Source  # noqa: E402
from signal_feeds.store import Store  # noqa: E402
from signal_feeds.store.reading import search_entries  # noqa: E402
from signal_feeds.store.sqlite import search as fts  # noqa: E402


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


# -- ingest ---------------------------------------------------------------------------


@contextmanager
def index_writes(enabled: bool, spent: list[float]) -> Iterator[None]:
    """Time the write path's index change (applied once per batch, before the commit),
    or (``enabled=False``) skip it."""
    real = fts.IndexChange.apply

    def timed(change: fts.IndexChange, conn: sqlite3.Connection) -> None:
        t0 = time.perf_counter()
        real(change, conn)
        spent.append(time.perf_counter() - t0)

    def skipped(change: fts.IndexChange, conn: sqlite3.Connection) -> None:
        return None

    fts.IndexChange.apply = timed if enabled else skipped  # type: ignore[method-assign]
    try:
        yield
    finally:
        fts.IndexChange.apply = real  # type: ignore[method-assign]


def fts_bytes(db: Path) -> int:
    """Bytes of the full-text index's tables (``dbstat``)."""
    with closing(sqlite3.connect(db)) as conn, conn:
        return int(conn.execute("SELECT coalesce(sum(pgsize), 0) FROM dbstat "
                                "WHERE name LIKE 'entries_fts%'").fetchone()[0])


def _cpu_seconds() -> float:
    """CPU used so far by this process (all threads) and its reaped children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def ingest(work: Path, feeds: int, entries: int, runs: int) -> list[str]:
    corpus = corp.Corpus(feeds, entries)
    folder = work / "corpus"
    corp.write_corpus(corpus, folder)
    # nginx, as run.py uses it: a server in this process would take the interpreter
    # from the run it serves.
    server = make_server("auto", work, folder)
    log(f"server: {server.description}")
    server.start()
    times: dict[bool, list[float]] = {True: [], False: []}
    cpu: dict[bool, list[float]] = {True: [], False: []}
    spent: list[float] = []
    sizes: dict[bool, tuple[int, int]] = {}
    try:
        sources = tuple(Source(id=slug, url=server.url(f"{slug}.xml"))
                        for slug in corpus.slugs())
        for run in range(runs):
            # Alternate which side goes first, so a drift of the machine's speed
            # does not always favour the same side.
            for enabled in ((True, False) if run % 2 == 0 else (False, True)):
                db = work / f"ingest-{run}-{int(enabled)}.db"
                config = Config(sources=sources, settings=Settings(database=db,
                                                                   min_interval=0.0))
                before = len(spent)
                with index_writes(enabled, spent):
                    c0, t0 = _cpu_seconds(), time.perf_counter()
                    report = run_fetch(config, force=True)
                    took, used = time.perf_counter() - t0, _cpu_seconds() - c0
                created = sum(s.created for s in report.sources)
                if created != corpus.total_entries:
                    raise RuntimeError(f"run created {created}, not {corpus.total_entries}")
                times[enabled].append(took)
                cpu[enabled].append(used)
                log(f"ingest run {run + 1} index={'on' if enabled else 'off'}: {took:.2f} s, "
                    f"{used:.2f} s of CPU"
                    + (f" ({sum(spent[before:]):.2f} s in index inserts)" if enabled else ""))
                sizes[enabled] = (db.stat().st_size, fts_bytes(db))
                for path in db.parent.glob(db.name + "*"):
                    path.unlink()
    finally:
        server.stop()
    on, off = statistics.median(times[True]), statistics.median(times[False])
    paired = statistics.median(a / b for a, b in zip(times[True], times[False], strict=True))
    cpu_on, cpu_off = statistics.median(cpu[True]), statistics.median(cpu[False])
    total = corpus.total_entries
    index_per_run = sum(spent) / runs
    return [
        f"| cold ingest {feeds}×{entries} ({total:,} entries), index written | "
        f"{on:.2f} s | {total / on:,.0f} entries/s; runs "
        + " / ".join(f"{t:.2f}" for t in times[True]) + " s |",
        f"| the same, index writes switched off | {off:.2f} s | {total / off:,.0f} entries/s; "
        "runs " + " / ".join(f"{t:.2f}" for t in times[False]) + " s |",
        f"| index cost: median with / without | {on / off:.3f} × | "
        f"{(on / off - 1) * 100:+.1f} % (target ≤ +15 %) |",
        f"| index cost: median of the {runs} back-to-back pairs | {paired:.3f} × | "
        f"{(paired - 1) * 100:+.1f} % |",
        f"| CPU of the whole run (all processes), median with / without | "
        f"{cpu_on:.1f} s / {cpu_off:.1f} s | {cpu_on - cpu_off:+.1f} s, "
        f"{(cpu_on - cpu_off) / total * 1e6:.0f} µs per entry |",
        f"| time in the FTS5 inserts per run (writer thread; the commit's segment "
        f"writes not included) | {index_per_run:.2f} s | "
        f"{index_per_run / total * 1e6:.0f} µs per entry |",
        f"| database file / of which the index, {total:,} entries | "
        f"{sizes[True][0] / 1e6:.1f} MB / {sizes[True][1] / 1e6:.1f} MB | "
        f"without: {sizes[False][0] / 1e6:.1f} MB |",
    ]


# -- queries --------------------------------------------------------------------------


def build_big(db: Path, total: int, work: Path) -> list[str]:
    """A database of ``total`` entries with varied text, indexed; the rebuild's rows."""
    seed_dir = work / "seed"
    seed_dir.mkdir(parents=True, exist_ok=True)
    (seed_dir / "seed.xml").write_bytes(corp.tiny_feed("seed", 1))
    server = TeachingFeedServer(seed_dir)
    server.start()
    try:
        config = Config(sources=(Source(id="seed", url=server.url("seed.xml")),),
                        settings=Settings(database=db, min_interval=0.0))
        if not run_fetch(config, force=True).ok:
            raise RuntimeError("the seed fetch failed")
    finally:
        server.stop()
    t0 = time.perf_counter()
    added = fill_entries(db, total)
    log(f"filled {added:,} entries in {time.perf_counter() - t0:.0f} s")
    t0 = time.perf_counter()
    rng = random.Random(20261203)
    with closing(sqlite3.connect(db, isolation_level=None)) as conn, conn:
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute("BEGIN")
        seqs = [r[0] for r in conn.execute(
            f"SELECT seq FROM entries WHERE source_id LIKE '{FILLER_PREFIX}%' ORDER BY seq")]
        for start in range(0, len(seqs), 10_000):
            conn.executemany(
                "UPDATE entries SET title = ?, summary = ? WHERE seq = ?",
                [(corp._sentence(rng, 30, 80), corp._short_summary(rng, "https://x.example"),
                  seq) for seq in seqs[start:start + 10_000]])
        conn.execute("COMMIT")
    log(f"wrote varied text into {len(seqs):,} rows in {time.perf_counter() - t0:.0f} s")
    with Store(db) as store:
        t0 = time.perf_counter()
        indexed = store.rebuild_search_index()
        rebuild = time.perf_counter() - t0
    log(f"rebuilt the index of {indexed:,} entries in {rebuild:.0f} s")
    return [f"| `signal search --rebuild`, {indexed:,} entries | {rebuild:.0f} s | "
            f"{indexed / rebuild:,.0f} entries/s |"]


#: Phrase classes by how many entries a phrase matches: (label, at least, below).
PHRASE_CLASSES = (
    ("under 1,000", 0, 1_000),
    ("1,000–9,999", 1_000, 10_000),
    ("10,000–49,999", 10_000, 50_000),
    ("50,000 or more", 50_000, 10**12),
)
PHRASE_DRAW = 400  # title phrases drawn
PER_CLASS = 20


def title_phrases(conn: sqlite3.Connection, count: int, seed: int = 20261205
                  ) -> list[tuple[str, int]]:
    """``count`` two-word phrases, each two adjacent words of a stored title picked at
    random (seeded: the same draw every time on the same database), with the number of
    entries each matches."""
    rng = random.Random(seed)
    top = int(conn.execute("SELECT max(seq) FROM entries").fetchone()[0])
    drawn: list[tuple[str, int]] = []
    while len(drawn) < count:
        row = conn.execute("SELECT title FROM entries WHERE seq = ?",
                           (rng.randrange(1, top + 1),)).fetchone()
        words = (row[0] or "").lower().split() if row else []
        if len(words) < 2:
            continue
        i = rng.randrange(len(words) - 1)
        phrase = f'"{words[i]} {words[i + 1]}"'
        drawn.append((phrase, _count(conn, phrase)))
    return drawn


def _count(conn: sqlite3.Connection, query: str) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {fts.FTS_TABLE} "
                            f"WHERE {fts.FTS_TABLE} MATCH ?", (query,)).fetchone()[0])


def queries(db: Path, repeat: int) -> list[str]:
    rows: list[str] = []
    with Store(db) as store:
        total = store.count("entries")
        rows.append(f"| database file / of which the index, {total:,} entries | "
                    f"{db.stat().st_size / 1e6:,.0f} MB / {fts_bytes(db) / 1e6:,.0f} MB | |")
        with closing(sqlite3.connect(db)) as conn, conn:
            drawn = title_phrases(conn, PHRASE_DRAW)
            source = conn.execute("SELECT source_id FROM entries ORDER BY random() LIMIT 1"
                                  ).fetchone()[0]
        shares = ", ".join(f"{label}: {sum(low <= n < high for _, n in drawn)}"
                           for label, low, high in PHRASE_CLASSES)
        log(f"{len(drawn)} title phrases by entries matched: {shares}")
        rows.append(f"| {len(drawn)} phrases drawn from stored titles, by entries matched | "
                    f"{shares} | |")
        words = corp._WORDS
        kinds: dict[str, tuple[list[str], int]] = {
            "one word, vocabulary ranks 3,000–3,019": (list(words[3000:3020]), repeat),
            "one word, vocabulary ranks 300–319": (list(words[300:320]), repeat),
            "one word, vocabulary ranks 30–39": (list(words[30:40]), repeat),
            "one word, vocabulary ranks 0–4 (the commonest words: worst case)":
                (list(words[0:5]), repeat),
            # The whole draw, once each: the mix a user typing title phrases meets.
            f"two-word phrase from a stored title, all {len(drawn)} drawn":
                ([q for q, _ in drawn], 1),
        }
        for label, low, high in PHRASE_CLASSES:
            kinds[f"two-word title phrase matching {label}"] = (
                [q for q, n in drawn if low <= n < high][:PER_CLASS], repeat)
        kinds["one word, ranks 300–319, `--source` one source"] = (
            list(words[300:320]), repeat)
        for label, (qs, times) in kinds.items():
            if qs:
                source_id = source if "--source" in label else None
                rows.append(_time(store, db, label, qs, times, source_id))
    return rows


def _matching(db: Path, qs: Sequence[str]) -> float:
    """Median number of entries each query matches (before filters and limit)."""
    with closing(sqlite3.connect(db)) as conn, conn:
        return statistics.median(_count(conn, q) for q in qs)


def _time(store: Store, db: Path, label: str, qs: Sequence[str], repeat: int,
          source: str | None) -> str:
    times: list[float] = []
    hits = 0
    for _ in range(repeat):
        for q in qs:
            t0 = time.perf_counter()
            found = search_entries(store, q, source_id=source)
            times.append(time.perf_counter() - t0)
            hits += bool(found)
    med, high = statistics.median(times) * 1000, p95(times) * 1000
    matching = _matching(db, qs)
    log(f"{label}: median {med:.1f} ms, p95 {high:.1f} ms ({hits}/{len(times)} with hits; "
        f"median {matching:,.0f} matching entries)")
    return (f"| query: {label}, median {matching:,.0f} entries match "
            f"({len(qs)} queries × {repeat}) | median {med:.1f} ms | p95 {high:.1f} ms |")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--part", choices=("all", "ingest", "query"), default="all")
    p.add_argument("--feeds", type=int, default=200)
    p.add_argument("--per-feed", type=int, default=100)
    p.add_argument("--runs", type=int, default=3, help="ingest runs per side")
    p.add_argument("--entries", type=int, default=1_000_000, help="entries for the queries")
    p.add_argument("--repeat", type=int, default=5, help="times each query runs")
    p.add_argument("--keep-db", type=Path, default=None,
                   help="build the large database here once and reuse it")
    args = p.parse_args(argv)
    rows = ["| measure | value | note |", "|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="signal-search-bench-") as tmp:
        work = Path(tmp)
        if args.part in ("all", "ingest"):
            rows += ingest(work, args.feeds, args.per_feed, args.runs)
        if args.part in ("all", "query"):
            db = args.keep_db or work / "big.db"
            if not db.exists():
                rows += build_big(db, args.entries, work)
            rows += queries(db, args.repeat)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
