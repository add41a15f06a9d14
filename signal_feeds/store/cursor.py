"""Change-feed cursors: the opaque strings a consumer stores between reads.

A cursor names one position of one database's change log:
``v1.<database id>.<position>``, e.g. ``v1.3f9a2b7c01de.42``. The database id is made
when the change log is created, so a cursor kept for one database is refused by another
(a copy made with ``cp`` shares the id, which is right: it shares the history too).
Positions come from a sequence that never hands out a committed number twice.

Backend-neutral and pure: each store checks a cursor against its own id and the last
position it has issued.
"""

from __future__ import annotations

import re
import secrets

from signal_feeds.errors import CursorError

__all__ = ["CURSOR_VERSION", "format_cursor", "new_database_id", "parse_cursor"]

#: The format's version prefix: a later format can still read (or clearly refuse) these.
CURSOR_VERSION = "v1"
_DATABASE_ID_BYTES = 6  # 12 hex digits: two databases sharing one is a 1 in 2**48 chance

_CURSOR = re.compile(r"^v1\.([0-9a-f]{12})\.(0|[1-9][0-9]{0,18})$")


def new_database_id() -> str:
    """A random identity for a new change log."""
    return secrets.token_hex(_DATABASE_ID_BYTES)


def format_cursor(database_id: str, position: int) -> str:
    """The cursor of ``position`` in the change log of ``database_id``."""
    return f"{CURSOR_VERSION}.{database_id}.{position}"


def parse_cursor(cursor: str, *, database_id: str, last_position: int,
                 where: str) -> int:
    """The position a cursor names, checked against this database.

    ``last_position`` is the highest position this database has ever issued; ``where``
    names the database in messages. Raises :class:`CursorError` for a malformed cursor,
    one from another database, and one beyond the log (the database was restored from an
    older copy: resuming would silently skip the changes numbered again).
    """
    found = _CURSOR.match(cursor.strip())
    if found is None:
        raise CursorError(f"malformed change cursor {cursor!r} (expected "
                          f"{CURSOR_VERSION}.<database id>.<position>, as printed by "
                          "'signal changes')")
    owner, position = found.group(1), int(found.group(2))
    if owner != database_id:
        raise CursorError(f"change cursor {cursor!r} belongs to another database "
                          f"(id {owner}); {where} has id {database_id}")
    if position > last_position:
        raise CursorError(f"change cursor {cursor!r} is ahead of the change log of {where} "
                          f"(last position {last_position}): was the database restored "
                          "from an older copy? Start again without a cursor")
    return position
