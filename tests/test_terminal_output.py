"""What the ``signal`` command writes to a terminal or a pipe, whatever a feed holds:
a pipe closed early, bidi overrides in JSON and XML output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from pytest_httpserver import HTTPServer

from signal_feeds.cli.commands import cli

#: Right-to-left override: a terminal that does bidi shows the rest of the line reversed.
RLO = "\u202e"


def fetched(httpserver: HTTPServer, tmp_path: Path, title: str = "Plain title",
            items: int = 1) -> Path:
    """A real SQLite database holding a JSON Feed from ``httpserver``, fetched by
    ``signal fetch``; the path of its source list."""
    feed = {"version": "https://jsonfeed.org/version/1.1", "title": f"Feed {title}",
            "items": [{"id": f"i{n}", "url": f"https://example.org/{n}", "title": title,
                       "content_text": f"harvest {title} {n}"} for n in range(items)]}
    httpserver.expect_request("/feed.json").respond_with_data(
        json.dumps(feed), content_type="application/feed+json")
    config = tmp_path / "signal.toml"
    config.write_text(f'[settings]\ndatabase = "{tmp_path / "s.db"}"\nmin_interval = 0\n\n'
                      f'[[sources]]\nid = "j"\nurl = "{httpserver.url_for("/feed.json")}"\n',
                      encoding="utf-8")
    result = CliRunner().invoke(cli, ["fetch", "--config", str(config)])
    assert result.exit_code == 0, result.output
    return config


def into_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    """``signal ARGS`` with its standard output a pipe whose reader has gone (``| head``
    after its line)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "signal_feeds", *args], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    finally:
        os.close(write_end)


def test_export_to_dev_stdout_stops_quietly_when_the_reader_goes(
        httpserver: HTTPServer, tmp_path: Path) -> None:
    # `signal export -o /dev/stdout | head` said "error: --output /dev/stdout: cannot
    # write it: Broken pipe" with exit 2 (a usage error); `-o -` stops quietly.
    config = fetched(httpserver, tmp_path)
    for output in ("-", "/dev/stdout"):
        for fmt in ("json", "atom", "opml"):
            done = into_closed_pipe("export", "--config", str(config), "--format", fmt,
                                    "-o", output)
            assert (done.returncode, done.stderr) == (1, ""), (output, fmt)


def test_json_and_xml_output_escape_bidi_overrides(httpserver: HTTPServer,
                                                    tmp_path: Path) -> None:
    # The text output shows U+202E as U+FFFD, but --json and export printed it raw: on a
    # terminal that does bidi, one title reversed the rest of the JSON line, every later
    # entry included. Escaped (\u202e, &#x202e;), the data is the same.
    title = f"evil {RLO}txt.exe \u2066iso\u2069"
    config = fetched(httpserver, tmp_path, title=title)
    key = json.loads(CliRunner().invoke(
        cli, ["entries", "--json", "--config", str(config)]).output)["entries"][0]["key"]
    runner = CliRunner()
    for args in (["entries", "--json"], ["history", key, "--json"],
                 ["search", "harvest", "--json"], ["changes", "--json"],
                 ["lookup", "https://example.org/0", "--json"], ["export"],
                 ["export", "--format", "atom"], ["export", "--format", "opml"]):
        result = runner.invoke(cli, [*args, "--config", str(config)])
        assert result.exit_code == 0, result.output
        shown = result.output
        assert RLO not in shown and "\u2066" not in shown, args
        if "--json" in args or args == ["export"]:
            assert "\\u202e" in shown, args
            documents = [json.loads(line) for line in shown.splitlines() if line.strip()
                         ] if args[0] == "changes" else [json.loads(shown)]
            assert title in json.dumps(documents, ensure_ascii=False), args
        else:
            assert "&#x202e;" in shown, args
    # What is stored, and what the JSON says, is the title as the feed wrote it.
    listed = json.loads(runner.invoke(cli, ["entries", "--json", "--config", str(config)])
                        .output)["entries"]
    assert listed[0]["title"] == title
