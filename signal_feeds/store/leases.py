"""Work sharing between ``signal fetch`` workers: leases on sources, and host slots.

Several workers (processes, on one host or several) may run against one database with
the same source list. Each claims the due sources it will fetch by writing a **lease**
on the source's row: its worker id, when it took it, and when the lease expires. A source
with a lease that has not expired is not claimed by anyone else. The worker gives the
lease back in the transaction that stores the source's response (or its failure), the
same transaction that moves the source's next poll forward: a worker that claims later
finds it not due, so each due source is fetched by one worker per interval. A worker
that dies holds its leases until they expire; then any worker's next run takes those
sources. On the dead worker's own host that wait is skipped: a ``host:pid:N`` lease whose
process is gone (:func:`owner_is_gone`) is taken at once.

Which sources may be claimed is decided here, by :func:`choose_claims`, over plain data;
each backend reads the candidate rows and writes the leases in one transaction (SQLite:
``BEGIN IMMEDIATE``; PostgreSQL: ``SELECT … FOR UPDATE SKIP LOCKED``). Lease times come
from the database's clock where it has one (PostgreSQL's ``now()``), so that workers on
hosts with different clocks agree on whether a lease has expired; whether a source is
due is judged with the worker's clock, the clock that wrote its next poll time.

The per-host limit across workers goes through a :class:`HostGate`: ``per_host`` slots
per host name that a process holds while its request is in flight and that die with the
process (SQLite: byte-range locks on a file next to the database; PostgreSQL:
session-level advisory locks on a connection of their own).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import os
import socket
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from signal_feeds.config.source_list import DEFAULT_LEASE_SECONDS
from signal_feeds.decide.schedule import DEFAULT_DUE_SLACK, check_due

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "MAX_SLOTS_PER_HOST",
    "Candidate",
    "HostGate",
    "Lease",
    "choose_claims",
    "host_key",
    "may_claim",
    "owner_is_gone",
    "owners_gone",
    "this_host",
    "worker_id",
]

#: Slots a host can have in a :class:`HostGate` (a larger ``per_host`` is capped here).
MAX_SLOTS_PER_HOST = 1024


def worker_id(name: str = "") -> str:
    """A run's worker id: ``name`` if given, else ``host:pid:N``, N counting this
    process's runs (two runs at once in one program must not share an id: each would
    take the other's leases for its own and fetch every source again).

    A given name must be unique among the workers running at one time: a run gives
    back every lease its worker id holds when it ends.
    """
    return name or f"{this_host()}:{os.getpid()}:{next(_RUNS)}"


_RUNS = itertools.count(1)
#: What ``/proc/self/ns/pid`` names for the kernel's first PID namespace (the host's).
_HOST_PID_NAMESPACE = "pid:[4026531836]"


def _pid_namespace() -> str:
    """This process's PID namespace as ``/proc`` names it, or ``""`` where it cannot."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def this_host() -> str:
    """The host part of this process's worker ids: the host name, with the PID namespace
    (``name@pidns4026532451``) in a container that has one of its own. Containers on
    host networking share the host's name but not its pids; without it, one would take
    another's live worker for a dead one of its own and its leases for free."""
    name = socket.gethostname()
    namespace = _pid_namespace()
    inode = namespace.removeprefix("pid:[").removesuffix("]")
    if namespace == _HOST_PID_NAMESPACE or not inode.isdigit():
        return name
    return f"{name}@pidns{inode}"


def owner_is_gone(owner: str) -> bool:
    """True for a ``host:pid:N`` (or, before 2026-12-07, ``host:pid``) worker id of
    this host (:func:`this_host`, so also of this PID namespace) whose process no longer
    runs: its leases need not wait for their expiry. Any other id (another host or
    container, a given name, a live process, a reused pid) is taken as alive, and its
    leases as valid."""
    host, _, pid = owner.rpartition(":")
    if host.count(":") == 1 and pid.isdigit():  # host:pid:N
        host, _, pid = host.rpartition(":")
    if host != this_host() or not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's live process
        return False
    return _zombie(int(pid))


