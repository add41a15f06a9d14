#!/usr/bin/env python3
"""Two ``signal fetch`` workers against one: cold ingest of the corpus into one database.

    python benchmarks/workers.py [--feeds 200] [--entries 100] [--runs 3]
                                 [--backends postgresql sqlite] [--requests 50000]

Each run builds a fresh database and starts one worker, or two at the same moment, on
the same config (``signal fetch --json`` subprocesses, timed from the first spawn to the
last exit, start-up included); the alternatives run interleaved, run by run, in one
process, against one local HTTP server that logs every request. The figures are medians.
A run counts only if the workers stored every entry once and the server saw every feed
requested exactly once (the duplicate-request count is printed; anything but 0 marks
the run broken).

PostgreSQL is a throwaway cluster (tests/postgres_cluster.py: fsync and
synchronous_commit off, on /dev/shm when it has room), on the same machine as the
workers and the HTTP server. At the end it prints what one stored entry and one fetch
cost in the database (``pg_total_relation_size`` over the tables and their indexes),
the figures the README's capacity sketch starts from.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent / "tests"))

from bench import corpus as corp  # noqa: E402

#: Tables (with their indexes and TOAST) that grow with entries, and with fetches.
ENTRY_TABLES = ("entries", "entry_versions", "changes", "dedupe_text")
FETCH_TABLES = ("fetches",)


@dataclass
class Log:
    """Requests per path, and the most in flight at once."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    paths: collections.Counter[str] = field(default_factory=collections.Counter)
    in_flight: int = 0
    peak: int = 0


class _Handler(SimpleHTTPRequestHandler):
    log_record: Log

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        with self.log_record.lock:
            self.log_record.paths[self.path] += 1
            self.log_record.in_flight += 1
            self.log_record.peak = max(self.log_record.peak, self.log_record.in_flight)
        try:
            super().do_GET()
        finally:
            with self.log_record.lock:
                self.log_record.in_flight -= 1

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


