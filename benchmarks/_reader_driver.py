"""Run one update of the ``reader`` library (by lemon24) and print what it did as JSON.

Usage: python _reader_driver.py --db PATH --urls FILE [--workers N] [--all]

``FILE`` has one feed URL per line; feeds missing from the database are added first.
``--all`` updates every feed whatever its schedule (like ``signal fetch --force``).
The harness runs this as a whole subprocess and times it from the outside.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from reader import FeedExistsError, make_reader


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--urls", required=True, type=Path)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--all", action="store_true", help="ignore the update schedule")
    args = parser.parse_args(argv)

    urls = [line.strip() for line in args.urls.read_text().splitlines() if line.strip()]
    rdr = make_reader(args.db)
    try:
        for url in urls:
            with contextlib.suppress(FeedExistsError):
                rdr.add_feed(url)
        counts = {"feeds": 0, "new": 0, "modified": 0, "unmodified": 0,
                  "not_modified": 0, "errors": 0}
        errors: list[str] = []
        for result in rdr.update_feeds_iter(scheduled=not args.all, workers=args.workers):
            counts["feeds"] += 1
            if result.error is not None:
                counts["errors"] += 1
                errors.append(f"{result.url}: {result.error}")
            elif result.updated_feed is None:
                counts["not_modified"] += 1
            else:
                counts["new"] += result.updated_feed.new
                counts["modified"] += result.updated_feed.modified
                counts["unmodified"] += result.updated_feed.unmodified
        stored = rdr.get_entry_counts().total
    finally:
        rdr.close()
    json.dump({**counts, "stored": stored, "error_text": errors[:5]}, sys.stdout)
    sys.stdout.write("\n")
    return 1 if counts["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