def _zombie(pid: int) -> bool:
    """A process that has exited but not been reaped yet (its parent has not waited
    for it): signal 0 still reaches it, and its leases are as dead as its work."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # "pid (name) S ...": the state follows the last ")" (a name may hold one).
            return stat.read().rpartition(b")")[2].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):  # no /proc here, or it went meanwhile
        return False


@dataclass(frozen=True)
class Lease:
    """Who holds a source and since when (what ``signal sources`` shows)."""

    owner: str
    leased_at: dt.datetime
    expires: dt.datetime

    def active(self, now: dt.datetime) -> bool:
        """True until the lease expires."""
        return self.expires > now


@dataclass(frozen=True)
class Candidate:
    """What a claim needs to know of one source's stored row (``stored_url`` is
    ``None`` when the source has no row yet)."""

    source_id: str
    stored_url: str | None = None
    next_due_at: dt.datetime | None = None
    retry_after: dt.datetime | None = None
    gone: bool = False
    lease: Lease | None = None


def may_claim(candidate: Candidate, *, url: str, owner: str, now: dt.datetime,
              lease_now: dt.datetime, force: bool,
              gone: Collection[str] = frozenset()) -> bool:
    """Whether ``owner`` may claim this source (configured at ``url``).

    Not while another worker's lease is active (by ``lease_now``, the database's clock)
    unless that worker is one of ``gone`` (dead processes, see :func:`owner_is_gone`);
    then only if it is due by ``now`` (the worker's clock), as the run's decider would
    judge it: a source never stored, or stored for another URL, is due; a gone source
    and a pending ``Retry-After`` never are; ``force`` ignores the schedule.
    """
    lease = candidate.lease
    if lease is not None and lease.owner != owner and lease.active(lease_now) \
            and lease.owner not in gone:
        return False
    if candidate.stored_url is None or candidate.stored_url != url:
        return True
    # With the longest slack the decider may allow (a source's own, from its
    # min_interval, is never more): a claim refused where the decider would fetch left
    # the source reported "leased", and an hourly cron job still skipped every other run.
    return check_due(now=now, gone=candidate.gone, next_due_at=candidate.next_due_at,
                     retry_after=candidate.retry_after, force=force,
                     slack=DEFAULT_DUE_SLACK).status == "due"


def choose_claims(candidates: Sequence[Candidate], urls: Mapping[str, str], *, owner: str,
                  now: dt.datetime, lease_now: dt.datetime, force: bool,
                  limit: int, gone: Collection[str] = frozenset()) -> list[str]:
    """The ids of at most ``limit`` sources to claim, in the order of ``candidates``."""
    chosen: list[str] = []
    for candidate in candidates:
        if len(chosen) >= limit:
            break
        url = urls.get(candidate.source_id)
        if url is not None and may_claim(candidate, url=url, owner=owner, now=now,
                                         lease_now=lease_now, force=force, gone=gone):
            chosen.append(candidate.source_id)
    return chosen


def owners_gone(candidates: Iterable[Candidate]) -> frozenset[str]:
    """The lease holders among ``candidates`` that :func:`owner_is_gone` says are dead."""
    owners = {c.lease.owner for c in candidates if c.lease is not None}
    return frozenset(o for o in owners if owner_is_gone(o))


def host_key(host: str) -> int:
    """A stable 31-bit number for a host name (lower-cased): the same in every process
    and on every machine, unlike ``hash()``."""
    raw = hashlib.sha256(host.lower().encode("utf-8")).digest()
    return int.from_bytes(raw[:4], "big") & 0x7FFF_FFFF


class HostGate(Protocol):
    """``per_host`` slots per host, shared by every worker on the database.

    :meth:`take` never waits: it returns the slot it took, or ``None`` when every slot
    is held (the caller waits and asks again). Slots are held by the process and die
    with it. Thread-safe; the calls may block briefly on I/O.

    A request that found every slot held joins the host's line (:meth:`join_line`) and
    asks again ``in_line``; a request's first ask gets no slot while another process
    has one in line. Otherwise a worker handing its slot on to its own next request of
    the host took it back at once, every time, and a request of another worker, asking
    only every 50-75 ms, waited for as long as the first had requests for the host
    (until it failed as if a worker were hung).
    """

    #: True when :meth:`take` and :meth:`give_back` never wait on I/O (locks on a
    #: local file): the run then calls them on its event loop rather than a thread.
    instant: bool

    def take(self, host: str, per_host: int, *, in_line: bool = False) -> int | None:
        """Take a free slot of ``host`` (one of ``per_host``), or ``None`` (also when
        not ``in_line`` and another process has a request in the host's line)."""
        ...

    def give_back(self, host: str, slot: int) -> None:
        """Give back a slot :meth:`take` returned; never raises."""
        ...

    def join_line(self, host: str) -> None:
        """One more of this process's requests waits for a slot of ``host``; never
        raises (a line not joined is only less fair)."""
        ...

    def leave_line(self, host: str) -> None:
        """One of them no longer waits (it took a slot or gave up); never raises."""
        ...

    def close(self) -> None:
        """Give back every slot and release the resources."""
        ...
