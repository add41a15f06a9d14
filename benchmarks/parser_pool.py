#!/usr/bin/env python3
"""Signal's parser pool against ``concurrent.futures.ProcessPoolExecutor``: whole runs.

    python benchmarks/parser_pool.py [--feeds 200] [--entries 100] [--short] [--runs 5]

Issue 16 allows keeping an own pool of parser processes only if a whole run is at least
10 % faster with it. Each run here is a cold ingest of the corpus (fresh database) by
``run_fetch`` in this process, from a local nginx (the teaching server without it), with
one of two pools passed as ``parser=``; the pool is created and closed inside the timed
region, so process start-up counts. The sides alternate run by run; medians compared.

- **own**: :class:`signal_feeds.parse.processes.ParserPool` (``python -m
  signal_feeds.parse._worker_main`` subprocesses, pickled jobs over pipes).
- **executor**: a ``ProcessPoolExecutor`` with as many workers, for each start method
  in ``--methods`` (``forkserver`` and ``fork`` by default), whose initializer sets the
  same limits and the same feedparser tuning, running the same ``parse_job``. ``fork``
  is measured for the record: its workers are forked while the run's threads exist
  (the executor starts them at its first job), which Python 3.12 and later warn about.

This script has a ``__main__`` guard, as an executor needs; see ``benchmarks/README.md``
for why that matters to embedding scripts.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from bench import corpus as corp  # noqa: E402
from bench.servers import NginxServer, TeachingFeedServer  # noqa: E402

from signal_feeds import run_fetch  # noqa: E402
from signal_feeds.config.source_list import Config, Settings, Source  # noqa: E402
from signal_feeds.parse.processes import (  # noqa: E402
    DEFAULT_PARSE_MEMORY,
    ParseJob,
    ParseOutcome,
    ParserPool,
    parse_job,
)


def _start_worker(memory: int) -> None:
    """The executor's initializer: what ``serve`` does before its first job."""
    from signal_feeds.parse import (
        feed,  # noqa: F401  # import before the first job
        processes,
    )
    from signal_feeds.parse._speedups import tune_feedparser, why_not_tuned

    processes._limit_self(memory)
    if not why_not_tuned():
        tune_feedparser()


class ExecutorPool:
    """The parts of ``ParserPool`` a run uses, over a ``ProcessPoolExecutor``."""

    def __init__(self, workers: int, method: str) -> None:
        self.workers = workers
        self._executor = ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context(method),
            initializer=_start_worker, initargs=(DEFAULT_PARSE_MEMORY,))

    async def parse(self, job: ParseJob) -> ParseOutcome:
        loop = asyncio.get_running_loop()
        outcome: ParseOutcome = await loop.run_in_executor(self._executor, parse_job, job)
        return outcome

    def close(self) -> None:
        self._executor.shutdown(wait=True)


def one_run(side: str, config: Config, database: Path) -> tuple[float, int]:
    for leftover in database.parent.glob(database.name + "*"):
        leftover.unlink()
    t0 = time.perf_counter()
    pool: Any = (ParserPool() if side == "own"
                 else ExecutorPool(ParserPool().workers, side.removeprefix("executor-")))
    try:
        report = run_fetch(config, database=database, force=True, parser=pool)
    finally:
        pool.close()
    elapsed = time.perf_counter() - t0
    created = report.totals.get("created", 0)
    return elapsed, created


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--feeds", type=int, default=200)
    p.add_argument("--entries", type=int, default=100)
    p.add_argument("--short", action="store_true", help="~300-byte summaries")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--methods", nargs="+", default=["forkserver", "fork"],
                   choices=["forkserver", "fork", "spawn"],
                   help="the executor's start methods to measure")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="signal-pool-"))
    corpus = corp.Corpus(feeds=args.feeds, entries=args.entries, short=args.short)
    feeds = corp.write_corpus(corpus, work / "feeds")
    nginx = shutil.which("nginx")
    server: Any
    if nginx:
        server = NginxServer(work / "nginx", nginx)
        server.show(work / "feeds")
    else:
        server = TeachingFeedServer(work / "feeds")
    server.start()
    try:
        sources = tuple(Source(id=f.filename.rsplit(".", 1)[0], url=server.url(f.filename))
                        for f in feeds)
        config = Config(settings=Settings(database=work / "unused.db", concurrency=50,
                                          per_host=50, min_interval=0),
                        sources=sources)
        sides = ["own", *(f"executor-{m}" for m in args.methods)]
        times: dict[str, list[float]] = {side: [] for side in sides}
        for run in range(args.runs):
            # The order rotates run by run, so a drift of the machine favours no side.
            for side in sides[run % len(sides):] + sides[:run % len(sides)]:
                elapsed, created = one_run(side, config, work / f"{side}.db")
                if created != corpus.total_entries:
                    print(f"{side}: stored {created} of {corpus.total_entries}",
                          file=sys.stderr)
                    return 1
                times[side].append(elapsed)
                print(f"run {run + 1} {side}: {elapsed:.2f} s", file=sys.stderr, flush=True)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    n = corpus.total_entries
    own = statistics.median(times["own"])
    print(f"| pool | whole run, {args.feeds} × {args.entries}"
          f"{' short' if args.short else ''} (median of {args.runs}) | entries/s | "
          "own pool's gain | runs |")
    print("|---|---|---|---|---|")
    for side in sides:
        median = statistics.median(times[side])
        name = ("own (`ParserPool`)" if side == "own"
                else f"`ProcessPoolExecutor` ({side.removeprefix('executor-')})")
        gain = "—" if side == "own" else f"{median / own - 1:+.1%}"
        print(f"| {name} | {median:.2f} s | {n / median:,.0f} | {gain} | "
              + ", ".join(f"{t:.2f}" for t in times[side]) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
