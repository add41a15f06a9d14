"""Where a database is: a SQLite file path or a PostgreSQL URL, and how to name it safely.

A PostgreSQL URL may carry a password (``postgresql://user:secret@host/db``). Every place
that names a database in a message, a report or a log line goes through
:func:`display_database`, and every error text that may echo a connection string through
:func:`redact`, so the password never leaves the process. No driver is imported here.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

__all__ = ["PASSWORD_MASK", "POSTGRES_SCHEMES", "Database", "as_database", "display_database",
           "is_postgres_url", "mask_password", "redact"]

#: What a URL's password is replaced with wherever it is shown.
PASSWORD_MASK = "***"
#: URL schemes that select the PostgreSQL store (libpq accepts both).
POSTGRES_SCHEMES = ("postgresql://", "postgres://")

#: A database location: a SQLite file path, or a PostgreSQL URL (a ``str``).
Database = Path | str

# libpq keyword/value strings ("host=... password=secret") can appear in driver messages.
_KEYWORD_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def as_database(database: str | Path) -> Database:
    """A location as given: a PostgreSQL URL stays a string (``Path`` would fold its
    ``//``), anything else is a file path."""
    return str(database).strip() if is_postgres_url(database) else Path(database)


def is_postgres_url(database: object) -> bool:
    """True if ``database`` is a ``postgresql://`` or ``postgres://`` URL (a string)."""
    return isinstance(database, str) and database.strip().lower().startswith(POSTGRES_SCHEMES)


def _userinfo(url: str) -> tuple[str, str, str] | None:
    """``(scheme and user, password, rest from the "@" on)`` of a URL whose user info
    has a password, else ``None``. Split as libpq splits it, at the first "@" after the
    scheme, not as a web URL is: libpq takes ``postgresql://u:ab#cd?ef@host/db`` with
    the password ``ab#cd?ef``, where ``urlsplit`` sees a fragment and no password at
    all, and the message showed it whole. (A "/" in it is taken as the password's too:
    shown, a mistyped URL would print the secret.)"""
    start = url.find("://")
    if start == -1:
        return None
    start += 3
    at = url.find("@", start)
    if at == -1:
        return None
    user, colon, secret = url[start:at].partition(":")
    if not colon or ("/" in secret and secret.split("/", 1)[0].isdigit()):
        return None  # no password: host:port/db?...@ (an "@" in the query)
    return url[:start] + user, secret, url[at:]


def _password(url: str) -> str | None:
    found = _userinfo(url)
    return found[1] if found else None


def mask_password(url: str) -> str:
    """``url`` with its password (if any) replaced by :data:`PASSWORD_MASK`; also masks a
    ``password=`` query parameter. Anything that cannot be parsed as a URL is masked as
    a keyword/value string."""
    found = _userinfo(url)
    if found is not None:
        url = f"{found[0]}:{PASSWORD_MASK}{found[2]}"
    try:
        parts = urlsplit(url)
    except ValueError:
        return _KEYWORD_PASSWORD.sub(rf"\g<1>{PASSWORD_MASK}", url)
    query = re.sub(r"(^|&)(password=)[^&]*", rf"\1\2{PASSWORD_MASK}", parts.query,
                   flags=re.IGNORECASE)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


def redact(text: str, url: str) -> str:
    """``text`` (e.g. a driver's error message) with every form of ``url``'s password
    masked, and the URL itself shown masked."""
    secret = _password(url)
    text = text.replace(url, mask_password(url))
    if secret:
        for form in {secret, unquote(secret)}:
            if form:
                text = text.replace(form, PASSWORD_MASK)
    return _KEYWORD_PASSWORD.sub(rf"\g<1>{PASSWORD_MASK}", text)


def display_database(database: Database) -> str:
    """How a database is named in messages: a path as is, a URL without its password."""
    if is_postgres_url(database):
        return mask_password(str(database))
    return str(database)
