"""``signal demo`` on a new user's first day: the machine's setup around it (a proxy in
the environment, another demo in the same folder), run as the command a user types."""

from __future__ import annotations

import fcntl
import os
import socket
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _demo(cwd: Path, *args: str, env: dict[str, str] | None = None,
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "signal_feeds", "demo", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def _dead_port() -> int:
    """A port on 127.0.0.1 where nothing listens (it was free a moment ago)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_proxy_in_the_environment_is_not_used_for_the_demo_server(tmp_path: Path) -> None:
    # A workstation behind a corporate proxy: HTTP_PROXY set, NO_PROXY not. Every fetch
    # of the demo went to the proxy and failed, and the demo still exited 0.
    dead = f"http://127.0.0.1:{_dead_port()}"
    env = {name: dead for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy",
                                   "https_proxy", "all_proxy")}
    clean = {k: v for k, v in os.environ.items() if k.lower() != "no_proxy"}
    proc = subprocess.run([sys.executable, "-m", "signal_feeds", "demo"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**clean, "PYTHONPATH": str(REPO), **env})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cannot connect" not in proc.stdout
    assert "5 created" in proc.stdout and "1 updated" in proc.stdout
    assert "signal history" in proc.stdout


def _no_network() -> list[str]:
    """A prefix that runs a command in a network namespace of its own, where even
    127.0.0.1 is down (``unshare -n``); skips the test where that is not allowed."""
    try:
        probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=30,
                               check=False)
    except OSError:
        pytest.skip("no unshare here")
    if probe.returncode != 0:
        pytest.skip("unshare -n is not allowed here")
    return ["unshare", "-n"]


def test_a_demo_that_cannot_reach_its_server_says_so_and_fails(tmp_path: Path) -> None:
    # It printed "1. First fetch: every entry is new." over two failed lines, then two
    # more steps of failures, "Read it:" commands for an empty database, and exit 0.
    proc = subprocess.run([*_no_network(), sys.executable, "-m", "signal_feeds", "demo"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          check=False, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "2. Second fetch" not in proc.stdout and "Read it:" not in proc.stdout
    assert proc.stderr.startswith("signal: error: demo-rss: the demo could not fetch from "
                                  "its own server at http://127.0.0.1:")
    assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr


def test_a_second_demo_on_the_same_file_waits_its_turn(tmp_path: Path) -> None:
    first = _demo(tmp_path)
    assert first.returncode == 0, first.stderr
    database = tmp_path / "signal-demo.db"
    before = database.stat().st_ino
    # Another demo is running on that file (it holds signal-demo.db-demo): this one
    # deleted its database under it, and both printed a story that did not happen.
    with (tmp_path / "signal-demo.db-demo").open("w") as held:
        fcntl.lockf(held, fcntl.LOCK_EX)
        second = _demo(tmp_path)
    assert second.returncode == 1
    assert second.stderr == (f"signal: error: another signal demo is writing {database}; "
                             "wait for it to end or choose another path with --db\n")
    assert "Teaching server" not in second.stdout
    assert database.stat().st_ino == before
    third = _demo(tmp_path)  # and once it has ended, the next one runs
    assert third.returncode == 0, third.stderr
    assert not (tmp_path / "signal-demo.db-demo").exists()


@pytest.mark.parametrize("leftover", ["no bytes", "sqlite without tables"])
def test_a_demo_killed_before_its_first_write_does_not_block_the_next(
        tmp_path: Path, leftover: str) -> None:
    # SIGKILL between SQLite making the file (journal mode WAL, no tables yet) and the
    # schema's commit left this; every later demo said "exists and is not a Signal
    # database; choose another path with --db", though it holds nothing.
    database = tmp_path / "signal-demo.db"
    if leftover == "no bytes":
        database.touch()
    else:
        with closing(sqlite3.connect(database)) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
    proc = _demo(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "5 created" in proc.stdout and "signal history" in proc.stdout
