"""``signal copy``: move the database (``--db`` or the config's) to another store, e.g.
from a SQLite file to PostgreSQL, checked table by table before it commits.

Exit codes: 0 copied and checked, 1 the copy failed (nothing committed), 2 a usage error
(a non-empty target without --replace, a server that cannot be reached).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from signal_feeds.cli.common import config_option, db_option, fail, json_option, say, say_json
from signal_feeds.cli.reading import reading_settings
from signal_feeds.errors import ConfigError, SignalError

__all__ = ["copy"]


@click.command(short_help="Copy the database to another store.")
@config_option
@db_option
@click.option("--to", "target", required=True, metavar="PATH|URL",
              help="The target: a postgresql:// URL or a SQLite file path.")
@click.option("--replace", is_flag=True,
              help="Delete the target's rows first (otherwise a non-empty target is refused).")
@json_option
def copy(config_path: str | None, db_path: str | None, target: str, replace: bool,
         as_json: bool) -> None:
    """Copy every table into the target in one transaction, then check equal row counts
    and digests per table before committing; print the rows per table."""
    from signal_feeds.cli.common import checked_file, reading_database
    from signal_feeds.dsn import as_database
    from signal_feeds.store.copy import copy_store

    try:
        source = reading_database(config_path, db_path)
        if isinstance(source, Path) and not source.exists():
            raise ConfigError(f"no database at {source}; nothing to copy")
        settings = reading_settings(config_path, db_path)
        destination = as_database(target)
        if isinstance(destination, Path):
            checked_file(destination, f"--to {target}")
            if isinstance(source, Path) and destination.resolve() == source.resolve():
                raise ConfigError(f"--to {target}: that is the database being copied; "
                                  "choose another target")
        report = copy_store(source, destination, replace=replace,
                            busy_timeout=settings.busy_timeout)
    except SignalError as exc:
        fail(exc)
    if as_json:
        say_json(json.dumps(report.to_dict(), ensure_ascii=False))
    else:
        for line in report.lines():
            say(line)
