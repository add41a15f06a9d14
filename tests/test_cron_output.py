"""``signal fetch`` text output that suits cron: a line only where something happened.

Real HTTP on 127.0.0.1 (the scenario server), real SQLite files, the command through
click's CliRunner.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from conftest import FIXTURES
from scenario_server import ScenarioServer, ScriptedResponse

from signal_feeds import FetchRecord, SourceState, Store
from signal_feeds.cli.commands import cli

FAR = dt.datetime(2099, 1, 1, tzinfo=dt.UTC)  # a next poll no test run reaches


def write_config(tmp_path: Path, sources: dict[str, str],
                 extra: dict[str, str] | None = None) -> Path:
    lines = ["[settings]", f'database = "{tmp_path / "signal.db"}"', "min_interval = 0", ""]
    for sid, url in sources.items():
        lines += ["[[sources]]", f'id = "{sid}"', f'url = "{url}"',
                  *((extra or {}).get(sid, "").splitlines()), ""]
    path = tmp_path / "signal.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def not_due(db: Path, sources: dict[str, str]) -> None:
    """Store each source as fetched, with its next poll far ahead."""
    now = dt.datetime.now(dt.UTC)
    with Store(db) as store, store.batch():
        for sid, url in sources.items():
            store.save_attempt(
                SourceState(source_id=sid, url=url, status="fetched", http_status=200,
                            last_fetch_at=now, next_due_at=FAR),
                FetchRecord(source_id=sid, started_at=now, url=url, outcome="fetched"))


def fetch(config: Path, *args: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(cli, ["fetch", "--config", str(config), *args])
    return result.exit_code, result.stdout.splitlines()


def test_a_run_of_sources_that_are_not_due_prints_one_line(tmp_path: Path) -> None:
    # Port 9 (discard): nothing may be requested, and nothing is.
    sources = {f"feed-{i:04d}": f"http://127.0.0.1:9/feed-{i}.xml" for i in range(2000)}
    config = write_config(tmp_path, sources)
    not_due(tmp_path / "signal.db", sources)

    code, lines = fetch(config)
    assert code == 0
    assert len(lines) == 1 and lines[0].startswith("2000 sources: 0 created")
    assert "2000 not_due" in lines[0]

    code, lines = fetch(config, "-q")
    assert (code, lines) == (0, [])  # cron mails nothing

    code, lines = fetch(config, "-v")
    assert code == 0 and len(lines) == 2001
    assert all(" not_due " in line for line in lines[:-1])

    code, lines = fetch(config, "--json")
    assert len(json.loads(lines[0])["sources"]) == 2000  # --json: every source, always


SOURCES = ["not-modified", "unchanged", "new", "failed", "rejected", "gone", "retry-later",
           "moved", "expired", "not-due"]


def mixed_run(server: ScenarioServer, folder: Path, *args: str) -> tuple[int, list[str]]:
    """A fresh database, then one ``signal fetch`` in which every outcome happens once:
    the listed sources in :data:`SOURCES` order."""
    folder.mkdir()
    plain = (FIXTURES / "variants" / "no-dates.xml").read_bytes()  # no <ttl>: due at once
    for path in ("/plain.xml", "/same-entries.xml", "/new.xml", "/target.xml"):
        server.put(path, plain)
    server.put("/contradiction.xml",
               (FIXTURES / "variants" / "demo-rss-contradiction.xml").read_bytes())
    server.script("/gone.xml", [ScriptedResponse(status=410)])
    server.script("/busy.xml", [ScriptedResponse(status=429,
                                                 headers=(("Retry-After", "3600"),))])
    server.script("/old.xml", [ScriptedResponse(status=301, headers=(
        ("Location", server.url("/target.xml")),))])
    urls = ["/plain.xml", "/same-entries.xml", "/new.xml", "/missing.xml",
            "/contradiction.xml", "/gone.xml", "/busy.xml", "/old.xml", "/plain.xml?expired"]
    sources = {sid: server.url(url) for sid, url in zip(SOURCES, urls, strict=False)}
    # By another name: a host that answers 429 gets no more requests that run.
    sources["retry-later"] = sources["retry-later"].replace("127.0.0.1", "localhost")
    sources["not-due"] = "http://127.0.0.1:9/never.xml"
    config = write_config(folder, sources, {"expired": "review_by = 2001-01-01"})
    code, _ = fetch(config, "--source", "not-modified", "--source", "unchanged")
    assert code == 0
    server.put("/same-entries.xml", plain + b"\n")  # other bytes, the same entries
    not_due(folder / "signal.db", {"not-due": sources["not-due"]})
    return fetch(config, *args)


def test_by_default_a_line_where_something_happened_and_a_summary(
        server: ScenarioServer, tmp_path: Path) -> None:
    code, lines = mixed_run(server, tmp_path / "default")
    assert code == 1  # failed and rejected
    assert [line.split()[0] for line in lines[:-1]] == [
        "new", "failed", "rejected", "gone", "retry-later", "moved", "expired"]
    assert lines[-1].startswith("10 sources: ")
    assert "1 not_modified" in lines[-1] and "1 not_due" in lines[-1]


def test_quiet_prints_only_what_needs_a_human(server: ScenarioServer,
                                             tmp_path: Path) -> None:
    code, lines = mixed_run(server, tmp_path / "quiet", "-q")
    assert code == 1
    assert [line.split()[0] for line in lines] == ["failed", "rejected", "gone", "expired"]


def test_verbose_lists_every_source(server: ScenarioServer, tmp_path: Path) -> None:
    code, lines = mixed_run(server, tmp_path / "verbose", "-v")
    assert [line.split()[:2] for line in lines[:-1]] == [
        ["not-modified", "not_modified"], ["unchanged", "fetched"], ["new", "fetched"],
        ["failed", "failed"], ["rejected", "rejected"], ["gone", "gone"],
        ["retry-later", "retry_later"], ["moved", "moved"], ["expired", "expired"],
        ["not-due", "not_due"]]
    assert lines[-1].startswith("10 sources: ")


def test_verbose_and_quiet_together_are_a_usage_error(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"a": "http://127.0.0.1:9/a.xml"})
    result = CliRunner().invoke(cli, ["fetch", "--config", str(config), "-v", "-q"])
    assert result.exit_code == 2 and "exclude each other" in result.output


def test_a_source_waiting_out_a_retry_after_or_already_moved_is_quiet(
        server: ScenarioServer, tmp_path: Path) -> None:
    # A source under a month-long Retry-After, and one moved by a 301 runs ago, each
    # printed its line on every run: cron mail every 15 minutes for nothing new.
    plain = (FIXTURES / "variants" / "no-dates.xml").read_bytes()
    server.put("/target.xml", plain)
    server.script("/busy.xml", [ScriptedResponse(status=429,
                                                 headers=(("Retry-After", "3600"),))])
    # The moving source on another host name: a host's Retry-After pauses every source
    # it serves, in this run and the next.
    elsewhere = server.url("/").replace("127.0.0.1", "localhost")
    server.script("/old.xml", [ScriptedResponse(status=301, headers=(
        ("Location", elsewhere + "target.xml"),))])
    config = write_config(tmp_path, {"busy": server.url("/busy.xml"),
                                     "moving": elsewhere + "old.xml"})
    code, lines = fetch(config)
    assert [line.split()[:2] for line in lines[:-1]] == [["busy", "retry_later"],
                                                         ["moving", "moved"]]
    code, lines = fetch(config)
    assert code == 0 and len(lines) == 1  # the summary alone
    assert "1 retry_later" in lines[0] and "1 not_modified" in lines[0]
    code, lines = fetch(config, "-v")
    assert [line.split()[:2] for line in lines[:-1]] == [["busy", "retry_later"],
                                                         ["moving", "not_modified"]]
    # Forced, the refusal is news: its line says --force does not override Retry-After.
    code, lines = fetch(config, "--force", "--source", "busy")
    assert len(lines) == 2 and "--force does not override Retry-After" in lines[0]


def test_skips_on_a_line_not_printed_are_pointed_to_in_the_summary(
        server: ScenarioServer, tmp_path: Path) -> None:
    # Its only item has neither an id nor a usable link: nothing new, so no line.
    body = (b"<?xml version='1.0'?><rss version='2.0'><channel><title>t</title>"
            b"<item><title>x</title><link>javascript:alert(1)</link></item></channel></rss>")
    server.script("/skips.xml", [ScriptedResponse(
        200, (("Content-Type", "application/rss+xml"),), body)] * 2)
    config = write_config(tmp_path, {"skips": server.url("/skips.xml")})
    code, lines = fetch(config)
    assert code == 0 and len(lines) == 1
    # The reason itself: the next run may not parse the feed again (a 304, the same
    # body), so "-v says why" sent people to a run that could not say it.
    assert ("1 skipped (no id and no usable link (scheme javascript: is not http or "
            "https));") in lines[0], lines
    code, lines = fetch(config, "-v")
    assert "no id and no usable link (scheme javascript:" in lines[0]
    assert "skipped;" in lines[1]
    code, lines = fetch(config, "-q")
    assert lines == []


def test_a_run_with_its_output_streams_closed_still_fetches(server: ScenarioServer,
                                                             tmp_path: Path) -> None:
    # A daemon or supervisor may start the job with stdout or stderr closed
    # (`signal fetch 2>&-`): Python then has no sys.stderr at all, and the check for a
    # progress line failed before anything was fetched (exit 1, and no word of why).
    server.put("/plain.xml", (FIXTURES / "demo-rss.xml").read_bytes())
    config = write_config(tmp_path, {"plain": server.url("/plain.xml")})
    for closed in (1, 2):
        proc = subprocess.run([sys.executable, "-m", "signal_feeds", "fetch", "--force",
                               "--config", str(config)], stdin=subprocess.DEVNULL,
                              preexec_fn=lambda fd=closed: os.close(fd),  # noqa: PLW1509
                              capture_output=False, timeout=120, check=False)
        assert proc.returncode == 0, closed
    with Store(tmp_path / "signal.db") as store:
        assert len(store.entries(limit=10)) == 3  # demo-rss.xml holds three
