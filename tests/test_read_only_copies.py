"""Reading a copy of the database that is not in WAL mode (``VACUUM INTO`` makes one, a
common backup) where it lies, without write access: real HTTP, real SQLite files."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import make_config, sqlite_read_only
from scenario_server import ScenarioServer

from signal_feeds import run_fetch
from signal_feeds.cli.commands import cli
from signal_feeds.store import Store
from signal_feeds.store.change_feed import read_changes
from signal_feeds.store.reading import (
    entry_history,
    export_entries,
    list_entries,
    lookup,
    search_entries,
)

FEED = (b"<?xml version='1.0'?><rss version='2.0'><channel><title>t</title>"
        b"<link>https://example.org/</link><item><guid isPermaLink='false'>a-1</guid>"
        b"<title>Harbour lights at dusk</title><link>https://example.org/harbour</link>"
        b"<pubDate>Mon, 02 Mar 2026 10:00:00 GMT</pubDate></item></channel></rss>")


@pytest.fixture
def backup(server: ScenarioServer, tmp_path: Path) -> Iterator[Path]:
    """A fetched database copied with ``VACUUM INTO`` (rollback-journal mode) into a
    folder of its own."""
    live = tmp_path / "signal.db"
    server.put("/feed.xml", FEED)
    report = run_fetch(make_config(live, {"news": server.url("/feed.xml")}))
    assert report.sources[0].status == "fetched", report.sources[0]
    (tmp_path / "backups").mkdir()
    copy = tmp_path / "backups" / "signal.db"
    with closing(sqlite3.connect(live)) as conn:
        conn.execute("VACUUM INTO ?", (str(copy),))
    yield copy
    copy.parent.chmod(0o755)


def _state(path: Path) -> tuple[str, int, list[str]]:
    """The file's bytes (a digest), its mtime and what lies beside it."""
    return (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns,
            sorted(p.name for p in path.parent.iterdir()))


READS = [["entries"], ["search", "harbour"], ["history", "KEY"], ["sources"],
         ["changes"], ["export"], ["lookup", "https://example.org/harbour"]]


def _read_everything(copy: Path) -> None:
    key = ""
    for args in READS:
        args = [key if a == "KEY" else a for a in args]
        result = CliRunner().invoke(cli, [*args, "--db", str(copy)])
        assert result.exit_code == 0, (args, result.output)
        assert "Harbour lights" in result.output or args == ["sources"], result.output
        if args == ["entries"]:
            key = result.output.split()[0]
    with Store(copy) as store:
        assert [e.title for e in list_entries(store)] == ["Harbour lights at dusk"]
        assert [h.entry.title for h in search_entries(store, "harbour")] == [
            "Harbour lights at dusk"]
        history = entry_history(store, key)
        assert history is not None and len(history.versions) == 1
        assert lookup(store, "https://example.org/harbour") is not None
        assert "Harbour lights" in export_entries(store)
        assert len(read_changes(store)) == 1


def test_reading_a_rollback_journal_copy_leaves_it_as_it_was(backup: Path) -> None:
    # Every reading command switched the copy to WAL mode: it rewrote the backup's header
    # (new bytes, new mtime) only to list entries.
    before = _state(backup)
    _read_everything(backup)
    assert _state(backup) == before
    with closing(sqlite3.connect(f"{backup.as_uri()}?mode=ro", uri=True)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_a_rollback_journal_copy_is_read_on_read_only_storage(
        backup: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # On a read-only mount every reading command failed with "attempt to write a
    # readonly database", though SQLite reads such a file there without writing anything.
    # Tests run as root, which ignores file modes: SQLite's own read-only mode refuses.
    before = _state(backup)
    sqlite_read_only(monkeypatch)
    _read_everything(backup)
    monkeypatch.undo()
    assert _state(backup) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file modes")
def test_a_rollback_journal_copy_in_a_read_only_folder_is_read(backup: Path) -> None:
    backup.chmod(0o444)
    backup.parent.chmod(0o555)
    before = _state(backup)
    _read_everything(backup)
    assert _state(backup) == before


def test_the_first_write_still_switches_a_copy_to_wal(
        backup: Path, server: ScenarioServer) -> None:
    # Writers need WAL (readers go on during a fetch): the first write switches to it.
    report = run_fetch(make_config(backup, {"news": server.url("/feed.xml")}), force=True)
    assert report.sources[0].status in {"fetched", "not_modified"}, report.sources[0]
    with closing(sqlite3.connect(backup)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
