"""PostgreSQL as operators deploy it: their own connect timeout, and a role the DBA has not
let create tables."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from signal_feeds.cli.commands import cli
from signal_feeds.dsn import display_database
from signal_feeds.errors import DatabaseUnavailableError
from signal_feeds.store import open_store


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never says a word (a filtered server)."""
    pytest.importorskip("psycopg")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


@pytest.mark.parametrize("where", ["url", "environment"])
def test_the_operators_connect_timeout_is_kept(silent_port: int, where: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # Signal's own 10 s was passed as a keyword, which psycopg puts over the URL's:
    # "?connect_timeout=2" (or PGCONNECT_TIMEOUT=2) waited 10 s all the same.
    url = f"postgresql://signal:pw@127.0.0.1:{silent_port}/x?sslmode=disable"
    if where == "url":
        url += "&connect_timeout=2"
    else:
        monkeypatch.setenv("PGCONNECT_TIMEOUT", "2")
    started = time.monotonic()
    with pytest.raises(DatabaseUnavailableError, match="timeout"):
        open_store(url)
    assert time.monotonic() - started < 7


def test_the_operators_application_name_is_kept(postgres_url: str) -> None:
    # Workers named apart in pg_stat_activity were all "signal".
    import psycopg

    with open_store(f"{postgres_url}?application_name=fetch-host-3"), \
            psycopg.connect(postgres_url, autocommit=True) as admin:
        names = {r[0] for r in admin.execute(
            "SELECT application_name FROM pg_stat_activity WHERE datname = %s",
            (postgres_url.rsplit("/", 1)[1],))}
    assert "fetch-host-3" in names and "signal" not in names
    with open_store(postgres_url), psycopg.connect(postgres_url, autocommit=True) as admin:
        assert admin.execute("SELECT count(*) FROM pg_stat_activity "
                             "WHERE application_name = 'signal'").fetchone() == (1,)


def test_a_role_that_may_not_create_tables_is_told_what_the_first_run_needs(
        postgres_url: str) -> None:
    # The first run was told to "grant it INSERT, UPDATE and DELETE on Signal's
    # tables", tables that did not exist yet: it needs CREATE on the schema.
    import psycopg
    from psycopg import sql

    dbname = postgres_url.rsplit("/", 1)[1]
    role = f"newcomer_{dbname}"[:60]
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD 'pw'").format(
            sql.Identifier(role)))
        admin.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    port = postgres_url.rsplit(":", 1)[1].split("/", 1)[0]
    url = f"postgresql://{role}:pw@127.0.0.1:{port}/{dbname}"
    result = CliRunner().invoke(cli, ["entries", "--db", url])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"signal: error: cannot create Signal's tables in "
                           f"{display_database(url)}: permission denied for schema public")
    assert "give this role CREATE on the schema" in line
    assert "INSERT, UPDATE and DELETE" not in line
    # A search_path naming no schema that exists says so.
    missing = f"{url}?options=-csearch_path%3Dnowhere"
    with pytest.raises(DatabaseUnavailableError, match="no schema of this role's search_path"):
        open_store(missing)
