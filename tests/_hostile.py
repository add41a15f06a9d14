"""Helpers shared by the hostile-input and fault tests (not a test module)."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Peak resident memory one ``signal fetch`` process may reach, in bytes.
RSS_LIMIT = 300 * 1024 * 1024

#: Runs the console command in a fresh interpreter and reports its own peak resident
#: memory (the parser workers are child processes and do not count). The peak is the
#: VmHWM of the command's own address space, not ``ru_maxrss``: Linux carries that over
#: an exec from the process that forked it, so a command started by a pytest process of
#: 302 MB reported 302 MB while its own peak was about 120 MB.
_MEASURED_CLI = """
import resource, sys
from signal_feeds.cli import main

def own_peak_kb():
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak  # bytes there

sys.argv = ["signal", *sys.argv[1:]]
try:
    main()
finally:
    sys.stderr.write(f"\\nPEAK_RSS_KB={own_peak_kb()}\\n")
"""


def rss(items: str = "", *, prolog: str = "", channel: str = "",
        encoding: str = "utf-8") -> bytes:
    """An RSS 2.0 document around ``items``."""
    return (f'<?xml version="1.0" encoding="{encoding}"?>\n{prolog}<rss version="2.0"><channel>'
            f"<title>hostile</title><link>https://example.org/</link>{channel}{items}"
            "</channel></rss>\n").encode(encoding)


def item(guid: str, title: str = "t", extra: str = "") -> str:
    return (f"<item><guid>{guid}</guid><title>{title}</title>"
            f"<link>https://example.org/{guid}</link>{extra}</item>")


def write_config(path: Path, db: Path, sources: dict[str, str], **settings: Any) -> Path:
    lines = ["[settings]", f'database = "{db}"', "min_interval = 0"]
    for key, value in settings.items():
        lines.append(f"{key} = {json.dumps(value)}")
    for sid, url in sources.items():
        lines += ["", "[[sources]]", f'id = "{sid}"', f'url = "{url}"']
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@dataclass
class CliRun:
    returncode: int
    report: dict[str, Any]
    stderr: str
    peak_rss: int
    seconds: float

    def source(self, sid: str) -> dict[str, Any]:
        for rep in self.report["sources"]:
            if rep["source"] == sid:
                return dict(rep)
        raise KeyError(sid)


def run_measured_cli(*args: str, timeout: float = 120.0
                     ) -> tuple[subprocess.CompletedProcess[str], int, float]:
    """``signal ARGS`` in a subprocess: the finished process, its own peak RSS in bytes
    and the seconds it took."""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", _MEASURED_CLI, *args],
                          capture_output=True, text=True, timeout=timeout, check=False)
    seconds = time.monotonic() - started
    match = re.search(r"PEAK_RSS_KB=(\d+)", proc.stderr)
    assert match, proc.stderr
    return proc, int(match.group(1)) * 1024, seconds


def run_cli_fetch(config: Path, *extra: str, timeout: float = 120.0) -> CliRun:
    """``signal fetch --config CONFIG --force --json`` in a subprocess, with its peak RSS."""
    proc, peak, seconds = run_measured_cli("fetch", "--config", str(config), "--force",
                                           "--json", *extra, timeout=timeout)
    assert "Traceback" not in proc.stderr, proc.stderr
    report = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return CliRun(proc.returncode, report, proc.stderr, peak, seconds)


def rows(db: Path, sql: str, *args: object) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()
