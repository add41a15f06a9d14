"""The per-host limit across processes sharing one SQLite file: byte-range locks.

A :class:`~signal_feeds.store.leases.HostGate` over one file next to the database
(``<database>-hosts``, like SQLite's own ``-wal`` and ``-shm``). Slot ``n`` of a host
is one byte of that file, at ``host_key(host) * MAX_SLOTS_PER_HOST + n``, locked with
``fcntl.lockf``: the kernel counts the holders, and a process that dies (SIGKILL
included) lets go of its bytes. Nothing is ever written to the file. A process with
requests waiting for a slot of a host holds a shared lock on the host's line byte (past
every slot's); a request's first ask tries it exclusively and, if another process
holds it, waits in line too.

POSIX locks belong to the process, not to a file descriptor or a thread: this process
taking a byte it already holds would "succeed", so the process remembers which slots it
holds and never offers them twice. They also all go when the process closes *any*
descriptor of the file. So every gate of one file in a process (two runs at once in one
program, each with its own store) shares that file's one descriptor and what it holds
(:class:`_SlotFile`); a gate gives back only its own slots, and the last one to close
closes the file.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import os
import threading
from pathlib import Path

from signal_feeds.errors import DatabaseUnavailableError
from signal_feeds.store.leases import MAX_SLOTS_PER_HOST, host_key

__all__ = ["FileHostGate"]

#: Where the line bytes start: past every slot's byte (host keys are under 2 ** 31).
_LINES = 1 << 42


class _SlotFile:
    """This process's one descriptor of a ``-hosts`` file and the locks it holds there,
    shared by the process's gates of that file (see the module's docstring)."""

    def __init__(self, database: Path) -> None:
        self.database = database
        self.path = Path(f"{database}-hosts")
        #: The gates using this file; the last to close closes it.
        self.users = 0
        self._fd: int | None = None
        self._held: set[tuple[str, int]] = set()
        #: This process's requests in each host's line.
        self._line: dict[str, int] = {}
        self._lock = threading.Lock()

    def _file(self) -> int:
        if self._fd is None:
            try:
                self._fd = self._open()
            except OSError as exc:
                # Every request of the run needs it: the run stops (exit 2), one line.
                raise DatabaseUnavailableError(
                    f"cannot open the host slot file {self.path}: {exc.strerror} (it must "
                    "be writable by every user that runs signal fetch on this database, "
                    "as the database is; remove it and it is made again)") from exc
        return self._fd

    def _open(self) -> int:
        """Open the file, made as SQLite makes ``-wal`` and ``-shm``: with the database's
        permissions, and (when made by root) its owner, so that a run by hand as root
        does not lock out the user cron runs as."""
        try:
            made = os.stat(self.database)
        except OSError:
            made = None
        mode = made.st_mode & 0o666 if made is not None else 0o644
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
        except FileExistsError:
            return os.open(self.path, os.O_RDWR)
        try:
            os.fchmod(fd, mode)  # not narrowed by the umask
            if made is not None and os.geteuid() == 0:
                os.fchown(fd, made.st_uid, made.st_gid)
        except OSError:
            pass  # the file works for this user all the same
        return fd

    @staticmethod
    def _offset(host: str, slot: int) -> int:
        return host_key(host) * MAX_SLOTS_PER_HOST + slot

    def take(self, host: str, per_host: int, *, in_line: bool = False) -> int | None:
        """Lock a free slot of ``host``; ``None`` when all ``per_host`` are held, or
        when not ``in_line`` and another process has a request in the host's line."""
        host = host.lower()
        with self._lock:
            fd = self._file()
            if not in_line and not self._nobody_in_line(fd, host):
                return None
            for slot in range(min(per_host, MAX_SLOTS_PER_HOST)):
                if (host, slot) in self._held:
                    continue
                try:
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1,
                                self._offset(host, slot), os.SEEK_SET)
                except OSError:  # another process holds it (EAGAIN / EACCES)
                    continue
                self._held.add((host, slot))
                return slot
        return None

    def _nobody_in_line(self, fd: int, host: str) -> bool:
        """True when no other process holds the host's line byte. This process's own
        shared lock there is turned exclusive by the try, and turned back after."""
        line = _LINES + host_key(host)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, line, os.SEEK_SET)
        except OSError:
            return False
        back = fcntl.LOCK_SH | fcntl.LOCK_NB if self._line.get(host) else fcntl.LOCK_UN
        with contextlib.suppress(OSError):
            fcntl.lockf(fd, back, 1, line, os.SEEK_SET)
        return True

    def join_line(self, host: str) -> None:
        """Stand one more request of this process in the host's line."""
        self._line_change(host.lower(), +1)

    def leave_line(self, host: str) -> None:
        """One request of this process no longer waits; the last leaves the line."""
        self._line_change(host.lower(), -1)

    def _line_change(self, host: str, step: int) -> None:
        with self._lock:
            before = self._line.pop(host, 0)
            count = max(0, before + step)
            if count:
                self._line[host] = count
            if bool(before) == bool(count):
                return
            # (A failed lock leaves the request out of line: its wait is only less fair.)
            with contextlib.suppress(OSError, DatabaseUnavailableError):
                fcntl.lockf(self._file(), (fcntl.LOCK_SH | fcntl.LOCK_NB) if count
                            else fcntl.LOCK_UN, 1, _LINES + host_key(host), os.SEEK_SET)

    def give_back(self, host: str, slot: int) -> None:
        """Unlock a slot :meth:`take` returned."""
        host = host.lower()
        with self._lock:
            if (host, slot) not in self._held or self._fd is None:
                return
            self._held.discard((host, slot))
            with contextlib.suppress(OSError):
                fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, self._offset(host, slot),
                            os.SEEK_SET)

    def close(self) -> None:
        """Close the file (which unlocks every slot this process holds)."""
        with self._lock:
            self._held.clear()
            self._line.clear()
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = None


