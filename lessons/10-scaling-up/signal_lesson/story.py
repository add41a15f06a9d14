"""A scripted publisher and reader: ``python -m signal_lesson story``.

The teaching server plays the publisher, a temporary database plays Signal's memory,
and an injected clock stands in for time (each step is one hour after the last), so
every run prints the same thing.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from .fetch import new_client
from .identity import Identified, fingerprint
from .parse import NORMALIZER_VERSION, Entry
from .pipeline import Normalize, Update, as_parsed, update_source
from .server import FIXTURES, TeachingServer
from .store import Store

STEPS = [
    ("publish", "demo-rss", "demo-rss.xml"),
    ("update", "demo-rss", ""),
    ("update", "demo-rss", ""),
    ("publish", "demo-rss", "variants/demo-rss-corrected.xml"),
    ("update", "demo-rss", ""),
    ("publish", "demo-rss", "demo-rss.xml"),
    ("update", "demo-rss", ""),
    ("publish", "demo-atom", "demo-atom.xml"),
    ("update", "demo-atom", ""),
    ("update", "demo-atom", ""),
    ("upgrade", "demo-atom", ""),
    ("update", "demo-atom", ""),
]


class StepClock:
    """A clock that only moves when told to."""

    def __init__(self, start: datetime = datetime(2026, 3, 25, 8, 0, tzinfo=UTC)) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, hours: int = 1) -> None:
        self.now += timedelta(hours=hours)


def normalizer_v2(identified: Identified) -> Identified:
    """A pretend next release: an ``updated`` equal to ``published`` is dropped."""
    rows = []
    for row in identified.rows:
        updated = "" if row.updated == row.published else row.updated
        entry = Entry(row.remote_id, row.url, row.title, row.published, updated)
        rows.append(replace(row, updated=updated, fingerprint=fingerprint(entry),
                            normalizer_version=NORMALIZER_VERSION + 1))
    return replace(identified, rows=tuple(rows))


def show_update(update: Update) -> str:
    line = f"update {update.source_id}: {update.outcome}, HTTP {update.http_status}"
    if update.outcome == "fetched":
        c = update.counts
        line += f": created {c.created}, updated {c.updated}, unchanged {c.unchanged}"
    return line


def hhmm(stamp: object) -> str:
    return str(stamp)[11:16]  # "2026-03-25T13:00:00Z" -> "13:00"


def run_story(steps: list[tuple[str, str, str]] = STEPS) -> None:
    clock = StepClock()
    normalize: Normalize = as_parsed
    conditional = True
    with (tempfile.TemporaryDirectory() as tmp, TeachingServer() as server,
          new_client() as client, Store(Path(tmp) / "story.db", clock=clock) as store):
        for action, source_id, name in steps:
            clock.advance()
            path = f"/publisher/{source_id}.xml"
            if action == "publish":
                server.publish(path, (FIXTURES / name).read_bytes())
                print(f"{hhmm(clock().isoformat())} publisher: {source_id} is now {name}")
            elif action == "upgrade":
                normalize, conditional = normalizer_v2, False
                print(f"{hhmm(clock().isoformat())} signal: normalizer "
                      f"{NORMALIZER_VERSION + 1}, next request without validators")
            else:
                update = update_source(store, client, source_id, server.url(path),
                                       normalize=normalize, conditional=conditional)
                conditional = True
                print(f"{hhmm(clock().isoformat())} {show_update(update)}")
        for source_id in ("demo-rss", "demo-atom"):
            print(f"history of {source_id}:")
            for entry in store.entries(source_id):
                print(f"  {entry['remote_id']}: first seen {hhmm(entry['first_seen_at'])}, "
                      f"last seen {hhmm(entry['last_seen_at'])}")
                for version in store.versions(str(entry["id"])):
                    print(f"    n{version['normalizer_version']} "
                          f"{str(version['fingerprint'])[:12]} "
                          f"{hhmm(version['first_seen_at'])}-{hhmm(version['last_seen_at'])} "
                          f"{version['title']} | updated {version['updated'] or '-'}")
