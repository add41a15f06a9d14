"""The ``signal`` command. Each command calls one library function and turns a
:class:`SignalError` into a clean message and an exit code (0 ok, 1 some source failed,
2 usage or configuration error, 130 interrupted, 143 after SIGTERM)."""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from signal_feeds.cli.common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    config_option,
    database_path,
    db_option,
    fail,
    fitted,
    json_option,
    load,
    quiet_refused_threads,
    say,
    say_json,
)
from signal_feeds.errors import SignalError, did_you_mean
from signal_feeds.records import SOURCE_STATUSES

if TYPE_CHECKING:
    from signal_feeds.decide.report import RunReport


class _SignalGroup(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        # click would print "Aborted!" and exit 1, which for `signal fetch` means "a
        # source failed". Whatever a command had written stays (each source's response
        # is stored whole or not at all); the next run does the rest.
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            if _terminated:
                say("signal: terminated", err=True)
                raise SystemExit(EXIT_TERMINATED) from None
            say("signal: interrupted", err=True)
            raise SystemExit(EXIT_INTERRUPTED) from None


_terminated = False


def _stop_as_on_ctrl_c(signum: int, frame: Any) -> None:
    """SIGTERM (``timeout``, systemd, ``kill``) takes Ctrl-C's path: the run is
    cancelled, each response is stored whole or not at all, the leases are given back.
    Without this the process died at once and its leases held the sources until they
    expired."""
    global _terminated  # noqa: PLW0603  # one process, one command
    _terminated = True
    on_interrupt = signal.getsignal(signal.SIGINT)
    if callable(on_interrupt):  # asyncio.run's handler cancels its task; Python's raises
        on_interrupt(signal.SIGINT, frame)
        return
    raise KeyboardInterrupt  # SIGINT ignored (a background job): stop all the same


@click.group(cls=_SignalGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="signal-feeds")
def cli() -> None:
    """Signal: aggregate RSS and Atom feeds from a fixed source list into SQLite."""


def _columns() -> int:
    """The width of the terminal on stderr (where the progress line goes), in columns."""
    try:
        columns = os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError):  # not a terminal after all, or a closed stream
        return 80
    return columns if columns > 1 else 80  # 0: a terminal that never set its size


class _ProgressLine:
    """One self-updating stderr line for long runs on a terminal."""

    def __init__(self) -> None:
        self.width = 0

    def __call__(self, p: Any) -> None:
        slowest = f"; waiting on {p.in_flight[0]}" if p.in_flight else ""
        # Narrower than the terminal: a line that wraps is not rewritten by "\r" (it
        # goes back to the start of the last row only), and each update left a row.
        columns = _columns() - 1
        text = f"{p.done}/{p.total} sources, {p.failed} failed{slowest}"[:columns]
        sys.stderr.write("\r" + text.ljust(min(self.width, columns)))
        sys.stderr.flush()
        self.width = len(text)

    def close(self) -> None:
        if self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()
            self.width = 0


@cli.command(short_help="Fetch the due sources and store them.")
@config_option
@db_option
@click.option("--source", "source_ids", multiple=True, metavar="ID",
              help="Fetch only this source (repeatable).")
@click.option("--force", is_flag=True, help="Ignore the poll schedule (never Retry-After).")
@click.option("--refresh", is_flag=True,
              help="Ask without validators and parse every body again, even an unchanged "
                   "one (after changing a parse setting); implies --force.")
@click.option("-v", "--verbose", is_flag=True,
              help="Also list sources where nothing happened (not_modified, not_due).")
@click.option("-q", "--quiet", is_flag=True,
              help="Print only problems (failed, rejected, gone, expired); no summary.")
@click.option("--worker", "worker", metavar="NAME", default=None,
              help="This worker's name in the leases it takes, when several workers share "
                   "the database (default: host:pid:N, N counting the process's runs).")
@json_option
def fetch(config_path: str | None, db_path: str | None, source_ids: tuple[str, ...],
          force: bool, refresh: bool, verbose: bool, quiet: bool, worker: str | None,
          as_json: bool) -> None:
    """Fetch the due sources and store their entries.

    Prints a line for each source where something happened and a summary line (-v:
    every source; -q: only problems, nothing when all went well, for cron). Every
    problem in the config file is reported at once (exit 2).
    """
    from signal_feeds.run.pipeline import run_fetch

    if verbose and quiet:
        raise click.UsageError("-v and -q exclude each other")

    # No sys.stderr at all when the job was started with it closed (`2>&-`).
    shown = not as_json and sys.stderr is not None and sys.stderr.isatty()
    progress = _ProgressLine() if shown else None
    try:
        config = load(config_path)
        database = database_path(config, db_path)
        report = run_fetch(config, database=database, source_ids=source_ids or None,
                           force=force, refresh=refresh, progress=progress, worker=worker)
    except SignalError as exc:
        fail(exc)
    finally:
        if progress is not None:
            progress.close()
    if as_json:
        say_json(report.to_json())
    else:
        for line in _fetch_lines(report, verbose=verbose, quiet=quiet):
            say(line)
    raise SystemExit(EXIT_OK if report.ok else EXIT_FAILED)


