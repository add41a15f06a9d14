"""Running each side as a whole subprocess, timed and measured the same way.

A run is started with :class:`subprocess.Popen` and reaped with :func:`os.wait4`, which
returns the resource usage of that one child: wall time comes from the harness's clock
around start and exit, peak RSS from the child's own ``ru_maxrss``. Start-up counts.
"""

from __future__ import annotations

import contextlib
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

__all__ = [
    "CheckFailed",
    "Measured",
    "ReaderRun",
    "SignalRun",
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


@dataclass(frozen=True)
class Measured:
    seconds: float
    #: The child's ``ru_maxrss`` from ``wait4``. Caution: on Linux it includes the RSS
    #: of the *harness* at spawn time (exec records the old, borrowed address space's
    #: high-water mark), so it is only a fallback.
    max_rss_mb: float
    #: Sum over every process of the run (the child and its descendants, such as parser
    #: workers) of that process's own peak RSS (``VmHWM``); 0 if it could not be read.
    tree_rss_mb: float
    returncode: int
    stdout: str
    stderr: str

    @property
    def rss_mb(self) -> float:
        """The memory figure to report: the process tree's peak when it could be read."""
        return self.tree_rss_mb if self.tree_rss_mb > 0 else self.max_rss_mb


def _vm_hwm_bytes(pid: int) -> int:
    """A process's peak RSS since its exec (``VmHWM`` in /proc/PID/status), or 0."""
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return 0


class _TreeSampler(threading.Thread):
    """Follows a process and all its descendants, remembering each one's peak RSS.

    Every ``interval`` seconds it reads each process's ``VmHWM`` (a high-water mark, so
    short spikes between samples are not lost). The figure is the sum of those peaks:
    an upper bound on the tree's simultaneous peak, counting parser workers too.

    The sampler runs in the harness, on the same two cores: at 20 ms it took several
    percent of a core, which a one-process side (reader) does not notice and a side
    that uses both cores (Signal) does. A high-water mark does not need frequent reads.
    """

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.interval = interval
        self.peaks: dict[tuple[int, float], int] = {}
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            import psutil
        except ImportError:
            return
        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self._stop_event.is_set():
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                return
            for proc in procs:
                with contextlib.suppress(psutil.Error):
                    key = (proc.pid, proc.create_time())
                    peak = _vm_hwm_bytes(proc.pid)
                    if peak > self.peaks.get(key, 0):
                        self.peaks[key] = peak
            self._stop_event.wait(self.interval)

    def stop(self) -> float:
        self._stop_event.set()
        self.join()
        return sum(self.peaks.values()) / (1024.0 * 1024.0)


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
    """Run ``cmd`` to completion; wall time and the child's own peak RSS."""
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
        sampler = _TreeSampler(proc.pid)
        sampler.start()
        try:
            _pid, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        elapsed = time.perf_counter() - started
        tree_rss_mb = sampler.stop()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if killed.is_set():
            raise CheckFailed(f"killed after {timeout:g} s: {' '.join(cmd)}")
        out.seek(0)
        err.seek(0)
        return Measured(
            seconds=elapsed,
            max_rss_mb=usage.ru_maxrss / 1024.0,  # kilobytes on Linux
            tree_rss_mb=tree_rss_mb,
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
