"""The side-by-side scenarios (the smoke pass is in ``run.py``).

Each scenario measures whole subprocess runs (see :mod:`bench.sides`), checks every run's
counts so that a broken run cannot look fast, and returns rows for the results table.
"""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from . import corpus as corp
from .common import (
    READER_WORKERS,
    Bench,
    Row,
    Series,
    attempt_reader,
    attempt_signal,
    best_reader,
    copy_db,
    error_notes,
    fmt_ms,
    fmt_rate,
    log,
    rdr_label,
    verdict,
)
from .prepopulate import fill_entries
from .servers import DelayServer
from .sides import (
    CheckFailed,
    ReaderRun,
    SignalRun,
    expect_reader,
    expect_signal,
    memory_method,
    run_signal,
    write_signal_config,
)

__all__ = ["SCENARIOS", "TITLES"]


# -- 1. cold ingest, 1b. the same with short entries ----------------------------------


def _feed_bytes(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.glob("*.xml"))


def _cold(b: Bench, name: str, show: Path, corpus: corp.Corpus) -> list[Row]:
    """Cold ingest of the corpus the server shows from ``show`` into empty databases."""
    target = "Signal ≥ 3 × reader"
    total, n = corpus.total_entries, corpus.feeds
    assert corpus.slugs() == b.corpus.slugs()  # the URLs Bench hands out
    sig = Series()
    rdr = {w: Series() for w in READER_WORKERS}

    def check_signal(r: SignalRun) -> None:
        expect_signal(r, sources=n, created=total, updated=0,
                      statuses={"fetched": n}, http={200: n})

    def check_reader(r: ReaderRun) -> None:
        expect_reader(r, feeds=n, new=total, stored=total)

    b.server.show(show)
    try:
        for i in range(b.s.runs):
            log(f"{name}: run {i + 1}/{b.s.runs}")
            d = b.fresh_dir("cold-short" if corpus.short else "cold")
            attempt_signal(sig, b.signal_config(d, d / "signal.db"), check_signal)
            urls = b.urls_file(d)
            for w, series in rdr.items():
                attempt_reader(series, d / f"reader-w{w}.sqlite", urls, workers=w,
                               all_feeds=False, check=check_reader)
    finally:
        b.server.show(b.base)
    best = best_reader(rdr)
    notes = error_notes(sig, list(rdr.values()))
    sig_text = fmt_rate(total / sig.median_s) if sig.ok else "broken"
    sig_rss = f"{sig.median_rss:.0f} MB" if sig.ok else "broken"
    rdr_text = rdr_rss = "broken"
    ratio_text, result = "—", "broken"
    size = f"{total:,} entries in {n} feeds, {_feed_bytes(show) / 1e6:.1f} MB of feed documents"
    if best is not None:
        workers, rs = best
        rdr_text = fmt_rate(total / rs.median_s) + rdr_label(workers)
        rdr_rss = f"{rs.median_rss:.0f} MB" + rdr_label(workers)
        others = ", ".join(f"workers={w}: {fmt_rate(total / s.median_s)}"
                           for w, s in rdr.items() if s.ok and w != workers)
        notes.append(f"{size}; reader {rs.median_s:.2f} s"
                     + (f" ({others})" if others else ""))
        if sig.ok:
            ratio = rs.median_s / sig.median_s
            ratio_text, result = f"{ratio:.2f} ×", verdict(ratio >= 3.0)
    else:
        notes.append(size)
    if sig.ok:
        notes.append(f"Signal {sig.median_s:.2f} s")
    mem_notes = [memory_method()]
    if sig.ok:
        mem_notes.append(f"Signal: {sig.memory_info()}")
    if best is not None:
        mem_notes.append(f"reader{rdr_label(best[0])}: {best[1].memory_info()}")
    return [
        Row(name, sig_text, rdr_text, ratio_text, target, result, notes),
        Row("   peak memory (PSS) of that run", sig_rss, rdr_rss, "—", "(info)", "n/a", mem_notes),
    ]


def cold(b: Bench) -> list[Row]:
    return _cold(b, TITLES["cold"], b.base, b.corpus)