class LoggingServer:
    """Serves a folder on 127.0.0.1 and counts every request."""

    def __init__(self, folder: Path) -> None:
        self.log = Log()
        handler = type("Handler", (_Handler,), {"log_record": self.log})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0),
                                         partial(handler, directory=str(folder)))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def reset(self) -> None:
        with self.log.lock:
            self.log.paths.clear()
            self.log.peak = self.log.in_flight

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def write_config(folder: Path, server: LoggingServer, feeds: list[corp.Feed]) -> Path:
    lines = ["[settings]", "min_interval = 3600", "per_host = 20"]
    for feed in feeds:
        lines += ["", "[[sources]]", f'id = "{feed.slug}"',
                  f'url = "{server.url("/" + feed.filename)}"']
    path = folder / "signal.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_workers(config: Path, database: str, workers: int) -> tuple[float, list[dict[str, Any]]]:
    """Start ``workers`` fetch processes at once; seconds until the last exits, reports."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": ""}
    env.pop("PYTHONDONTWRITEBYTECODE")
    t0 = time.perf_counter()
    procs = [subprocess.Popen(
        [sys.executable, "-m", "signal_feeds", "fetch", "--config", str(config), "--db",
         database, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env) for _ in range(workers)]
    outputs = [p.communicate() for p in procs]
    elapsed = time.perf_counter() - t0
    reports = []
    for proc, (out, err) in zip(procs, outputs, strict=True):
        if proc.returncode != 0:
            raise RuntimeError(f"worker exited {proc.returncode}: {err.strip()[-500:]}")
        reports.append(json.loads(out))
    return elapsed, reports


@dataclass
class Series:
    label: str
    times: list[float] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    duplicates: list[int] = field(default_factory=list)
    shares: list[list[int]] = field(default_factory=list)


def check(series: Series, server: LoggingServer, reports: list[dict[str, Any]],
          corpus: corp.Corpus) -> None:
    """Every feed requested once, every entry created once, by some worker."""
    requested = server.log.paths
    duplicates = sum(n - 1 for n in requested.values() if n > 1)
    series.duplicates.append(duplicates)
    created = sum(int(r["totals"]["created"]) for r in reports)
    fetched = [sum(1 for s in r["sources"] if s["status"] == "fetched") for r in reports]
    series.shares.append(fetched)
    problems = []
    if duplicates:
        problems.append(f"{duplicates} duplicate requests")
    if len(requested) != corpus.feeds:
        problems.append(f"{len(requested)} of {corpus.feeds} feeds requested")
    if created != corpus.total_entries:
        problems.append(f"{created} of {corpus.total_entries} entries created")
    if problems:
        series.broken.append("; ".join(problems))


def pg_sizes(url: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(url) as conn:
        sizes = {t: int(conn.execute("SELECT pg_total_relation_size(%s)", (t,)).fetchone()[0])
                 for t in (*ENTRY_TABLES, *FETCH_TABLES, "sources")}
        sizes["database"] = int(conn.execute(
            "SELECT pg_database_size(current_database())").fetchone()[0])
        for table in ("entries", "fetches"):
            sizes[f"{table}_rows"] = int(conn.execute(
                f"SELECT count(*) FROM {table}").fetchone()[0])
    return sizes


def request_costs(url: str, count: int) -> str:
    """What a 304 costs the database: ``count`` sources' state and fetch row written
    through ``save_attempt`` in batches of the writer's size, in this process; the time
    per request and the bytes per fetch row and per source row."""
    import datetime as dt

    from signal_feeds.records import FetchRecord, SourceState
    from signal_feeds.run.writer import DEFAULT_MAX_BATCH
    from signal_feeds.store import open_store

    now = dt.datetime.now(dt.UTC)
    states = [SourceState(source_id=f"src-{n:07d}", url=f"https://host{n % 997}.example/f/{n}",
                          etag=f'"{n:x}-5f2a9c"', last_modified="Thu, 03 Dec 2026 10:00:00 GMT",
                          body_digest="0" * 64, status="not_modified", http_status=304,
                          last_fetch_at=now, last_success_at=now,
                          next_due_at=now + dt.timedelta(hours=1)) for n in range(count)]
    with open_store(url) as store:
        t0 = time.perf_counter()
        for start in range(0, count, DEFAULT_MAX_BATCH):
            with store.batch():
                for state in states[start:start + DEFAULT_MAX_BATCH]:
                    store.save_attempt(state, FetchRecord(
                        source_id=state.source_id, started_at=now, url=state.url,
                        outcome="not_modified", http_status=304, duration_ms=12.5,
                        bytes=0))
        elapsed = time.perf_counter() - t0
    sizes = pg_sizes(url)
    per_fetch = sizes["fetches"] / sizes["fetches_rows"]
    per_source = sizes["sources"] / count
    return (f"PostgreSQL, {count:,} 304s written as the writer does (save_attempt, batches "
            f"of {DEFAULT_MAX_BATCH}): {elapsed / count * 1e6:,.0f} µs per request in the "
            f"database client; {per_fetch:,.0f} bytes per fetch row, {per_source:,.0f} bytes "
            f"per source row (tables with their indexes)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--feeds", type=int, default=200)
    parser.add_argument("--entries", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backends", nargs="+", default=["postgresql", "sqlite"],
                        choices=["postgresql", "sqlite"])
    parser.add_argument("--requests", type=int, default=50_000,
                        help="304s written for the per-request cost (PostgreSQL)")
    args = parser.parse_args()
    corpus = corp.Corpus(args.feeds, args.entries)
    with tempfile.TemporaryDirectory(prefix="signal-workers-") as tmp:
        folder = Path(tmp)
        feeds = corp.write_corpus(corpus, folder / "feeds")
        server = LoggingServer(folder / "feeds")
        config = write_config(folder, server, feeds)
        cluster = None
        if "postgresql" in args.backends:
            from postgres_cluster import PostgresCluster

            cluster = PostgresCluster().start()
        try:
            series = {(b, n): Series(f"{b}, {n} worker{'s' if n > 1 else ''}")
                      for b in args.backends for n in (1, 2)}
            sizes: dict[str, int] = {}
            run_workers(config, str(folder / "warm-up.db"), 1)  # bytecode caches
            for run in range(args.runs):
                for (backend, workers), s in series.items():
                    if backend == "postgresql":
                        assert cluster is not None
                        name = cluster.create_database(cluster.new_database_name(
                            f"w{workers}r{run}"))
                        database = cluster.url(name)
                    else:
                        database = str(folder / f"w{workers}r{run}.db")
                    server.reset()
                    elapsed, reports = run_workers(config, database, workers)
                    s.times.append(elapsed)
                    check(s, server, reports, corpus)
                    print(f"run {run + 1}: {s.label}: {elapsed:.2f} s, "
                          f"fetched per worker {s.shares[-1]}, "
                          f"duplicate requests {s.duplicates[-1]}", file=sys.stderr)
                    if backend == "postgresql" and workers == 1 and not sizes:
                        sizes = pg_sizes(database)
            costs = ""
            if cluster is not None and args.requests:
                costs = request_costs(cluster.url(cluster.create_database(
                    cluster.new_database_name("requests"))), args.requests)
        finally:
            server.stop()
            if cluster is not None:
                cluster.stop()
    print(f"\nCold ingest, {corpus.feeds} feeds x {corpus.entries} entries "
          f"({corpus.total_entries} entries), medians of {args.runs} runs\n")
    print("| Workers | Time | Entries/s | vs 1 worker | Sources fetched per worker | "
          "Duplicate requests |")
    print("|---|---|---|---|---|---|")
    for (backend, _workers), s in series.items():
        t = statistics.median(s.times)
        base = statistics.median(series[(backend, 1)].times)
        shares = " / ".join(str(statistics.median(x)) for x in zip(*s.shares, strict=True))
        verdict = f" (broken: {s.broken[0]})" if s.broken else ""
        print(f"| {s.label} | {t:.2f} s | {corpus.total_entries / t:,.0f} | "
              f"{base / t:.2f}x | {shares} | {sum(s.duplicates)}{verdict} |")
    if sizes:
        per_entry = sum(sizes[t] for t in ENTRY_TABLES) / sizes["entries_rows"]
        per_fetch = sum(sizes[t] for t in FETCH_TABLES) / sizes["fetches_rows"]
        print(f"\nPostgreSQL, after one cold ingest: database {sizes['database'] / 2**20:.1f} "
              f"MiB; entries + versions + change log + text tokens {per_entry:,.0f} bytes "
              f"per entry ({', '.join(f'{t} {sizes[t] / 2**20:.1f} MiB' for t in ENTRY_TABLES)}"
              f"); fetches {per_fetch:,.0f} bytes per fetch row")
    if costs:
        print(costs)
    return 1 if any(s.broken for s in series.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
