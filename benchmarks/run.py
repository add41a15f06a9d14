#!/usr/bin/env python3
"""Signal vs reader, side by side, in one command.

    python benchmarks/run.py [--quick] [--scenarios cold warm304 ...] [--runs N]
    python benchmarks/run.py --smoke      # a few seconds: Signal only, checks counts

Both sides run as whole subprocesses against the same local server (nginx when installed,
else the project's teaching server); every run's counts are checked; the table reports
medians of ``--runs`` runs and is also written to ``benchmarks/out/last.md``.

Exit status: 0 when every target is met, 1 when a target is missed, 2 when a run was
broken (wrong counts, errors), so its figure means nothing.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import importlib.util
import os
import platform
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from bench import corpus as corp  # noqa: E402
from bench.common import Bench, Row, Settings, log  # noqa: E402
from bench.scenarios import SCENARIOS, TITLES  # noqa: E402
from bench.servers import FeedServer, TeachingFeedServer, make_server  # noqa: E402
from bench.sides import (  # noqa: E402
    SAMPLING,
    CheckFailed,
    expect_signal,
    run_measured,
    run_signal,
    signal_command,
    write_signal_config,
)

OUT_DIR = BENCH_DIR / "out"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="benchmarks/run.py", description="Benchmark Signal against reader, side by side."
    )
    p.add_argument("--quick", action="store_true",
                   help="small sizes for a fast look (20 feeds × 20 entries, 100 slow "
                        "sources, 100,000 stored entries)")
    p.add_argument("--smoke", action="store_true",
                   help="3 feeds × 3 entries, Signal only, teaching server: cold + warm pass; "
                        "exit non-zero if the counts are wrong")
    p.add_argument("--scenarios", nargs="+", choices=list(SCENARIOS), default=list(SCENARIOS),
                   metavar="NAME", help=f"which scenarios to run (default: all of "
                                        f"{', '.join(SCENARIOS)})")
    p.add_argument("--runs", type=int, default=3, help="runs per side; medians are reported")
    p.add_argument("--feeds", type=int, help="feeds in the corpus (default 200, quick 20)")
    p.add_argument("--entries", type=int, help="entries per feed (default 100, quick 20)")
    p.add_argument("--latency-sources", type=int,
                   help="sources in the latency scenario (default 500, quick 100)")
    p.add_argument("--latency-delay", type=float, default=0.5, help="seconds per answer")
    p.add_argument("--latency-entries", type=int, default=5,
                   help="entries per slow feed (short items: the time should be the network's)")
    p.add_argument("--no-reader-latency", action="store_true",
                   help="skip reader in the latency scenario")
    p.add_argument("--concurrency", type=int, default=50,
                   help="Signal's concurrency (and per_host); reader's workers in scenario 5")
    p.add_argument("--scale-entries", type=int,
                   help="entries stored before the scale run (default 1,000,000, quick 100,000)")
    p.add_argument("--mem-interval", type=float, default=10.0, metavar="MS",
                   help="how often the memory of a run's process tree is sampled, in ms "
                        "(default 10; PSS every 20 samples)")
    p.add_argument("--server", choices=("auto", "nginx", "teaching"), default="auto")
    p.add_argument("--seed", type=int, default=20261202)
    p.add_argument("--keep", action="store_true", help="keep the temporary workspace")
    p.add_argument("--out", type=Path, default=OUT_DIR / "last.md",
                   help="where to write the Markdown table")
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be at least 1")
    if args.mem_interval <= 0:
        p.error("--mem-interval must be positive")
    return args


def settings_from(args: argparse.Namespace) -> Settings:
    quick = args.quick
    return Settings(
        feeds=args.feeds or (20 if quick else 200),
        entries=args.entries or (20 if quick else 100),
        runs=args.runs,
        latency_sources=args.latency_sources or (100 if quick else 500),
        latency_delay=args.latency_delay,
        latency_entries=args.latency_entries,
        concurrency=args.concurrency,
        scale_entries=args.scale_entries or (100_000 if quick else 1_000_000),
        reader_latency=not args.no_reader_latency,
    )


# -- environment description ----------------------------------------------------------


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def version_of(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def httpx_cli_note() -> list[str]:
    """A line when httpx's command-line packages are installed: ``import httpx`` then
    imports its command line (click, pygments and rich) at every start-up, which users
    of a plain install do not pay. The test extras bring rich (through import-linter)."""
    if not all(importlib.util.find_spec(name) for name in ("click", "pygments", "rich")):
        return []
    return ["- **note:** click, pygments and rich are installed here, so every Signal "
            "command also imports httpx's command line (about 40–60 ms more per command, "
            "an eighth of an all-304 run); measure in a venv without the test extras "
            "(\"Run it\")"]


def environment(server: str, s: Settings) -> list[str]:
    return [
        f"- date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- machine: {os.cpu_count()} CPUs ({cpu_model()}), {platform.system()} "
        f"{platform.release()}",
        f"- Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}; "
        f"signal-feeds {version_of('signal-feeds')}, reader {version_of('reader')}",
        f"- server: {server}",
        f"- corpus: {s.feeds} feeds × {s.entries} entries (half RSS 2.0, half Atom), "
        f"medians of {s.runs} runs; every figure is a whole subprocess (start-up counts)",
        *httpx_cli_note(),
    ]


def markdown(rows: Sequence[Row], env: Sequence[str]) -> str:
    lines = [*env, "", "| Scenario | Signal | reader | Ratio | Target | Result |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.scenario} | {r.signal} | {r.reader} | {r.ratio} | {r.target} | "
                     f"{r.result} |")
    notes = [f"- {r.scenario.split(':')[0].strip()}: {note}" for r in rows for note in r.notes]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines) + "\n"


# -- servers --------------------------------------------------------------------------


def warm_up() -> None:
    """Import both libraries once (untimed) so bytecode caches exist for every timed run."""
    run_measured([*signal_command(), "--version"])
    run_measured([sys.executable, "-c", "import reader"])


# -- smoke ----------------------------------------------------------------------------


def smoke() -> int:
    """Signal only, teaching server, 3 feeds × 3 entries: a cold run then an all-304 run."""
    started = time.perf_counter()
    corpus = corp.Corpus(3, 3)
    with tempfile.TemporaryDirectory(prefix="signal-bench-smoke-") as tmp:
        work = Path(tmp)
        base = work / "corpus" / "base"
        corp.write_corpus(corpus, base)
        server = TeachingFeedServer(base)
        server.start()
        try:
            sources = [(slug, server.url(f"{slug}.xml")) for slug in corpus.slugs()]
            config = write_signal_config(work / "signal.toml", work / "signal.db", sources)
            cold = run_signal(config)
            expect_signal(cold, sources=3, created=9, updated=0,
                          statuses={"fetched": 3}, http={200: 3})
            warm = run_signal(config)
            expect_signal(warm, sources=3, created=0, updated=0,
                          statuses={"not_modified": 3}, http={304: 3})
        except CheckFailed as exc:
            print(f"smoke: FAILED: {exc}", file=sys.stderr)
            return 1
        finally:
            server.stop()
    print(f"smoke: ok (cold {cold.measured.seconds:.2f} s, 9 created, peak memory "
          f"{cold.measured.rss_mb:.0f} MB; warm "
          f"{warm.measured.seconds:.2f} s, 3 × 304; {time.perf_counter() - started:.1f} s "
          f"in all)")
    return 0


# -- main -----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    SAMPLING["interval"] = args.mem_interval / 1000.0
    if args.smoke:
        return smoke()
    s = settings_from(args)
    work = Path(tempfile.mkdtemp(prefix="signal-bench-"))
    server: FeedServer | None = None
    rows: list[Row] = []
    try:
        corpus = corp.Corpus(s.feeds, s.entries, seed=args.seed)
        base, changed = work / "corpus" / "base", work / "corpus" / "changed"
        log(f"generating {s.feeds} × {s.entries} feeds in {work}")
        corp.write_corpus(corpus, base)
        corp.write_changed_corpus(corpus, base, changed)
        server = make_server(args.server, work, base)
        server.start()
        log(f"server: {server.description}")
        warm_up()
        env = environment(server.description, s)
        bench = Bench(s, work, server, corpus, base, changed)
        for name in args.scenarios:
            try:
                rows += SCENARIOS[name](bench)
            except CheckFailed as exc:  # preparation failed
                log(f"BROKEN: {exc}")
                rows.append(Row(TITLES[name], "broken", "", "—", "", "broken",
                                [str(exc).splitlines()[0]]))
            print(f"{rows[-1].scenario}: {rows[-1].result}", file=sys.stderr)
    finally:
        if server is not None:
            server.stop()
        if args.keep:
            log(f"workspace kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    table = markdown(rows, env)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table, encoding="utf-8")
    log(f"table written to {args.out}")
    results = {r.result for r in rows}
    if "broken" in results:
        return 2
    return 1 if "FAIL" in results else 0


if __name__ == "__main__":
    raise SystemExit(main())
