"""The process's own limits as a run meets them: a thread, a process or a descriptor the
system refuses (``ulimit -u``, ``ulimit -n``, a container's pids limit), and how many
descriptors are left for connections.

A refusal is the machine's setup, not one source's failure: every source after it would
fail the same, each with a traceback ("unexpected error"). It becomes one
:class:`~signal_feeds.errors.ResourceLimitError` that names the limit, and the run stops.
"""

from __future__ import annotations

import errno
import logging
import os

from signal_feeds.errors import ResourceLimitError, causes

log = logging.getLogger("signal_feeds.run")

__all__ = ["DESCRIPTOR_RESERVE", "bounded_concurrency", "descriptors", "refused",
           "stop_if_refused"]

#: Errors of starting a process or a thread (fork's EAGAIN, a stack's ENOMEM) or of
#: opening a descriptor.
_NO_RESOURCE = {errno.EAGAIN, errno.EMFILE, errno.ENFILE, errno.ENOMEM}
#: Of those, the ones that mean the same wherever they come from (a non-blocking socket
#: says EAGAIN too, and says nothing about a limit).
_NO_DESCRIPTOR = {errno.EMFILE, errno.ENFILE}
#: Descriptors a run needs besides its connections: the database and its -wal, -shm
#: and -hosts files, the pipes of a parser executor started again after a worker died,
#: name lookups, an outcome's handover file, CA certificates.
DESCRIPTOR_RESERVE = 12


def _what(exc: BaseException, *, direct: bool) -> str:
    """"open files" or "processes" when ``exc`` is the system refusing one, else ''."""
    if isinstance(exc, OSError) and exc.errno in (_NO_RESOURCE if direct else _NO_DESCRIPTOR):
        return "open files" if exc.errno in _NO_DESCRIPTOR else "processes"
    if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
        return "processes"
    if isinstance(exc, MemoryError) and _address_space_limit():
        return "memory"  # under ulimit -v, not a feed's size (a worker's own cap)
    return ""


def refused(exc: BaseException, doing: str = "the run could not go on"
            ) -> ResourceLimitError | None:
    """The error to report when ``exc`` (or what caused it: an httpx error wraps the
    socket's EMFILE) is the system refusing a thread, a process or a descriptor, else
    ``None``. ``doing`` says what was refused, as the message's start."""
    found = next(((seen, what) for depth, seen in enumerate(causes(exc, most=8))
                  if (what := _what(seen, direct=depth == 0))), None)
    if found is None:
        return None
    seen, what = found
    limit = "ulimit -n" if what == "open files" else "ulimit -u, or a container's pids limit"
    if what == "memory":
        limit = f"ulimit -v, now {_address_space_limit()} KB"
    elif what == "processes" and (memory := _address_space_limit()):
        # A thread's stack, or a forked copy, that does not fit says the same.
        what, limit = "processes or on memory", f"ulimit -u, or ulimit -v, now {memory} KB"
    shown = str(seen) or type(seen).__name__  # a MemoryError has no message
    return ResourceLimitError(f"{doing}: {shown} (the limit on {what}, {limit}, is too "
                              "low for this job: raise it)")


def _address_space_limit() -> int:
    """This process's address space limit in KB (``ulimit -v``), or 0 when unlimited."""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError):
        return 0
    return 0 if limit == resource.RLIM_INFINITY else int(limit) // 1024


def descriptors() -> tuple[int, int] | None:
    """``(open, limit)``: the descriptors this process has open and its soft limit on
    them, or ``None`` where either is unknown or there is no limit."""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return None
    if limit == resource.RLIM_INFINITY:
        return None
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(folder)) - 1, int(limit)  # less listdir's own
        except OSError as exc:
            if exc.errno in _NO_DESCRIPTOR:  # not one left to list them with
                return int(limit), int(limit)
    return None


def bounded_concurrency(concurrency: int) -> int:
    """``concurrency``, or fewer requests when this process's open-file limit leaves no
    descriptors for that many connections: then a warning says so, and what to change.
    (Each request in flight holds a socket; past the limit every further connection
    failed with "Too many open files".) Raises :class:`ResourceLimitError` when not one
    connection fits."""
    known = descriptors()
    if known is None:
        return concurrency
    used, limit = known
    room = limit - used - DESCRIPTOR_RESERVE
    if room >= concurrency:
        return concurrency
    if room < 1:
        raise ResourceLimitError(
            f"too few open files for a run: {used} of this process's limit of {limit} "
            f"are in use and a run needs {DESCRIPTOR_RESERVE} more besides its "
            "connections (the limit on open files, ulimit -n, is too low for this job: "
            "raise it)")
    log.warning("concurrency lowered from %d to %d for this run: the limit on open files "
                "(ulimit -n) is %d, and each request in flight needs one; raise "
                "'ulimit -n' to at least %d, or set concurrency = %d",
                concurrency, room, limit, used + DESCRIPTOR_RESERVE + concurrency, room)
    return room


def stop_if_refused(exc: Exception) -> None:
    """Raise ``exc`` again if it is a :class:`ResourceLimitError`, or the one
    :func:`refused` makes of it; else return (the error is one source's)."""
    if isinstance(exc, ResourceLimitError):
        raise exc
    if (refusal := refused(exc)) is not None:
        raise refusal from exc
