"""`signal dedupe` and `signal search --rebuild` on a PostgreSQL database that workers
are writing to: the whole-table rewrite and a worker's batch must wait for each other,
never deadlock.

A worker's batch holds row locks on the entries of the responses it has written so far
and goes on to write others; a rewrite locks every entry (and, for dedupe, every token
posting) in its own order. Beside two workers the server ended one side to break a
deadlock most of the times either command ran: the command failed after its three tries
(exit 1), or a worker's response failed.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from signal_feeds.identity.keys import EntryRow, identify
from signal_feeds.parse.feed import parse_feed
from signal_feeds.records import FetchRecord, SourceState
from signal_feeds.store import open_store
from signal_feeds.store.protocol import FeedStore

NOW = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)
BUSY_TIMEOUT = 30.0  # longer than the test: a lock wait never times out here


def _rows(source: str, rev: int) -> list[EntryRow]:
    items = "".join(
        f"<item><guid>{source}-{k}</guid><link>https://{source}.example/{k}</link>"
        f"<title>Story {k} of {source}, revision {rev}</title>"
        f"<description>Words {k} {source} told in revision {rev}</description></item>"
        for k in range(6))
    feed = f"<rss version='2.0'><channel><title>{source}</title>{items}</channel></rss>"
    return list(identify(source, parse_feed(feed.encode()).entries).rows)


def _write(store: FeedStore, source: str, rev: int) -> None:
    url = f"https://{source}.example/feed"
    store.apply_response(SourceState(source_id=source, url=url), _rows(source, rev),
                         FetchRecord(source_id=source, started_at=NOW, url=url,
                                     outcome="fetched"), NOW)


def _wait_for_a_lock_wait(url: str, timeout: float = 20.0) -> None:
    """Until some session of this database waits for a lock (the rewrite, blocked)."""
    import psycopg

    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'").fetchone()
            if row is not None and row[0] > 0:
                return
            time.sleep(0.02)
    raise AssertionError("the rewrite never waited for the worker's batch")


REWRITES: dict[str, Callable[[FeedStore], Any]] = {
    "search --rebuild": lambda store: store.rebuild_search_index(),
    "dedupe": lambda store: store.recompute_duplicates(),
}


@pytest.mark.parametrize("command", sorted(REWRITES))
def test_a_rewrite_waits_for_a_workers_batch_instead_of_deadlocking(
        postgres_url: str, command: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="signal_feeds")
    with open_store(postgres_url, busy_timeout=BUSY_TIMEOUT) as worker, \
            open_store(postgres_url, busy_timeout=BUSY_TIMEOUT) as other:
        _write(worker, "alpha", 1)  # stored first: first in every table's order
        _write(worker, "beta", 1)
        done: list[object] = []

        def rewrite() -> None:
            try:
                done.append(REWRITES[command](other))
            except Exception as exc:  # reported by the assertion below
                done.append(exc)

        with worker.batch():
            _write(worker, "beta", 2)  # the batch now holds beta's rows
            thread = threading.Thread(target=rewrite)
            thread.start()
            _wait_for_a_lock_wait(postgres_url)
            # alpha's rows come first in the rewrite's order: it had locked them
            # already when it met beta's, and this write waited for it in turn.
            _write(worker, "alpha", 2)
        thread.join(timeout=60)
        assert not thread.is_alive()
        assert len(done) == 1 and not isinstance(done[0], Exception), done
        assert "trying again" not in caplog.text  # never ended for a deadlock
        assert {e.title for e in worker.entries(limit=None)} == {
            f"Story {k} of {s}, revision 2" for k in range(6) for s in ("alpha", "beta")}
        assert len(worker.changes(limit=99)) == 24
