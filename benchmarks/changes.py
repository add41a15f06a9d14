#!/usr/bin/env python3
"""The change feed: how fast a page of changes reads from a large database, and what
logging changes costs the write path.

    python benchmarks/changes.py read  [--entries 1000000] [--page 1000] [--reads 50]
    python benchmarks/changes.py write [--feeds 200] [--entries 100] [--runs 5]

``read`` builds a database of ``--entries`` entries (a real ``Store.apply_response`` of
one corpus feed as the template, then :func:`bench.prepopulate.fill_entries`), fills its
change log the way fetch runs would have (below), and times ``Store.changes`` pages of
``--page`` from the start, the middle and the end of the log: median and p95 of
``--reads`` reads each, in one process, after one untimed read per position.

``write`` times ``Store.apply_response`` over a corpus of ``--feeds`` × ``--entries``
parsed entries (match keys computed beforehand, as the parser processes do in a fetch)
into an empty database, committed in batches as the writer does, with the change log
written (as shipped) and with its one write call replaced by a no-op, interleaved run by
run; medians. It also reports the time spent inside that call.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from bench import corpus as corp  # noqa: E402
from bench.prepopulate import FILLER_PREFIX, fill_entries  # noqa: E402

from signal_feeds import FetchRecord, SourceState, Store  # noqa: E402
from signal_feeds.identity.keys import EntryRow, identify  # noqa: E402
from signal_feeds.identity.matching import MatchKeys, match_keys  # noqa: E402
from signal_feeds.parse.feed import parse_feed  # noqa: E402
from signal_feeds.run.writer import DEFAULT_MAX_BATCH  # noqa: E402
from signal_feeds.store.sqlite import writing  # noqa: E402

NOW = dt.datetime(2026, 12, 3, 12, 0, tzinfo=dt.UTC)
#: Entries one response adds in the simulated history, and the share of entries edited.
RESPONSE_ENTRIES = 20
UPDATE_EVERY = 20  # one entry in 20 gets a second version later


def corpus_rows(corpus: corp.Corpus) -> list[tuple[str, list[EntryRow]]]:
    """Each corpus feed, parsed and identified: (source id, rows)."""
    out = []
    for i in range(corpus.feeds):
        feed = corp.build_feed(corpus, i)
        sid = feed.slug
        parsed = parse_feed(corp.render(feed), source_id=sid, url=f"{feed.home}/feed.xml")
        out.append((sid, list(identify(sid, parsed.entries).rows)))
    return out


def apply(store: Store, sid: str, rows: Sequence[EntryRow],
          keys: Mapping[str, MatchKeys] | None = None) -> None:
    url = f"http://127.0.0.1:9/{sid}.xml"
    store.apply_response(SourceState(source_id=sid, url=url, status="fetched"), rows,
                         FetchRecord(source_id=sid, started_at=NOW, url=url,
                                     outcome="fetched"), NOW, match_keys=keys)


def fill_changes(db: Path) -> int:
    """Log the filler entries as fetch runs would have: responses of
    :data:`RESPONSE_ENTRIES` entries of one source, sources taking turns, and one entry
    in :data:`UPDATE_EVERY` edited a while later (an ``updated`` change of its own)."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA cache_size = -262144")
        conn.execute("BEGIN IMMEDIATE")
        first = int(conn.execute(
            "SELECT min(seq) FROM entries WHERE source_id LIKE ?",
            (f"{FILLER_PREFIX}%",)).fetchone()[0])
        # n: the entry's number in its source; turn: the response it arrived in.
        conn.execute(f"""
            INSERT INTO changes (version_id, source_id, kind, previous_fingerprint,
                                 duplicate_of, changed_at)
            SELECT version_id, source_id, kind, previous, '', changed_at FROM (
              SELECT v.id AS version_id, e.source_id, 'created' AS kind, '' AS previous,
                     e.first_seen_at AS changed_at,
                     ((e.seq - {first}) % 1000) / {RESPONSE_ENTRIES} AS turn, e.seq AS n
              FROM entries AS e JOIN entry_versions AS v ON v.entry_seq = e.seq
              WHERE e.source_id LIKE '{FILLER_PREFIX}%'
              UNION ALL
              SELECT v.id, e.source_id, 'updated', e.fingerprint, e.first_seen_at,
                     ((e.seq - {first}) % 1000) / {RESPONSE_ENTRIES} + 5, e.seq
              FROM entries AS e JOIN entry_versions AS v ON v.entry_seq = e.seq
              WHERE e.source_id LIKE '{FILLER_PREFIX}%' AND e.seq % {UPDATE_EVERY} = 0
            ) ORDER BY turn, source_id, n""")
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(conn.execute("SELECT count(*) FROM changes").fetchone()[0])
    finally:
        conn.close()


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def timed(call: Callable[[], Any], reads: int) -> list[float]:
    call()  # untimed: the first read of a position loads its pages
    out = []
    for _ in range(reads):
        t0 = time.perf_counter()
        call()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def read_bench(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="signal-changes-"))
    db = work / "big.db"
    print(f"workspace {work}", file=sys.stderr)
    (sid, rows), = corpus_rows(corp.Corpus(1, 50, seed=6))
    with Store(db) as store:
        apply(store, sid, rows)  # the template rows, and the schema, as Signal writes them
    t0 = time.perf_counter()
    added = fill_entries(db, args.entries)
    print(f"filled {added:,} entries in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    t0 = time.perf_counter()
    logged = fill_changes(db)
    print(f"logged {logged:,} changes in {time.perf_counter() - t0:.0f} s "
          f"({db.stat().st_size / 1e6:,.0f} MB)", file=sys.stderr)
    with Store(db) as store:
        head = store.changes(limit=1)[0].cursor.rsplit(".", 1)[0]
        positions = {"start": None, "middle": f"{head}.{logged // 2}",
                     "end": f"{head}.{logged - args.page}"}
        print(f"\n`Store.changes(limit={args.page})` over {args.entries:,} entries, "
              f"{logged:,} changes; {args.reads} reads per position, ms\n")
        print("| position | median | p95 | max |\n|---|---|---|---|")
        for name, cursor in positions.items():
            def page(cursor: str | None = cursor) -> None:
                got = store.changes(after=cursor, limit=args.page)
                assert len(got) == args.page, len(got)
            ms = timed(page, args.reads)
            print(f"| {name} | {statistics.median(ms):.1f} | {percentile(ms, 0.95):.1f} | "
                  f"{max(ms):.1f} |")
        source = f"{FILLER_PREFIX}00500"
        ms = timed(lambda: store.changes(after=positions["middle"], limit=args.page,
                                         source_id=source), args.reads)
        print(f"| middle, `source_id={source}` | {statistics.median(ms):.1f} | "
              f"{percentile(ms, 0.95):.1f} | {max(ms):.1f} |")
    if not args.keep:
        for f in work.iterdir():
            f.unlink()
        work.rmdir()


def write_bench(args: argparse.Namespace) -> None:
    feeds = corpus_rows(corp.Corpus(args.feeds, args.entries))
    total = sum(len(rows) for _, rows in feeds)
    # As in a fetch run, where the parser processes compute the match keys.
    keys = {r.key: match_keys(r.url, r.title, r.summary) for _, rows in feeds for r in rows}
    shipped = writing.log_changes
    inside: list[float] = []  # seconds spent in the change log's write call, per run

    def measured(*a: Any, **kw: Any) -> None:
        t0 = time.perf_counter()
        shipped(*a, **kw)
        inside[-1] += time.perf_counter() - t0

    series: dict[str, list[float]] = {"with the change log": [], "without (no-op)": []}
    for run in range(args.runs):
        for label in series if run % 2 == 0 else reversed(list(series)):
            # Our own function, swapped in this benchmark process only.
            if label == "with the change log":
                inside.append(0.0)
                writing.log_changes = measured
            else:
                writing.log_changes = lambda *_, **__: None
            with tempfile.TemporaryDirectory() as work, Store(Path(work) / "w.db") as store:
                t0 = time.perf_counter()
                for start in range(0, len(feeds), DEFAULT_MAX_BATCH):  # as the writer does
                    with store.batch():
                        for sid, rows in feeds[start:start + DEFAULT_MAX_BATCH]:
                            apply(store, sid, rows, keys)
                series[label].append(time.perf_counter() - t0)
    writing.log_changes = shipped
    print(f"\n`apply_response` of {args.feeds} responses × {args.entries} entries "
          f"({total:,} created) into an empty database, {DEFAULT_MAX_BATCH} responses per "
          f"commit; median of {args.runs}\n")
    print("| write path | median s | entries/s |\n|---|---|---|")
    for label, seconds in series.items():
        median = statistics.median(seconds)
        print(f"| {label} | {median:.3f} | {total / median:,.0f} |")
    with_log, without = (statistics.median(s) for s in series.values())
    print(f"\nwhole runs: {100 * (with_log / without - 1):+.1f} % "
          f"({1e6 * (with_log - without) / total:.1f} µs per change)")
    spent = statistics.median(inside)
    print(f"inside the change log's write call: {spent:.3f} s per run, "
          f"{1e6 * spent / total:.1f} µs per change, {100 * spent / with_log:.1f} % "
          "of the write path")


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="benchmarks/changes.py", description=__doc__.split(
        "\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("read", help="page reads from a large change log")
    r.add_argument("--entries", type=int, default=1_000_000)
    r.add_argument("--page", type=int, default=1000)
    r.add_argument("--reads", type=int, default=50)
    r.add_argument("--keep", action="store_true", help="keep the database")
    w = sub.add_parser("write", help="the change log's cost in the write path")
    w.add_argument("--feeds", type=int, default=200)
    w.add_argument("--entries", type=int, default=100)
    w.add_argument("--runs", type=int, default=5)
    args = p.parse_args(argv)
    (read_bench if args.what == "read" else write_bench)(args)


if __name__ == "__main__":
    main()
