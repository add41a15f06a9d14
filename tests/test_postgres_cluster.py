"""The throwaway PostgreSQL server the future store's tests will stand on.

psycopg is imported inside the tests, after the fixture has checked for it: a module-level
import would turn a missing psycopg into a collection error instead of a skip (or, in CI,
the fixture's loud failure).
"""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path

import pytest
from postgres_cluster import (
    PostgresCluster,
    PostgresUnavailable,
    _unavailable,
    check_available,
    find_bindir,
    require_postgres,
)


def _scalar(url_or_dsn: str, query: str) -> object:
    import psycopg

    with psycopg.connect(url_or_dsn, connect_timeout=10) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


def test_server_is_postgresql_15(postgres_url: str) -> None:
    assert "PostgreSQL 15" in str(_scalar(postgres_url, "SELECT version()"))
    assert int(str(_scalar(postgres_url, "SHOW server_version_num"))) // 10000 == 15


def test_url_names_a_fresh_database_of_its_own(postgres_url: str,
                                               postgres_cluster: PostgresCluster) -> None:
    assert postgres_url.startswith(f"postgresql://signal:{postgres_cluster.password}"
                                   f"@127.0.0.1:{postgres_cluster.port}/test_")
    dbname = postgres_url.rsplit("/", 1)[1]
    assert _scalar(postgres_url, "SELECT current_database()") == dbname
    assert _scalar(postgres_url, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == 0


@pytest.mark.parametrize("run", [1, 2])
def test_each_test_gets_an_empty_database(postgres_url: str, run: int) -> None:
    # Whichever of the two runs comes second would see the first one's table if shared.
    import psycopg

    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT to_regclass('marker')").fetchone() == (None,)
        conn.execute("CREATE TABLE marker (run int)")
        conn.execute("INSERT INTO marker VALUES (%s)", (run,))


def test_two_databases_are_independent(postgres_url: str,
                                       postgres_cluster: PostgresCluster) -> None:
    import psycopg

    other = postgres_cluster.url(postgres_cluster.create_database(
        postgres_cluster.new_database_name("other")))
    assert other != postgres_url
    with psycopg.connect(postgres_url) as conn:
        conn.execute("CREATE TABLE only_here (x int)")
    with psycopg.connect(other) as conn:
        assert conn.execute("SELECT to_regclass('only_here')").fetchone() == (None,)


def test_speed_settings_are_applied(postgres_url: str) -> None:
    assert _scalar(postgres_url, "SHOW fsync") == "off"
    assert _scalar(postgres_url, "SHOW synchronous_commit") == "off"
    assert _scalar(postgres_url, "SHOW full_page_writes") == "off"
    assert _scalar(postgres_url, "SHOW max_connections") == "100"
    assert _scalar(postgres_url, "SHOW listen_addresses") == "127.0.0.1"


def test_wrong_password_is_an_operational_error(postgres_url: str,
                                                postgres_cluster: PostgresCluster) -> None:
    import psycopg

    dbname = postgres_url.rsplit("/", 1)[1]
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(postgres_cluster.url(dbname, password="not-the-password"))


def test_unix_socket_also_asks_for_the_password(postgres_cluster: PostgresCluster) -> None:
    import psycopg

    sock = (f"host={postgres_cluster.socket_dir} port={postgres_cluster.port}"
            " user=signal dbname=postgres")
    assert _scalar(f"{sock} password={postgres_cluster.password}", "SELECT 1") == 1
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(f"{sock} password=wrong")


def test_kill_drops_clients_and_restart_brings_the_data_back(
        postgres_url: str, postgres_cluster: PostgresCluster) -> None:
    import psycopg

    conn = psycopg.connect(postgres_url, autocommit=True)
    try:
        # The cluster commits asynchronously; a durability test has to ask for it.
        conn.execute("SET synchronous_commit = on")
        conn.execute("CREATE TABLE kept (x int)")
        conn.execute("INSERT INTO kept VALUES (42)")
        postgres_cluster.kill()
        assert not postgres_cluster.is_running()
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    finally:
        conn.close()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(postgres_url, connect_timeout=5)

    postgres_cluster.restart()  # crash recovery, same port, same URL
    assert _scalar(postgres_url, "SELECT x FROM kept") == 42
    postgres_cluster.restart()  # and a clean restart of a running server
    assert _scalar(postgres_url, "SELECT x FROM kept") == 42


def test_drop_connections_keeps_the_server_up(postgres_url: str,
                                              postgres_cluster: PostgresCluster) -> None:
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        dbname = postgres_url.rsplit("/", 1)[1]
        assert postgres_cluster.drop_connections(dbname) == 1
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    assert _scalar(postgres_url, "SELECT 1") == 1


def test_a_server_left_down_is_restarted_for_the_next_user(
        postgres_cluster: PostgresCluster) -> None:
    postgres_cluster.kill()
    postgres_cluster.ensure_running()  # what postgres_url does before each test
    assert _scalar(postgres_cluster.url(), "SELECT 1") == 1


def test_stop_removes_the_server_and_its_folder() -> None:
    with PostgresCluster(require_postgres()) as cluster:
        base, port = cluster.base, cluster.port
        assert base is not None and (base / "data" / "PG_VERSION").exists()
        assert _scalar(cluster.dsn(), "SELECT 1") == 1
    assert not base.exists()
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0  # nobody listens there any more


def test_missing_binaries_are_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SIGNAL_PG_BINDIR", str(tmp_path / "nowhere"))
    with pytest.raises(PostgresUnavailable, match="SIGNAL_PG_BINDIR"):
        find_bindir()


def test_missing_psycopg_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for exe in ("initdb", "pg_ctl", "postgres"):  # stand-ins, so only psycopg is missing
        (tmp_path / exe).write_text("#!/bin/sh\n")
        (tmp_path / exe).chmod(0o755)
    monkeypatch.setenv("SIGNAL_PG_BINDIR", str(tmp_path))
    assert find_bindir() == tmp_path
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(PostgresUnavailable, match="psycopg is not installed"):
        check_available()


def test_unavailable_skips_outside_ci_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no initdb"):
        _unavailable("no initdb")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="cannot run in CI: no initdb"):
        _unavailable("no initdb")
