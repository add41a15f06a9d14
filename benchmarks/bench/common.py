"""What the scenarios share: settings, table rows, the workspace, measured series.

Each scenario (:mod:`bench.scenarios`) measures whole subprocess runs (see
:mod:`bench.sides`) through the helpers here, which check every run's counts so that a
broken run cannot look fast.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import corpus as corp
from .memory import TreeMemory
from .servers import FeedServer
from .sides import (
    CheckFailed,
    Measured,
    ReaderRun,
    SignalRun,
    expect_reader,
    expect_signal,
    run_reader,
    run_signal,
    write_signal_config,
)

__all__ = [
    "READER_WORKERS",
    "Bench",
    "Row",
    "Series",
    "Settings",
    "attempt_reader",
    "attempt_signal",
    "best_reader",
    "copy_db",
    "error_notes",
    "fmt_ms",
    "fmt_rate",
    "log",
    "median",
    "rdr_label",
    "verdict",
]

READER_WORKERS = (1, 4)


@dataclass(frozen=True)
class Settings:
    feeds: int
    entries: int
    runs: int
    latency_sources: int
    latency_delay: float
    latency_entries: int
    concurrency: int
    scale_entries: int
    reader_latency: bool


@dataclass
class Row:
    scenario: str
    signal: str
    reader: str
    ratio: str
    target: str
    result: str  # "pass", "FAIL", "n/a" or "broken"
    notes: list[str] = field(default_factory=list)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def verdict(ok: bool) -> str:
    return "pass" if ok else "FAIL"


def copy_db(src: Path, dst: Path) -> None:
    """Copy an SQLite database with its WAL files, if any."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        source = Path(str(src) + suffix)
        target = Path(str(dst) + suffix)
        target.unlink(missing_ok=True)
        if source.exists():
            shutil.copyfile(source, target)


class Bench:
    """Shared state: the workspace, the corpus, the server and cached warm databases."""

    def __init__(self, settings: Settings, work: Path, server: FeedServer,
                 corpus: corp.Corpus, base: Path, changed: Path) -> None:
        self.s = settings
        self.work = work
        self.server = server
        self.corpus = corpus
        self.base = base
        self.changed = changed
        self._warm: dict[tuple[str, bool], Path | CheckFailed] = {}
        self._counter = 0

    # -- helpers -------------------------------------------------------------------------

    def fresh_dir(self, label: str) -> Path:
        self._counter += 1
        path = self.work / "runs" / f"{self._counter:03d}-{label}"
        path.mkdir(parents=True)
        return path

    def sources(self, *, validators: bool = True) -> list[tuple[str, str]]:
        return [(slug, self.server.url(f"{slug}.xml", validators=validators))
                for slug in self.corpus.slugs()]

    def signal_config(self, directory: Path, db: Path, *, validators: bool = True) -> Path:
        return write_signal_config(directory / "signal.toml", db,
                                   self.sources(validators=validators),
                                   concurrency=self.s.concurrency)

    def urls_file(self, directory: Path, *, validators: bool = True) -> Path:
        path = directory / "urls.txt"
        path.write_text("".join(url + "\n" for _slug, url in self.sources(validators=validators)))
        return path

    def warm_signal_db(self, *, validators: bool) -> Path:
        """A Signal database holding the whole base corpus (made once, then copied)."""
        key = ("signal", validators)
        if key not in self._warm:
            self._warm[key] = self._prepare(key, validators)
        return self._warm_result(key)

    def warm_reader_db(self, *, validators: bool) -> Path:
        """A reader database holding the whole base corpus (made once, then copied)."""
        key = ("reader", validators)
        if key not in self._warm:
            self._warm[key] = self._prepare(key, validators)
        return self._warm_result(key)

    def _warm_result(self, key: tuple[str, bool]) -> Path:
        result = self._warm[key]
        if isinstance(result, CheckFailed):
            raise result
        return result

    def _prepare(self, key: tuple[str, bool], validators: bool) -> Path | CheckFailed:
        side = key[0]
        self.server.show(self.base)
        directory = self.fresh_dir(f"prep-{side}-{'v' if validators else 'nv'}")
        total, n = self.corpus.total_entries, self.corpus.feeds
        log(f"preparing a warm {side} database (validators={validators})")
        try:
            if side == "signal":
                db = directory / "signal.db"
                config = self.signal_config(directory, db, validators=validators)
                expect_signal(run_signal(config), sources=n, created=total)
            else:
                db = directory / "reader.sqlite"
                urls = self.urls_file(directory, validators=validators)
                expect_reader(run_reader(db, urls, workers=4, all_feeds=True),
                              feeds=n, new=total, stored=total)
        except CheckFailed as exc:
            log(f"BROKEN: {exc}")
            return CheckFailed(f"preparing the warm database: {exc}")
        return db


