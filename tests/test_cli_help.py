"""The command line as ``--help`` teaches it: an option given where a user would put it
is used or refused with a usage error (exit 2) naming it, never dropped without a word."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from signal_feeds.cli.commands import cli
from signal_feeds.records import FetchRecord, SourceState
from signal_feeds.store import Store

OPML = ("<opml version='2.0'><body><outline type='rss' text='B' "
        "xmlUrl='https://b.example/feed.xml'/></body></opml>")
CONFIG = '[[sources]]\nid = "a"\nurl = "https://a.example/feed.xml"\n'


def _gone_source(path: Path) -> Path:
    """A database holding one source, ``a``, that answered 410."""
    url = "https://a.example/feed.xml"
    with Store(path) as store:
        store.save_attempt(SourceState(source_id="a", url=url, status="gone", gone=True,
                                       http_status=410),
                           FetchRecord(source_id="a", url=url, outcome="gone",
                                       started_at=dt.datetime.now(dt.UTC), http_status=410))
    return path


def test_config_before_import_opml_is_the_list_it_adds_to(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "lists" / "mine.toml"
    config.parent.mkdir()
    config.write_text(CONFIG, encoding="utf-8")
    (tmp_path / "subs.opml").write_text(OPML, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    # `signal sources --config lists/mine.toml import-opml subs.opml` wrote a new
    # ./signal.toml holding the feed, and left lists/mine.toml as it was.
    result = CliRunner().invoke(cli, ["sources", "--config", str(config), "--json",
                                      "import-opml", "subs.opml"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["added"][0]["url"] == "https://b.example/feed.xml"
    assert "https://b.example/feed.xml" in config.read_text(encoding="utf-8")
    assert not (tmp_path / "signal.toml").exists()


def test_two_different_configs_around_import_opml_are_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "one.toml").write_text(CONFIG, encoding="utf-8")
    (tmp_path / "two.toml").write_text(CONFIG, encoding="utf-8")
    (tmp_path / "subs.opml").write_text(OPML, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["sources", "--config", "one.toml", "import-opml",
                                      "subs.opml", "--config", "two.toml"])
    assert result.exit_code == 2
    assert "--config given twice: one.toml (before import-opml) and two.toml" in (
        result.output)
    assert (tmp_path / "one.toml").read_text(encoding="utf-8") == CONFIG
    assert (tmp_path / "two.toml").read_text(encoding="utf-8") == CONFIG
    same = CliRunner().invoke(cli, ["sources", "--config", "one.toml", "import-opml",
                                    "subs.opml", "--config", "./one.toml", "--dry-run"])
    assert same.exit_code == 0, same.output


@pytest.mark.parametrize(("options", "named"), [
    (["--db", "signal.db"], "--db"),
    (["--status", "gone"], "--status"),
    (["--reset", "a"], "--reset"),
])
def test_list_options_before_import_opml_are_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: list[str],
        named: str) -> None:
    (tmp_path / "signal.toml").write_text(CONFIG, encoding="utf-8")
    (tmp_path / "subs.opml").write_text(OPML, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    # They were dropped, and the import ran as if they had not been typed.
    result = CliRunner().invoke(cli, ["sources", *options, "import-opml", "subs.opml"])
    assert result.exit_code == 2
    assert f"{named}: an option of 'signal sources' itself" in result.output
    assert (tmp_path / "signal.toml").read_text(encoding="utf-8") == CONFIG


@pytest.mark.parametrize(("options", "named"), [
    (["--json"], "--json"),
    (["--status", "ok"], "--status"),
    (["--status", "gone", "--json"], "--status and --json"),
])
def test_reset_with_a_list_option_is_refused_and_resets_nothing(
        tmp_path: Path, options: list[str], named: str) -> None:
    db = _gone_source(tmp_path / "signal.db")
    # `--reset a --json` printed a text line where a script expected JSON (exit 0).
    result = CliRunner().invoke(cli, ["sources", "--db", str(db), "--reset", "a", *options])
    assert result.exit_code == 2
    assert f"{named}: choose how the list is shown, and --reset shows none" in result.output
    listed = CliRunner().invoke(cli, ["sources", "--db", str(db), "--json"])
    assert json.loads(listed.stdout)["sources"][0]["status"] == "gone"


@pytest.mark.parametrize(("options", "named"), [
    (["--since", "2026-01-01"], "--since"),
    (["--source", "a", "--all"], "--source, --all"),
    (["--limit", "5"], "--limit"),
])
def test_hit_filters_with_a_rebuild_alone_are_refused_not_ignored(
        tmp_path: Path, options: list[str], named: str) -> None:
    db = _gone_source(tmp_path / "signal.db")
    # `search --rebuild --since ...` rebuilt and exited 0, as if the filter meant nothing
    # (a mistyped --source was not even checked).
    result = CliRunner().invoke(cli, ["search", "--db", str(db), "--rebuild", *options])
    assert result.exit_code == 2
    assert f"{named}: choose hits, and --rebuild without a QUERY searches nothing" in (
        result.output)
    assert CliRunner().invoke(cli, ["search", "--db", str(db), "--rebuild"]).exit_code == 0


@pytest.mark.parametrize("command", [["dedupe"], ["entries"], ["changes"], ["copy", "--to",
                                                                         "x.db"]])
def test_a_reading_command_with_no_database_and_no_config_names_db(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    # `signal dedupe` alone said only "signal.toml: config file not found", where the
    # other commands that read a database say how to name one.
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "signal: error: no database given and no signal.toml in this folder: pass --db PATH")
