"""``--json`` as a contract for scripts: the documents are the ones ``json.dumps`` gives,
written a few items at a time, and a reader that stops early (``| head``, ``| jq``
killed) is told by the exit code, as with the text output. Real HTTP on 127.0.0.1,
real SQLite files, the command run as a process where a pipe matters."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from pytest_httpserver import HTTPServer

from signal_feeds.cli.commands import cli

#: Items in the served feed: several writes' worth of JSON, and more than a
#: pipe's 64 KB buffer.
ITEMS = 307


def _feed() -> bytes:
    words = " ".join(f"harvest{n}" for n in range(60))
    items = "".join(
        f"<item><guid>g{i}</guid><title>Story {i} \u00e9t\u00e9 \u202e</title>"
        f"<link>https://news.example/{i}</link>"
        f"<pubDate>Mon, 02 Feb 2026 {i // 60 % 24:02d}:{i % 60:02d}:00 GMT</pubDate>"
        f"<description>{words} story {i}</description></item>" for i in range(ITEMS))
    return (f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel>'
            f"<title>t</title><link>https://news.example/</link>{items}</channel></rss>"
            ).encode()


@pytest.fixture
def fetched(httpserver: HTTPServer, tmp_path: Path) -> Path:
    """A database holding the feed's entries, fetched over HTTP; its path."""
    httpserver.expect_request("/feed").respond_with_data(
        _feed(), content_type="application/rss+xml")
    config = tmp_path / "signal.toml"
    config.write_text(f'[settings]\ndatabase = "s.db"\nmax_entries = {ITEMS}\n\n'
                      f'[[sources]]\nid = "news"\nurl = "{httpserver.url_for("/feed")}"\n')
    result = CliRunner().invoke(cli, ["fetch", "--config", str(config)])
    assert result.exit_code == 0, result.output
    return tmp_path / "s.db"


def _run(db: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, [*args, "--db", str(db)])
    assert result.exit_code == 0, result.output
    return result.output


def test_entries_and_search_print_the_document_json_dumps_gives(fetched: Path) -> None:
    from signal_feeds.cli.common import json_escaped
    from signal_feeds.store import open_store
    from signal_feeds.store.reading import list_entries, search_entries

    limit = str(ITEMS + 5)
    with open_store(fetched) as store:
        views = list_entries(store, limit=ITEMS + 5)
        hits = search_entries(store, "harvest7", limit=ITEMS + 5)
    assert len(views) == ITEMS and len(hits) == ITEMS
    expected = json.dumps({"entries": [v.to_dict() for v in views]}, ensure_ascii=False)
    assert _run(fetched, "entries", "--json", "--limit", limit) == json_escaped(expected) + "\n"
    for args, out in ((["search", "harvest7", "--limit", limit], {}),
                      (["search", "--rebuild", "harvest7", "--limit", limit],
                       {"indexed": ITEMS})):
        expected = json.dumps({"query": "harvest7", "hits": [h.to_dict() for h in hits],
                               **out}, ensure_ascii=False)
        assert _run(fetched, *args, "--json") == json_escaped(expected) + "\n", args
    # Empty results are documents too.
    assert json.loads(_run(fetched, "entries", "--json", "--since", "2099-01-01")) == {
        "entries": []}
    assert json.loads(_run(fetched, "search", "--rebuild", "--json")) == {
        "query": None, "hits": [], "indexed": ITEMS}


@pytest.mark.parametrize("args", [["entries", "--json", "--limit", "1000"],
                                  ["search", "harvest7", "--json", "--limit", "1000"]])
def test_a_reader_that_stops_early_gets_exit_1(fetched: Path, args: list[str]) -> None:
    # `signal entries --json | head -c 10` exited 0, as if all had been read: the
    # document went out in one write, which a closed pipe ends short without an error.
    proc = subprocess.Popen([sys.executable, "-m", "signal_feeds", *args, "--db",
                             str(fetched)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(10)
    proc.stdout.close()
    with proc.stderr:
        assert proc.stderr.read() == b""
    assert proc.wait(timeout=120) == 1


def test_changes_are_read_a_page_at_a_time(httpserver: HTTPServer, tmp_path: Path) -> None:
    # `signal changes --limit 100000` held every change it printed (160 MB) until the
    # last was read; it now holds one page of CHANGES_PAGE.
    import contextlib
    import tracemalloc

    from signal_feeds.cli.changes import CHANGES_PAGE

    many = 5 * CHANGES_PAGE
    items = "".join(f"<item><guid>c{i}</guid><title>Change {i}</title>"
                    f"<link>https://changes.example/{i}</link></item>" for i in range(many))
    httpserver.expect_request("/many").respond_with_data(
        f'<rss version="2.0"><channel><title>c</title>{items}</channel></rss>',
        content_type="application/rss+xml")
    config = tmp_path / "signal.toml"
    config.write_text(f'[settings]\ndatabase = "c.db"\nmax_entries = {many}\n\n'
                      f'[[sources]]\nid = "many"\nurl = "{httpserver.url_for("/many")}"\n')
    assert CliRunner().invoke(cli, ["fetch", "--config", str(config)]).exit_code == 0
    out = tmp_path / "changes.jsonl"
    with out.open("w", encoding="utf-8") as handle, contextlib.redirect_stdout(handle):
        tracemalloc.start()
        try:
            code = cli.main(["changes", "--db", str(tmp_path / "c.db"), "--json",
                             "--limit", str(many)], standalone_mode=False)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert code is None
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [c["title"] for c in lines] == [f"Change {i}" for i in range(many)]
    assert len({c["cursor"] for c in lines}) == many
    assert peak < 3_500_000, peak  # 5.2 MB when every change was held, 2.0 MB now