#: Outcomes someone has to act on: the only lines ``signal fetch -q`` prints.
PROBLEM_STATUSES = frozenset({"failed", "rejected", "gone", "expired"})
#: Outcomes worth a line by default, besides sources with new or updated entries.
EVENT_STATUSES = PROBLEM_STATUSES | {"moved", "retry_later"}


def _fetch_lines(report: RunReport, *, verbose: bool, quiet: bool) -> list[str]:
    """The text output of ``signal fetch``: a run over thousands of sources that are not
    due prints one line, not thousands (cron mails whatever a job prints)."""
    *per_source, _ = report.lines()
    shown = []
    hidden_skips: list[str] = []
    for rep, line in zip(report.sources, per_source, strict=True):
        # A source left alone while a Retry-After runs (no request, no status) is as
        # quiet as one not due: its line on every run was cron mail for up to a month.
        # (Not when its line says something: --force refused, a host paused this run.)
        waiting = rep.status == "retry_later" and rep.http_status is None and not rep.note
        if quiet:
            keep = rep.status in PROBLEM_STATUSES
        else:
            keep = (verbose or (rep.status in EVENT_STATUSES and not waiting)
                    or rep.created > 0 or rep.updated > 0)
        if keep:
            shown.append(line)
        elif not quiet:
            hidden_skips.extend(r for r in rep.skip_reasons if r not in hidden_skips)
    # The reasons are on source lines not printed, and the next run may not parse that
    # feed again (a 304, the same body): the summary says them ("-v says why" sent
    # people to a run that could not).
    note = ""
    if hidden_skips:
        more = len(hidden_skips) - 1
        note = f" ({hidden_skips[0]}" + (f"; {more} more in --json" if more else "") + ")"
    summary = report.summary(skipped_note=note)
    return shown if quiet else [*shown, summary]


def _local_files(ctx: click.Context, param: click.Parameter,
                 value: tuple[str, ...]) -> tuple[str, ...]:
    """FILES as given; an address among them is a usage error that says what to do."""
    for name in value:
        if "://" in name and name.split("://", 1)[0].isalpha() and not Path(name).exists():
            raise click.BadParameter(
                f"{name!r} is an address, and 'signal parse' reads files saved here: save "
                f"it first (curl -o feed.xml '{name}'), or add it to the source list and "
                "run 'signal fetch --source ID'", ctx=ctx, param=param)
    return value


@cli.command(short_help="Dry run: parse local feed files.")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False),
                callback=_local_files)
@click.option("--source-id", default="local", show_default=True,
              help="Source id used for the keys (and, with --config, whose settings apply).")
@click.option("--config", "config_path", default=None, type=click.Path(dir_okay=False),
              help="Read with this source list's settings, as 'signal fetch' would "
                   "(default: the built-in defaults).")
def parse(files: tuple[str, ...], source_id: str, config_path: str | None) -> None:
    """Dry run: parse local feed files, print one JSON line per file.

    With --config the files are normalized with the settings 'signal fetch' uses for
    the source --source-id (or the [settings] table when the list has no such source),
    so the rows are the rows a fetch would store.
    """
    from signal_feeds.run.pipeline import parse_files

    try:
        config = load(config_path) if config_path is not None else None
    except SignalError as exc:
        fail(exc)
    known = {s.id for s in config.sources} if config is not None else set()
    if config is not None and known and source_id not in known and source_id != "local":
        # Documented, but a typo would silently give other keys than a fetch stores.
        say(f"signal: note: {config.path or 'the source list'} has no source "
            f"{source_id!r} (read with its [settings]){did_you_mean(source_id, known)}",
            err=True)
    failed = False
    for result in parse_files([Path(f) for f in files], source_id=source_id, config=config):
        failed = failed or not result["ok"]
        say_json(json.dumps(result, ensure_ascii=False))
    raise SystemExit(EXIT_FAILED if failed else EXIT_OK)


@cli.command(short_help="Fetch the demo feeds from a local server.")
@click.option("--db", "db_path", default="signal-demo.db", show_default=True,
              metavar="PATH|URL",
              help="Where to write the demo database (a file, or an empty postgresql:// one).")