#: The slot files open in this process, by process id (a forked child opens its own:
#: locks are not inherited) and real path.
_OPEN: dict[tuple[int, Path], _SlotFile] = {}
_OPEN_LOCK = threading.Lock()


class FileHostGate:
    """Host slots as byte-range locks on ``<database>-hosts`` (opened on first use)."""

    #: ``lockf`` with ``LOCK_NB`` on a local file returns at once.
    instant = True

    def __init__(self, database: Path) -> None:
        # Beside the file itself: workers that reach one database through a symbolic
        # link and through its real path share one gate.
        self.database = Path(os.path.realpath(database))
        self.path = Path(f"{self.database}-hosts")
        self._opened: _SlotFile | None = None
        #: The slots this gate took, and its requests in each host's line.
        self._mine: set[tuple[str, int]] = set()
        self._waiting: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def _shared(self) -> _SlotFile:
        with self._lock:
            if self._opened is None:
                with _OPEN_LOCK:
                    key = (os.getpid(), self.database)
                    if (shared := _OPEN.get(key)) is None:
                        shared = _OPEN[key] = _SlotFile(self.database)
                    shared.users += 1
                self._opened = shared
            return self._opened

    def take(self, host: str, per_host: int, *, in_line: bool = False) -> int | None:
        """Lock a free slot of ``host``; ``None`` when all ``per_host`` are held (by any
        gate of this process too), or when not ``in_line`` and another process has a
        request in the host's line."""
        slot = self._shared().take(host, per_host, in_line=in_line)
        if slot is not None:
            with self._lock:
                self._mine.add((host.lower(), slot))
        return slot

    def give_back(self, host: str, slot: int) -> None:
        """Unlock a slot :meth:`take` returned."""
        with self._lock:
            if (host.lower(), slot) not in self._mine or self._opened is None:
                return
            self._mine.discard((host.lower(), slot))
            shared = self._opened
        shared.give_back(host, slot)

    def join_line(self, host: str) -> None:
        """Stand one more request of this process in the host's line."""
        shared = self._shared()
        with self._lock:
            self._waiting[host.lower()] += 1
        shared.join_line(host)

    def leave_line(self, host: str) -> None:
        """One request of this process no longer waits; the last leaves the line."""
        with self._lock:
            if self._waiting[host.lower()] <= 0 or self._opened is None:
                return
            self._waiting[host.lower()] -= 1
            shared = self._opened
        shared.leave_line(host)

    def close(self) -> None:
        """Give back this gate's slots and places in line; the last gate of the file in
        this process closes it."""
        with self._lock:
            shared, self._opened = self._opened, None
            mine, self._mine = self._mine, set()
            waiting, self._waiting = self._waiting, collections.Counter()
        if shared is None:
            return
        for host, slot in mine:
            shared.give_back(host, slot)
        for host, count in waiting.items():
            for _ in range(count):
                shared.leave_line(host)
        with _OPEN_LOCK:  # held while it closes: a file opened anew must not be
            shared.users -= 1  # unlocked by the old descriptor's close
            if shared.users > 0:
                return
            if _OPEN.get((os.getpid(), shared.database)) is shared:
                del _OPEN[(os.getpid(), shared.database)]
            shared.close()
