"""The reading commands: ``entries``, ``history``, ``lookup``, ``export``, ``dedupe`` and
``sources import-opml``. Each calls one library function (reading, dedupe, opml) and
prints; ``--json`` prints one JSON document. Exit codes as in :mod:`.cli`: 0 ok, 1 not
found or failed, 2 usage or configuration error."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from signal_feeds.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    LIMIT_RANGE,
    config_option,
    db_option,
    fail,
    fitted,
    json_escaped,
    json_option,
    load,
    reading_database,
    say,
    say_json,
    say_json_object,
    source_option,
    xml_escaped,
)
from signal_feeds.config.source_list import DEFAULT_CONFIG_PATH, Config, Settings
from signal_feeds.dsn import Database
from signal_feeds.errors import ConfigError, SignalError
from signal_feeds.graphemes import cut_text
from signal_feeds.held import Hold, remove_abandoned_in
from signal_feeds.identity.search_text import searchable_text
from signal_feeds.timeutil import parse_since as since_bound

if TYPE_CHECKING:  # the store (and through it the parser) loads only when a command runs
    from signal_feeds.records import StoredVersion
    from signal_feeds.store import FeedStore

__all__ = ["dedupe", "entries", "entry_line", "existing_database", "export", "history",
           "import_opml", "lookup", "open_store", "parse_since", "reading_settings",
           "selection_options", "write_whole"]

def existing_database(config_path: str | None, db_path: str | None) -> Database:
    """The database to read: ``--db`` (no config file needed), else the config's; never
    created by a read (a file must exist; a PostgreSQL database is the server's)."""
    path = reading_database(config_path, db_path)
    if isinstance(path, Path) and not path.exists():
        raise ConfigError(f"no database at {path}; run 'signal fetch' first")
    from signal_feeds.store.sqlite.schema import not_signals

    if isinstance(path, Path) and (reason := not_signals(path, empty_ok=False)):
        raise ConfigError(f"{path} is {reason}; run 'signal fetch' first")
    return path


def open_store(config_path: str | None, db_path: str | None) -> FeedStore:
    """The :func:`existing_database`, opened with the config's ``busy_timeout``."""
    from signal_feeds.store import open_store as open_database

    path = existing_database(config_path, db_path)
    settings = reading_settings(config_path, db_path)
    return open_database(path, busy_timeout=settings.busy_timeout)


def _source_list(config_path: str | None, db_path: str | None) -> Config | None:
    """The source list a reading command reads: none with ``--db`` alone (the database
    is read as it is, whatever ``signal.toml`` the current folder holds), else the
    config."""
    if db_path is not None and config_path is None:
        return None
    return load(config_path)


def reading_settings(config_path: str | None, db_path: str | None) -> Settings:
    """The config's settings (for ``busy_timeout``), or the defaults without one."""
    config = _source_list(config_path, db_path)
    return config.settings if config is not None else Settings()


def _source_titles(config_path: str | None, db_path: str | None) -> dict[str, str]:
    """The config's source titles, if there is a config (without one the stored feed
    titles are used)."""
    config = _source_list(config_path, db_path)
    return {s.id: s.title for s in config.sources if s.title} if config is not None else {}


def _sources_as_opml(config_path: str | None, db_path: str | None) -> str:
    """The source list as OPML, each feed by its configured title, else the feed's own
    (once fetched), else its id; with ``--db`` alone, the sources the database holds."""
    from signal_feeds.config.opml import opml_document

    config = _source_list(config_path, db_path)
    if config is None:
        with open_store(config_path, db_path) as store:
            states = store.source_states()
        return opml_document([(s.feed_title or s.source_id, s.url, s.source_id)
                              for s in states])
    fetched: dict[str, str] = {}
    database = reading_database(config_path, db_path)
    if not isinstance(database, Path) or database.exists():  # else nothing fetched yet
        with open_store(config_path, db_path) as store:
            fetched = {s.source_id: s.feed_title for s in store.source_states()}
    return opml_document([(s.title or fetched.get(s.id) or s.id, s.url, s.id)
                          for s in config.sources])


def known_source(store: FeedStore, source_id: str | None, config_path: str | None,
                 db_path: str | None) -> None:
    """Called when a ``--source`` selection found nothing: a usage error (exit 2) if no
    source has that id, so a typo is not read as "nothing yet"."""
    from signal_feeds.store.reading import check_source

    if source_id is None:
        return
    config = _source_list(config_path, db_path)
    check_source(store, source_id,
                 configured={s.id for s in config.sources} if config is not None else ())


def parse_since(value: str | None) -> str | dt.date | dt.datetime | None:
    if value is None:
        return None
    try:
        return since_bound(value)
    except ValueError as exc:
        reason = (str(exc) if "out of range" in str(exc)
                  else f"{value!r} is not a date (YYYY-MM-DD) or ISO 8601 time")
        raise click.BadParameter(reason, param_hint="--since") from exc


#: Characters of an untitled entry's text shown in its place.
EXCERPT_CHARS = 80


def entry_name(e: Any) -> str:
    """What a line calls an entry: its title; for an untitled one (a Mastodon post, a
    micro-blog note) the start of its text in quotes; else its link or id."""
    if e.title:
        return str(e.title)
    text = searchable_text(e.summary or e.content or "")
    if text:
        cut = (text if len(text) <= EXCERPT_CHARS
               else cut_text(text, EXCERPT_CHARS - 1).rstrip() + "…")
        return f"“{cut}”"
    return str(e.url or e.remote_id)


def entry_line(e: Any) -> str:
    """One entry as a line: key prefix, date (:attr:`EntryView.date`), source, title
    (see :func:`entry_name`)."""
    when = e.date[:16].replace("T", " ")
    also = f"  (+{len(e.duplicates)}: {', '.join(e.also_in)})" if e.duplicates else ""
    dup = f"  [duplicate of {e.duplicate_of[:12]}]" if e.duplicate_of else ""
    return f"{e.key[:12]}  {when}  {e.source_id}  {entry_name(e)}{also}{dup}"


def selection_options(func: Any) -> Any:
    """``--source``, ``--since`` and ``--all``, as every reading command takes them."""
    for option in reversed([
        source_option("Only this source's entries."),
        click.option("--since", default=None, metavar="DATE",
                     help="Only entries dated (published, else updated, else first "
                          "seen) on or after DATE (YYYY-MM-DD, or an ISO 8601 time; "
                          "UTC unless it names its offset)."),
        click.option("--all", "include_duplicates", is_flag=True,
                     help="Show cross-source duplicates too (collapsed by default)."),
    ]):
        func = option(func)
    return func


@click.command(short_help="List entries, newest first.")
@config_option
@db_option
@selection_options
@click.option("--limit", default=50, show_default=True, type=LIMIT_RANGE,
              help="At most N entries.")
@json_option
def entries(config_path: str | None, db_path: str | None, source_id: str | None,
            since: str | None, include_duplicates: bool, limit: int, as_json: bool) -> None:
    """List entries, newest first, one per story unless --all. Times are UTC."""
    from signal_feeds.store.reading import list_entries

    when = parse_since(since)
    try:
        with open_store(config_path, db_path) as store:
            rows = list_entries(store, source_id=source_id, since=when, limit=limit,
                                include_duplicates=include_duplicates)
            if not rows:
                known_source(store, source_id, config_path, db_path)
    except SignalError as exc:
        fail(exc)
    if as_json:
        say_json_object({}, "entries", (r.to_dict() for r in rows))
        return
    for row in rows:
        say(entry_line(row))


@click.command(short_help="Every version of one entry.")
@click.argument("key")
@config_option
@db_option
@json_option
def history(key: str, config_path: str | None, db_path: str | None, as_json: bool) -> None:
    """Every version of an entry, with when it was seen.

    KEY is the full key or any unique prefix of it of at least 4 hex digits (as
    'signal entries' shows them); an ambiguous prefix lists the keys it starts (exit 2).
    """
    from signal_feeds.store.reading import entry_history

    try:
        with open_store(config_path, db_path) as store:
            found = entry_history(store, key)
    except SignalError as exc:
        fail(exc)
    if found is None:
        say(f"signal: no entry with key {key!r}", err=True)
        raise SystemExit(EXIT_FAILED)
    if as_json:
        say_json(json.dumps(found.to_dict(), ensure_ascii=False))
        return
    say(entry_line(found.entry))
    for i, v in enumerate(found.versions):
        # After a return to an earlier version, the current one is not the last line.
        now = "  (current)" if i == found.current and len(found.versions) > 1 else ""
        # To the second, still saying UTC (the "Z"), as published= and updated= do.
        say(f"  {v.first_seen_at[:19]}Z .. {v.last_seen_at[:19]}Z  {v.fingerprint[:12]}  "
            f"{v.title or '-'}  {v.url or '-'}  published={v.published or '-'} "
            f"updated={v.updated or '-'}"
            f"{_body_change(found.versions[i - 1], v) if i else ''}{now}")


def _body_change(before: StoredVersion, after: StoredVersion) -> str:
    """What a version line adds when the text (author, summary, content) differs from
    the line above: a post without a title or a date (a Mastodon post edited) has no
    other field that shows it, and its lines read as the same version twice."""
    if not (before.content_fingerprint and after.content_fingerprint) or (
            before.content_fingerprint == after.content_fingerprint):
        return ""  # (a database from before content fingerprints has none to compare)
    if before.normalizer_version != after.normalizer_version:
        return (f"  (text changed; normalizer {before.normalizer_version}"
                f" -> {after.normalizer_version})")
    return "  (text changed)"


@click.command(short_help="Do we know this link?")
@click.argument("url")
@config_option
@db_option
@json_option
def lookup(url: str, config_path: str | None, db_path: str | None, as_json: bool) -> None:
    """Do we know this link? Answers with the canonical entry of the story."""
    from signal_feeds.store.reading import lookup as lookup_url

    try:
        with open_store(config_path, db_path) as store:
            found = lookup_url(store, url)
    except SignalError as exc:
        fail(exc)
    if as_json:
        say_json(json.dumps({"found": found is not None,
                             **(found.to_dict() if found else {"query": url})},
                            ensure_ascii=False))
    elif found is not None:
        say(entry_line(found.canonical))
        for m in found.matches:
            if m.key != found.canonical.key:
                say(f"  matched {m.key[:12]} in {m.source_id}: {m.url}")
    else:
        say(f"not known: {url}")
    raise SystemExit(EXIT_OK if found is not None else EXIT_FAILED)


@click.command(short_help="Export the entries or the source list.")
@config_option
@db_option
@click.option("--format", "fmt", type=click.Choice(["json", "atom", "opml"]), default="json",
              show_default=True, help="Entries as JSON or Atom; the source list as OPML.")
@click.option("--output", "-o", type=click.Path(dir_okay=False, allow_dash=True), default="-",
              help="Write to FILE instead of standard output.")
@selection_options
@click.option("--limit", default=None, type=LIMIT_RANGE, help="At most N entries.")
def export(config_path: str | None, db_path: str | None, fmt: str, output: str,
           source_id: str | None, since: str | None, include_duplicates: bool,
           limit: int | None) -> None:
    """Export the entries (collapsed unless --all) as JSON or Atom, or the sources as OPML."""
    from signal_feeds.store.reading import iter_export, list_entries

    when = parse_since(since)
    if fmt == "opml":
        # The source list has no entries to choose from: said, not ignored.
        given = [name for name, value in (("--source", source_id), ("--since", since),
                                          ("--all", include_duplicates or None),
                                          ("--limit", limit)) if value is not None]
        if given:
            raise click.UsageError(f"{', '.join(given)}: choose entries, and --format opml "
                                   "exports the source list, not entries")
    try:
        if fmt == "opml":
            _write_export(output, [_sources_as_opml(config_path, db_path)], fmt)
            return
        # Open while the pieces are written: an export reads its entries a page at a
        # time as it goes, never the whole database at once.
        with open_store(config_path, db_path) as store:
            if source_id is not None and not list_entries(
                    store, source_id=source_id, limit=1, include_duplicates=True):
                known_source(store, source_id, config_path, db_path)
            _write_export(output, iter_export(
                store, format="atom" if fmt == "atom" else "json", source_id=source_id,
                since=when, limit=limit, include_duplicates=include_duplicates,
                source_titles=_source_titles(config_path, db_path)), fmt)
    except SignalError as exc:
        fail(exc)


def _write_export(output: str, pieces: Iterable[str], fmt: str) -> None:
    """Write an export's pieces, as they come, to standard output or ``--output``."""
    kind = "json" if fmt == "json" else "xml"
    clean = json_escaped if fmt == "json" else xml_escaped
    if output == "-":
        for piece in pieces:
            click.echo(fitted(clean(piece), kind=kind), nl=False)
        return
    try:
        write_whole(Path(output), (clean(piece) for piece in pieces))
    except BrokenPipeError:
        # A pipe's reader went away (`-o /dev/stdout | head`): not an error of the
        # command line, and as quiet as when click writes to standard output.
        raise SystemExit(EXIT_FAILED) from None
    except OSError as exc:
        fail(ConfigError(f"--output {output}: cannot write it: {exc.strerror or exc}"))


def write_whole(path: Path, pieces: Iterable[str]) -> None:
    """Write ``pieces`` to ``path`` as they come, into a new file beside it that then
    replaces it: a reader (a web server, a static-site build) never finds half an export,
    and a full disk leaves the last one whole. A path that is not a regular file (a
    pipe, ``/dev/stdout``) is written to directly.

    The new file is held while it is written (see :mod:`signal_feeds.held`), and the
    half-written ones of exports that were killed are removed first: a cron job stopped
    by its time limit left one beside the file each time, as large as the export."""
    if path.exists() and not path.is_file():  # /dev/stdout names a pipe through links
        with path.open("w", encoding="utf-8") as handle:
            handle.writelines(pieces)
        return
    target = path.resolve() if path.is_symlink() else path
    _remove_abandoned_exports(target)
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    # Created as open() would create the file (0666 less the umask), not 0600.
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    hold = Hold(fd)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.writelines(pieces)
            # On its disk before it takes FILE's place: after a power cut or a reboot
            # FILE is the last export or this one, never an empty file under its name.
            handle.flush()
            os.fsync(handle.fileno())
        if target.exists():
            os.chmod(temporary, target.stat().st_mode & 0o7777)
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    finally:
        hold.release()


def _remove_abandoned_exports(target: Path) -> None:
    """Remove the new files that killed exports to ``target`` left beside it."""
    pattern = re.compile(rf"\.{re.escape(target.name)}\.[0-9a-f]{{8}}\.tmp")
    remove_abandoned_in(target.parent, lambda name: pattern.fullmatch(name) is not None)


@click.command(short_help="Recompute the duplicate markers.")
@config_option
@db_option
@json_option
def dedupe(config_path: str | None, db_path: str | None, as_json: bool) -> None:
    """Recompute every cross-source duplicate marker (idempotent; nothing is deleted).
    The config's order of the sources breaks ties between copies of a story, as in
    a fetch: after reordering the sources, this applies the new order."""
    try:
        # The database first: with neither it nor signal.toml, its error names --db
        # (the source list's alone said "signal.toml: config file not found").
        with open_store(config_path, db_path) as store:
            config = _source_list(config_path, db_path)
            report = store.recompute_duplicates(source_order=None if config is None else [
                s.id for s in config.sources])
    except SignalError as exc:
        fail(exc)
    if as_json:
        say_json(json.dumps(report.to_dict()))
        return
    per_channel = ", ".join(f"{name} {count}" for name, count in report.changed.items())
    say(f"{report.rows} entries checked; markers changed: {per_channel}; "
        f"{report.duplicates} rows marked as duplicates")


@click.command("import-opml", short_help="Add the feeds of an OPML file.")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@config_option
@click.option("--dry-run", is_flag=True, help="Report what would be added; write nothing.")
@json_option
@click.pass_context
def import_opml(ctx: click.Context, file: str, config_path: str | None, dry_run: bool,
                as_json: bool) -> None:
    """Add the feeds of an OPML file to the source list (same checks as by hand)."""
    from signal_feeds.config.opml import import_opml as run_import

    config_path, as_json = _outer_options(ctx, config_path, as_json)
    try:
        report = run_import(config_path or DEFAULT_CONFIG_PATH, Path(file).read_bytes(),
                            opml_name=Path(file).name,
                            dry_run=dry_run)
    except SignalError as exc:
        fail(exc)
    if as_json:
        say_json(json.dumps(report.to_dict(), ensure_ascii=False))
        return
    verb = "would add" if dry_run else "added"
    say(f"{verb} {len(report.added)} source(s) to {report.config_path}")
    for a in report.added:
        say(f"  + {a.id}  {a.url}")
    if report.skipped:
        say(f"skipped {len(report.skipped)}:")
        for s in report.skipped:
            say(f"  - {s.title or '(untitled)'}  {s.url or '-'}: {s.reason}")


def _outer_options(ctx: click.Context, config_path: str | None,
                   as_json: bool) -> tuple[str | None, bool]:
    """``--config`` and ``--json`` as given to ``signal sources`` before the subcommand
    (``signal sources --config my.toml import-opml F``): that --config was dropped, and
    the feeds went into ./signal.toml, a new file. Two different ones are refused."""
    outer = ctx.parent.params if ctx.parent is not None else {}
    before: str | None = outer.get("config_path")
    if config_path is None:
        config_path = before
    elif before is not None and Path(before).resolve() != Path(config_path).resolve():
        raise click.UsageError(f"--config given twice: {before} (before import-opml) and "
                               f"{config_path}; give one")
    return config_path, as_json or bool(outer.get("as_json"))
