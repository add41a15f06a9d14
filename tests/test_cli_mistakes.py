"""What a user's ordinary mistakes get from the command: a clear line and an exit code,
never a traceback, and nothing of theirs lost (found by walking the README as a new
user, 2026-12-06)."""

from __future__ import annotations

import datetime as dt
import logging
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from signal_feeds import ConfigError, RunReport, SourceReport, StoreError, parse_config
from signal_feeds.cli.commands import cli
from signal_feeds.config.opml import parse_opml
from signal_feeds.records import FetchRecord, SourceState
from signal_feeds.store import Store

CONFIG = '[[sources]]\nid = "configured"\nurl = "https://configured.example/feed.xml"\n'


def _database_with(path: Path, *source_ids: str) -> Path:
    with Store(path) as store:
        for source_id in source_ids:
            url = f"https://{source_id}.example/feed.xml"
            store.save_attempt(SourceState(source_id=source_id, url=url),
                               FetchRecord(source_id=source_id, url=url, outcome="failed",
                                           started_at=dt.datetime.now(dt.UTC), error="x"))
    return path


def test_export_to_a_folder_that_does_not_exist_is_a_clear_error(tmp_path: Path) -> None:
    db = _database_with(tmp_path / "signal.db", "a")
    for fmt in ("json", "atom", "opml"):
        target = tmp_path / "nope" / f"x.{fmt}"
        result = CliRunner().invoke(cli, ["export", "--db", str(db), "--format", fmt,
                                          "-o", str(target)])
        # It was a FileNotFoundError traceback, exit 1.
        assert result.exit_code == 2, (fmt, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert result.stderr == (f"signal: error: --output {target}: cannot write it: "
                                 "No such file or directory\n")


def test_import_opml_that_cannot_write_the_config_says_so_and_keeps_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "signal.toml"
    config.write_text(CONFIG, encoding="utf-8")
    opml = tmp_path / "subs.opml"
    opml.write_text("<opml version='2.0'><body><outline type='rss' text='B' "
                    "xmlUrl='https://b.example/feed.xml'/></body></opml>", encoding="utf-8")

    def refuse(src: str, dst: str) -> None:
        raise PermissionError(13, "Permission denied", dst)

    # What a read-only folder or file does to any user but root (the tests may run as root).
    monkeypatch.setattr(os, "replace", refuse)
    result = CliRunner().invoke(cli, ["sources", "import-opml", str(opml),
                                      "--config", str(config)])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stderr == (f"signal: error: {config}: cannot write it: Permission denied; "
                             "it is unchanged\n")
    assert config.read_text(encoding="utf-8") == CONFIG
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_db_alone_reads_the_database_whatever_config_the_folder_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = _database_with(tmp_path / "other.db", "kept-a", "kept-b")
    here = tmp_path / "project"
    here.mkdir()
    (here / "signal.toml").write_text(CONFIG, encoding="utf-8")
    monkeypatch.chdir(here)
    # It listed the folder's config (one source, "new") instead of the database's two.
    listed = CliRunner().invoke(cli, ["sources", "--db", str(other), "--json"])
    assert listed.exit_code == 0, listed.output
    assert '"kept-a"' in listed.stdout and '"kept-b"' in listed.stdout
    assert "configured" not in listed.stdout
    # ...and --reset said "signal.toml: no source with id 'kept-a'".
    reset = CliRunner().invoke(cli, ["sources", "--reset", "kept-a", "--db", str(other)])
    assert reset.exit_code == 0, reset.output
    # With --config as well, the config's list it is.
    both = CliRunner().invoke(cli, ["sources", "--db", str(other), "--config", "signal.toml",
                                    "--json"])
    assert both.exit_code == 0 and '"configured"' in both.stdout, both.output


def test_the_opml_export_of_a_database_alone_lists_its_sources(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = _database_with(tmp_path / "signal.db", "alpha", "beta")
    monkeypatch.chdir(tmp_path)  # no signal.toml here: it was "config file not found"
    result = CliRunner().invoke(cli, ["export", "--db", str(db), "--format", "opml"])
    assert result.exit_code == 0, result.output
    feeds = parse_opml(result.stdout.encode())
    assert sorted((f.title, f.url) for f in feeds) == [
        ("alpha", "https://alpha.example/feed.xml"), ("beta", "https://beta.example/feed.xml")]


@pytest.mark.parametrize("url", ["mysql://db.example/signal", "sqlite:///tmp/signal.db"])
def test_a_database_url_signal_cannot_use_says_so(tmp_path: Path, url: str) -> None:
    result = CliRunner().invoke(cli, ["entries", "--db", url])
    # It was "the folder mysql:/db.example does not exist".
    assert result.exit_code == 2
    assert result.stderr == (f"signal: error: --db {url}: not a database Signal can use; "
                             "give a SQLite file path or a postgresql:// URL\n")


def test_copy_checks_its_target_and_never_copies_a_database_onto_itself(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = _database_with(tmp_path / "signal.db", "a")
    missing = tmp_path / "nope" / "copy.db"
    result = CliRunner().invoke(cli, ["copy", "--db", str(db), "--to", str(missing)])
    # It was "unable to open database file", exit 1.
    assert result.exit_code == 2
    assert f"--to {missing}: the folder {missing.parent} does not exist" in result.stderr
    monkeypatch.chdir(tmp_path)
    same = CliRunner().invoke(cli, ["copy", "--db", str(db), "--to", "signal.db", "--replace"])
    # It reported "copied ... -> signal.db; checked".
    assert same.exit_code == 2
    assert same.stderr == ("signal: error: --to signal.db: that is the database being "
                           "copied; choose another target\n")
    with Store(db) as store:
        assert [s.source_id for s in store.source_states()] == ["a"]


def test_settings_that_would_fail_every_request_are_config_problems() -> None:
    text = ('[settings]\ndeadline = 0\nconnect_timeout = 0\nmax_body_bytes = 0\n'
            'min_interval = 7200\nmax_interval = 60\nread_timeout = "30s"\n\n'
            '[[sources]]\nid = "a"\nurl = "https://a.example/feed.xml"\nmax_body_bytes = 0\n')
    # They were accepted, and every source then failed at fetch time ("no complete
    # response within the 0 s deadline", "larger than the cap of 0 bytes").
    with pytest.raises(ConfigError) as raised:
        parse_config(text, path="signal.toml")
    assert sorted(raised.value.problems) == sorted([
        "[settings]: deadline: must be more than 0 (at 0 every request fails)",
        "[settings]: connect_timeout: must be more than 0 (at 0 every request fails)",
        "[settings]: max_body_bytes: must be more than 0 (at 0 every request fails)",
        "[settings]: read_timeout: must be a number, not '30s'",
        "[settings]: max_interval: 60 is less than min_interval (7200); polls could not "
        "be both",
        "sources[0] (id 'a'): max_body_bytes: must be more than 0 (at 0 every request "
        "fails)"])


@pytest.mark.parametrize(("settings", "problem"), [
    # Accepted, then every run failed with an OverflowError's traceback.
    ("min_interval = 1e12", "min_interval: must be at most 31622400 seconds (366 days)"),
    ("lease_seconds = 1e300", "lease_seconds: must be at most 86400 seconds (1 day)"),
    ("busy_timeout = 1e9", "busy_timeout: must be at most 86400 seconds (1 day)"),
])
def test_settings_past_any_schedule_are_config_problems(settings: str, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(f"[settings]\n{settings}\n", path="signal.toml")
    assert list(raised.value.problems) == [f"[settings]: {problem}"]


def test_a_max_interval_under_the_min_interval_is_named_as_written() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config("[settings]\nmin_interval = 2592000\nmax_interval = 1209600\n",
                     path="signal.toml")
    assert list(raised.value.problems) == [
        "[settings]: max_interval: 1209600 is less than min_interval (2592000); "
        "polls could not be both"]


@pytest.mark.parametrize(("settings", "warned"), [
    # One of the pair alone, against the other's default: min_interval wins, as it did,
    # and the user is told (a max_interval of 60 was silently overruled).
    ("max_interval = 60", "signal.toml: [settings]: max_interval (60) is less than the "
                          "default min_interval (3600); min_interval wins (set "
                          "min_interval too to silence this)"),
    # A number is shown as written: a two-week min_interval read "(1.2096e+06)".
    ("min_interval = 1209600", "signal.toml: [settings]: min_interval (1209600) is more than "
                               "the default max_interval (604800); min_interval wins (set "
                               "max_interval too to silence this)"),
    ("max_interval = 0.5", "signal.toml: [settings]: max_interval (0.5) is less than the "
                           "default min_interval (3600); min_interval wins (set "
                           "min_interval too to silence this)"),
])
def test_one_interval_alone_against_the_others_default_is_warned_of(
        settings: str, warned: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="signal_feeds"):
        config = parse_config(f"[settings]\n{settings}\n", path="signal.toml")
    assert [r.getMessage() for r in caplog.records] == [warned]
    assert config.settings.min_interval >= 3600


@pytest.mark.parametrize(("host", "reason"), [
    ("a" * 64 + ".example", "host name label 'aaaaaaaaaaaaaaaaaaaa'... is 64 bytes as sent; "
                            "DNS allows 63"),
    ("news..example", "host 'news..example' has an empty label"),
    # Every run failed with "invalid URL ...: Invalid IDNA hostname": a symbol and a
    # ligature are no letters of a host name under IDNA 2008, which requests use.
    ("☃.example", "host '☃.example' is no international domain name a request can send "
                  "(Codepoint U+2603 at position 1 of '☃' not allowed); a registered one "
                  "can be written in its xn-- form"),
    ("ﬁnance.example", "host 'ﬁnance.example' is no international domain name a request "
                       "can send (Codepoint U+FB01 at position 1 of 'ﬁnance' not allowed); "
                       "a registered one can be written in its xn-- form"),
])
def test_a_host_name_dns_cannot_carry_is_a_config_problem(host: str, reason: str) -> None:
    # It failed on every run with "encoding with 'idna' codec failed (UnicodeError:
    # label empty or too long)".
    with pytest.raises(ConfigError) as raised:
        parse_config(f'[[sources]]\nid = "a"\nurl = "https://{host}/feed.xml"\n')
    (problem,) = raised.value.problems
    assert problem.endswith(f"refused: {reason}"), problem
    # Names DNS does carry pass: a trailing dot, an IDN, an address.
    for fine in ("example.com.", "bücher.example", "faß.example", "xn--n3h.example",
                 "127.0.0.1", "[::1]"):
        parse_config(f'[[sources]]\nid = "a"\nurl = "https://{fine}/feed.xml"\n')


def test_a_retry_after_line_says_when_the_next_poll_is_when_later() -> None:
    # A 429 saying "120 s" under an hour's backoff: the line said only "retry after
    # 12:02", while the source is next asked at 13:00 (--json had it as next_due).
    now = dt.datetime(2026, 12, 7, 12, 0, tzinfo=dt.UTC)
    told, polled = now + dt.timedelta(seconds=120), now + dt.timedelta(hours=1)
    line = RunReport(sources=(SourceReport("s", "retry_later", 429, retry_after=told,
                                           next_due=polled),), started_at=now).lines()[0]
    assert ("(retry after 2026-12-07T12:02:00.000000Z; "
            "next poll 2026-12-07T13:00:00.000000Z)") in line
    same = RunReport(sources=(SourceReport("s", "retry_later", 429, retry_after=told,
                                           next_due=told),), started_at=now).lines()[0]
    assert "(retry after 2026-12-07T12:02:00.000000Z)" in same


def test_the_summary_line_reads_right_for_none_and_one() -> None:
    now = dt.datetime.now(dt.UTC)
    # It was "0 sources: 0 created, 0 updated, 0 unchanged, 0 skipped; " and "1 sources".
    assert RunReport(sources=(), started_at=now).lines() == [
        "0 sources: 0 created, 0 updated, 0 unchanged, 0 skipped; the source list names none"]
    one = RunReport(sources=(SourceReport(source="a", status="fetched", created=2),),
                    started_at=now)
    assert one.lines()[-1] == "1 source: 2 created, 0 updated, 0 unchanged, 0 skipped; 1 fetched"


def test_a_dry_run_for_a_mistyped_source_says_which_settings_it_used(tmp_path: Path) -> None:
    config = tmp_path / "signal.toml"
    config.write_text(CONFIG, encoding="utf-8")
    feed = tmp_path / "feed.xml"
    feed.write_bytes(b'<rss version="2.0"><channel><title>t</title><item><guid>g</guid>'
                     b"</item></channel></rss>")
    result = CliRunner().invoke(cli, ["parse", str(feed), "--config", str(config),
                                      "--source-id", "configurd"])
    # It fell back to [settings] without a word, and keyed the rows by the typo.
    assert result.exit_code == 0, result.output
    assert result.stderr == (f"signal: note: {config} has no source 'configurd' (read with "
                             "its [settings]); did you mean configured?\n")


@pytest.mark.parametrize("command", [["entries"], ["search", "x"], ["changes"],
                                     ["sources"], ["fetch", "--config", "signal.toml"]])
def test_signal_never_writes_its_tables_into_another_programs_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]) -> None:
    # `signal entries --db other.db` added Signal's 20 tables to another program's
    # database (exit 0, nothing printed), and a file that was no database at all said
    # "file is not a database" with exit 1.
    import sqlite3
    from contextlib import closing

    monkeypatch.chdir(tmp_path)
    (tmp_path / "signal.toml").write_text('[[sources]]\nid = "a"\nurl = "https://a.example/"\n')
    with closing(sqlite3.connect(tmp_path / "other.db")) as conn:
        conn.execute("CREATE TABLE notes (x)")
        conn.commit()
    (tmp_path / "notes.txt").write_text("not a database\n")
    for name, said in [("other.db", "another program's SQLite database (its tables: notes); "
                                    "Signal makes its tables only in a new file or its own "
                                    "database"),
                       ("notes.txt", "not a SQLite database (another kind of file, or a "
                                     "damaged one)")]:
        result = CliRunner().invoke(cli, [*command, "--db", name])
        assert result.exit_code == 2, result.output
        assert result.output == (f"signal: error: --db {name}: {name} is {said}; it is left "
                                 "as it is\n")
    with closing(sqlite3.connect(tmp_path / "other.db")) as conn:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("notes",)]
    # A file of no bytes is no database to read yet (a fetch would make one there).
    (tmp_path / "empty.db").touch()
    if command[0] != "fetch":
        result = CliRunner().invoke(cli, [*command, "--db", "empty.db"])
        assert result.exit_code == 2 and "empty: it holds no Signal database yet" in (
            result.output)


@pytest.mark.parametrize("command", [["entries"], ["search", "x"], ["export"], ["changes"]])
def test_a_repeated_source_is_refused_not_narrowed_to_the_last(tmp_path: Path,
                                                               command: list[str]) -> None:
    # `signal entries --source a --source b` showed b's entries alone, without a word.
    Store(tmp_path / "s.db").close()
    result = CliRunner().invoke(cli, [*command, "--db", str(tmp_path / "s.db"),
                                      "--source", "a", "--source", "b"])
    assert result.exit_code == 2
    assert "one source at a time (given 2: a, b)" in result.output


def test_entry_filters_with_the_opml_export_are_refused_not_ignored(tmp_path: Path) -> None:
    # `export --format opml --source a --since ...` exported every source without a word.
    Store(tmp_path / "s.db").close()
    db = ["--db", str(tmp_path / "s.db"), "--format", "opml"]
    result = CliRunner().invoke(cli, ["export", *db, "--source", "a", "--limit", "3"])
    assert result.exit_code == 2
    assert ("--source, --limit: choose entries, and --format opml exports the source list, "
            "not entries") in result.output
    assert CliRunner().invoke(cli, ["export", *db]).exit_code == 0


@pytest.mark.parametrize(("wal", "version"), [(False, 0), (True, 0), (True, 5), (True, 77)])
def test_another_programs_file_is_refused_even_while_it_is_held(
        tmp_path: Path, wal: bool, version: int) -> None:
    # The look before opening does not wait for a file someone holds: it let a fetch
    # open another program's database held for a moment, and the store wrote its tables
    # there once the lock was gone (and switched the file to WAL).
    import sqlite3
    import subprocess
    import sys
    from contextlib import closing

    other = tmp_path / "other.db"
    with closing(sqlite3.connect(other, isolation_level=None)) as conn:
        if wal:
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE notes (x)")
        # Programs keep their own schema number there (Firefox, Android's Room): it was
        # taken for Signal's (tables added at 5, "a newer Signal made it" at 77).
        conn.execute(f"PRAGMA user_version = {version}")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys, time\n"
         "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
         "conn.execute('BEGIN EXCLUSIVE')\nprint('locked', flush=True)\ntime.sleep(1.5)\n"
         "conn.execute('COMMIT')\n", str(other)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
    try:
        with pytest.raises(StoreError, match="another program's SQLite database"):
            Store(other, busy_timeout=10)
    finally:
        holder.wait(timeout=30)
        holder.stdout.close()
    with closing(sqlite3.connect(other)) as conn:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("notes",)]
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == ("wal" if wal
                                                                      else "delete")
        assert conn.execute("PRAGMA user_version").fetchone()[0] == version