# -- measurement loops ----------------------------------------------------------------


@dataclass
class Series:
    """The runs of one side in one scenario."""

    seconds: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    memory: list[TreeMemory] = field(default_factory=list)
    error: str | None = None

    def add(self, measured: Measured) -> None:
        self.seconds.append(measured.seconds)
        self.rss_mb.append(measured.rss_mb)
        if measured.memory is not None:
            self.memory.append(measured.memory)

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.seconds)

    @property
    def median_s(self) -> float:
        return median(self.seconds)

    @property
    def median_rss(self) -> float:
        return median(self.rss_mb)

    def memory_info(self) -> str:
        """The other memory figures of these runs (medians), for the notes."""
        if not self.memory:
            return "no /proc: ru_maxrss only"
        m = self.memory

        def med(attr: str) -> float:
            return median([getattr(x, attr) for x in m])

        return (f"sampled PSS sum {med('pss_peak'):.0f} MB (every {m[0].pss_every} "
                f"samples), largest own peak (VmHWM) {med('hwm_max'):.0f} MB; RSS sum "
                f"{med('rss_peak'):.0f} MB (pages shared with forked workers counted per "
                f"process); own peaks summed {med('hwm_sum'):.0f} MB (the old figure); "
                f"{_processes(max(x.processes for x in m))}, "
                f"{med('missed'):.1f} MB of own peaks above their largest sample; "
                f"{med('samples'):.0f} samples, one per "
                f"{median([x.span_s * 1000 / max(x.samples, 1) for x in m]):.0f} ms, sampler "
                f"{med('sampler_cpu_s'):.2f} s CPU")


def _processes(n: int) -> str:
    return f"{n} process" if n == 1 else f"{n} processes"


def _attempt(series: Series, run: Callable[[], Measured]) -> None:
    if series.error is not None:
        return  # one broken run makes the whole series meaningless
    try:
        measured = run()
    except CheckFailed as exc:
        series.error = str(exc)
        log(f"BROKEN: {exc}")
        return
    series.add(measured)


def attempt_signal(series: Series, config: Path, check: Callable[[SignalRun], None]) -> None:
    """One ``signal fetch --force`` run, checked, added to ``series``."""

    def run() -> Measured:
        result = run_signal(config)
        check(result)
        return result.measured

    _attempt(series, run)


def attempt_reader(series: Series, db: Path, urls: Path, *, workers: int, all_feeds: bool,
                   check: Callable[[ReaderRun], None]) -> None:
    """One reader driver run, checked, added to ``series``."""

    def run() -> Measured:
        result = run_reader(db, urls, workers=workers, all_feeds=all_feeds)
        check(result)
        return result.measured

    _attempt(series, run)


def best_reader(series: dict[int, Series]) -> tuple[int, Series] | None:
    usable = [(w, s) for w, s in series.items() if s.ok]
    if not usable:
        return None
    return min(usable, key=lambda item: item[1].median_s)


def error_notes(sig: Series | None, rdr: Sequence[Series]) -> list[str]:
    notes = []
    if sig is not None and sig.error:
        notes.append("Signal broken: " + sig.error.splitlines()[0])
    errors = [r.error for r in rdr if r.error]
    if errors and not any(r.ok for r in rdr):
        notes.append("reader broken: " + errors[0].splitlines()[0])
    return notes


def fmt_rate(value: float) -> str:
    return f"{value:,.0f} entries/s"


def fmt_ms(value: float) -> str:
    return f"{value:.2f} ms/source"


def rdr_label(workers: int) -> str:
    return f" (workers={workers})"
