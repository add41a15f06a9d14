"""What the ``signal`` commands share: exit codes, common options, error reporting."""

from __future__ import annotations

from typing import NoReturn

import click

from signal_feeds.config.source_list import DEFAULT_CONFIG_PATH
from signal_feeds.errors import ConfigError, SignalError

#: 0 ok, 1 some source (or the lookup) failed, 2 usage or configuration error.
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

config_option = click.option("--config", "config_path", default=DEFAULT_CONFIG_PATH,
                             show_default=True, type=click.Path(dir_okay=False),
                             help="The TOML source list.")
db_option = click.option("--db", "db_path", default=None, type=click.Path(dir_okay=False),
                         help="Database file (default: the config's [settings] database).")
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def fail(exc: SignalError) -> NoReturn:
    """Print a library error as one clean line and exit with its code."""
    click.echo(f"signal: error: {exc}", err=True)
    raise SystemExit(EXIT_USAGE if isinstance(exc, ConfigError) else EXIT_FAILED)