def cold_short(b: Bench) -> list[Row]:
    """Scenario 1 with short entries: a one-line title and a summary of about 300 bytes."""
    corpus = corp.Corpus(b.corpus.feeds, b.corpus.entries, seed=b.corpus.seed, short=True)
    directory = b.base.parent / "short"
    if not directory.exists():
        log(f"generating {corpus.feeds} × {corpus.entries} short-entry feeds")
        corp.write_corpus(corpus, directory)
    return _cold(b, TITLES["cold-short"], directory, corpus)


# -- 2, 3, 4: warm runs ---------------------------------------------------------------


def _warm(b: Bench, name: str, target: str, min_speedup: float | None, *, validators: bool,
          show: Path, per_run_copy: bool,
          check_signal: Callable[[SignalRun], None],
          check_reader: Callable[[ReaderRun], None]) -> list[Row]:
    n = b.corpus.feeds
    sig = Series()
    rdr = {w: Series() for w in READER_WORKERS}
    sig_src: Path | None = None
    rdr_src: Path | None = None
    try:
        sig_src = b.warm_signal_db(validators=validators)
    except CheckFailed as exc:
        sig.error = str(exc)
    try:
        rdr_src = b.warm_reader_db(validators=validators)
    except CheckFailed as exc:
        for series in rdr.values():
            series.error = str(exc)
    shared = b.fresh_dir("warm")

    def install(d: Path) -> None:
        if sig_src is not None:
            copy_db(sig_src, d / "signal.db")
        if rdr_src is not None:
            for w in READER_WORKERS:
                copy_db(rdr_src, d / f"reader-w{w}.sqlite")

    install(shared)
    try:
        for i in range(b.s.runs):
            log(f"{name}: run {i + 1}/{b.s.runs}")
            d = b.fresh_dir("warm-run") if per_run_copy else shared
            if per_run_copy:
                install(d)
            b.server.show(show)
            cfg = b.signal_config(d, d / "signal.db", validators=validators)
            attempt_signal(sig, cfg, check_signal)
            urls = b.urls_file(d, validators=validators)
            for w, series in rdr.items():
                attempt_reader(series, d / f"reader-w{w}.sqlite", urls, workers=w,
                               all_feeds=True, check=check_reader)
    finally:
        b.server.show(b.base)
    best = best_reader(rdr)
    notes = error_notes(sig, list(rdr.values()))
    sig_text = fmt_ms(sig.median_s * 1000 / n) if sig.ok else "broken"
    rdr_text, ratio_text, result = "broken", "—", "broken"
    if best is not None:
        workers, rs = best
        rdr_text = fmt_ms(rs.median_s * 1000 / n) + rdr_label(workers)
        others = ", ".join(f"workers={w}: {fmt_ms(s.median_s * 1000 / n)}"
                           for w, s in rdr.items() if s.ok and w != workers)
        notes.append(f"whole run for {n} sources: reader {rs.median_s:.2f} s"
                     + (f" ({others})" if others else ""))
        if sig.ok:
            speedup = rs.median_s / sig.median_s
            ratio_text = f"{speedup:.2f} × faster"
            result = "n/a" if min_speedup is None else verdict(speedup >= min_speedup)
    if sig.ok:
        notes.append(f"whole run for {n} sources: Signal {sig.median_s:.2f} s")
    return [Row(name, sig_text, rdr_text, ratio_text, target, result, notes)]


def warm304(b: Bench) -> list[Row]:
    n = b.corpus.feeds
    return _warm(
        b, "2. warm, every source answers 304", "Signal ≥ 2 × faster", 2.0,
        validators=True, show=b.base, per_run_copy=False,
        check_signal=lambda r: expect_signal(r, sources=n, created=0, updated=0,
                                             statuses={"not_modified": n}, http={304: n}),
        check_reader=lambda r: expect_reader(r, feeds=n, new=0, modified=0, not_modified=n),
    )


