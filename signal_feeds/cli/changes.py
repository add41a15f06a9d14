"""``signal changes``: the change feed from a cursor on, for scripts and cron jobs.

Each line carries its cursor, so a pipeline can resume after the last line it handled:

```sh
after=$(cat cursor 2>/dev/null)   # no cursor yet: from the beginning (--after "" is refused)
signal changes --db signal.db ${after:+--after "$after"} --json > batch.jsonl
[ -s batch.jsonl ] && tail -n 1 batch.jsonl |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["cursor"])' > cursor
```

Exit codes: 0 ok (also when nothing is new), 1 the database could not be read, 2 a
usage error (a cursor this database did not issue included).
"""

from __future__ import annotations

import json

import click

from signal_feeds.cli.common import (
    EXIT_USAGE,
    LIMIT_RANGE,
    config_option,
    db_option,
    fail,
    json_option,
    say,
    say_json,
    source_option,
)
from signal_feeds.cli.reading import known_source, open_store
from signal_feeds.errors import CursorError, SignalError
from signal_feeds.records import Change

__all__ = ["changes", "change_line"]


def change_line(change: Change) -> str:
    """One change as a line of text: cursor, kind, short key, source, title."""
    dup = f"  [duplicate of {change.duplicate_of[:12]}]" if change.duplicate_of else ""
    return (f"{change.cursor}  {change.kind:<7}  {change.key[:12]}  {change.source_id}  "
            f"{change.title or change.url or '(untitled)'}{dup}")


@click.command(short_help="What was created or edited, from a cursor on.")
@config_option
@db_option
@click.option("--after", "after", metavar="CURSOR", default=None,
              help="Start after this cursor (as printed by an earlier run); "
                   "default: the beginning.")
@source_option("Only this source's changes.")
@click.option("--limit", default=100, show_default=True, type=LIMIT_RANGE,
              help="At most N changes.")
@json_option
def changes(config_path: str | None, db_path: str | None, after: str | None,
            source_id: str | None, limit: int, as_json: bool) -> None:
    """Entries created and new versions stored, oldest first, after --after.

    Every line shows its cursor: store the last one and pass it as --after next time.
    Nothing new prints nothing. --json prints one JSON object per line.
    """
    from signal_feeds.store.change_feed import read_changes

    try:
        with open_store(config_path, db_path) as store:
            # A page at a time, each after the last one's cursor: --limit 100000 held
            # every change (160 MB) before the first line went out.
            found = read_changes(store, after=after, limit=min(limit, CHANGES_PAGE),
                                 source_id=source_id)
            if not found:
                known_source(store, source_id, config_path, db_path)
            left = limit
            while found:
                for change in found:
                    if as_json:
                        say_json(json.dumps(change.to_dict(), ensure_ascii=False))
                    else:
                        say(change_line(change))
                left -= len(found)
                if left == 0 or len(found) < CHANGES_PAGE:
                    break
                found = read_changes(store, after=found[-1].cursor,
                                     limit=min(left, CHANGES_PAGE), source_id=source_id)
    except CursorError as exc:  # the caller's input, not the database, is at fault
        say(f"signal: error: {exc}", err=True)
        raise SystemExit(EXIT_USAGE) from exc
    except SignalError as exc:
        fail(exc)


#: Changes ``signal changes`` reads and holds at a time.
CHANGES_PAGE = 1000
