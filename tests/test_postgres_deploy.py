"""PostgreSQL as operators deploy it: a role the DBA has not let create tables."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from signal_feeds.cli.commands import cli
from signal_feeds.dsn import display_database
from signal_feeds.errors import DatabaseUnavailableError
from signal_feeds.store import open_store


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