def warm200(b: Bench) -> list[Row]:
    n = b.corpus.feeds

    def check_signal(run: SignalRun) -> None:
        expect_signal(run, sources=n, created=0, updated=0, http={200: n})
        failing = set(run.statuses()) - {"fetched", "not_modified", "unchanged"}
        if failing:
            raise CheckFailed(f"Signal statuses {run.statuses()}")

    return _warm(
        b, "3. warm, 200 with identical bodies, no validators", "Signal ≥ 10 × faster", 10.0,
        validators=False, show=b.base, per_run_copy=False,
        check_signal=check_signal,
        check_reader=lambda r: expect_reader(r, feeds=n, new=0, modified=0),
    )


def changed(b: Bench) -> list[Row]:
    n = b.corpus.feeds
    k = len(b.corpus.changed_indices)
    created, updated = k * corp.ADDED_ENTRIES, k * min(corp.EDITED_TITLES, b.corpus.entries)
    return _warm(
        b, f"4. one feed in ten changed ({k} of {n})", "(no target in the issue)", None,
        validators=True, show=b.changed, per_run_copy=True,
        check_signal=lambda r: expect_signal(r, sources=n, created=created, updated=updated,
                                             http={200: k, 304: n - k} if k < n else {200: k}),
        check_reader=lambda r: expect_reader(r, feeds=n, new=created, modified=updated,
                                             not_modified=n - k),
    )


# -- 5. latency-bound -----------------------------------------------------------------


def latency(b: Bench) -> list[Row]:
    s = b.s
    name = (f"5. latency-bound: {s.latency_sources} sources × {s.latency_delay * 1000:.0f} ms, "
            f"concurrency {s.concurrency}")
    target = "Signal ≤ 1.3 × ideal"
    n = s.latency_sources
    total = n * s.latency_entries
    bodies = {f"/slow/{corp.feed_slug(i)}.xml": corp.tiny_feed(corp.feed_slug(i),
                                                                 s.latency_entries)
              for i in range(n)}
    server = DelayServer(bodies, s.latency_delay)
    server.start()
    srcs = [(corp.feed_slug(i), server.url(f"/slow/{corp.feed_slug(i)}.xml"))
            for i in range(n)]
    ideal = math.ceil(n / s.concurrency) * s.latency_delay
    sig, rdr = Series(), Series()

    def check_signal(r: SignalRun) -> None:
        expect_signal(r, sources=n, created=total, statuses={"fetched": n}, http={200: n})

    def check_reader(r: ReaderRun) -> None:
        expect_reader(r, feeds=n, new=total, stored=total)

    try:
        for i in range(s.runs):
            log(f"{name}: run {i + 1}/{s.runs}")
            d = b.fresh_dir("latency")
            cfg = write_signal_config(d / "signal.toml", d / "signal.db", srcs,
                                      concurrency=s.concurrency)
            attempt_signal(sig, cfg, check_signal)
            if s.reader_latency:
                urls = d / "urls.txt"
                urls.write_text("".join(url + "\n" for _sid, url in srcs))
                attempt_reader(rdr, d / "reader.sqlite", urls, workers=s.concurrency,
                               all_feeds=False, check=check_reader)
        floor = server.floor(list(bodies), s.concurrency)
    finally:
        server.stop()
    notes = error_notes(sig, [rdr] if s.reader_latency else [])
    notes.append(f"server: {server.description}; ideal = ceil({n} / {s.concurrency}) × "
                 f"{s.latency_delay:g} s = {ideal:g} s; a bare asyncio client (no HTTP "
                 f"library, no parsing, no process start) needs {floor:.2f} s here")
    reader_text = "(skipped)"
    if s.reader_latency:
        reader_text = (f"{rdr.median_s:.2f} s{rdr_label(s.concurrency)} = "
                       f"{rdr.median_s / ideal:.2f} × ideal" if rdr.ok else "broken")
    if not sig.ok:
        return [Row(name, "broken", reader_text, "—", target, "broken", notes)]
    ratio = sig.median_s / ideal
    return [Row(name, f"{sig.median_s:.2f} s", reader_text, f"{ratio:.2f} × ideal",
                target, verdict(ratio <= 1.3), notes)]


# -- 6. scale -------------------------------------------------------------------------


