"""A scripted publisher and reader: ``python -m signal_lesson story``.

The teaching server plays the publisher, a temporary database plays Signal's memory,
and a fixed clock stands in for time, so every run prints the same thing.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from .fetch import Validators, new_client
from .pipeline import Update, update_source
from .server import FIXTURES, TeachingServer
from .store import Store

PATH = "/publisher/demo-rss.xml"
SOURCE = "demo-rss"
STEPS = [
    "variants/demo-rss-contradiction.xml", "update", "update",
    "demo-rss.xml", "update", "update",
    "variants/demo-rss-corrected.xml", "update",
]


class FixedClock:
    """Starts at a fixed instant and moves one minute each time it is read."""

    def __init__(self, start: datetime = datetime(2026, 3, 25, 12, 0, tzinfo=UTC)) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(minutes=1)
        return self.now


def show_validators(label: str, validators: Validators) -> str:
    if not (validators.etag or validators.last_modified):
        return f"  {label:<6} no validators"
    return (f"  {label:<6} ETag {validators.etag or '-'}; "
            f"Last-Modified {validators.last_modified or '-'}")


def show_update(update: Update) -> str:
    line = f"update: {update.outcome}, HTTP {update.http_status}"
    if update.outcome == "fetched":
        c = update.counts
        line += (f": created {c.created}, updated {c.updated}, "
                 f"unchanged {c.unchanged}, skipped {c.skipped}")
    return line + (f"\n  error  {update.error}" if update.error else "")


def run_story(steps: list[str] = STEPS) -> None:
    with (tempfile.TemporaryDirectory() as tmp, TeachingServer() as server,
          new_client() as client, Store(Path(tmp) / "story.db", clock=FixedClock()) as store):
        for step in steps:
            if step != "update":
                server.publish(PATH, (FIXTURES / step).read_bytes())
                print(f"publisher: {PATH} is now {step}")
                continue
            update = update_source(store, client, SOURCE, server.url(PATH))
            sent = server.log[-1].headers
            print(show_update(update))
            print(show_validators("sent", Validators(sent.get("If-None-Match", ""),
                                                     sent.get("If-Modified-Since", ""))))
            print(show_validators("saved", store.validators(SOURCE)))
        print("entries:")
        for entry in store.entries(SOURCE):
            print(f"  {entry['remote_id']:<15} {str(entry['fingerprint'])[:12]}  {entry['title']}")
        outcomes = [str(fetch["outcome"]) for fetch in store.fetches(SOURCE)]
        print(f"fetches: {', '.join(outcomes)}")
