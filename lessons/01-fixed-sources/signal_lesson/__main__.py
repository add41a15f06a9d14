"""Command line of the lesson: ``python -m signal_lesson COMMAND``."""

from __future__ import annotations

import argparse
import sys

from .config import load_config
from .demo import REPO, local_copy
from .errors import SignalError


def show_sources(config_path: str) -> int:
    config = load_config(config_path)
    for source in config.sources:
        copy = local_copy(source.id)
        if copy.exists():
            where = f"{copy.relative_to(REPO)}, {len(copy.read_bytes())} bytes"
        else:
            where = "no local copy"
        print(f"{source.id:<10} {source.url}")
        print(f"{'':<10} {source.title or '(no title)'}; {where}")
    print(f"{len(config.sources)} sources in {config.path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m signal_lesson")
    commands = parser.add_subparsers(dest="command", required=True)
    sources = commands.add_parser("sources", help="validate and list the sources")
    sources.add_argument("--config", default="signal.toml")
    args = parser.parse_args(argv)
    try:
        return show_sources(args.config)
    except SignalError as exc:
        print(exc, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
