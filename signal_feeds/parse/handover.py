"""The folder where parser processes leave their outcomes, and the clean-up of folders
whose program was killed.

A pool removes its folder when it closes, when it is collected or when the program
ends; a program killed with SIGKILL (the OOM killer, ``timeout -s KILL``, a cron job's
limit) does none of that, and its folder stayed in the temporary directory for good,
with any outcome nobody took (a parsed feed, possibly megabytes). Each folder is
therefore held by its program: an ``flock`` on the folder itself, which the kernel
drops when the last process holding it ends (the pool's forked workers inherit it, so
a folder is not taken from workers still finishing). A new pool removes the folders
nobody holds any more. Folders younger than :data:`SETTLE_SECONDS` are left alone: a
folder is made before its lock is taken, and another program must not take it in
between.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time

__all__ = ["PREFIX", "SETTLE_SECONDS", "HandoverFolder", "remove_abandoned"]

log = logging.getLogger("signal_feeds.parse")

#: How the folders' names start, in the temporary directory.
PREFIX = "signal-parse-"
#: Age (by modification time) under which an unheld folder may still be being set up.
SETTLE_SECONDS = 60.0

try:
    import fcntl
except ImportError:  # not on this platform (Windows): folders are not held, nor swept
    fcntl = None  # type: ignore[assignment]


class HandoverFolder:
    """A new folder in the temporary directory, held by this process and its children
    until :meth:`release` (or the end of the last of them)."""

    def __init__(self) -> None:
        self.path = tempfile.mkdtemp(prefix=PREFIX)
        self._fd: int | None = None
        if fcntl is not None:
            with contextlib.suppress(OSError):
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    os.close(fd)
                else:
                    self._fd = fd

    def release(self) -> None:
        """Give up the hold (the folder itself is removed by its owner)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def remove_abandoned(now: float | None = None) -> int:
    """Remove the handover folders of programs that ended without removing theirs (this
    user's, in the temporary directory); the number removed."""
    if fcntl is None:
        return 0
    moment = time.time() if now is None else now
    removed = 0
    try:
        entries = list(os.scandir(tempfile.gettempdir()))
    except OSError:
        return 0
    for entry in entries:
        if not entry.name.startswith(PREFIX):
            continue
        try:
            if (not entry.is_dir(follow_symlinks=False)
                    or entry.stat(follow_symlinks=False).st_uid != os.geteuid()
                    or moment - entry.stat(follow_symlinks=False).st_mtime < SETTLE_SECONDS):
                continue
            fd = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: its program (or a worker of it) still runs
            os.close(fd)
            continue
        try:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed += 1
        finally:
            os.close(fd)
    if removed:
        log.info("removed %d parse handover folder(s) left by killed runs", removed)
    return removed
