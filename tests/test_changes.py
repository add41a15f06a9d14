"""The change feed: a durable cursor over created entries and new versions.

Real HTTP on 127.0.0.1 through ``run_fetch``, real SQLite files (and, for the tests
that take the ``database`` fixture, each store backend), the CLI through
CliRunner, and the README's consumer in a subprocess against a local webhook server.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from xml.sax.saxutils import escape

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, make_config
from scenario_server import ScenarioServer

from signal_feeds import Change, CursorError, Store, digest, read_changes, run_fetch
from signal_feeds.cli.commands import cli
from signal_feeds.decide.report import RunReport
from signal_feeds.parse.processes import ParserPool
from signal_feeds.store import open_store

README = Path(__file__).resolve().parent.parent / "README.md"


def rss(*items: tuple[str, str]) -> bytes:
    """An RSS 2.0 document of (guid, title) items, each with its own link."""
    body = "".join(f"<item><guid isPermaLink='false'>{escape(g)}</guid>"
                   f"<title>{escape(t)}</title>"
                   f"<link>https://news.example/{escape(g)}</link></item>" for g, t in items)
    return ("<?xml version='1.0' encoding='utf-8'?><rss version='2.0'><channel>"
            f"<title>t</title><link>https://news.example/</link>{body}</channel></rss>"
            ).encode()


Fetch = Callable[[str, bytes], RunReport]


@pytest.fixture(scope="module")
def parser() -> Iterator[ParserPool]:
    pool = ParserPool(workers=1)
    yield pool
    pool.close()


def _fetcher(server: ScenarioServer, db: Path | str, parser: ParserPool) -> Fetch:
    def run(source_id: str, body: bytes) -> RunReport:
        server.put(f"/{source_id}.xml", body)
        return run_fetch(make_config(db, {source_id: server.url(f"/{source_id}.xml")}),
                         force=True, parser=parser)

    return run


@pytest.fixture
def fetch(server: ScenarioServer, db_path: Path, parser: ParserPool) -> Fetch:
    """Serve ``body`` as a source's feed and fetch that source into ``db_path``."""
    return _fetcher(server, db_path, parser)


@pytest.fixture
def fetch_any(server: ScenarioServer, database: Path | str, parser: ParserPool) -> Fetch:
    """:func:`fetch` into ``database``: the change feed is the same on every backend."""
    return _fetcher(server, database, parser)


def all_changes(db: Path | str, after: str | None = None) -> list[Change]:
    with open_store(db) as store:
        return read_changes(store, after=after, limit=10_000)


def changes_cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["changes", *args])
    return result.exit_code, result.stdout, result.stderr


def test_an_edit_and_a_new_entry_are_one_update_and_one_creation_in_order(
        fetch_any: Fetch, database: Path | str) -> None:
    first = fetch_any("news", rss(("a", "Alpha"), ("b", "Beta")))
    assert first.totals["created"] == 2
    logged = all_changes(database)
    assert [(c.kind, c.title) for c in logged] == [("created", "Alpha"), ("created", "Beta")]
    last = logged[-1].cursor

    second = fetch_any("news", rss(("a", "Alpha, corrected"), ("b", "Beta"), ("c", "Gamma")))
    assert (second.totals["created"], second.totals["updated"],
            second.totals["unchanged"]) == (1, 1, 1)
    after = all_changes(database, last)
    assert [(c.kind, c.key, c.title) for c in after] == [
        ("updated", digest(["news", "a"]), "Alpha, corrected"),
        ("created", digest(["news", "c"]), "Gamma")]
    updated, created = after
    # The update names the fingerprint it replaced; a creation has none.
    assert updated.previous_fingerprint == logged[0].fingerprint != updated.fingerprint
    assert created.previous_fingerprint == ""
    assert (created.source_id, created.url) == ("news", "https://news.example/c")
    # Cursors grow with the log; the last one reads nothing more.
    assert [c.cursor for c in all_changes(database)] == [*(c.cursor for c in logged),
                                                          updated.cursor, created.cursor]
    assert all_changes(database, created.cursor) == []


