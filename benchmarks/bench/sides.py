"""Running each side as a whole subprocess, timed and measured the same way.

A run is started with :class:`subprocess.Popen` and reaped with :func:`os.wait4`: wall
time comes from the harness's clock around start and exit (start-up counts), memory from
sampling the child's whole process tree while it runs (:mod:`bench.memory`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .memory import TreeMemory, TreeSampler, proc_available

__all__ = [
    "CheckFailed",
    "Measured",
    "ReaderRun",
    "SAMPLING",
    "SignalRun",
    "memory_method",
    "run_measured",
    "run_reader",
    "run_signal",
    "signal_command",
    "write_signal_config",
]

BENCH_DIR = Path(__file__).resolve().parent.parent
READER_DRIVER = BENCH_DIR / "_reader_driver.py"


class CheckFailed(RuntimeError):
    """A run finished but did not do what was expected: its timing would be meaningless."""


#: How the memory of a measured run is sampled (``run.py --mem-interval`` sets it).
SAMPLING = {"interval": 0.01, "pss_every": 10}


@dataclass(frozen=True)
class Measured:
    seconds: float
    #: The child's ``ru_maxrss`` from ``wait4``. Caution: on Linux it includes the RSS
    #: of the *harness* at spawn time (exec records the old, borrowed address space's
    #: high-water mark), so it is only a fallback where ``/proc`` cannot be read.
    max_rss_mb: float
    #: The process tree's memory as sampled (see :mod:`bench.memory`); None without /proc.
    memory: TreeMemory | None
    returncode: int
    stdout: str
    stderr: str

    @property
    def rss_mb(self) -> float:
        """The memory figure to report: the tree's simultaneous peak (PSS) when sampled."""
        if self.memory is not None and self.memory.samples:
            return self.memory.peak
        return self.max_rss_mb


def memory_method() -> str:
    """One line for the table: how the peak RSS figures were measured."""
    if not proc_available():
        return "peak RSS = ru_maxrss of the command (no /proc here: includes the harness's RSS)"
    every = SAMPLING["interval"] * SAMPLING["pss_every"] * 1000
    return (f"peak memory = the largest sum of PSS over the command and all its "
            f"descendants at one moment, sampled every {every:g} ms from /proc (or the "
            f"largest single process's VmHWM, if larger)")


def child_env() -> dict[str, str]:
    """The environment for measured runs: as inherited, but with bytecode caching on.

    With ``PYTHONDONTWRITEBYTECODE`` set, a project that is not installed from a wheel
    recompiles its modules in every run; an installed library never does. The untimed
    warm-up run writes the caches for both sides.
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_measured(
    cmd: Sequence[str], *, cwd: Path | None = None, timeout: float = 1800.0
) -> Measured:
    """Run ``cmd`` to completion; wall time and the memory of its process tree."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(list(cmd), cwd=cwd, stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, env=child_env())
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            proc.kill()

        timer = threading.Timer(timeout, kill)
        timer.start()
        sampler = None
        if proc_available():
            sampler = TreeSampler(proc.pid, interval=SAMPLING["interval"],
                                  pss_every=int(SAMPLING["pss_every"]))
            sampler.start()
        try:
            _pid, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        elapsed = time.perf_counter() - started
        memory = sampler.stop() if sampler is not None else None
        proc.returncode = os.waitstatus_to_exitcode(status)
        if killed.is_set():
            raise CheckFailed(f"killed after {timeout:g} s: {' '.join(cmd)}")
        out.seek(0)
        err.seek(0)
        return Measured(
            seconds=elapsed,
            max_rss_mb=usage.ru_maxrss / 1024.0,  # kilobytes on Linux
            memory=memory,
            returncode=proc.returncode,
            stdout=out.read().decode("utf-8", "replace"),
            stderr=err.read().decode("utf-8", "replace"),
        )


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no output)"


# -- Signal ----------------------------------------------------------------------------


def signal_command() -> list[str]:
    """The console script next to this Python, else ``python -m signal_feeds``."""
    script = Path(sys.executable).with_name("signal")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "signal_feeds"]


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def write_signal_config(
    path: Path, database: Path, sources: Sequence[tuple[str, str]], *, concurrency: int = 50
) -> Path:
    """A ``signal.toml`` for ``sources`` (id, url) with no schedule in the way."""
    lines = [
        "[settings]",
        f"database = {_toml_string(str(database))}",
        f"concurrency = {concurrency}",
        f"per_host = {concurrency}",
        "min_interval = 0",
        "",
    ]
    for source_id, url in sources:
        lines += ["[[sources]]", f"id = {_toml_string(source_id)}",
                  f"url = {_toml_string(url)}", ""]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