def test_a_file_with_only_sqlites_own_tables_is_an_empty_one(tmp_path: Path) -> None:
    # An ANALYZE leaves sqlite_stat1 behind: that made an empty file "another
    # program's database".
    import sqlite3
    from contextlib import closing

    path = tmp_path / "analyzed.db"
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("CREATE TABLE t (x)")
        conn.execute("CREATE INDEX t_x ON t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute("ANALYZE")
        conn.execute("DROP TABLE t")
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("sqlite_stat1",)]
    with Store(path) as store:
        assert store.source_states() == []


@pytest.mark.parametrize("command", [["fetch"], ["entries"], ["sources"]])
def test_a_database_path_that_is_no_file_is_refused_at_once(
        tmp_path: Path, command: list[str]) -> None:
    # A named pipe hung the command for ever (reading its first bytes waits for a
    # writer), and /dev/null said "disk I/O error" with exit 1 and left a file
    # /dev/null-journal behind in /dev.
    import subprocess
    import sys

    (tmp_path / "signal.toml").write_text('[[sources]]\nid = "a"\nurl = "http://127.0.0.1:9/"\n')
    pipe = tmp_path / "pipe.db"
    os.mkfifo(pipe)
    (tmp_path / "link.db").symlink_to(pipe)
    journal = Path("/dev/null-journal")
    journal_before = journal.exists()
    for name, kind in [(str(pipe), "a named pipe (FIFO)"), ("link.db", "a named pipe (FIFO)"),
                       ("/dev/null", "a device")]:
        proc = subprocess.run([sys.executable, "-m", "signal_feeds", *command, "--db", name],
                              cwd=tmp_path, capture_output=True, text=True, timeout=30,
                              check=False)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr == (f"signal: error: --db {name}: {name} is {kind}, not a "
                               "database file; name a regular file (a new one is made)\n")
    assert journal.exists() == journal_before
    with pytest.raises(StoreError, match="is a named pipe \\(FIFO\\), not a database file"):
        Store(pipe)  # the library refuses it too, rather than wait on it


