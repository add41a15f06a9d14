"""The PostgreSQL store's own rules (issue 17): choosing it by URL, its migrations, bad
input and faults (one clean line, exit 2, never a password), and `signal copy`.

Everything runs against the throwaway server of postgres_cluster.py; the behaviour both
backends share is tested by the parametrized store and pipeline tests.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pytest
from click.testing import CliRunner, Result
from conftest import FIXTURES, make_config
from postgres_cluster import PostgresCluster, free_port
from scenario_server import ScenarioServer, ScriptedResponse

from signal_feeds import run_fetch
from signal_feeds.cli.commands import cli
from signal_feeds.config.source_list import load_config
from signal_feeds.dsn import display_database, is_postgres_url, mask_password, redact
from signal_feeds.errors import DatabaseUnavailableError, StoreError
from signal_feeds.identity.keys import identify
from signal_feeds.parse.feed import parse_feed
from signal_feeds.records import FetchRecord, SourceState
from signal_feeds.store import open_store
from signal_feeds.store.copy import table_digest
from signal_feeds.store.protocol import TABLES

NOW = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)
STATE = SourceState(source_id="demo", url="https://example.org/feed", etag='"v1"',
                    last_modified="Sun, 01 Mar 2026 11:00:00 GMT")
RECORD = FetchRecord(source_id="demo", started_at=NOW, url=STATE.url, outcome="fetched")
ROWS = identify("demo", parse_feed((FIXTURES / "demo-rss.xml").read_bytes()).entries).rows
SECRET = "s3cr:t/p@ss"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _password(url: str) -> str:
    return url.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]


# -- naming a database without its password ------------------------------------------------

def test_the_password_is_masked_wherever_a_database_is_named() -> None:
    url = f"postgresql://ana:{quote(SECRET, safe='')}@db.example:5432/signal"
    assert mask_password(url) == "postgresql://ana:***@db.example:5432/signal"
    assert display_database(url) == mask_password(url)
    assert display_database(Path("signal.db")) == "signal.db"
    assert mask_password("postgresql://ana@db/signal") == "postgresql://ana@db/signal"
    assert mask_password("postgres://db/x?password=hunter2&sslmode=require") == \
        "postgres://db/x?password=***&sslmode=require"
    # A driver message echoing the password in any form is redacted too.
    said = f"failed for {url} (password={SECRET}) host=db password='{SECRET}'"
    clean = redact(said, url)
    assert SECRET not in clean and quote(SECRET, safe="") not in clean
    assert "postgresql://ana:***@db.example:5432/signal" in clean
    assert is_postgres_url("postgresql://x/y") and is_postgres_url("POSTGRES://x/y")
    assert not is_postgres_url(Path("postgresql:/x")) and not is_postgres_url("signal.db")


@pytest.mark.parametrize("secret", ["ab#cd?ef", "pa/ss", "pa[w", "xx@yy", "p@ssword",
                                    "12345678", "2024?x", "1?a=b"])
def test_a_password_written_unescaped_is_masked_as_libpq_reads_it(secret: str) -> None:
    # libpq takes the user info up to the "@": "u:ab#cd?ef@host" connects. urlsplit saw
    # a fragment and no password, and `signal copy` and `fetch --json` printed it whole.
    url = f"postgresql://hx:{secret}@127.0.0.1:5432/hxdb"
    shown = display_database(url)
    assert secret not in shown and shown.startswith("postgresql://hx:***@")
    assert secret not in redact(f"connection to {url} failed for {secret}", url)
    # A query's "@" after host:port, or after an IPv6 host, is no user info: nothing to
    # mask there, and the URL is shown as it is.
    for plain in ("postgresql://db.example:5432/signal?application_name=a@b",
                  "postgresql://[::1]:5432/signal?application_name=a@b"):
        assert mask_password(plain) == plain
    # After the password, an "@" in the query is the query's.
    assert mask_password("postgresql://u:hunter22@db/x?application_name=a@b") == (
        "postgresql://u:***@db/x?application_name=a@b")
    assert mask_password("postgresql://u:secret@db?application_name=a@b") == (
        "postgresql://u:***@db?application_name=a@b")
    # libpq's message names what it took for the host of a mistyped password.
    assert redact("failed to resolve host 'ssword@db'", "postgresql://u:p@ssword@db/x") == (
        "failed to resolve host '***@db'")
    # The query's password key percent-encoded, as libpq decodes it.
    assert mask_password("postgresql://db/x?pass%77ord=hunter22") == (
        "postgresql://db/x?pass%77ord=***")
    # A user name with an "@" (Azure's admin@server).
    assert mask_password("postgresql://admin@srv:s3cretpw@h:5432/db") == (
        "postgresql://admin@srv:***@h:5432/db")
    # A password in the query, "@" and all.
    assert mask_password("postgresql://db:1?user=u&password=hunter@2secret") == (
        "postgresql://db:1?user=u&password=***")
    # A short password is masked in the URL, not wherever its letters occur.
    assert redact("no pg_hba.conf entry for postgresql://u:p@h/db", "postgresql://u:p@h/db"
                  ) == "no pg_hba.conf entry for postgresql://u:***@h/db"


def test_the_config_takes_a_url_as_the_database(tmp_path: Path) -> None:
    url = "postgresql://ana@db.example/signal"
    config = tmp_path / "signal.toml"
    config.write_text(f'[settings]\ndatabase = "{url}"\n')
    assert load_config(config).settings.database == url
    config.write_text('[settings]\ndatabase = "x.db"\n')
    assert load_config(config).settings.database == tmp_path / "x.db"


# -- migrations -----------------------------------------------------------------------------

def test_migrations_are_numbered_and_recorded(postgres_url: str) -> None:
    import psycopg

    from signal_feeds.store.postgres.schema import MIGRATIONS, SCHEMA_VERSION

    assert SCHEMA_VERSION == len(MIGRATIONS) >= 3
    # A database built by the first step only is upgraded in place, keeping its rows.
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO schema_version VALUES (1)")
        for statement in MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("INSERT INTO sources (id, url) VALUES ('old', 'https://o.example/')")
    with open_store(postgres_url) as store:
        assert [s.source_id for s in store.source_states()] == ["old"]
        store.apply_response(STATE, ROWS, RECORD, NOW)
        assert len(store.changes(limit=10)) == len(ROWS)
        assert store.search("meetup OR Встреча")
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [
            (SCHEMA_VERSION,)]
        # Versions 4 and 5 rebuilt the reading order's indexes on today's order.
        indexes = dict(conn.execute("SELECT indexname, indexdef FROM pg_indexes "
                                    "WHERE tablename = 'entries'").fetchall())
        assert all("LEAST(" in indexes[name] and indexes[name].endswith("seq DESC)")
                   for name in ("entries_shown_order", "entries_source_order",
                                "entries_order"))


def test_the_reading_queries_walk_the_order_indexes(postgres_url: str) -> None:
    import psycopg

    from signal_feeds.store.postgres.queries import _listing

    with open_store(postgres_url) as store:
        store.apply_response(STATE, ROWS, RECORD, NOW)
    for source_id, index in ((None, "entries_shown_order"),
                             (STATE.source_id, "entries_source_order")):
        sql, args = _listing("SELECT *", source_id=source_id, since=None, limit=5,
                             include_duplicates=source_id is not None)
        with psycopg.connect(postgres_url) as conn:
            # A handful of rows: make the planner say whether it could walk the index.
            conn.execute("SET enable_seqscan = off")
            conn.execute("SET enable_sort = off")
            plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, args))
        assert index in plan and "Sort" not in plan, plan


def test_a_schema_newer_than_the_code_is_refused(postgres_url: str) -> None:
    import psycopg

    from signal_feeds.store.postgres.schema import SCHEMA_VERSION

    open_store(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("UPDATE schema_version SET version = %s", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreError, match=f"schema version {SCHEMA_VERSION + 1}, newer") as info:
        open_store(postgres_url)
    assert _password(postgres_url) not in str(info.value)
    result = invoke("entries", "--db", postgres_url)
    # A setup problem, as an unreachable server is (it was 1, "some source failed").
    assert result.exit_code == 2 and "newer than this Signal supports" in result.output
    assert "Traceback" not in result.output


# -- bad input and faults -------------------------------------------------------------------

def _bad_urls(cluster: PostgresCluster, postgres_url: str) -> dict[str, str]:
    dbname = postgres_url.rsplit("/", 1)[1]
    return {
        "wrong password": cluster.url(dbname, password=SECRET),
        "refused": f"postgresql://signal:{quote(SECRET, safe='')}@127.0.0.1:{free_port()}/x",
        "unknown database": cluster.url("no_such_database_here"),
        "bad url": f"postgresql://signal:{quote(SECRET, safe='')}@127.0.0.1:notaport/x",
    }


def _setup_error(config: Path, database: str) -> list[str]:
    """The lines of a ``signal fetch`` that ends with exit 2 (a setup problem)."""
    result = invoke("fetch", "--config", str(config), "--db", database)
    assert result.exit_code == 2, result.output
    return result.output.strip().splitlines()


def _role(postgres_url: str, name: str, privileges: str) -> str:
    """A login role of this test's own with ``privileges`` on every table there is now,
    not their owner: its URL."""
    import psycopg
    from psycopg import sql

    dbname = postgres_url.rsplit("/", 1)[1]
    role = f"{name}_{dbname}"[:60]
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD 'pw'").format(
            sql.Identifier(role)))
        admin.execute(sql.SQL(f"GRANT {privileges} ON ALL TABLES IN SCHEMA public TO {{}}")
                      .format(sql.Identifier(role)))
    port = postgres_url.rsplit(":", 1)[1].split("/", 1)[0]
    return f"postgresql://{role}:pw@127.0.0.1:{port}/{dbname}"


def test_a_database_the_run_may_not_write_is_one_line_and_exit_2_before_any_fetch(
        postgres_url: str, postgres_cluster: PostgresCluster, tmp_path: Path) -> None:
    # A read-only role, or a database read-only by default: every source "failed" with
    # "cannot claim sources ... permission denied", a warning about leases, and exit 1.
    import psycopg
    from psycopg import sql

    with open_store(postgres_url):
        pass  # the schema, made by its owner
    dbname = postgres_url.rsplit("/", 1)[1]
    read_only_role = _role(postgres_url, "reader", "SELECT")
    config = tmp_path / "signal.toml"
    config.write_text('[[sources]]\nid = "a"\nurl = "http://127.0.0.1:9/feed.xml"\n')
    assert _setup_error(config, read_only_role) == [
        f"signal: error: cannot write to {display_database(read_only_role)}: permission "
        "denied for table sources (this role may not write here: grant it INSERT, UPDATE "
        "and DELETE on Signal's tables)"]
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(sql.SQL("ALTER DATABASE {} SET default_transaction_read_only = on")
                      .format(sql.Identifier(dbname)))
    result = invoke("fetch", "--config", str(config), "--db", postgres_url)
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.endswith("(the database or server is read-only)"), line
    # Reading still works.
    assert invoke("entries", "--db", postgres_url).exit_code == 0


def test_an_upgrade_the_workers_role_may_not_make_says_who_must_make_it(
        postgres_url: str, tmp_path: Path) -> None:
    # A worker's role granted INSERT, UPDATE and DELETE, as the hint above asks, but not
    # the tables' owner: the new version's first run was told "must be owner of table
    # sources (this role may not write here: grant it INSERT, UPDATE and DELETE ...)",
    # which it had; only the owner may alter the tables.
    import psycopg

    from signal_feeds.store.postgres.schema import MIGRATIONS, SCHEMA_VERSION

    with psycopg.connect(postgres_url, autocommit=True) as admin:
        # The database as the previous version left it, made by its owner.
        admin.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        admin.execute("INSERT INTO schema_version VALUES (%s)", (SCHEMA_VERSION - 1,))
        for step in MIGRATIONS[:-1]:
            for statement in step:
                admin.execute(statement)
    worker = _role(postgres_url, "worker", "SELECT, INSERT, UPDATE, DELETE")
    config = tmp_path / "signal.toml"
    config.write_text('[[sources]]\nid = "a"\nurl = "http://127.0.0.1:9/feed.xml"\n')
    assert _setup_error(config, worker) == [
        f"signal: error: cannot upgrade {display_database(worker)} from schema version "
        f"{SCHEMA_VERSION - 1} to {SCHEMA_VERSION}: must be owner of table sources (only "
        "the role that owns Signal's tables may upgrade them: run this version once as "
        "that role, then the other roles can use it)"]
    with open_store(postgres_url):
        pass  # the owner upgrades it
    assert invoke("fetch", "--config", str(config), "--db", worker).exit_code == 1
    assert invoke("entries", "--db", worker).exit_code == 0


def test_unreachable_databases_are_one_clean_line_and_exit_2(
        postgres_url: str, postgres_cluster: PostgresCluster, tmp_path: Path) -> None:
    config = tmp_path / "signal.toml"
    config.write_text('[[sources]]\nid = "a"\nurl = "http://127.0.0.1:9/feed.xml"\n')
    for what, url in _bad_urls(postgres_cluster, postgres_url).items():
        with pytest.raises(DatabaseUnavailableError) as info:
            open_store(url)
        message = str(info.value)
        assert SECRET not in message and quote(SECRET, safe="") not in message, what
        assert _password(postgres_cluster.url()) not in message, what
        for command in (["entries"], ["fetch", "--config", str(config)],
                        ["sources", "--config", str(config)], ["changes"],
                        ["search", "x"]):
            result = invoke(*command, "--db", url)
            assert result.exit_code == 2, (what, command, result.output)
            lines = result.output.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("signal: error: "), (what, lines)
            assert SECRET not in result.output and "Traceback" not in result.output
            assert quote(SECRET, safe="") not in result.output


def test_the_password_may_come_from_pgpassword(postgres_url: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    password = _password(postgres_url)
    monkeypatch.setenv("PGPASSWORD", unquote(password))
    without = postgres_url.replace(f":{password}@", "@")
    with open_store(without) as store:
        assert store.count("entries") == 0


def test_a_missing_driver_says_how_to_install_it() -> None:
    code = ("import sys; sys.modules['psycopg'] = None\n"
            "from signal_feeds.cli.commands import main\n"
            "sys.argv = ['signal', 'entries', '--db', 'postgresql://a:pw@127.0.0.1:1/x']\n"
            "main()\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=False, env={**os.environ, "CI": ""})
    assert result.returncode == 2, result
    assert "pip install 'signal-feeds[postgres]'" in result.stderr
    assert "Traceback" not in result.stderr and ":pw@" not in result.stderr


def test_sqlite_never_imports_the_driver(tmp_path: Path) -> None:
    code = ("import sys\nfrom signal_feeds.store import open_store\n"
            f"open_store({str(tmp_path / 'x.db')!r}).close()\n"
            "assert 'psycopg' not in sys.modules, 'psycopg imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_server_gone_mid_run_commits_each_response_or_nothing(
        postgres_url: str, postgres_cluster: PostgresCluster) -> None:
    import psycopg
    from psycopg import sql

    dbname = postgres_url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        # The cluster commits asynchronously: the kill below must not lose a commit.
        admin.execute(sql.SQL("ALTER DATABASE {} SET synchronous_commit = on")
                      .format(sql.Identifier(dbname)))
    with open_store(postgres_url) as store:
        store.apply_response(STATE, ROWS[:1], RECORD, NOW)
        postgres_cluster.kill()
        try:
            with pytest.raises(DatabaseUnavailableError) as info:
                store.apply_response(STATE, ROWS, RECORD, NOW)
        finally:
            postgres_cluster.ensure_running()
        assert _password(postgres_url) not in str(info.value)
        with open_store(postgres_url) as other:  # nothing of that response was written
            assert other.table_counts() == {"sources": 1, "entries": 1, "entry_versions": 1,
                                            "fetches": 1}
            assert len(other.changes(limit=10)) == 1
        # The server is back: the next response connects again and is stored.
        assert store.apply_response(STATE, ROWS, RECORD, NOW).created == len(ROWS) - 1
        assert len(store.changes(limit=10)) == len(ROWS)
        # Lost inside a batch: the batch fails whole; the next batch connects again.
        with pytest.raises(DatabaseUnavailableError), store.batch():
            store.save_attempt(STATE, RECORD)
            postgres_cluster.drop_connections(dbname, wait=True)
            store.save_attempt(STATE, RECORD)
        with store.batch():
            store.save_attempt(STATE, RECORD)
        assert store.count("fetches") == 3


def test_a_connection_lost_before_the_commit_is_replaced_for_the_next_batch(
        postgres_url: str, postgres_cluster: PostgresCluster) -> None:
    dbname = postgres_url.rsplit("/", 1)[1]
    with open_store(postgres_url) as store:
        # Every statement of the batch ran; the backend is gone before the commit.
        with pytest.raises(DatabaseUnavailableError, match="cannot commit"), store.batch():
            store.save_attempt(STATE, RECORD)
            assert postgres_cluster.drop_connections(dbname, wait=True) == 1
        with store.batch():
            store.save_attempt(STATE, RECORD)
        assert store.count("fetches") == 1
        # Lost between batches: the next batch connects again before it begins (its
        # first statement failed, and the run stopped on it).
        postgres_cluster.drop_connections(dbname, wait=True)
        with store.batch():
            store.save_attempt(STATE, RECORD)
        assert store.count("fetches") == 2


def test_a_write_that_fails_on_the_server_does_not_count_as_the_database_gone(
        postgres_url: str) -> None:
    import psycopg.errors

    from signal_feeds.store.postgres.connection import Connection

    db = Connection(postgres_url, busy_timeout=1)
    try:
        # A deadlock or serialization failure fails one write; other sources go on.
        for error in (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure,
                      psycopg.errors.LockNotAvailable, psycopg.errors.DiskFull,
                      psycopg.errors.UniqueViolation):
            with pytest.raises(StoreError) as info, db.errors("cannot save", "demo"):
                raise error("refused")
            assert type(info.value) is StoreError and info.value.source_id == "demo"
            assert not db.gone
        with pytest.raises(DatabaseUnavailableError), db.errors("cannot save"):
            raise psycopg.errors.AdminShutdown("terminating connection")
        assert db.gone  # dropped, so the next transaction connects again
        with db.transaction() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        db.close()


def test_a_fetch_whose_server_went_away_stops_with_exit_2(
        server: ScenarioServer, postgres_url: str, postgres_cluster: PostgresCluster,
        tmp_path: Path) -> None:
    config = tmp_path / "signal.toml"
    config.write_text(f'[[sources]]\nid = "demo"\nurl = "{server.url("/feeds/demo-rss.xml")}"\n')
    assert invoke("fetch", "--config", str(config), "--db", postgres_url).exit_code == 0
    postgres_cluster.kill()
    try:
        result = invoke("fetch", "--config", str(config), "--db", postgres_url, "--force")
    finally:
        postgres_cluster.ensure_running()
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and _password(postgres_url) not in result.output
    with open_store(postgres_url) as store:
        # (The test server commits asynchronously: a kill may lose the first run too.)
        counts = store.table_counts()
        assert counts["entries"] == counts["entry_versions"] == len(store.changes(limit=99))


def test_a_server_gone_mid_run_stops_the_run_with_one_line(
        server: ScenarioServer, postgres_url: str, postgres_cluster: PostgresCluster,
        tmp_path: Path) -> None:
    # The server shut down in the middle of a run: exit 2, but 49 lines on stderr, among
    # them 13 asyncio "Future exception was never retrieved" tracebacks and a warning
    # per lease and host slot that could not be given back.
    body = (FIXTURES / "demo-rss.xml").read_bytes()
    lines = ["[settings]", "concurrency = 2", "min_interval = 0"]
    for i in range(40):
        server.script(f"/slow/{i}.xml", [ScriptedResponse(
            body=body, headers=(("Content-Type", "application/rss+xml"),), delay=0.2)])
        lines += ["[[sources]]", f'id = "s{i}"', f'url = "{server.url(f"/slow/{i}.xml")}"']
    config = tmp_path / "signal.toml"
    config.write_text("\n".join(lines) + "\n")
    proc = subprocess.Popen([sys.executable, "-m", "signal_feeds", "fetch", "-q", "--config",
                             str(config), "--db", postgres_url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(server.requests) < 6:
            time.sleep(0.05)
        postgres_cluster.kill()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        postgres_cluster.ensure_running()
    assert proc.returncode == 2, (out, err)
    (line,) = err.splitlines()
    assert line.startswith("signal: error: ") and _password(postgres_url) not in line


def test_contradictory_duplicates_are_rejected_whole(server: ScenarioServer,
                                                     postgres_url: str) -> None:
    path = "/feeds/demo-rss.xml"
    config = make_config(postgres_url, {"demo-rss": server.url(path)})
    run_fetch(config, force=True)
    with open_store(postgres_url) as store:
        before = store.table_counts(), store.entries(include_duplicates=True)
    server.put(path, (FIXTURES / "variants" / "demo-rss-contradiction.xml").read_bytes())
    report = run_fetch(config, force=True)
    assert report.get("demo-rss").status == "rejected"
    with open_store(postgres_url) as store:
        counts, entries = store.table_counts(), store.entries(include_duplicates=True)
    assert entries == before[1]
    assert counts["entries"] == before[0]["entries"]
    assert counts["entry_versions"] == before[0]["entry_versions"]


def test_change_positions_follow_commit_order_across_connections(postgres_url: str) -> None:
    # A second writer waits for the first one's lock: its positions come after.
    other = SourceState(source_id="other", url="https://o.example/feed")
    rows = identify("other", parse_feed((FIXTURES / "demo-rss.xml").read_bytes()).entries).rows
    with open_store(postgres_url) as first, open_store(postgres_url) as second:
        with first.batch():
            first.apply_response(STATE, ROWS, RECORD, NOW)
            with pytest.raises(StoreError, match="lock"):  # held until the commit
                second_fast = open_store(postgres_url, busy_timeout=0.2)
                try:
                    second_fast.apply_response(other, rows, RECORD, NOW)
                finally:
                    second_fast.close()
        second.apply_response(other, rows, RECORD, NOW)
        seen = [c.source_id for c in first.changes(limit=100)]
    assert seen == ["demo"] * len(ROWS) + ["other"] * len(rows)


# -- signal copy ----------------------------------------------------------------------------

def test_copy_round_trips_the_demo_database(tmp_path: Path, postgres_url: str,
                                            postgres_cluster: PostgresCluster) -> None:
    demo = tmp_path / "demo.db"
    assert invoke("demo", "--db", str(demo)).exit_code == 0
    result = invoke("copy", "--db", str(demo), "--to", postgres_url)
    assert result.exit_code == 0, result.output
    assert "checked: equal counts and digests" in result.output
    assert _password(postgres_url) not in result.output
    with open_store(demo) as sqlite_store, open_store(postgres_url) as pg_store:
        counts = sqlite_store.table_counts()
        assert pg_store.table_counts() == counts and counts["entries"] > 0
        for table in ("sources", "entries", "entry_versions", "fetches", "changes"):
            assert table_digest(pg_store, table) == table_digest(sqlite_store, table), table
        # The change feed resumes on the copy from a cursor the original issued.
        cursor = sqlite_store.changes(limit=2)[-1].cursor
        assert pg_store.changes(after=cursor, limit=100) == sqlite_store.changes(
            after=cursor, limit=100)
    for command in (["entries", "--json"], ["entries", "--all", "--json"],
                    ["search", "release", "--json"], ["history", "--json", "0"]):
        assert invoke(*command, "--db", postgres_url).output == \
            invoke(*command, "--db", str(demo)).output, command
    exported = [json.loads(invoke("export", "--db", str(db)).output)
                for db in (postgres_url, demo)]
    for export in exported:
        export.pop("exported_at", None)
    assert exported[0] == exported[1]
    # A second copy into the now non-empty database is refused, unless told.
    again = invoke("copy", "--db", str(demo), "--to", postgres_url)
    assert again.exit_code == 2 and "not empty" in again.output
    assert invoke("copy", "--db", str(demo), "--to", postgres_url,
                  "--replace", "--json").exit_code == 0
    # And back into a new SQLite file: the same rows again.
    back = tmp_path / "back.db"
    report = json.loads(invoke("copy", "--db", postgres_url, "--to", str(back),
                               "--json").output)
    assert report["ok"] and {t["table"] for t in report["tables"]} >= set(TABLES)
    with open_store(demo) as a, open_store(back) as b:
        for table in ("sources", "entries", "entry_versions", "fetches", "changes"):
            assert table_digest(a, table) == table_digest(b, table), table


def test_copy_keeps_match_keys_an_older_signal_computed(tmp_path: Path, postgres_url: str
                                                        ) -> None:
    # The copy recomputed every entry's match keys by today's rules, so a database whose
    # keys came from an older Signal (or another rule set) failed its own check after
    # copying everything: "failed its check (entries); nothing was committed".
    import sqlite3

    demo = tmp_path / "demo.db"
    assert invoke("demo", "--db", str(demo)).exit_code == 0
    with sqlite3.connect(demo) as conn:
        conn.execute("UPDATE entries SET norm_title = 'older rules ' || seq, "
                     "match_url = 'https://older.example/' || seq, "
                     "text_tokens = x'00000000000000070000000000000009'")
    conn.close()
    for target in (str(tmp_path / "copy.db"), postgres_url):
        result = invoke("copy", "--db", str(demo), "--to", target)
        assert result.exit_code == 0, result.output
        with open_store(demo) as a, open_store(target) as b:
            assert table_digest(a, "entries") == table_digest(b, "entries")


def test_signal_sources_shows_the_same_view_on_both_backends(
        server: ScenarioServer, tmp_path: Path, postgres_url: str) -> None:
    from conftest import Clock

    from signal_feeds.run.source_status import source_table

    feeds = {"demo-rss": server.url("/feeds/demo-rss.xml"),
             "demo-atom": server.url("/feeds/demo-atom.xml"),
             "missing": server.url("/no-such-feed.xml")}
    tables = []
    for database in (tmp_path / "signal.db", postgres_url):
        config = make_config(database, feeds)
        clock = Clock()
        run_fetch(config, force=True, clock=clock)
        clock.advance(60)
        run_fetch(config, force=True, clock=clock)
        # (A failed source's next poll has random jitter: compared apart.)
        tables.append([{**row, "next_due_at": row["next_due_at"] if row["error_count"] == 0
                        else "jittered"} for row in source_table(config, database=database)])
    assert tables[0] == tables[1]
    assert [row["status"] for row in tables[0]] == ["ok", "ok", "failed"]


def test_the_demo_runs_on_an_empty_postgresql_database(postgres_url: str) -> None:
    result = invoke("demo", "--db", postgres_url)
    assert result.exit_code == 0, result.output
    assert "postgresql://signal:***@" in result.output
    assert _password(postgres_url) not in result.output
    again = invoke("demo", "--db", postgres_url)  # never empties a server's database
    assert again.exit_code == 2 and "not empty" in again.output


# -- the FTS5 query syntax on tsquery --------------------------------------------------------

@pytest.mark.parametrize(("query", "tsquery"), [
    ("harvest", "'harvest'"),
    ("Café  CRÈME", "('cafe' & 'creme')"),  # implicit AND; case and accents folded
    ("a OR b c", "('a' | ('b' & 'c'))"),  # AND binds tighter than OR, as in FTS5
    ("a NOT b OR c", "(('a' & !'b') | 'c')"),  # NOT tightest
    ("a NOT b c", "('a' & !('b' & 'c'))"),  # ...but words side by side are one operand
    ('"harvest fair"', "('harvest' <-> 'fair')"),
    ("harv*", "'harv':*"),
    ("title:harvest", "'harvest':A"),
    ("{title summary}: harvest", "'harvest':AB"),
    ("-title: harvest", "'harvest':BC"),
    ("title:(a OR b)", "('a':A | 'b':A)"),
    ("a + b", "('a' <-> 'b')"),
    ("NEAR(a b, 5)", "('a' & 'b')"),  # all the words, anywhere: a superset of FTS5's hits
    # A word holding punctuation is the phrase of its parts, as on SQLite.
    ("release-notes", "('release' <-> 'notes')"),
    ("title:node.js", "('node':A <-> 'js':A)"),
    ("release OR", None),  # invalid FTS5 too
])
def test_fts5_queries_translate_to_tsquery(query: str, tsquery: str | None) -> None:
    from signal_feeds.errors import QueryError
    from signal_feeds.store.postgres.search import to_tsquery

    if tsquery is None:
        with pytest.raises(QueryError, match="not valid FTS5 syntax"):
            to_tsquery(query)
    else:
        assert to_tsquery(query).tsquery == tsquery


def test_a_snippet_shows_a_hit_whose_word_folds_into_several() -> None:
    # Decomposed, a kana's voicing mark is a character of its own (で is て and U+3099),
    # so です is indexed as て and す; the hit was found but had no snippet.
    from signal_feeds.store.postgres.search import to_tsquery
    from signal_feeds.store.postgres.snippets import snippet

    terms = to_tsquery("駅前のカフェです").terms
    assert snippet(["東京", "駅前のカフェです。Coffee"], terms) == "[駅前のカフェです]。Coffee"
    assert snippet(["Un café crème"], to_tsquery("cafe").terms) == "Un [café] crème"


def test_a_snippet_brackets_a_word_with_its_combining_marks() -> None:
    # The index splits a word at a vowel sign, a virama, a niqqud or harakat point (as
    # FTS5 does); each part was bracketed on its own, and the marks between them, shown
    # after a "]", joined the bracket instead of their letter: "[ह]ि[न]्[द]ी".
    from signal_feeds.store.postgres.search import to_tsquery
    from signal_feeds.store.postgres.snippets import snippet

    text = "हिन्दी भाषा और עִבְרִית النَّص"
    for query, shown in (("हिन्दी", "[हिन्दी] भाषा"), ("עִבְרִית", "[עִבְרִית] النَّص"),
                         ("النَّص", "[النَّص]"), ("भाषा OR हिन्दी", "[हिन्दी] [भाषा]")):
        assert shown in snippet([text], to_tsquery(query).terms), query
    # Cut short after a word, its marks stay with it.
    assert snippet([" ".join(["शब्द"] * 20)], to_tsquery("शब्द").terms).endswith("[शब्द]…")


def test_a_whole_table_rewrite_ended_for_a_deadlock_is_tried_again(
        postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # `signal search --rebuild` beside running workers failed about once in fifteen:
    # the server ended it to break a deadlock with a worker's write.
    import psycopg

    from signal_feeds.store.postgres import store as pg_store

    real, calls = pg_store.reindex, []

    def deadlocked_once(conn: Any) -> int:
        calls.append(1)
        if len(calls) == 1:
            raise psycopg.errors.DeadlockDetected("deadlock detected")
        return real(conn)

    monkeypatch.setattr(pg_store, "reindex", deadlocked_once)
    with open_store(postgres_url) as store:
        assert store.rebuild_search_index() == 0 and len(calls) == 2

    def always(conn: Any) -> int:
        raise psycopg.errors.DeadlockDetected("deadlock detected")

    monkeypatch.setattr(pg_store, "reindex", always)
    with open_store(postgres_url) as store, pytest.raises(StoreError, match="deadlock"):
        store.rebuild_search_index()  # three tries, then the error as before
