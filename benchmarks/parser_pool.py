#!/usr/bin/env python3
"""Signal's parser pool against a bare ``concurrent.futures.ProcessPoolExecutor``.

    python benchmarks/parser_pool.py [--feeds 200] [--entries 100] [--short] [--runs 5]

Each run here is a cold ingest of the corpus (fresh database) by ``run_fetch`` in this
process, from a local nginx (the teaching server without it), with one of the pools
passed as ``parser=``; the pool is created and closed inside the timed region, so
process start-up counts. The sides rotate run by run; medians compared.

- **pool**: :class:`signal_feeds.parse.processes.ParserPool` as shipped: a
  ``ProcessPoolExecutor`` with forked workers, plus what it adds (a time limit armed
  per document, the workers' process ids and stderr, a broken executor replaced).
- **executor**: a bare ``ProcessPoolExecutor`` with as many workers, for each start
  method in ``--methods`` (``forkserver`` by default), whose initializer sets the same
  limits and the same feedparser tuning, running the same ``parse_job``: what the
  pool's additions cost, and what forking gives.

Until 2026-12-05 the pool was Signal's own (``python -m`` subprocesses, pickled jobs
over pipes); issue 16 allowed keeping it only with a whole-run gain of 10 %, and this
script measured none (see ``benchmarks/README.md``). This script has a ``__main__``
guard, as ``forkserver`` needs.
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
    default_workers,
    parse_job,
)


def _start_worker(memory: int) -> None:
    """The executor's initializer: what ``serve`` does before its first job."""
    from signal_feeds.parse import (
        feed,  # noqa: F401  # import before the first job
        processes,
    )
    from signal_feeds.parse._speedups import tune_feedparser, why_not_tuned

    processes.limit_self(memory)   # the same limits as the pool's
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
    pool: Any = (ParserPool() if side == "pool"
                 else ExecutorPool(default_workers(), side.removeprefix("executor-")))
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
    p.add_argument("--methods", nargs="+", default=["forkserver"],
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
        sides = ["pool", *(f"executor-{m}" for m in args.methods)]
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
    own = statistics.median(times["pool"])
    print(f"| pool | whole run, {args.feeds} × {args.entries}"
          f"{' short' if args.short else ''} (median of {args.runs}) | entries/s | "
          "time against `ParserPool` | runs |")
    print("|---|---|---|---|---|")
    for side in sides:
        median = statistics.median(times[side])
        name = ("`ParserPool`" if side == "pool"
                else f"`ProcessPoolExecutor` ({side.removeprefix('executor-')})")
        gain = "—" if side == "pool" else f"{median / own - 1:+.1%}"
        print(f"| {name} | {median:.2f} s | {n / median:,.0f} | {gain} | "
              + ", ".join(f"{t:.2f}" for t in times[side]) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
