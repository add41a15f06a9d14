"""The folder where parser processes leave their outcomes, and the clean-up of folders
whose program was killed.

A pool removes its folder when it closes, when it is collected or when the program
ends; a program killed with SIGKILL does none of that, and its folder stayed in the
temporary directory for good, with any outcome nobody took (a parsed feed, possibly
megabytes). Each folder is therefore held by its program (see :mod:`signal_feeds.held`;
the pool's forked workers inherit the hold, so a folder is not taken from workers still
finishing), and a new pool removes the folders nobody holds any more.
"""

from __future__ import annotations

import logging
import tempfile

from signal_feeds.held import Hold, remove_abandoned_in

__all__ = ["PREFIX", "HandoverFolder", "remove_abandoned_folders"]

log = logging.getLogger("signal_feeds.parse")

#: How the folders' names start, in the temporary directory.
PREFIX = "signal-parse-"


class HandoverFolder:
    """A new folder in the temporary directory, held by this process and its children
    until :meth:`release` (or the end of the last of them)."""

    def __init__(self) -> None:
        self.path = tempfile.mkdtemp(prefix=PREFIX)
        self._hold = Hold(self.path)

    def release(self) -> None:
        """Give up the hold (the folder itself is removed by its owner)."""
        self._hold.release()


def remove_abandoned_folders(now: float | None = None) -> int:
    """Remove the handover folders of programs that ended without removing theirs (this
    user's, in the temporary directory); the number removed."""
    removed = remove_abandoned_in(tempfile.gettempdir(), lambda name: name.startswith(PREFIX),
                                  now=now)
    if removed:
        log.info("removed %d parse handover folder(s) left by killed runs", removed)
    return removed
