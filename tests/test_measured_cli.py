"""The memory figure the hostile-input tests assert on is the command's own."""

from __future__ import annotations

from _hostile import RSS_LIMIT, run_measured_cli

#: Held by this (pytest) process while it starts the command: larger than the limit.
_BALLAST_BYTES = 400 * 1024 * 1024


def test_the_peak_is_the_commands_own_not_the_process_that_started_it() -> None:
    # Linux keeps ru_maxrss across an exec, so a command started by a large pytest
    # process reported pytest's peak (302 MB in CI against a limit of 300 MB).
    ballast = b"\x01" * _BALLAST_BYTES  # every page written, so resident
    proc, peak, _ = run_measured_cli("--help")
    assert proc.returncode == 0, proc.stderr
    assert len(ballast) == _BALLAST_BYTES
    assert peak < RSS_LIMIT < _BALLAST_BYTES
    assert peak < 150 * 1024 * 1024, f"{peak / 2**20:.0f} MB for --help"