def demo(db_path: str) -> None:
    """Fetch the embedded demo feeds from a local teaching server, twice."""
    from signal_feeds.demo.walkthrough import run_demo

    try:
        run_demo(database_path(None, db_path), echo=lambda text: click.echo(fitted(text)))
    except SignalError as exc:
        fail(exc)


@cli.group(invoke_without_command=True, short_help="Show the sources and their state.")
@config_option
@db_option
@click.option("--reset", "reset_id", metavar="ID", default=None,
              help="Clear a source's gone, moved and backoff state.")
@click.option("--status", "statuses", multiple=True, type=click.Choice(SOURCE_STATUSES),
              help="Only the sources in this state (repeat for several).")
@json_option
@click.pass_context
def sources(ctx: click.Context, config_path: str | None, db_path: str | None,
            reset_id: str | None, statuses: tuple[str, ...], as_json: bool) -> None:
    """Show the sources and their polling state (or run a subcommand). With --db and no
    --config, the sources the database holds; with --status, only those in that state."""
    from signal_feeds.cli.reading import existing_database
    from signal_feeds.run.source_status import reset_source, source_table

    if ctx.invoked_subcommand is not None:
        # Given before the subcommand, these were dropped without a word (--config too:
        # import-opml wrote ./signal.toml). import-opml reads --config and --json from
        # here (see its _outer_options); the rest choose the list it does not show.
        ignored = [name for name, value in (("--db", db_path), ("--reset", reset_id),
                                            ("--status", statuses or None))
                   if value is not None]
        if ignored:
            raise click.UsageError(f"{', '.join(ignored)}: an option of 'signal sources' "
                                   f"itself, which '{ctx.invoked_subcommand}' does not take")
        return
    if reset_id is not None and (statuses or as_json):
        # A reset shows no list: --status chose nothing and --json printed a text line.
        given = " and ".join(n for n, v in (("--status", statuses), ("--json", as_json)) if v)
        raise click.UsageError(f"{given}: choose how the list is shown, and --reset shows "
                               "none (its exit status says whether it worked)")
    try:
        config = None
        if db_path is not None and config_path is None:  # the database alone
            database = existing_database(None, db_path)
        else:
            config = load(config_path)
            database = database_path(config, db_path)
        if reset_id is not None:
            reset_source(config, reset_id, database=database)
            say(f"{reset_id}: reset; it will be fetched on the next run")
            return
        rows = [r for r in source_table(config, database=database)
                if not statuses or r["status"] in statuses]
    except SignalError as exc:
        fail(exc)
    if as_json:
        say_json(json.dumps({"sources": rows}, ensure_ascii=False))
        return
    headers = ["id", "status", "last fetch", "http", "next due", "errors", "leased by",
               "since", "note"]
    # To the second, and still saying UTC: without its "Z", a time read as local.
    def when(text: str | None) -> str:
        return text[:19] + "Z" if text else "-"

    table = [[str(r["id"]), str(r["status"]), when(r["last_fetch_at"]),
              str(r["http_status"] or "-"), when(r["next_due_at"]),
              str(r["error_count"]), r["leased_by"] or "-", when(r["leased_at"]),
              r["note"]] for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in table)) if table else len(h)
              for i, h in enumerate(headers)]
    for row in [headers, *table]:
        say("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


#: Allocations of container objects between two young-generation collections (Python's
#: default is 700). A cold run allocates a few hundred thousand short-lived tuples, dicts
#: and rows per 20,000 entries: at 700 the collector ran 430 times, 0.2 s of the main
#: process's 3.5 s of CPU, at 10,000 35 times, 0.03 s, for 4 MB more peak RSS. The
#: command owns its interpreter; the library leaves the embedding program's collector
#: alone (its parser processes set their own: ``WORKER_GC_YOUNG_THRESHOLD``).
GC_YOUNG_THRESHOLD = 10_000


def main() -> None:
    """Console-script entry point."""
    signal.signal(signal.SIGTERM, _stop_as_on_ctrl_c)
    threading.excepthook = quiet_refused_threads
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    cli(prog_name="signal")


# The reading commands live in reading_cli (issue 7).
from signal_feeds.cli.reading import (  # noqa: E402
    dedupe,
    entries,
    export,
    history,
    import_opml,
    lookup,
)

for _command in (entries, history, lookup, export, dedupe):
    cli.add_command(_command)
sources.add_command(import_opml)
from signal_feeds.cli.search import search  # noqa: E402  (issue 18: full-text search)

cli.add_command(search)

from signal_feeds.cli.changes import changes  # noqa: E402

cli.add_command(changes)

from signal_feeds.cli.copy import copy  # noqa: E402  (issue 17: SQLite -> PostgreSQL)

cli.add_command(copy)