@dataclass(frozen=True)
class SignalRun:
    measured: Measured
    report: dict[str, Any]

    @property
    def totals(self) -> dict[str, Any]:
        totals = self.report.get("totals", {})
        return totals if isinstance(totals, dict) else {}

    def statuses(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.report.get("sources", []):
            counts[row.get("status", "?")] = counts.get(row.get("status", "?"), 0) + 1
        return counts

    def http_statuses(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        for row in self.report.get("sources", []):
            code = int(row.get("http_status") or 0)
            counts[code] = counts.get(code, 0) + 1
        return counts


def _json_output(measured: Measured, who: str, what: str) -> Any:
    """The JSON a side printed, or CheckFailed saying how it ended instead."""
    try:
        return json.loads(measured.stdout)
    except json.JSONDecodeError:
        raise CheckFailed(
            f"{who} exited {measured.returncode} without {what}: "
            f"{_last_line(measured.stderr)}\n{measured.stdout[-2000:]}\n{measured.stderr[-2000:]}"
        ) from None


def run_signal(config: Path, *, force: bool = True) -> SignalRun:
    cmd = [*signal_command(), "fetch", "--config", str(config), "--json"]
    if force:
        cmd.append("--force")
    measured = run_measured(cmd, cwd=config.parent)
    report = _json_output(measured, "signal fetch", "a JSON report")
    if not isinstance(report, dict):
        raise CheckFailed(f"signal fetch printed {type(report).__name__}, not an object")
    return SignalRun(measured, report)


def expect_signal(
    run: SignalRun,
    *,
    sources: int,
    created: int | None = None,
    updated: int | None = None,
    statuses: dict[str, int] | None = None,
    http: dict[int, int] | None = None,
) -> None:
    """Raise :class:`CheckFailed` unless the report says exactly what was expected."""
    problems = []
    if run.measured.returncode != 0:
        problems.append(f"exit code {run.measured.returncode}")
    rows = run.report.get("sources", [])
    if len(rows) != sources:
        problems.append(f"{len(rows)} sources in the report, expected {sources}")
    totals = run.totals
    for key, want in (("created", created), ("updated", updated)):
        if want is not None and totals.get(key) != want:
            problems.append(f"totals.{key} = {totals.get(key)!r}, expected {want}")
    if statuses is not None and run.statuses() != statuses:
        problems.append(f"statuses {run.statuses()}, expected {statuses}")
    if http is not None and run.http_statuses() != http:
        problems.append(f"HTTP statuses {run.http_statuses()}, expected {http}")
    if problems:
        errors = [f"{r.get('source')}: {r.get('error')}" for r in rows if r.get("error")][:3]
        first = f" (first error: {errors[0][:200]})" if errors else ""
        raise CheckFailed(
            "Signal run is not what was expected: " + "; ".join(problems) + first
            + ("\n  errors: " + "; ".join(errors) if errors else "")
            + (f"\n  stderr: {run.measured.stderr[-1500:]}" if run.measured.stderr else "")
        )


# -- reader ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ReaderRun:
    measured: Measured
    counts: dict[str, Any]
    workers: int


def run_reader(database: Path, urls_file: Path, *, workers: int, all_feeds: bool) -> ReaderRun:
    cmd = [sys.executable, str(READER_DRIVER), "--db", str(database), "--urls", str(urls_file),
           "--workers", str(workers)]
    if all_feeds:
        cmd.append("--all")
    measured = run_measured(cmd, cwd=database.parent)
    counts = _json_output(measured, "reader driver", "JSON")
    return ReaderRun(measured, counts, workers)


def expect_reader(
    run: ReaderRun,
    *,
    feeds: int,
    new: int | None = None,
    modified: int | None = None,
    not_modified: int | None = None,
    stored: int | None = None,
) -> None:
    problems = []
    c = run.counts
    if run.measured.returncode != 0 or c.get("errors"):
        problems.append(f"exit code {run.measured.returncode}, errors {c.get('error_text')}")
    for key, want in (("feeds", feeds), ("new", new), ("modified", modified),
                      ("not_modified", not_modified), ("stored", stored)):
        if want is not None and c.get(key) != want:
            problems.append(f"{key} = {c.get(key)!r}, expected {want}")
    if problems:
        raise CheckFailed(f"reader run (workers={run.workers}) is not what was expected: "
                          + "; ".join(problems))