@pytest.mark.parametrize("command", [["entries"], ["search", "harvest"], ["sources"],
                                     ["export", "--format", "opml"]])
def test_a_config_warning_is_given_once_per_command(
        tmp_path: Path, command: list[str], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Reading commands read the config several times (for the database, the source
    # titles, the known ids), and each time it said "allow_http_links is deprecated".
    _database_with(tmp_path / "signal.db", "configured")
    (tmp_path / "signal.toml").write_text("[settings]\nallow_http_links = true\n" + CONFIG)
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.WARNING, logger="signal_feeds"):
        result = CliRunner().invoke(cli, command)
    assert result.exit_code in (0, 1), result.output
    said = [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()]
    assert len(said) == 1, said


@pytest.mark.parametrize("command", [["sources"], ["entries"], ["fetch"],
                                     ["sources", "import-opml", "subs.opml"]])
def test_the_database_given_as_config_is_named_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]) -> None:
    # --config mistaken for --db was "not UTF-8 at line 1, column 107 (byte 0xfb) ...
    # save it as UTF-8", which sent the user to re-save a database in an editor.
    db = _database_with(tmp_path / "signal.db", "a")
    before = db.read_bytes()
    (tmp_path / "subs.opml").write_text(
        "<opml version='2.0'><body><outline type='rss' text='B' "
        "xmlUrl='https://b.example/feed.xml'/></body></opml>", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, [*command, "--config", str(db)])
    assert result.exit_code == 2, result.output
    assert result.stderr == (f"signal: error: {db}: this is a SQLite database, not a source "
                             "list: a database is named with --db (or [settings] database "
                             "in the source list)\n")
    assert db.read_bytes() == before
