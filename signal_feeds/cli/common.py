"""What the ``signal`` commands share: exit codes, common options, error reporting, and
finding the database (checked here, at the command line, before any store opens it)."""

from __future__ import annotations

import codecs
import json
import logging
import re
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from signal_feeds.config.source_list import DEFAULT_CONFIG_PATH, load_config
from signal_feeds.dsn import Database, is_database_url
from signal_feeds.errors import (
    ConfigError,
    DatabaseUnavailableError,
    ResourceLimitError,
    SignalError,
)
from signal_feeds.limits import refused
from signal_feeds.store.views import MOST_ROWS

if TYPE_CHECKING:
    from signal_feeds.config.source_list import Config

#: 0 ok, 1 some source (or the lookup) failed, 2 usage or configuration error.
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
#: Stopped by Ctrl-C (SIGINT): 128 + 2, as shells report it.
EXIT_INTERRUPTED = 130
#: After SIGTERM (128 + 15, as a shell reports a process that the signal ended).
EXIT_TERMINATED = 143

# No click default: a reading command must know whether the user named a config file.
config_option = click.option("--config", "config_path", default=None,
                             show_default=DEFAULT_CONFIG_PATH, type=click.Path(dir_okay=False),
                             help="The TOML source list.")
# A plain string: a SQLite file path or a postgresql:// URL (never shown with its password).
db_option = click.option("--db", "db_path", default=None, metavar="PATH|URL",
                         help="Database file, or a postgresql:// URL (default: the config's "
                              "[settings] database).")
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def _one_source(_ctx: click.Context, _param: click.Parameter,
                given: tuple[str, ...]) -> str | None:
    # Given twice, click would keep the last without a word: the reader then sees one
    # source's entries and believes it sees both.
    if len(given) > 1:
        raise click.BadParameter(f"one source at a time (given {len(given)}: "
                                 f"{', '.join(given)}); leave it out to read them all")
    return given[0] if given else None


