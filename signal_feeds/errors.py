"""The library's exception hierarchy.

Every error raised by Signal is a :class:`SignalError`. Exceptions from the network
(httpx, httpcore, ssl), feedparser, sqlite3 and tomllib are translated at the module
boundary (``raise ... from exc``), so a caller never has to know which dependency failed.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable, Iterator
from typing import Any

# shown lives with the text cutting so that urls (a sibling of this module) uses it too.
from signal_feeds.graphemes import shown

__all__ = [
    "ConfigError",
    "ContradictionError",
    "CursorError",
    "DatabaseUnavailableError",
    "FetchError",
    "ParseError",
    "QueryError",
    "ResourceLimitError",
    "SignalError",
    "StoreError",
    "causes",
    "did_you_mean",
    "log_level_of",
    "shown",
]


def causes(exc: BaseException, *, most: int | None = None) -> Iterator[BaseException]:
    """``exc``, then what it was raised from (``__cause__``, else ``__context__``), and
    so on: at most ``most`` of them, each once (a chain may loop)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and (
            most is None or len(seen) < most):
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``; did you mean NAME?`` for the known name nearest a mistyped one, or ``""``:
    the hint every error about an unknown key or id ends with."""
    names = sorted(known)
    # Compared in lower case: difflib finds nothing near "URL" or "Id" (a key typed with
    # a capital), which are the commonest misspellings of url and id.
    by_lower = {name.lower(): name for name in reversed(names)}
    near = difflib.get_close_matches(word.lower(), list(by_lower), n=1)
    return f"; did you mean {by_lower[near[0]]}?" if near else ""


class SignalError(Exception):
    """Base class of every error Signal raises.

    ``source_id`` names the source the error concerns, or is ``None`` when the error is
    not about one source (a config file that cannot be read, a database that cannot be
    opened).
    """

    def __init__(self, message: str, *, source_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.source_id = source_id

    def __str__(self) -> str:
        if self.source_id is None:
            return self.message
        return f"{self.source_id}: {self.message}"

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (a worker process's error) and copied from its attributes, not by
        # calling the class with ``args`` again: QueryError and ContradictionError take
        # keyword-only arguments that ``args`` does not hold.
        return _rebuilt, (type(self), self.args), self.__dict__


def _rebuilt(cls: type[SignalError], args: tuple[Any, ...]) -> SignalError:
    """An error of ``cls`` with these ``args``; its attributes are set after."""
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    return error


class ConfigError(SignalError):
    """The source list or settings are invalid; names the file and the entry.

    ``problems`` lists every problem found, each with its place in the file (a config
    file is checked as a whole, so one run shows them all); ``message`` says them all.
    """

    def __init__(
        self, message: str, *, path: str | None = None, source_id: str | None = None,
        problems: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message, source_id=source_id)
        self.path = path
        self.problems = problems or (message,)
        # Problems from the validator already say which source they concern.
        self._located = bool(problems)

    def __str__(self) -> str:
        where = [self.path] if self.path else []
        if self.source_id is not None and not self._located:
            where.append(f"source {self.source_id!r}")
        return ": ".join([*where, self.message])


class QueryError(ConfigError):
    """Something the user typed to read the aggregate is not valid: a search expression
    with bad syntax, a key prefix that is too short or matches several entries. A usage
    error (the command exits 2); ``query`` is the text as given."""

    def __init__(self, message: str, *, query: str) -> None:
        super().__init__(message)
        self.query = query


class FetchError(SignalError):
    """The HTTP exchange failed: network error, timeout, size cap, redirect policy."""

    def __init__(self, message: str, *, source_id: str | None = None, reason: str = "") -> None:
        super().__init__(message, source_id=source_id)
        #: A short machine-readable reason such as ``"timeout"`` or ``"too_large"``.
        self.reason = reason


class ParseError(SignalError):
    """The body could not be read as a feed."""


class ContradictionError(SignalError):
    """One response holds two different versions of the same entry key."""

    def __init__(self, problem: str, *, source_id: str, key: str, remote_id: str) -> None:
        # The one place this message is put together: the run's report, the fetch row
        # and ``signal parse`` all show it. Remote ids may be 2,048 characters long.
        shown = remote_id if len(remote_id) <= _ID_SHOWN else remote_id[:_ID_SHOWN] + "…"
        named = f"remote id {shown!r}" if remote_id else "no remote id"
        super().__init__(f"{problem} (key {key}, {named}); the response is rejected",
                         source_id=source_id)
        self.key = key
        self.remote_id = remote_id


#: Characters of a remote id a contradiction's message shows.
_ID_SHOWN = 200


class StoreError(SignalError):
    """The database could not be opened, read or written."""


class CursorError(StoreError):
    """A change-feed cursor that this database cannot resume from: malformed, issued by
    another database, or ahead of the change log (a database restored from an older
    copy). Resuming from a guess would skip or repeat changes silently."""


class DatabaseUnavailableError(StoreError):
    """The database server cannot be reached or refuses us: a malformed URL, a refused
    connection, a wrong password, an unknown database, or a server that went away; or
    a SQLite file that cannot be opened or written (a read-only file or folder); or a
    database a newer Signal made. A problem of the setup rather than of one source (the
    command exits 2). The message names the database without its password."""


class ResourceLimitError(SignalError):
    """The system refused the run a process, a thread or a file descriptor it needs to
    start (a limit on processes, ``ulimit -u`` or a container's pids limit, or on open
    files, ``ulimit -n``). A problem of the setup rather than of one source (the command
    exits 2)."""


def log_level_of(exc: BaseException) -> int:
    """How loud a cleanup that failed with ``exc`` is logged (a lease not given back, a
    batch not committed): a warning, but only debug output when the database is gone,
    since the run then stops with one line that says so, which a warning per source
    would bury."""
    return logging.DEBUG if isinstance(exc, DatabaseUnavailableError) else logging.WARNING
