"""A PostgreSQL session the server ends between two of Signal's transactions (a restart,
``pg_terminate_backend``, ``idle_session_timeout``): the next transaction or read connects
again instead of failing, so a run or a long-lived reader carries on.

libpq learns that a session was ended only from the next statement; the store looks
before it begins one (see ``Connection.ready``).
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from conftest import FIXTURES
from postgres_cluster import PostgresCluster
from scenario_server import ScenarioServer, ScriptedResponse

from signal_feeds.cli.commands import cli
from signal_feeds.store import open_store

RSS = (("Content-Type", "application/rss+xml"),)


def test_a_reader_reads_on_after_the_server_ended_its_session(
        postgres_url: str, postgres_cluster: PostgresCluster) -> None:
    # A program that keeps a store open to read it got "terminating connection due to
    # administrator command", then "the connection is closed" on every read after,
    # for as long as it kept the store.
    dbname = postgres_url.rsplit("/", 1)[1]
    with open_store(postgres_url) as store:
        assert store.entries(limit=5) == []
        assert postgres_cluster.drop_connections(dbname, wait=True) == 1
        assert store.entries(limit=5) == []
        assert store.count("entries") == 0
        assert postgres_cluster.drop_connections(dbname, wait=True) == 1
        assert store.changes(limit=5) == []


def test_a_run_carries_on_when_the_server_ends_its_idle_session(
        server: ScenarioServer, postgres_url: str, tmp_path: Path) -> None:
    # With idle_session_timeout shorter than a feed's answer, the session idle while the
    # feeds downloaded was ended by the server, and the run stopped at its next claim
    # or write: "cannot claim sources in ...: terminating connection due to
    # idle-session timeout", exit 2, the responses already downloaded thrown away.
    import psycopg
    from psycopg import sql

    body = (FIXTURES / "demo-rss.xml").read_bytes()
    lines = ["[settings]", "concurrency = 1", "min_interval = 0"]
    for i in range(3):
        server.script(f"/slow/{i}.xml", [ScriptedResponse(body=body, headers=RSS, delay=0.8)])
        lines += ["[[sources]]", f'id = "s{i}"', f'url = "{server.url(f"/slow/{i}.xml")}"']
    config = tmp_path / "signal.toml"
    config.write_text("\n".join(lines) + "\n")
    with open_store(postgres_url):
        pass  # the schema, made before the timeout applies
    dbname = postgres_url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(sql.SQL("ALTER DATABASE {} SET idle_session_timeout = '300ms'")
                      .format(sql.Identifier(dbname)))
    result = CliRunner().invoke(cli, ["fetch", "-q", "--config", str(config),
                                      "--db", postgres_url])
    assert result.exit_code == 0, result.output
    with open_store(postgres_url) as store:
        assert {s.source_id: s.status for s in store.source_states()} == {
            "s0": "ok", "s1": "ok", "s2": "ok"}
        assert store.leases() == {}
        assert len(store.changes(limit=99)) == store.count("entries") > 0
