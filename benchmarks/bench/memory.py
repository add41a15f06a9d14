"""The peak memory of a process tree at one moment, sampled from ``/proc``.

A measured run is one command and every process it starts (Signal's parser workers).
:class:`TreeSampler` follows that tree from the harness and, every ``interval`` seconds,
adds up the resident set (``VmRSS``, field 24 of ``/proc/PID/stat``) of every process
alive at that moment, and every few samples the proportional set size (``Pss`` in
``/proc/PID/smaps_rollup``). The figure reported (:attr:`TreeMemory.peak`) is the larger
of

* the largest PSS sum: the tree's *simultaneous* physical footprint as far as the
  samples see it. PSS divides each shared page among the processes mapping it, so the
  pages a forked parser worker still shares with the main process (the interpreter,
  the modules imported before the fork) count once, not once per process. Reading it
  walks the page tables (about 1 ms per process here), so it is read every
  ``pss_every`` samples and a peak shorter than that can fall between two readings;
* the largest single process's own peak (``VmHWM`` in ``/proc/PID/status``, a
  high-water mark kept by the kernel, so no spike of that process is missed): when that
  process peaked, the tree held at least that much.

Both are lower bounds of the tree's true footprint at its peak, so their maximum is one
too. Also recorded, as information:

* the largest RSS sum: since Signal's parser workers are forked (2026-12-05), it counts
  every page a worker shares with the main process once per process, an overstatement
  of about the main process's size at the fork per worker;
* the sum of the processes' own peaks (``VmHWM``): peaks reached at different times,
  added as if they coincided (the harness's figure until the evening of 2026-12-03);
* how far each process's own peak lies above its largest sample: what the samples can
  have missed.

Every process of the tree is counted, forked or exec'd: neither side starts programs
during a measured run (Signal's workers are forked and never exec, reader uses
threads), so a process caught between ``vfork`` and ``exec``, which would show its
parent's memory as its own, does not occur.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

__all__ = ["TreeMemory", "TreeSampler", "proc_available"]

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_MB = 1024.0 * 1024.0


def proc_available() -> bool:
    return os.path.exists("/proc/self/stat") and os.path.exists("/proc/self/smaps_rollup")


@dataclass(frozen=True)
class TreeMemory:
    """What :class:`TreeSampler` saw of one run (all sizes in MB)."""

    #: The largest sum of the tree's RSS at one sample.
    rss_peak: float
    #: The largest sum of the tree's PSS at one PSS sample.
    pss_peak: float
    #: Sum over the processes of each one's own peak (VmHWM): an upper bound.
    hwm_sum: float
    #: The largest single process's own peak (VmHWM): a lower bound.
    hwm_max: float
    #: Sum over the processes of (own peak − largest sampled RSS): missed between samples.
    missed: float
    processes: int
    samples: int
    #: Seconds from the first sample to the last: under load, samples come later than
    #: ``interval_ms`` asks (span / samples is the interval they really had).
    span_s: float
    interval_ms: float
    pss_every: int
    #: CPU time the sampler thread used (it runs in the harness, on the same cores).
    sampler_cpu_s: float

    @property
    def peak(self) -> float:
        """The figure to report: the best lower bound of the tree's footprint at its
        peak (PSS, or one process's own peak if that was higher)."""
        return max(self.pss_peak, self.hwm_max)


def _parse_stat(data: bytes) -> tuple[int, int, int, int]:
    """(ppid, flags, start time, RSS in pages) from the text of /proc/PID/stat."""
    # Field 2 (comm) may hold spaces and parentheses: split after its last ")".
    rest = data[data.rindex(b")") + 2:].split()
    return int(rest[1]), int(rest[6]), int(rest[19]), int(rest[21])


def _stat(pid: int) -> tuple[int, int, int, int] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return _parse_stat(f.read())
    except (OSError, ValueError, IndexError):
        return None


def _status_kb(pid: int, key: bytes) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


class TreeSampler(threading.Thread):
    """Samples the memory of ``root`` and all its descendants until :meth:`stop`.

    Every ``interval`` seconds: the sum of RSS; every ``pss_every`` samples also the sum
    of PSS; every ``hwm_every`` samples each process's VmHWM. The tree is found from
    the parent pid of each process in ``/proc``, listed every ``tree_every`` samples
    (listing ``/proc`` costs more than reading a few processes' figures; a new process
    is counted from its first listing, at most ``tree_every`` samples after its start,
    while it is still starting up); a process keeps its place in the tree if its parent
    exits first.
    """

    def __init__(self, root: int, *, interval: float = 0.01, pss_every: int = 10,
                 hwm_every: int = 5, tree_every: int = 5) -> None:
        super().__init__(daemon=True, name="tree-memory")
        self.root = root
        self.interval = interval
        self.pss_every = max(1, pss_every)
        self.hwm_every = max(1, hwm_every)
        self.tree_every = max(1, tree_every)
        self._stop_event = threading.Event()
        self._parent: dict[int, int] = {}  # pid -> parent pid, for every pid in /proc
        self._members: dict[int, int] = {root: -1}  # pid -> start time (-1: not yet read)
        # /proc/PID/stat of each member, kept open and read again with pread: half the
        # cost of opening it every time, and the descriptor stays bound to that one
        # process (a reused pid cannot be mistaken for it: reads fail once it is gone).
        self._fds: dict[int, int] = {}
        self._rss_peak = self._pss_peak = 0
        self._own_rss: dict[tuple[int, int], int] = {}  # (pid, start) -> largest sample
        self._own_hwm: dict[tuple[int, int], int] = {}  # (pid, start) -> VmHWM, kB
        self._samples = 0
        self._cpu = 0.0
        self._span = 0.0

    # -- the tree --------------------------------------------------------------------

    def _update_tree(self) -> None:
        try:
            pids = {int(name) for name in os.listdir("/proc") if name.isdigit()}
        except OSError:
            return
        for pid in list(self._parent):
            if pid not in pids:  # exited; the number may be reused by another process
                del self._parent[pid]
        new = [pid for pid in pids if pid not in self._parent]
        for pid in new:
            st = _stat(pid)
            self._parent[pid] = st[0] if st is not None else -1
        grew = True
        while grew:  # a child and its own child can both be new in one sample
            grew = False
            for pid in new:
                if pid not in self._members and self._parent[pid] in self._members:
                    self._members[pid] = -1
                    grew = True

    # -- sampling --------------------------------------------------------------------

    def _sample(self, n: int) -> None:
        if n % self.tree_every == 0:
            self._update_tree()
        rss_pages = pss_kb = 0
        with_pss = n % self.pss_every == 0
        with_hwm = n % self.hwm_every == 0
        for pid in list(self._members):
            try:
                fd = self._fds.get(pid)
                if fd is None:
                    fd = self._fds[pid] = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
                _ppid, _flags, start, rss = _parse_stat(os.pread(fd, 4096, 0))
            except (OSError, ValueError, IndexError):  # exited
                self._forget(pid)
                continue
            self._members[pid] = start
            key = (pid, start)
            rss_pages += rss
            if rss > self._own_rss.get(key, 0):
                self._own_rss[key] = rss
            if with_pss:
                pss_kb += _pss_kb(pid)
            if with_hwm or key not in self._own_hwm:
                hwm = _status_kb(pid, b"VmHWM:")
                if hwm > self._own_hwm.get(key, 0):
                    self._own_hwm[key] = hwm
        self._rss_peak = max(self._rss_peak, rss_pages)
        if with_pss:
            self._pss_peak = max(self._pss_peak, pss_kb)
        self._samples += 1

    def _forget(self, pid: int) -> None:
        self._members.pop(pid, None)
        fd = self._fds.pop(pid, None)
        if fd is not None:
            os.close(fd)

    def run(self) -> None:
        started = time.thread_time()
        first = time.monotonic()
        n = 0
        try:
            while True:
                self._sample(n)
                n += 1
                if self._stop_event.wait(self.interval):
                    break
        finally:
            for pid in list(self._fds):
                self._forget(pid)
            self._cpu = time.thread_time() - started
            self._span = time.monotonic() - first

    def stop(self) -> TreeMemory:
        self._stop_event.set()
        self.join()
        own_rss_kb = {key: pages * _PAGE // 1024 for key, pages in self._own_rss.items()}
        missed = sum(max(0, hwm - own_rss_kb.get(key, 0)) for key, hwm in self._own_hwm.items())
        return TreeMemory(
            rss_peak=self._rss_peak * _PAGE / _MB,
            pss_peak=self._pss_peak / 1024.0,
            hwm_sum=sum(self._own_hwm.values()) / 1024.0,
            hwm_max=max(self._own_hwm.values(), default=0) / 1024.0,
            missed=missed / 1024.0,
            processes=len(self._own_rss),
            samples=self._samples,
            span_s=self._span,
            interval_ms=self.interval * 1000.0,
            pss_every=self.pss_every,
            sampler_cpu_s=self._cpu,
        )