def source_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--source ID`` of a reading command: one source, refused when repeated."""
    return click.option("--source", "source_id", metavar="ID", multiple=True,
                        callback=_one_source, help=help_text)


# C0 and C1 control characters: ESC and CSI start the sequences that move a terminal's
# cursor, recolour it, clear it or retitle its window. Feeds are untrusted text.
# Bidirectional embeddings, overrides and isolates too: a title holding U+202E shows
# the rest of the line (a duplicate's note, the next column) reversed.
_BIDI = "\u202a-\u202e\u2066-\u2069"
_CONTROLS = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")
_BREAKS = re.compile("[\t\n\r]")
# What JSON and XML output escape: JSON itself escapes the C0 controls; the rest of
# _CONTROLS it would leave raw (XML refuses C0 controls, already left out of stored text).
_ESCAPED = re.compile(f"[\x7f-\x9f{_BIDI}]")


def printable(text: str, *, lines: bool = False) -> str:
    """``text`` safe to show on a terminal: each control character (and each bidi
    embedding, override or isolate) becomes U+FFFD, and
    tabs and line breaks a space (kept, with ``lines``, where the text is several lines)."""
    if not lines:
        text = _BREAKS.sub(" ", text)
    return _CONTROLS.sub("\ufffd", text)


class _Limit(click.types.IntParamType):
    """A --limit: at least 1; a larger number than any database holds rows means all
    of them (it was an OverflowError's traceback)."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        number = super().convert(value, param, ctx)
        if number < 1:
            self.fail(f"{number} is not at least 1", param, ctx)
        return min(number, MOST_ROWS)


#: The type of every --limit option.
LIMIT_RANGE = _Limit()


def say(text: str, *, err: bool = False, lines: bool = False) -> None:
    """Print a line of human-readable output, which may quote feed text (see
    :func:`printable`). Exported files are printed as they are, JSON by :func:`say_json`."""
    click.echo(fitted(printable(text, lines=lines), err=err), err=err)


_NON_ASCII = re.compile("[^\x00-\x7f]")


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code > 0xFFFF:  # a pair of surrogates, as JSON writes it
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def fitted(text: str, *, err: bool = False, kind: str = "text") -> str:
    """``text`` as the output stream's encoding can carry it: unchanged when it can
    (UTF-8 nearly always); else JSON (``kind="json"``) with ``\\uXXXX`` escapes and XML
    (``"xml"``) with character references, both the same data, and other text with
    ``?`` for what the encoding lacks (a Latin-1 terminal and Cyrillic titles), rather
    than a UnicodeEncodeError's traceback."""
    stream = sys.stderr if err else sys.stdout
    encoding = str(getattr(stream, "encoding", None) or "utf-8")
    try:
        if codecs.lookup(encoding).name == "ascii":
            return text  # click writes UTF-8 to an ASCII stream
        text.encode(encoding)
        return text
    except UnicodeEncodeError:
        pass
    except LookupError:
        return text
    if kind == "json":
        return _NON_ASCII.sub(_json_escape, text)
    if kind == "xml":
        return text.encode("ascii", "xmlcharrefreplace").decode("ascii")
    return text.encode(encoding, "replace").decode(encoding)


def json_escaped(text: str) -> str:
    """JSON text with C1 controls, DEL and bidi embeddings, overrides and isolates
    escaped (``\\u009b``, ``\\u202e``): JSON escapes C0 controls itself but leaves these
    raw. The same data, nothing for a terminal to act on when the output is shown
    rather than piped (a U+202E reversed the rest of a JSON line, later entries too)."""
    return _ESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def xml_escaped(text: str) -> str:
    """XML text with those characters as character references (``&#x9b;``,
    ``&#x202e;``): the same document, as :func:`json_escaped` for JSON."""
    return _ESCAPED.sub(lambda m: f"&#x{ord(m.group()):x};", text)


def say_json(text: str) -> None:
    """Print JSON text (see :func:`json_escaped`)."""
    click.echo(fitted(json_escaped(text), kind="json"))


def say_json_object(head: dict[str, Any], key: str, items: Iterable[Any],
                    tail: dict[str, Any] | None = None) -> None:
    """Print, as :func:`say_json` would print ``json.dumps({**head, key: [*items],
    **tail})``, the same text, a few items at a time. As one string, 100,000 entries
    took 1.1 GB to print (json.dumps holds a piece per value), and a reader that stopped
    early (``| head``) was told nothing: a write that large ends short without an
    error, so the command exited 0 (1, as click has it, when a later write fails)."""
    opening = json.dumps(head, ensure_ascii=False)[:-1]
    pieces = [(opening + ", " if head else "{") + json.dumps(key) + ": ["]
    separator = ""
    for item in items:
        pieces.append(separator + json.dumps(item, ensure_ascii=False))
        separator = ", "
        if len(pieces) >= JSON_ITEMS_PER_WRITE:
            _write_json("".join(pieces))
            pieces = []
    closing = json.dumps(tail, ensure_ascii=False)[1:] if tail else "}"
    pieces.append("]" + (", " if tail else "") + closing)
    _write_json("".join(pieces))
    click.echo("")


#: Items of a :func:`say_json_object` list written at once.
JSON_ITEMS_PER_WRITE = 100


def _write_json(text: str) -> None:
    click.echo(fitted(json_escaped(text), kind="json"), nl=False)


def fail(exc: SignalError) -> NoReturn:
    """Print a library error (every line of it) and exit with its code."""
    say(f"signal: error: {exc}", err=True, lines=True)
    usage = isinstance(exc, ConfigError | DatabaseUnavailableError | ResourceLimitError)
    raise SystemExit(EXIT_USAGE if usage else EXIT_FAILED)


def load(config_path: str | None) -> Config:
    """The source list at ``--config``, or ``signal.toml`` in the current folder, read
    once per command: a reading command asks for it in several places (the database,
    the source titles, the known ids), and each reading logged its warnings again."""
    path = config_path or DEFAULT_CONFIG_PATH
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return load_config(path)
    read: dict[str, Config] = ctx.meta.setdefault("signal_feeds.configs", {})
    if path not in read:
        read[path] = load_config(path)
    return read[path]


def database_path(config: Config | None, db_path: str | None) -> Database:
    """The database a command opens: ``--db``, else the config's ``[settings] database``:
    a file path, or a database URL such as ``postgresql://`` (returned as given).

    A missing folder is a configuration error naming the folder and where the path came
    from; SQLite would only say "unable to open database file".
    """
    if is_database_url(db_path):
        return str(db_path)
    if db_path is not None:
        path, origin, config_file = Path(db_path).expanduser(), f"--db {db_path}", None
    elif config is not None:
        if is_database_url(config.settings.database):
            return config.settings.database
        path, origin = Path(config.settings.database), "[settings] database"
        config_file = str(config.path) if config.path else None
    else:
        raise ConfigError("no database given: pass --db PATH or --config PATH")
    return checked_file(path, origin, config_file)


_OTHER_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+://")  # not a drive letter


def checked_file(path: Path, origin: str, config_file: str | None = None) -> Path:
    """``path`` if SQLite can make or open a database there; else a configuration error
    that says why (SQLite would only say "unable to open database file")."""
    if _OTHER_URL.match(str(path).replace(":/", "://", 1)):
        raise ConfigError(f"{origin}: not a database Signal can use; give a SQLite file "
                          "path or a postgresql:// URL", path=config_file)
    folder = path.parent
    if not folder.is_dir():
        state = "is not a folder" if folder.exists() else "does not exist"
        raise ConfigError(f"{origin}: the folder {folder} {state}; create it or choose "
                          "another path", path=config_file)
    if path.is_dir():
        raise ConfigError(f"{origin}: {path} is a folder, not a database file; name a "
                          f"file in it (e.g. {path / 'signal.db'})", path=config_file)
    from signal_feeds.store.sqlite.connection import not_a_file
    from signal_feeds.store.sqlite.schema import not_signals

    if kind := not_a_file(path):
        raise ConfigError(f"{origin}: {path} is {kind}, not a database file; name a regular "
                          "file (a new one is made)", path=config_file)
    if reason := not_signals(path):
        raise ConfigError(f"{origin}: {path} is {reason}; it is left as it is",
                          path=config_file)
    return path


def reading_database(config_path: str | None, db_path: str | None) -> Database:
    """The database a reading command opens. Reading needs no source list: with ``--db``
    no config file is read at all; without it, the config's database is used."""
    if db_path is not None:
        return database_path(None, db_path)
    if config_path is None and not Path(DEFAULT_CONFIG_PATH).exists():
        raise ConfigError(
            f"no database given and no {DEFAULT_CONFIG_PATH} in this folder: pass --db PATH "
            "(a Signal database, e.g. the one 'signal demo' wrote) or --config PATH "
            "(a source list; its [settings] database is read)")
    return database_path(load(config_path), None)


def quiet_refused_threads(args: threading.ExceptHookArgs) -> None:
    """``threading.excepthook`` of the ``signal`` command: a thread of the standard
    library that ends because the system refused it a thread (the parser executor's
    manager, under ``ulimit -u``) printed its own traceback before the command's one
    line; the run notices that thread's end and stops with that line, which names the
    limit. Any other thread's error is printed as Python prints it."""
    if args.exc_value is not None and refused(args.exc_value) is not None:
        logging.getLogger("signal_feeds.cli").debug(
            "thread %s ended: %s", getattr(args.thread, "name", "?"), args.exc_value)
        return
    threading.__excepthook__(args)
