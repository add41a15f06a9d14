"""A source list's bytes as text, or a configuration error saying what the file is."""

from __future__ import annotations

from pathlib import Path

from signal_feeds.errors import ConfigError

__all__ = ["config_text"]

#: The first bytes of every SQLite database file.
_SQLITE_HEADER = b"SQLite format 3\x00"


def config_text(raw: bytes, path: Path) -> str:
    """The config file's text. TOML files are UTF-8; one saved as UTF-16 or in a legacy
    encoding is named so, with the place of its first byte that is not UTF-8. (UTF-16
    without a BOM was "Invalid statement": its first character's NUL is valid UTF-8.)"""
    if raw.startswith(_SQLITE_HEADER):
        # --config given the database (meant --db) was "not UTF-8 ... save it as UTF-8".
        raise ConfigError("this is a SQLite database, not a source list: a database is "
                          "named with --db (or [settings] database in the source list)",
                          path=str(path))
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in raw[:2]:  # or no BOM
        raise ConfigError("the file is UTF-16, and TOML files are UTF-8: save it as UTF-8",
                          path=str(path))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - raw.rfind(b"\n", 0, exc.start)
        raise ConfigError(f"not UTF-8 at line {line}, column {column} (byte "
                          f"0x{raw[exc.start]:02x}), and TOML files are UTF-8: save it as "
                          "UTF-8", path=str(path)) from exc
