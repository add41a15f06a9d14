"""Command line of the lesson: ``python -m signal_lesson COMMAND``."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from .config import load_config
from .demo import REPO, local_copy
from .errors import SignalError
from .parse import parse_feed


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


def show_entries(files: list[str], allow_http: bool) -> int:
    failed = 0
    for name in files:
        try:
            entries = parse_feed(Path(name).read_bytes(), allow_http=allow_http)
        except (OSError, SignalError) as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(f"{name}: entries {len(entries)}")
        for entry in entries:
            print()
            for key, value in asdict(entry).items():
                print(f"  {key:<10} {json.dumps(value, ensure_ascii=False)}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m signal_lesson")
    commands = parser.add_subparsers(dest="command", required=True)
    sources = commands.add_parser("sources", help="validate and list the sources")
    sources.add_argument("--config", default="signal.toml")
    parse = commands.add_parser("parse", help="show the rows of local feed files")
    parse.add_argument("files", nargs="+", metavar="FILE")
    parse.add_argument("--allow-http", action="store_true", help="accept http links")
    args = parser.parse_args(argv)
    try:
        if args.command == "parse":
            return show_entries(args.files, args.allow_http)
        return show_sources(args.config)
    except SignalError as exc:
        print(exc, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