def test_a_change_keeps_the_version_it_wrote(fetch_any: Fetch, database: Path | str) -> None:
    fetch_any("news", rss(("a", "First title")))
    fetch_any("news", rss(("a", "Second title")))
    fetch_any("news", rss(("a", "First title")))  # back to the first version: a change too
    assert [(c.kind, c.title) for c in all_changes(database)] == [
        ("created", "First title"), ("updated", "Second title"), ("updated", "First title")]


def test_unchanged_entries_and_304s_add_no_change(fetch_any: Fetch, database: Path | str,
                                                  server: ScenarioServer,
                                                  parser: ParserPool) -> None:
    fetch_any("news", rss(("a", "Alpha"), ("b", "Beta")))
    before = all_changes(database)
    # Other bytes, the same entries: parsed again, every entry unchanged.
    report = fetch_any("news", rss(("a", "Alpha"), ("b", "Beta")).replace(b"<title>t<",
                                                                          b"<title>t2<"))
    assert report.totals["unchanged"] == 2 and report.sources[0].status == "fetched"
    config = make_config(database, {"news": server.url("/news.xml")})
    assert run_fetch(config, force=True, parser=parser).sources[0].status == "not_modified"
    assert all_changes(database) == before


def test_a_rejected_response_adds_no_change(server: ScenarioServer, database: Path | str,
                                            parser: ParserPool) -> None:
    config = make_config(database, {"demo-rss": server.url("/feeds/demo-rss.xml")})
    run_fetch(config, force=True, parser=parser)
    before = all_changes(database)
    assert len(before) == 3
    server.put("/feeds/demo-rss.xml",
               (FIXTURES / "variants" / "demo-rss-contradiction.xml").read_bytes())
    report = run_fetch(config, force=True, parser=parser)
    assert report.sources[0].status == "rejected"
    assert all_changes(database) == before
    assert all_changes(database, before[-1].cursor) == []


def test_a_cross_source_duplicate_is_a_change_marked_with_its_canonical_key(
        fetch_any: Fetch, database: Path | str) -> None:
    story = ("s-1", "Parliament passes the long-awaited budget bill")
    fetch_any("publisher", rss(story))
    fetch_any("mirror", rss(story))  # same link and title: a duplicate of the publisher's row
    publisher, mirror = all_changes(database)
    assert (publisher.source_id, publisher.duplicate_of) == ("publisher", "")
    assert mirror.source_id == "mirror" and mirror.kind == "created"
    assert mirror.duplicate_of == publisher.key == digest(["publisher", "s-1"])
    # The mirror's own source filter still sees it: it is that source's change.
    with open_store(database) as store:
        assert [c.key for c in read_changes(store, source_id="mirror")] == [mirror.key]
        assert [c.key for c in read_changes(store, source_id="nobody")] == []


def test_cursors_from_elsewhere_are_refused(fetch: Fetch, db_path: Path,
                                            tmp_path: Path) -> None:
    fetch("news", rss(("a", "Alpha")))
    copy = tmp_path / "restored.db"
    with Store(db_path):
        pass  # closing folds the WAL into the file
    shutil.copy(db_path, copy)  # a backup taken now
    fetch("news", rss(("a", "Alpha"), ("b", "Beta")))
    latest = all_changes(db_path)[-1].cursor
    other = tmp_path / "other.db"
    with Store(other):
        pass
    with Store(copy) as restored, pytest.raises(CursorError, match="ahead of the change log"):
        restored.changes(after=latest, limit=10)  # would silently skip what it renumbers
    with Store(other) as store, pytest.raises(CursorError, match="another database"):
        store.changes(after=latest, limit=10)
    for bad in ("", "42", "v1.zz.1", latest + "x", "v3" + latest[2:], "v1" + latest[2:],
                latest.rpartition(".")[0]):
        with Store(db_path) as store, pytest.raises(CursorError, match="malformed"):
            store.changes(after=bad, limit=10)
    with Store(db_path) as store, pytest.raises(ValueError):
        read_changes(store, limit=0)


