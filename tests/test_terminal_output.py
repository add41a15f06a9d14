"""What the ``signal`` command writes to a terminal or a pipe, whatever a feed holds:
a pipe closed early, bidi overrides in JSON and XML output, a narrow terminal."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

from click.testing import CliRunner
from pytest_httpserver import HTTPServer
from scenario_server import ScenarioServer, ScriptedResponse

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


def test_the_progress_line_fits_a_narrow_terminal(server: ScenarioServer,
                                                  tmp_path: Path) -> None:
    # The progress line was cut at 120 characters whatever the terminal's width: in a
    # 40-column pane, a line naming a long source id wrapped, "\r" went back only to
    # the start of its last row, and every update left a row behind.
    rss = (b"<rss version='2.0'><channel><title>t</title><item><guid>a</guid>"
           b"<title>A</title></item></channel></rss>")
    lines = ["[settings]", 'database = "s.db"', "min_interval = 0"]
    for n, delay in enumerate((0.0, 1.0, 1.0)):
        server.script(f"/p/{n}.xml", [ScriptedResponse(
            200, (("Content-Type", "application/rss+xml"),), rss, delay=delay)])
        lines += ["", "[[sources]]", f'id = "{"a-rather-long-source-name-" * 2}{n}"',
                  f'url = "{server.url(f"/p/{n}.xml")}"']
    (tmp_path / "signal.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    terminal, pane = pty.openpty()
    fcntl.ioctl(pane, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 40, 0, 0))
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    try:
        done = subprocess.run([sys.executable, "-m", "signal_feeds", "fetch"], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=pane, timeout=120, check=False,
                              env=env)
    finally:
        os.close(pane)
    shown = b""
    try:
        while chunk := os.read(terminal, 65536):
            shown += chunk
    except OSError:  # EIO: the other end is closed and everything was read
        pass
    finally:
        os.close(terminal)
    assert done.returncode == 0, shown
    updates = [u for u in re.split(rb"[\r\n]", shown) if u.strip()]
    assert any(b"waiting on" in u for u in updates), shown
    assert all(len(u) < 40 for u in updates), updates
