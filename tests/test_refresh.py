"""A changed parse setting reaches stored entries (issue 18, point 3), and what the run
passes to the store for exports and canonical choice (the feed's title, the source
order)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from _hostile import rss, write_config
from click.testing import CliRunner
from conftest import make_config
from scenario_server import ScenarioServer

from signal_feeds import load_config, run_fetch
from signal_feeds.cli.commands import cli
from signal_feeds.parse.settings import ParseSettings

# An item whose only link is plain http: kept by default, refused with https only.
HTTP_ITEM = ("<item><guid>one</guid><title>One</title>"
             "<link>http://example.org/one</link></item>")


def stored_url(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        (url,) = conn.execute("SELECT url FROM entries").fetchone()
        return str(url)
    finally:
        conn.close()


def test_the_parse_settings_are_part_of_what_a_body_is_remembered_by() -> None:
    body = "ab" * 32
    default, https_only = ParseSettings(), ParseSettings(require_https_links=True)
    assert default.input_digest(body) == default.input_digest(body)
    assert default.input_digest(body) != https_only.input_digest(body)
    assert default.input_digest("") == ""  # no body, nothing to remember


def test_the_input_digest_is_pinned() -> None:
    # Stored states carry these: a change would make every source parse its next body
    # again, so it must be deliberate.
    body = "ab" * 32
    assert ParseSettings().input_digest(body) == (
        "a69a0f52852b27612e6c467d1f6a05ea99edc523781ea972d7b12838b8d74266")
    assert ParseSettings(require_https_links=True, max_entries=10).input_digest(body) == (
        "b797939f141b556ad3ef23413d9e0a9ee0f8df632eecb750c412a0c485d9498b")


def test_a_changed_setting_reparses_the_next_identical_200(server: ScenarioServer,
                                                           tmp_path: Path) -> None:
    # No validators: every request is a 200 with the same bytes.
    server.put("/plain.xml", rss(HTTP_ITEM), etag=False, last_modified=False)
    db = tmp_path / "signal.db"
    config = make_config(db, {"plain": server.url("/plain.xml")}, require_https_links=True)
    first = run_fetch(config, force=True)
    assert stored_url(db) == "" and first.get("plain").created == 1
    same = run_fetch(config, force=True)  # identical body, same settings: not parsed
    assert same.get("plain").unchanged == 1 and same.get("plain").updated == 0
    changed = make_config(db, {"plain": server.url("/plain.xml")})
    after = run_fetch(changed, force=True)
    assert after.get("plain").updated == 1
    assert stored_url(db) == "http://example.org/one"


def test_refresh_asks_without_validators_and_parses_again(server: ScenarioServer,
                                                           tmp_path: Path) -> None:
    server.put("/valid.xml", rss(HTTP_ITEM))  # strong ETag and Last-Modified: 304s
    db = tmp_path / "signal.db"
    strict = write_config(tmp_path / "strict.toml", db, {"valid": server.url("/valid.xml")},
                          require_https_links=True)
    relaxed = write_config(tmp_path / "relaxed.toml", db, {"valid": server.url("/valid.xml")})
    runner = CliRunner()
    assert runner.invoke(cli, ["fetch", "--config", str(strict)]).exit_code == 0
    assert stored_url(db) == ""
    # --force keeps the validators: the server answers 304 and nothing changes.
    forced = runner.invoke(cli, ["fetch", "--config", str(relaxed), "--force", "--json"])
    assert '"http_status": 304' in forced.output and stored_url(db) == ""
    server.clear_log()
    refreshed = runner.invoke(cli, ["fetch", "--config", str(relaxed), "--refresh",
                                    "--source", "valid", "--json"])
    assert refreshed.exit_code == 0, refreshed.output
    (request,) = server.requests_for("/valid.xml")
    assert request.header("If-None-Match") is None
    assert request.header("If-Modified-Since") is None
    assert '"updated": 1' in refreshed.output
    assert stored_url(db) == "http://example.org/one"


def test_the_feed_title_is_kept_for_exports(server: ScenarioServer, tmp_path: Path) -> None:
    server.put("/titled.xml", rss("<item><guid>a</guid><title>A</title></item>"))
    db = tmp_path / "signal.db"
    config_path = write_config(tmp_path / "signal.toml", db,
                               {"titled": server.url("/titled.xml")})
    run_fetch(load_config(config_path))
    out = tmp_path / "out.atom"
    result = CliRunner().invoke(cli, ["export", "--config", str(config_path), "--format",
                                      "atom", "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    # The feed's own <title>, not the source id "titled".
    assert '<title type="text">hostile</title>' in text


def test_a_run_records_the_config_order_of_sources(server: ScenarioServer,
                                                   tmp_path: Path) -> None:
    db = tmp_path / "signal.db"
    server.put("/a.xml", rss("<item><guid>a</guid><title>A</title></item>"))
    config = make_config(db, {"zeta": server.url("/a.xml"), "alpha": server.url("/a.xml")})
    run_fetch(config, source_ids=["alpha"])  # the whole list's order, not the selection
    conn = sqlite3.connect(db)
    try:
        order = conn.execute("SELECT * FROM source_order ORDER BY 2").fetchall()
    finally:
        conn.close()
    assert [row[0] for row in order] == ["zeta", "alpha"]
