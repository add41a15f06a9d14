"""Change-feed cursors: the opaque strings a consumer stores between reads.

A cursor names one position of one database's change log and the change there:
``v2.<database id>.<position>.<check>``, e.g. ``v2.3f9a2b7c01de.42.9c1d0e7a``. The
database id is made when the change log is created, so a cursor kept for one database is
refused by another (a copy made with ``cp`` shares the id, which is right: it shares the
history too). Positions come from a sequence that never hands out a committed number
twice, in one database. A database restored from a backup, or a copy that went on being
fetched beside its original, numbers other changes again from where it was: the check
(a digest of the change at the position) tells them apart, so a cursor is refused rather
than silently skipping the changes now at positions up to its own. ``v1`` cursors, from
before the check, are still read.

Backend-neutral and pure: each store checks a cursor against its own id, the last
position it has issued and the change it holds at the cursor's position.
"""

from __future__ import annotations

import hashlib
import re
import secrets

from signal_feeds.errors import CursorError

__all__ = ["CURSOR_VERSION", "change_check", "format_cursor", "new_database_id",
           "parse_cursor", "verify_position"]

#: The format's version prefix: a later format can still read (or clearly refuse) these.
CURSOR_VERSION = "v2"
_DATABASE_ID_BYTES = 6  # 12 hex digits: two databases sharing one is a 1 in 2**48 chance

_CURSOR = re.compile(r"^(?:v1\.([0-9a-f]{12})\.(0|[1-9][0-9]{0,18})|"
                     r"v2\.([0-9a-f]{12})\.([1-9][0-9]{0,18})\.([0-9a-f]{8}))$")


def new_database_id() -> str:
    """A random identity for a new change log."""
    return secrets.token_hex(_DATABASE_ID_BYTES)


def change_check(key: str, fingerprint: str, changed_at: str) -> str:
    """The check of a change: 8 hex digits of the digest of its entry key, the version's
    fingerprint and when it was logged (the same on every backend and every copy)."""
    text = f"{key}\n{fingerprint}\n{changed_at}".encode()
    return hashlib.sha256(text).hexdigest()[:8]


def format_cursor(database_id: str, position: int, check: str) -> str:
    """The cursor of ``position`` (whose change has :func:`change_check` ``check``) in
    the change log of ``database_id``."""
    return f"{CURSOR_VERSION}.{database_id}.{position}.{check}"


def parse_cursor(cursor: str, *, database_id: str, last_position: int,
                 where: str) -> tuple[int, str]:
    """The position a cursor names and its check (``""`` for a ``v1`` cursor), checked
    against this database; the store then calls :func:`verify_position`.

    ``last_position`` is the highest position this database has ever issued; ``where``
    names the database in messages. Raises :class:`CursorError` for a malformed cursor,
    one from another database, and one beyond the log (the database was restored from an
    older copy: resuming would silently skip the changes numbered again).
    """
    found = _CURSOR.match(cursor.strip())
    if found is None:
        raise CursorError(f"malformed change cursor {cursor!r} (expected "
                          f"{CURSOR_VERSION}.<database id>.<position>.<check>, as printed "
                          "by 'signal changes')")
    owner = found.group(1) or found.group(3)
    position = int(found.group(2) or found.group(4))
    check = found.group(5) or ""
    if owner != database_id:
        raise CursorError(f"change cursor {cursor!r} belongs to another database "
                          f"(id {owner}); {where} has id {database_id}")
    if position > last_position:
        raise CursorError(f"change cursor {cursor!r} is ahead of the change log of {where} "
                          f"(last position {last_position}): was the database restored "
                          "from an older copy? Start again without a cursor")
    return position, check


def verify_position(cursor: str, check: str, held: tuple[str, str, str] | None, *,
                    position: int, where: str) -> None:
    """Refuse ``cursor`` unless the change this database holds at its position (``held``:
    key, fingerprint, changed_at; ``None`` when there is none) is the one it was issued
    for. A ``v1`` cursor (no ``check``) is taken as it is."""
    if not check:
        return
    if held is None or change_check(*held) != check:
        raise CursorError(f"change cursor {cursor!r} was issued for another change than "
                          f"{where} holds at position {position}: was the database "
                          "restored from an older copy, or is it a copy that went on "
                          "being written beside its original? Start again without a "
                          "cursor")