def scale(b: Bench) -> list[Row]:
    s = b.s
    big = s.scale_entries
    name_tp = f"6a. scale: upsert throughput with {big:,} entries stored vs empty"
    name_rss = f"6b. scale: peak memory (PSS) with {big:,} entries stored vs empty"
    total, n = b.corpus.total_entries, b.corpus.feeds
    b.server.show(b.base)

    prep = b.fresh_dir("scale-prep")
    seed_file = b.base.parent / "scale-seed" / "scale-seed.xml"
    seed_feed = corp.build_feed(corp.Corpus(1, 50, seed=b.corpus.seed + 6), 0)
    seed_file.parent.mkdir(parents=True, exist_ok=True)
    seed_file.write_bytes(corp.render(seed_feed))
    shutil.copyfile(seed_file, b.base / "scale-seed.xml")
    big_db = prep / "big.db"
    try:
        log(f"{name_tp}: creating the schema with one real signal fetch")
        cfg = write_signal_config(prep / "signal.toml", big_db,
                                  [("scale-seed", b.server.url("scale-seed.xml"))])
        expect_signal(run_signal(cfg), sources=1, created=50)
    finally:
        (b.base / "scale-seed.xml").unlink(missing_ok=True)
    started = time.perf_counter()
    added = fill_entries(big_db, big)
    log(f"{name_tp}: added {added:,} filler entries in {time.perf_counter() - started:.1f} s "
        f"({big_db.stat().st_size / 1e6:,.0f} MB)")

    empty, full = Series(), Series()

    def check(r: SignalRun) -> None:
        expect_signal(r, sources=n, created=total, statuses={"fetched": n}, http={200: n})

    for i in range(s.runs):
        log(f"{name_tp}: run {i + 1}/{s.runs}")
        d = b.fresh_dir("scale-empty")
        attempt_signal(empty, b.signal_config(d, d / "signal.db"), check)
        d = b.fresh_dir("scale-full")
        copy_db(big_db, d / "signal.db")
        attempt_signal(full, b.signal_config(d, d / "signal.db"), check)
        shutil.rmtree(d)  # a copy of the big database is large
    if empty.error or full.error:
        notes = [f"{label}: {series.error.splitlines()[0]}"
                 for label, series in (("empty db", empty), ("full db", full)) if series.error]
        return [Row(name_tp, "broken", "—", "—", "≥ 75 %", "broken", notes)]
    rate_empty, rate_full = total / empty.median_s, total / full.median_s
    tp_ratio = rate_full / rate_empty
    rss_empty, rss_full = empty.median_rss, full.median_rss
    peak = max(max(empty.rss_mb), max(full.rss_mb))
    rss_ok = abs(rss_full - rss_empty) <= 20.0 and peak < 150.0
    return [
        Row(name_tp, f"{fmt_rate(rate_full)} vs {fmt_rate(rate_empty)}", "—",
            f"{tp_ratio * 100:.0f} %", "≥ 75 %", verdict(tp_ratio >= 0.75),
            [f"cold ingest of {total:,} fresh entries; full {full.median_s:.2f} s, "
             f"empty {empty.median_s:.2f} s"]),
        Row(name_rss, f"{rss_full:.0f} MB vs {rss_empty:.0f} MB", "—",
            f"{rss_full - rss_empty:+.0f} MB (max {peak:.0f} MB)",
            "within 20 MB, < 150 MB", verdict(rss_ok),
            [memory_method() + ", parser workers included",
             f"full db: {full.memory_info()}", f"empty db: {empty.memory_info()}"]),
    ]


SCENARIOS: dict[str, Callable[[Bench], list[Row]]] = {
    "cold": cold,
    "cold-short": cold_short,
    "warm304": warm304,
    "warm200": warm200,
    "changed": changed,
    "latency": latency,
    "scale": scale,
}

TITLES: dict[str, str] = {
    "cold": "1. cold ingest (empty db, all new)",
    "cold-short": "1b. cold ingest, short entries (~300-byte summaries, empty db)",
    "warm304": "2. warm, every source answers 304",
    "warm200": "3. warm, 200 with identical bodies, no validators",
    "changed": "4. one feed in ten changed",
    "latency": "5. latency-bound",
    "scale": "6. scale",
}
