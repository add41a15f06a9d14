"""PostgreSQL as operators deploy it: a pooler in front, their own connect timeout, and
a role the DBA has not let create tables.

The pooler tests start pgbouncer themselves (as the cluster's OS user when run as root)
and skip, with the reason, where it is not installed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import make_config
from postgres_cluster import OS_USER, SUPERUSER, PostgresCluster, free_port
from scenario_server import ScenarioServer

from signal_feeds import run_fetch
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


# -- a pooler in front ------------------------------------------------------------------------

def _pgbouncer() -> str | None:
    """Where pgbouncer is (Debian puts it in /usr/sbin, not on every user's PATH)."""
    return shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin")


class Bouncer:
    """One pgbouncer in ``pool_mode`` in front of the cluster, on a port of its own."""

    def __init__(self, cluster: PostgresCluster, pool_mode: str) -> None:
        assert cluster.base is not None
        self.folder = cluster.base / f"pgbouncer-{pool_mode}"
        self.folder.mkdir()
        self.port = free_port()
        users = self.folder / "users.txt"
        users.write_text(f'"{SUPERUSER}" "{cluster.password}"\n')
        ini = self.folder / "pgbouncer.ini"
        ini.write_text(
            f"[databases]\n* = host=127.0.0.1 port={cluster.port}\n[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = scram-sha-256\nauth_file = {users}\npool_mode = {pool_mode}\n"
            f"default_pool_size = 4\nlogfile = {self.folder / 'log'}\n"
            "ignore_startup_parameters = extra_float_digits\n")
        for path in (self.folder, users, ini):
            cluster._chown(path)  # noqa: SLF001 (the cluster's own OS user runs it)
        users.chmod(0o600)
        command = [str(_pgbouncer()), str(ini)]
        if os.geteuid() == 0:  # pgbouncer, like postgres, refuses to run as root
            command = ["runuser", "-u", OS_USER, "--", *command]
        self.process = subprocess.Popen(command, cwd=self.folder, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        self.stop()
        pytest.fail(f"pgbouncer did not start on port {self.port}")

    def url(self, dbname: str) -> str:
        return (f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{dbname}"
                "?sslmode=disable")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture
def bouncer(postgres_cluster: PostgresCluster,
            request: pytest.FixtureRequest) -> Iterator[Bouncer]:
    if _pgbouncer() is None:
        pytest.skip("pgbouncer is not installed")
    running = Bouncer(postgres_cluster, str(request.param))
    yield running
    running.stop()


def _advisory_locks(postgres_url: str) -> int:
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as admin:
        row = admin.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                            ).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.parametrize("bouncer", ["transaction"], indirect=True)
def test_a_pool_in_transaction_mode_is_refused_with_one_line(
        bouncer: Bouncer, postgres_url: str, postgres_cluster: PostgresCluster,
        server: ScenarioServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Host slots' advisory locks stayed behind on server sessions other clients then
    # used (per_host held for nobody, after the run) and psycopg's prepared statements
    # met other clients' ("prepared statement "_pg3_0" already exists"): a run went on
    # with some sources failed and the next runs waited for slots nobody held.
    monkeypatch.setenv("PGPASSWORD", postgres_cluster.password)
    url = bouncer.url(postgres_url.rsplit("/", 1)[1])
    config = tmp_path / "signal.toml"
    config.write_text(f'[[sources]]\nid = "a"\nurl = "{server.url("/feeds/demo-rss.xml")}"\n')
    for command in (["fetch", "--config", str(config)], ["entries"], ["changes"]):
        result = CliRunner().invoke(cli, [*command, "--db", url])
        assert result.exit_code == 2, result.output
        (line,) = result.output.strip().splitlines()
        assert line == (f"signal: error: cannot use {display_database(url)}: a connection "
                        "pooler there hands each transaction to any server session "
                        "(pgbouncer's pool_mode = transaction or statement), and Signal "
                        "keeps locks and settings in its session: connect to the server "
                        "itself, or through a pool in session mode (which resets a "
                        "session before another client gets it)")
    assert _advisory_locks(postgres_url) == 0


@pytest.mark.parametrize("bouncer", ["session"], indirect=True)
def test_a_pool_in_session_mode_works_and_leaves_no_lock(
        bouncer: Bouncer, postgres_url: str, postgres_cluster: PostgresCluster,
        server: ScenarioServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGPASSWORD", postgres_cluster.password)
    url = bouncer.url(postgres_url.rsplit("/", 1)[1])
    config = make_config(url, {"demo-rss": server.url("/feeds/demo-rss.xml"),
                               "demo-atom": server.url("/feeds/demo-atom.xml")})
    for _ in range(2):  # past psycopg's prepare_threshold on the second run's statements
        report = run_fetch(config, force=True)
        assert {s.status for s in report.sources} <= {"fetched", "not_modified"}, report
    with open_store(url) as store:
        assert store.count("entries") > 0
    time.sleep(0.2)  # pgbouncer resets (DISCARD ALL) a session its client has left
    assert _advisory_locks(postgres_url) == 0


def _tcp_options(store: object) -> dict[str, int]:
    """The keepalive settings of the store's own connection, read off its socket."""
    conn = store._db.conn  # type: ignore[attr-defined]
    with socket.socket(fileno=os.dup(conn.fileno())) as sock:
        return {"keepalive": sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                "idle": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                "interval": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
                "count": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
                "user_timeout": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)}


@pytest.mark.skipif(not hasattr(socket, "TCP_USER_TIMEOUT"), reason="Linux socket options")
def test_a_server_gone_silent_is_given_up_within_a_minute_unless_the_url_says(
        postgres_url: str) -> None:
    # libpq left keepalives to the system (first probe after two hours on Linux): a
    # run whose server vanished behind a firewall waited hours on its next answer.
    with open_store(postgres_url) as store:
        assert _tcp_options(store) == {"keepalive": 1, "idle": 30, "interval": 10,
                                       "count": 3, "user_timeout": 60_000}
    with open_store(f"{postgres_url}?keepalives_idle=300&tcp_user_timeout=0") as store:
        options = _tcp_options(store)
    assert (options["idle"], options["user_timeout"], options["interval"]) == (300, 0, 10)
