"""Where a database is: a SQLite file path or a PostgreSQL URL, and how to name it safely.

A PostgreSQL URL may carry a password (``postgresql://user:secret@host/db``). Every place
that names a database in a message, a report or a log line goes through
:func:`display_database`, and every error text that may echo a connection string through
:func:`redact`, so the password never leaves the process. No driver is imported here.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

__all__ = ["PASSWORD_MASK", "POSTGRES_SCHEMES", "URL_SCHEMES", "Database", "as_database",
           "display_database", "is_database_url", "is_postgres_url", "mask_password",
           "not_a_location", "redact"]

#: What a URL's password is replaced with wherever it is shown.
PASSWORD_MASK = "***"
#: URL schemes that select the PostgreSQL store (libpq accepts both).
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
#: Every URL scheme that names a database Signal opens (a store backend's; anything else
#: is a SQLite file path). A config's ``database``, ``--db`` and ``signal copy`` keep
#: such a location as the string it is, and :func:`display_database` masks its password.
URL_SCHEMES: tuple[str, ...] = POSTGRES_SCHEMES

#: A database location: a SQLite file path, or a PostgreSQL URL (a ``str``).
Database = Path | str

# libpq keyword/value strings ("host=... password=secret") can appear in driver messages.
_KEYWORD_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def as_database(database: str | Path) -> Database:
    """A location as given: a database URL stays a string (``Path`` would fold its
    ``//``), and so does a URL of another kind, for :func:`not_a_location` to refuse
    where it is opened; anything else is a file path."""
    if is_database_url(database) or not_a_location(database):
        return str(database).strip()
    return Path(database)


def is_database_url(database: object) -> bool:
    """True if ``database`` is a URL of one of :data:`URL_SCHEMES` (a string): a
    database a backend reaches by URL, not a SQLite file path."""
    return isinstance(database, str) and database.strip().lower().startswith(URL_SCHEMES)


def is_postgres_url(database: object) -> bool:
    """True if ``database`` is a ``postgresql://`` or ``postgres://`` URL (a string)."""
    return isinstance(database, str) and database.strip().lower().startswith(POSTGRES_SCHEMES)


_URL = re.compile(r"^\s*([A-Za-z][A-Za-z0-9+.-]*)://")


def not_a_location(database: object) -> str:
    """Why ``database`` names no database Signal opens, or ``""``. A URL of another kind
    (SQLAlchemy's ``sqlite:///signal.db``, ``mysql://...``) was taken for a relative
    path: the error said that a folder ``sqlite:`` does not exist, and where one did,
    a database was made in it."""
    found = _URL.match(database) if isinstance(database, str) else None
    if found is None or is_database_url(database):
        return ""
    return (f"not a database Signal can use ({found[1]}:// URL); give a SQLite file path "
            "(signal.db, not sqlite:///signal.db) or a postgresql:// URL")


def _userinfo(url: str) -> tuple[str, str, str] | None:
    """``(scheme and user, password, rest from the "@" on)`` of a URL whose user info
    has a password, else ``None``.

    First as libpq reads a URL: the user info runs to the first "@" that comes before
    any "/" (so ``postgresql://u:ab#cd?ef@host/db`` connects with the password
    ``ab#cd?ef``, where ``urlsplit`` sees a fragment and no password at all, and the
    message showed it whole). Then more is masked rather than less, for a password
    mistyped with "@" or "/" in it, which libpq misreads and whose message then echoes
    the URL: the user info runs on to the last "@" before the host's "/"
    (``u:p@ssword@host``, ``admin@srv:secret@host``), or, when libpq found none, to
    the first "@" unless a port comes first (``u:pa/ss@host``, not
    ``host:5432/db?name=a@b``).
    """
    start = url.find("://")
    if start == -1:
        return None
    start += 3
    path = url.find("/", start)
    path = len(url) if path == -1 else path
    first = url.find("@", start, path)
    if first == -1:  # libpq sees no user info
        at = url.find("@", start)
        user, colon, secret = url[start:at].partition(":")
        if at == -1 or not colon or any(c in user for c in "/?#[]") \
                or _PORT_THEN.match(secret):
            return None
        return url[:start] + user, secret, url[at:]
    # A mistyped password's own "@"s: on to the last "@" before the host's "/" and
    # before a query after the first "@" (whose "@"s are the query's).
    query = url.find("?", first, path)
    at = url.rfind("@", start, path if query == -1 else query)
    user, colon, secret = url[start:at].partition(":")
    if not colon:
        return None
    return url[:start] + user, secret, url[at:]


_PORT_THEN = re.compile(r"\d+(?:[/?]|$)")
#: A query parameter (``?name=value`` or ``&name=value``), to its end.
_QUERY_PARAMETER = re.compile(r"([?&])([^=&#?]*)=([^&#]*)")


def _password(url: str) -> str | None:
    found = _userinfo(url)
    return found[1] if found else None


def mask_password(url: str) -> str:
    """``url`` with its password (if any) replaced by :data:`PASSWORD_MASK`; also masks a
    ``password=`` query parameter. Anything that cannot be parsed as a URL is masked as
    a keyword/value string."""
    # The query's password first (an "@" in it is no user info), its name read as
    # libpq reads it, percent-decoded (``pass%77ord``).
    url = _QUERY_PARAMETER.sub(_masked_parameter, url)
    found = _userinfo(url)
    if found is not None:
        url = f"{found[0]}:{PASSWORD_MASK}{found[2]}"
    return url


def _masked_parameter(found: re.Match[str]) -> str:
    if unquote(found.group(2)).strip().lower() != "password":
        return found.group()
    return f"{found.group(1)}{found.group(2)}={PASSWORD_MASK}"


_SHORTEST_REDACTED = 4


def redact(text: str, url: str) -> str:
    """``text`` (e.g. a driver's error message) with every form of ``url``'s password
    masked, and the URL itself shown masked."""
    secret = _password(url)
    text = text.replace(url, mask_password(url))
    if secret:
        # Its pieces too: libpq misreads a password with "@" or "/" in it, and its
        # message names what it took for the host (``ssword@host`` of ``p@ssword``).
        pieces = {secret, unquote(secret), *re.split(r"[@/:]", secret)}
        for form in sorted(pieces, key=len, reverse=True):
            # A password of a few characters is masked in the URL, not wherever its
            # letters occur in a driver's message (every "p" of it for "p").
            if len(form) >= _SHORTEST_REDACTED:
                text = text.replace(form, PASSWORD_MASK)
    return _KEYWORD_PASSWORD.sub(rf"\g<1>{PASSWORD_MASK}", text)


def display_database(database: Database) -> str:
    """How a database is named in messages: a path as is, a URL without its password."""
    if is_database_url(database):
        return mask_password(str(database))
    return str(database)