def test_a_restored_database_that_was_fetched_again_refuses_the_cursor(
        fetch: Fetch, db_path: Path, tmp_path: Path) -> None:
    # Under cron the restored database is fetched before the consumer reads: it then
    # holds other changes at the positions the consumer has seen, and resuming from the
    # cursor skipped them without a word.
    fetch("news", rss(("a", "Alpha")))
    backup = tmp_path / "backup.db"
    with Store(db_path):
        pass
    shutil.copy(db_path, backup)
    fetch("news", rss(("a", "Alpha"), ("n0", "New 0"), ("n1", "New 1")))
    kept = all_changes(db_path)[-1].cursor  # what the consumer stored
    for suffix in ("-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    shutil.copy(backup, db_path)  # the restore
    fetch("news", rss(("a", "Alpha"), ("m0", "Other 0"), ("m1", "Other 1"), ("m2", "Other 2")))
    with Store(db_path) as store, pytest.raises(CursorError, match="another change"):
        store.changes(after=kept, limit=10)
    code, _, err = changes_cli("--db", str(db_path), "--after", kept)
    assert code == 2 and "restored from an older copy" in err
    # Without the cursor, everything the restored database holds is read.
    assert [c.title for c in all_changes(db_path)] == ["Alpha", "Other 0", "Other 1",
                                                       "Other 2"]


def test_a_cursor_of_the_first_format_is_still_read(fetch_any: Fetch, database: Path | str) -> None:
    fetch_any("news", rss(("a", "Alpha"), ("b", "Beta")))
    first, _ = all_changes(database)
    old = first.cursor.rpartition(".")[0].replace("v2.", "v1.", 1)  # v1.<id>.<position>
    assert re.fullmatch(r"v1\.[0-9a-f]{12}\.[0-9]+", old)
    assert [c.title for c in all_changes(database, old)] == ["Beta"]


def test_pages_walk_the_log_without_gaps_or_repeats(fetch_any: Fetch, database: Path | str) -> None:
    fetch_any("news", rss(*((f"e{i}", f"Entry {i}") for i in range(7))))
    seen: list[str] = []
    cursor = None
    with open_store(database) as store:
        while page := read_changes(store, after=cursor, limit=3):
            assert len(page) <= 3
            seen.extend(c.title for c in page)
            cursor = page[-1].cursor
    assert seen == [f"Entry {i}" for i in range(7)]  # the feed's order


def test_a_version_5_database_gets_a_log_of_what_it_holds(fetch: Fetch,
                                                          db_path: Path) -> None:
    # (Seen one after the other: the log is rebuilt in the order entries were first seen.)
    fetch("news", rss(("a", "Alpha")))
    fetch("news", rss(("a", "Alpha, corrected"), ("b", "Beta")))
    with contextlib.closing(sqlite3.connect(db_path)) as conn, conn:
        conn.execute("DROP TABLE changes")  # what version 5 had
        conn.execute("DROP TABLE change_log")
        conn.execute("PRAGMA user_version = 5")
    logged = all_changes(db_path)
    # Every stored entry, as created, with its current version; earlier versions are not.
    assert [(c.kind, c.title) for c in logged] == [("created", "Alpha, corrected"),
                                                   ("created", "Beta")]
    fetch("news", rss(("a", "Alpha, corrected"), ("b", "Beta"), ("c", "Gamma")))
    assert [c.title for c in all_changes(db_path, logged[-1].cursor)] == ["Gamma"]


# -- the command ----------------------------------------------------------------------


def test_signal_changes_prints_json_lines_and_resumes(fetch_any: Fetch,
                                                      database: Path | str) -> None:
    fetch_any("news", rss(("a", "Alpha"), ("b", "Beta")))
    code, out, _ = changes_cli("--db", str(database), "--json")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [(d["kind"], d["title"]) for d in lines] == [
        ("created", "Alpha"), ("created", "Beta")]
    assert all(d["cursor"] and d["key"] for d in lines)

    code, out, err = changes_cli("--db", str(database), "--after", lines[-1]["cursor"])
    assert (code, out, err) == (0, "", "")  # nothing new prints nothing

    code, out, _ = changes_cli("--db", str(database), "--limit", "1")
    assert code == 0 and len(out.splitlines()) == 1
    assert out.startswith(lines[0]["cursor"] + "  created  ") and "Alpha" in out

    fetch_any("news", rss(("a", "Alpha, corrected"), ("b", "Beta")))
    code, out, _ = changes_cli("--db", str(database), "--after", lines[-1]["cursor"],
                               "--source", "news", "--json")
    assert [json.loads(line)["kind"] for line in out.splitlines()] == ["updated"]


def test_signal_changes_refuses_a_bad_cursor_with_exit_2(fetch: Fetch, db_path: Path,
                                                         tmp_path: Path) -> None:
    fetch("news", rss(("a", "Alpha")))
    code, out, err = changes_cli("--db", str(db_path), "--after", "not-a-cursor")
    assert (code, out) == (2, "") and "malformed change cursor 'not-a-cursor'" in err
    other = tmp_path / "other.db"
    with Store(other):
        pass
    (mine,) = all_changes(db_path)
    code, out, err = changes_cli("--db", str(other), "--after", mine.cursor)
    assert (code, out) == (2, "") and "belongs to another database" in err
    code, _, err = changes_cli("--db", str(tmp_path / "missing.db"))
    assert code == 2 and "no database" in err


# -- the README's consumer, killed between acting and storing its cursor ----------------


def readme_consumer() -> str:
    """The Python block of the README's "Reacting to new entries" section."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Reacting to new entries", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found is not None, "the README section has no Python block"
    return found.group(1)


class Webhook:
    """A local webhook receiver that records each POST and can kill the poster."""

    def __init__(self) -> None:
        self.received: list[dict[str, str]] = []
        self.kill_at: int | None = None  # SIGKILL the consumer on this (1-based) POST
        self.consumer: int | None = None
        self.ready = threading.Event()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                hook.received.append({"cursor": body["cursor"], "key": body["key"],
                                      "idempotency": self.headers["Idempotency-Key"]})
                if hook.kill_at == len(hook.received):
                    # Acted on, not yet acknowledged: the consumer dies waiting for the
                    # answer, before it can store its cursor.
                    hook.ready.wait(10)
                    assert hook.consumer is not None
                    os.kill(hook.consumer, signal.SIGKILL)
                    return
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def run_consumer(script: Path, hook: Webhook, env: dict[str, str]) -> int:
    proc = subprocess.Popen([sys.executable, str(script)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    hook.consumer = proc.pid
    hook.ready.set()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, -signal.SIGKILL), err
    return proc.returncode


def test_a_consumer_killed_after_acting_repeats_only_its_last_batch(
        fetch: Fetch, db_path: Path, tmp_path: Path) -> None:
    fetch("news", rss(*((f"e{i}", f"Entry {i}") for i in range(5))))
    logged = [c.cursor for c in all_changes(db_path)]
    script = tmp_path / "consumer.py"
    script.write_text(readme_consumer(), encoding="utf-8")
    cursor_file = tmp_path / "signal.cursor"
    env = {**os.environ, "SIGNAL_DB": str(db_path), "SIGNAL_CURSOR": str(cursor_file),
           "SIGNAL_BATCH": "2", "NO_PROXY": "127.0.0.1"}
    hook = Webhook()
    try:
        env["WEBHOOK_URL"] = hook.url
        hook.kill_at = 4  # the second change of the second batch
        assert run_consumer(script, hook, env) == -signal.SIGKILL
        assert [r["cursor"] for r in hook.received] == logged[:4]
        assert cursor_file.read_text() == logged[1]  # the first batch was acknowledged

        hook.kill_at, hook.ready = None, threading.Event()
        assert run_consumer(script, hook, env) == 0
        # The second batch came again, and nothing else did.
        assert [r["cursor"] for r in hook.received] == [*logged[:4], *logged[2:]]
        assert cursor_file.read_text() == logged[-1]
        # The receiver tells a repeat from a new change by its idempotency key.
        assert [r["idempotency"] for r in hook.received] == [r["cursor"]
                                                             for r in hook.received]
        assert list(dict.fromkeys(r["idempotency"] for r in hook.received)) == logged

        assert run_consumer(script, hook, env) == 0  # nothing new: nothing posted
        assert len(hook.received) == 7
    finally:
        hook.close()
