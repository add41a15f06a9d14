"""Temporary files and folders held by the process writing them, and the removal of
those whose writer was killed.

A program stopped with SIGKILL (the OOM killer, ``timeout -s KILL``, a cron job's limit)
runs no clean-up: what it was writing on the side stays for good. So a writer holds what
it makes with an ``flock``, which the kernel drops when the last process holding it ends
(forked children inherit it), and the next writer of the same kind removes what nobody
holds. Anything younger than :data:`SETTLE_SECONDS` is left alone: a file is made before
its lock is taken, and another program must not take it in between.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["SETTLE_SECONDS", "Hold", "remove_abandoned", "remove_abandoned_in"]

#: Age (by modification time) under which an unheld file may still be being set up.
SETTLE_SECONDS = 60.0

try:
    import fcntl
except ImportError:  # not on this platform (Windows): nothing is held, nor removed
    fcntl = None  # type: ignore[assignment]


def _lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


class Hold:
    """This process's hold on ``what`` (a file or a folder, or an open descriptor of
    one, which stays the caller's) until :meth:`release`, or the end of the last process
    that inherited it."""

    def __init__(self, what: str | Path | int) -> None:
        self._fd: int | None = None
        if fcntl is None:
            return
        with contextlib.suppress(OSError):
            fd = os.dup(what) if isinstance(what, int) else os.open(what, os.O_RDONLY)
            if _lock(fd):
                self._fd = fd
            else:
                os.close(fd)

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def remove_abandoned(paths: Iterable[Path], *, now: float | None = None) -> int:
    """Remove those of ``paths`` (files or folders of this user) that no process holds
    and that are older than :data:`SETTLE_SECONDS`; the number removed."""
    if fcntl is None:
        return 0
    moment = time.time() if now is None else now
    removed = 0
    for path in paths:
        try:
            facts = path.lstat()
            if (facts.st_uid != os.geteuid() or moment - facts.st_mtime < SETTLE_SECONDS
                    or path.is_symlink()):
                continue
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            if not _lock(fd):  # held: its writer (or a child of it) still runs
                continue
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed += 1
        finally:
            os.close(fd)
    return removed


def remove_abandoned_in(folder: str | Path, named: Callable[[str], bool], *,
                        now: float | None = None) -> int:
    """:func:`remove_abandoned` for the entries of ``folder`` whose names ``named``
    accepts; 0 when the folder cannot be read."""
    try:
        with os.scandir(folder) as entries:
            found = [Path(e.path) for e in entries if named(e.name)]
    except OSError:
        return 0
    return remove_abandoned(found, now=now)
