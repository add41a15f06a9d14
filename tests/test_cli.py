"""The ``signal`` command through click's CliRunner (and once as a real process)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

from click.testing import CliRunner
from conftest import FIXTURES
from pytest_httpserver import HTTPServer
from scenario_server import ScenarioServer

from signal_feeds import digest
from signal_feeds.cli.commands import cli

REPORT_KEYS = {"source", "status", "http_status", "created", "updated", "unchanged",
               "skipped", "error"}


def write_config(tmp_path: Path, sources: dict[str, str]) -> Path:
    lines = ['[settings]', f'database = "{tmp_path / "signal.db"}"', "min_interval = 0", ""]
    for sid, url in sources.items():
        lines += ["[[sources]]", f'id = "{sid}"', f'url = "{url}"', ""]
    path = tmp_path / "signal.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def test_fetch_json_contract_and_exit_codes(server: ScenarioServer, tmp_path: Path) -> None:
    config = write_config(tmp_path, {"demo-rss": server.url("/feeds/demo-rss.xml"),
                                     "demo-atom": server.url("/feeds/demo-atom.xml")})
    runner = CliRunner()
    result = runner.invoke(cli, ["fetch", "--config", str(config), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert set(report) >= {"sources", "totals"}
    assert [s["source"] for s in report["sources"]] == ["demo-rss", "demo-atom"]
    for entry in report["sources"]:
        assert set(entry) >= REPORT_KEYS
        assert entry["status"] == "fetched" and entry["http_status"] == 200
        assert entry["error"] is None
    assert report["totals"]["created"] == 5

    again = json.loads(runner.invoke(cli, ["fetch", "--config", str(config), "--json"]).output)
    rss = again["sources"][0]
    assert rss["status"] == "not_due" and "next_due" in rss  # <ttl>60</ttl>: an hour

    forced = runner.invoke(cli, ["fetch", "--config", str(config), "--json", "--force",
                                 "--source", "demo-atom"])
    assert [s["status"] for s in json.loads(forced.output)["sources"]] == ["not_modified"]


def test_fetch_exit_1_when_a_source_fails_but_others_run(server: ScenarioServer,
                                                         tmp_path: Path) -> None:
    config = write_config(tmp_path, {"bad": server.url("/feeds/variants/malformed.xml"),
                                     "gone": server.url("/feeds/missing.xml"),
                                     "demo-rss": server.url("/feeds/demo-rss.xml")})
    result = CliRunner().invoke(cli, ["fetch", "--config", str(config), "--json"])
    assert result.exit_code == 1
    by_id = {s["source"]: s for s in json.loads(result.output)["sources"]}
    assert by_id["demo-rss"]["created"] == 3
    assert by_id["gone"]["status"] == "failed" and "404" in by_id["gone"]["error"]


def test_bad_config_exit_2_names_file_and_entry(tmp_path: Path) -> None:
    path = tmp_path / "signal.toml"
    path.write_text('[[sources]]\nid = "Not A Slug"\nurl = "https://example.org/f"\n')
    result = CliRunner().invoke(cli, ["fetch", "--config", str(path)])
    assert result.exit_code == 2
    assert str(path) in result.output and "sources[0]" in result.output
    assert "Traceback" not in result.output
    missing = CliRunner().invoke(cli, ["fetch", "--config", str(tmp_path / "none.toml")])
    assert missing.exit_code == 2 and "config file not found" in missing.output
    usage = CliRunner().invoke(cli, ["fetch", "--no-such-flag"])
    assert usage.exit_code == 2


def test_unknown_source_id_is_a_usage_error(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"a": "https://example.org/feed"})
    result = CliRunner().invoke(cli, ["fetch", "--config", str(config), "--source", "zzz"])
    assert result.exit_code == 2 and "zzz" in result.output


def test_parse_every_fixture_file() -> None:
    files = sorted(p for p in FIXTURES.rglob("*.xml"))
    result = CliRunner().invoke(cli, ["parse", "--source-id", "demo-rss", *map(str, files)])
    lines = [json.loads(line) for line in result.output.splitlines()]
    assert [line["file"] for line in lines] == [str(f) for f in files]
    by_name = {Path(line["file"]).name: line for line in lines}
    contradiction = by_name["demo-rss-contradiction.xml"]
    assert contradiction["ok"] is False and "release-1" in contradiction["error"]
    assert result.exit_code == 1  # some file was rejected
    demo = by_name["demo-rss.xml"]
    assert demo["ok"] and demo["skipped"] == 0
    first = demo["entries"][0]
    assert set(first) == {"id", "remote_id", "url", "title", "published", "updated",
                          "fingerprint"}
    assert first["id"] == digest(["demo-rss", "release-1"])
    assert by_name["no-id-no-link.xml"]["skipped"] == 1
    for name, line in by_name.items():
        if name != "demo-rss-contradiction.xml":
            assert line["ok"] or line["error"], name


def test_parse_unreadable_and_non_feed_files(tmp_path: Path) -> None:
    html = tmp_path / "page.html"
    html.write_text("<html><body><p>not a feed</p></body></html>")
    result = CliRunner().invoke(cli, ["parse", str(html), str(tmp_path / "missing.xml")])
    lines = [json.loads(line) for line in result.output.splitlines()]
    assert [line["ok"] for line in lines] == [False, False]
    assert "not an RSS or Atom feed" in lines[0]["error"]
    assert "cannot read" in lines[1]["error"]


def test_demo_runs_as_a_process(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "signal_feeds", "demo"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "5 created" in out
    assert "2 not_modified" in out
    assert "1 updated" in out and "Заметки о выпуске 1.0" in out
    assert str(tmp_path / "signal-demo.db") in out
    assert (tmp_path / "signal-demo.db").exists()

    # A terminal that cannot show Cyrillic (a Latin-1 locale): every reading command
    # ended in a UnicodeEncodeError's traceback. Text gets "?"; JSON and XML, escapes.
    def latin1(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-m", "signal_feeds", *args, "--db",
                               str(tmp_path / "signal-demo.db")], capture_output=True,
                              timeout=60, check=False,
                              env={**os.environ, "PYTHONIOENCODING": "latin-1"})

    listed = latin1("entries")
    assert listed.returncode == 0 and b"Traceback" not in listed.stderr
    assert b"demo-rss  ??????? ? ??????? 1.0\n" in listed.stdout
    as_json = latin1("entries", "--json")
    assert as_json.returncode == 0 and as_json.stdout.isascii()
    titles = {e["title"] for e in json.loads(as_json.stdout)["entries"]}
    assert "Заметки о выпуске 1.0" in titles
    atom = latin1("export", "--format", "atom")
    assert atom.returncode == 0 and b"&#1047;&#1072;" in atom.stdout
    demo = subprocess.run([sys.executable, "-m", "signal_feeds", "demo", "--db",
                           str(tmp_path / "latin1.db")], capture_output=True, timeout=120,
                          check=False, env={**os.environ, "PYTHONIOENCODING": "latin-1"})
    assert demo.returncode == 0 and b"Traceback" not in demo.stderr, demo.stderr


def entry_key(db: Path, remote_id: str) -> str:
    with closing(sqlite3.connect(db)) as conn:
        return str(conn.execute("SELECT id FROM entries WHERE remote_id = ?",
                                (remote_id,)).fetchone()[0])


def test_feed_text_cannot_drive_the_terminal(httpserver: HTTPServer, tmp_path: Path) -> None:
    # ESC (C0) and CSI (C1) begin the sequences that clear a terminal, move its cursor or
    # retitle its window; a feed is untrusted text that every reading command prints.
    esc, csi = "\x1b", "\x9b"
    rss = ("<rss version='2.0'><channel><title>t</title><item><guid>a</guid>"
           "<title>Alpha &#27;[2J title</title><author>x&#7;y</author>"
           f"<description>alpha {esc}]0;pwned{chr(7)} body</description></item>"
           "</channel></rss>").encode()
    feed = json.dumps({"version": "https://jsonfeed.org/version/1.1", "title": "j",
                       "items": [{"id": "b", "title": f"Beta {csi}2J title",
                                  "content_text": f"beta {csi}31m body"}]}).encode()
    httpserver.expect_request("/rss").respond_with_data(rss, content_type="application/rss+xml")
    httpserver.expect_request("/json").respond_with_data(feed,
                                                         content_type="application/feed+json")
    config = tmp_path / "signal.toml"
    config.write_text(f'[settings]\ndatabase = "s.db"\nmin_interval = 0\n\n'
                      f'[[sources]]\nid = "rss"\nurl = "{httpserver.url_for("/rss")}"\n\n'
                      f'[[sources]]\nid = "json"\nurl = "{httpserver.url_for("/json")}"\n')
    runner = CliRunner()
    assert runner.invoke(cli, ["fetch", "--config", str(config)]).exit_code == 0
    outputs = {}
    for args in (["entries"], ["entries", "--json"], ["search", "body"],
                 ["search", "body", "--json"], ["export"], ["export", "--format", "atom"],
                 ["history", entry_key(tmp_path / "s.db", "b")]):
        result = runner.invoke(cli, [*args, "--config", str(config)])
        assert result.exit_code == 0, result.output
        outputs[" ".join(args)] = result.output
    for name, text in outputs.items():
        assert esc not in text and csi not in text and "\x07" not in text, name
    # Titles and authors are stored without C0 controls; the text output shows what
    # remains (here a C1 control from JSON Feed) as U+FFFD, and JSON keeps the data.
    assert "Alpha [2J title" in outputs["entries"]
    assert "Beta \ufffd2J title" in outputs["entries"]
    entries = {e["remote_id"]: e for e in json.loads(outputs["entries --json"])["entries"]}
    exported = {e["remote_id"]: e for e in json.loads(outputs["export"])["entries"]}
    assert exported["b"]["title"] == entries["b"]["title"]  # escaped, not changed
    assert "Beta &#x9b;2J title" in outputs["export --format atom"]
    assert entries["b"]["title"] == f"Beta {csi}2J title"
    assert entries["a"]["author"] == "xy"
    # Raw controls make no XML document: they are removed before parsing, so the
    # document is read strictly.
    assert entries["a"]["summary"] == "alpha ]0;pwned body"


def _listed_names(httpserver: HTTPServer, tmp_path: Path, rss: bytes) -> list[str]:
    """How ``signal entries`` names each entry of ``rss`` (source "ana"), sorted."""
    httpserver.expect_request("/rss").respond_with_data(rss, content_type="application/rss+xml")
    config = tmp_path / "signal.toml"
    config.write_text(f'[settings]\ndatabase = "s.db"\nmin_interval = 0\n\n'
                      f'[[sources]]\nid = "ana"\nurl = "{httpserver.url_for("/rss")}"\n')
    runner = CliRunner()
    assert runner.invoke(cli, ["fetch", "--config", str(config)]).exit_code == 0
    result = runner.invoke(cli, ["entries", "--config", str(config)])
    return sorted(line.split("  ana  ", 1)[1] for line in result.output.splitlines())


def test_an_untitled_entry_is_listed_by_the_start_of_its_text(httpserver: HTTPServer,
                                                              tmp_path: Path) -> None:
    # Mastodon and micro-blog posts have no title: their link alone says nothing.
    long = "word " * 40
    rss = ("<rss version='2.0'><channel><title>t</title>"
           "<item><guid>https://social.example/@ana/1</guid>"
           "<description>&lt;p&gt;Hello &lt;a href='/tags/rss' class='mention hashtag'&gt;"
           "#&lt;span&gt;rss&lt;/span&gt;&lt;/a&gt; "
           "&amp;amp; friends&lt;/p&gt;</description></item>"
           f"<item><guid>https://social.example/@ana/2</guid><description>{long}"
           "</description></item>"
           "<item><guid>https://social.example/@ana/3</guid></item></channel></rss>").encode()
    names = _listed_names(httpserver, tmp_path, rss)
    assert names == ["https://social.example/@ana/3",
                     "“Hello #rss & friends”",
                     "“" + ("word " * 16).strip() + "…”"]


def test_an_untitled_entrys_excerpt_never_splits_a_character_as_drawn(
        httpserver: HTTPServer, tmp_path: Path) -> None:
    # The excerpt of an untitled post is cut at 80 characters; a cut through what is
    # drawn as one character showed another: half of a flag (a lone "🇫"), a family
    # emoji as a man and a dangling joiner, an "é" without its accent, a Hindi conjunct
    # as a consonant with a visible virama.
    lead = "x" * 78  # the cut, after 79 characters, falls inside the last cluster
    posts = {"flag": "\U0001F1EB\U0001F1F7 Paris", "family": "\U0001F468\u200d\U0001F469 ok",
             "accent": "e\u0301\u0301 ok", "hindi": "\u0915\u094d\u0937 ok"}
    items = "".join(f"<item><guid>{name}</guid><description>{lead}{text} and more words"
                    "</description></item>" for name, text in posts.items())
    rss = f"<rss version='2.0'><channel><title>t</title>{items}</channel></rss>".encode()
    names = _listed_names(httpserver, tmp_path, rss)
    assert names == [f"“{lead}…”"] * 4


def test_bidi_overrides_do_not_reverse_the_rest_of_a_line() -> None:
    # A title holding U+202E (right-to-left override) reversed how the rest of its line
    # showed, a duplicate's "[duplicate of ...]" and the next column included.
    from signal_feeds.cli.common import printable

    assert printable("evil \u202etxt.exe [duplicate of x]") == "evil \ufffdtxt.exe [duplicate of x]"
    assert printable("a\u2066b\u2069c \u202ax\u202c") == "a\ufffdb\ufffdc \ufffdx\ufffd"
    assert printable("שלום עולם مرحبا") == "שלום עולם مرحبا"  # right-to-left text itself stays
