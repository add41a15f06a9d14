"""A throwaway PostgreSQL cluster for the tests, and the pytest fixtures around it.

`PostgresCluster` runs `initdb` + `pg_ctl` in a fresh folder (/dev/shm or /tmp, see
base_parent), on 127.0.0.1 and a free port, tuned for speed (no fsync) and never for
safety: only tests use it.
The fixtures `postgres_cluster` (session) and `postgres_url` (one fresh database per test)
are registered through `pytest_plugins` in conftest.py.

Binaries are looked up in $SIGNAL_PG_BINDIR (if set, and then only there), then
`pg_config --bindir`, then /usr/lib/postgresql/*/bin (15 first). When they or psycopg are
missing the tests skip with the reason, except under CI=true, where they fail instead:
CI must never pass by skipping the PostgreSQL tests.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import importlib.util
import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import quote

import pytest

if TYPE_CHECKING:
    import psycopg

PG_VERSION = 15
SUPERUSER = "signal"
# The OS user that owns the cluster when the tests run as root (Debian's package creates it).
OS_USER = "postgres"
SETTINGS: dict[str, str] = {
    "listen_addresses": "'127.0.0.1'",
    "max_connections": "100",
    # Speed over durability: a test cluster is thrown away, never recovered after an OS crash.
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    # Quiet and quick to shut down; the log file is kept for the error message if start fails.
    "logging_collector": "off",
    "log_min_messages": "warning",
}
_STARTUP_TIMEOUT = 60.0  # seconds; pg_ctl -w gives up after this


class PostgresUnavailable(Exception):
    """The binaries, psycopg or the OS user needed to run a cluster are missing."""


def find_bindir() -> Path:
    """The folder holding initdb, pg_ctl and postgres, or PostgresUnavailable saying why."""
    needed = ("initdb", "pg_ctl", "postgres")

    def complete(d: Path) -> bool:
        return all(os.access(d / exe, os.X_OK) for exe in needed)

    forced = os.environ.get("SIGNAL_PG_BINDIR")
    if forced:  # An explicit choice: no silent fallback to some other installation.
        if complete(Path(forced)):
            return Path(forced)
        raise PostgresUnavailable(f"SIGNAL_PG_BINDIR={forced} lacks one of {', '.join(needed)}")
    tried: list[str] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                                 timeout=10, check=True).stdout.strip()
            if out and complete(Path(out)):
                return Path(out)
            tried.append(f"{out} (from pg_config)")
    # Debian installs servers per version; libpq-dev's pg_config may be absent.
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                        key=lambda p: (Path(p).parent.name != str(PG_VERSION), p))
    for cand in candidates:
        if complete(Path(cand)):
            return Path(cand)
        tried.append(cand)
    where = ", ".join(tried) or "no pg_config on PATH, no /usr/lib/postgresql/*/bin"
    raise PostgresUnavailable(f"PostgreSQL server binaries not found ({where}); "
                              "install the 'postgresql' package or set SIGNAL_PG_BINDIR")


def check_available() -> Path:
    """find_bindir() plus the other things a cluster needs; raises PostgresUnavailable."""
    bindir = find_bindir()
    if importlib.util.find_spec("psycopg") is None:
        raise PostgresUnavailable("psycopg is not installed (pip install -e '.[postgres]')")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(OS_USER)
        except KeyError:
            raise PostgresUnavailable(
                f"running as root and there is no OS user {OS_USER!r} to run PostgreSQL as"
            ) from None
        if shutil.which("runuser") is None:
            raise PostgresUnavailable("running as root and runuser is missing")
    return bindir


def free_port() -> int:
    """A port nobody listens on right now (start() retries if it is taken meanwhile)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def base_parent() -> str:
    """Where the cluster's folder goes: $SIGNAL_PG_TMPDIR, else /dev/shm if roomy, else /tmp.

    Not pytest's tmp_path: /tmp/pytest-of-root is 0700 and root's, so the postgres user could
    not reach it; both /dev/shm and /tmp are world-writable and short enough for a Unix
    socket path (107 bytes). /dev/shm is memory: CREATE DATABASE takes ~15 ms there against
    ~175 ms on this machine's disk even with fsync=off, and initdb ~0.7 s against ~1.3 s.
    Docker's default /dev/shm is 64 MiB, too small for a cluster: hence the room check.
    """
    forced = os.environ.get("SIGNAL_PG_TMPDIR")
    if forced:
        return forced
    with contextlib.suppress(OSError):
        st = os.statvfs("/dev/shm")
        if st.f_bavail * st.f_frsize >= 1 << 30 and os.access("/dev/shm", os.W_OK | os.X_OK):
            return "/dev/shm"
    return "/tmp"


class PostgresCluster:
    """One private PostgreSQL server: start(), create_database(), kill()/restart(), stop().

    kill() is `pg_ctl stop -m immediate`: every server process exits at once, clients see
    their connections drop, and the next start runs crash recovery. Because the cluster runs
    with synchronous_commit=off, commits from the last fraction of a second before a kill()
    may be lost; a test about durability should `SET synchronous_commit = on` itself.
    """

    def __init__(self, bindir: Path | None = None, settings: dict[str, str] | None = None) -> None:
        self.bindir = bindir or check_available()
        self.settings = {**SETTINGS, **(settings or {})}
        self.password = secrets.token_urlsafe(18)
        self.port = 0
        self.base: Path | None = None
        self.startup_seconds = 0.0  # initdb + first start, shown in pytest's summary
        self._as_root = os.geteuid() == 0
        self._db_counter = 0
        self._reaper: subprocess.Popen[bytes] | None = None
        self._reaper_pipe = -1

    # -- paths -------------------------------------------------------------------------
    @property
    def _base(self) -> Path:
        if self.base is None:
            raise RuntimeError("cluster not started")
        return self.base

    @property
    def datadir(self) -> Path:
        return self._base / "data"

    @property
    def socket_dir(self) -> Path:
        return self._base

    @property
    def logfile(self) -> Path:
        return self._base / "server.log"

    # -- running the binaries ------------------------------------------------------------
    def _cmd(self, exe: str, args: Sequence[str]) -> list[str]:
        # PostgreSQL refuses to run as root, so root runs it as the postgres OS user.
        cmd = [str(self.bindir / exe), *args]
        return ["runuser", "-u", OS_USER, "--", *cmd] if self._as_root else cmd

    @staticmethod
    def _env() -> dict[str, str]:
        # Stray PG* variables must not redirect the tools, and the C locale always exists.
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update(LC_ALL="C", LANG="C")
        return env

    def _run(self, exe: str, args: Sequence[str], check: bool = True,
             timeout: float = _STARTUP_TIMEOUT + 10) -> subprocess.CompletedProcess[str]:
        cmd = self._cmd(exe, args)
        # cwd is our folder because root's cwd (its home) may be closed to postgres.
        proc = subprocess.run(cmd, cwd=self._base, env=self._env(), capture_output=True,
                              text=True, stdin=subprocess.DEVNULL, timeout=timeout)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n"
                               f"{proc.stdout}{proc.stderr}{self._log_tail()}")
        return proc

    def _log_tail(self, lines: int = 30) -> str:
        try:
            text = self.logfile.read_text(errors="replace").splitlines()[-lines:]
        except (OSError, RuntimeError):
            return ""
        return "\n--- server log ---\n" + "\n".join(text)

    def _chown(self, path: Path) -> None:
        if self._as_root:
            ent = pwd.getpwnam(OS_USER)
            os.chown(path, ent.pw_uid, ent.pw_gid)

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> PostgresCluster:
        """initdb a new cluster and start it (~0.7 s on /dev/shm, ~1.3 s on disk)."""
        if self.base is not None:
            raise RuntimeError("cluster already started")
        t0 = time.monotonic()
        self.base = Path(tempfile.mkdtemp(prefix="signal-pg-", dir=base_parent()))
        _LIVE.add(self)
        try:
            self._start_reaper()
            self._chown(self.base)  # mkdtemp made it 0700: right for a data directory's parent
            pwfile = self.base / "pwfile"
            pwfile.write_text(self.password + "\n")
            self._chown(pwfile)
            self._run("initdb", [
                "-D", str(self.datadir), "-U", SUPERUSER, f"--pwfile={pwfile}",
                # Passwords on every connection, the socket too, so a wrong one is refused.
                "--auth=scram-sha-256", "-E", "UTF8", "--locale=C",
                "--no-sync", "--no-instructions",  # --no-sync: seconds saved, nothing lost
            ])
            pwfile.unlink()
            with (self.datadir / "postgresql.conf").open("a") as conf:
                conf.write("\n# Signal test cluster\n")
                conf.write(f"unix_socket_directories = '{self.socket_dir}'\n")
                conf.writelines(f"{k} = {v}\n" for k, v in self.settings.items())
            self._start_server()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        _STARTUPS.append(self.startup_seconds)
        return self

    def _start_reaper(self) -> None:
        """A watchdog that stops the server and removes the folder once this process is gone.

        atexit covers normal exits and exceptions, but not SIGKILL or SIGTERM (a CI timeout):
        the watchdog holds the read end of a pipe whose only writer is this process, so the
        kernel closing it on our death, however it happens, wakes the watchdog up.
        """
        read_end, write_end = os.pipe()  # non-inheritable: pg_ctl and postgres don't get it
        stop = self._cmd("pg_ctl", ["-D", str(self.datadir), "-m", "immediate", "-w", "stop"])
        self._reaper = subprocess.Popen(
            [sys.executable, "-c", _REAPER, str(self._base), *stop],
            stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd=self._base, env=self._env(),
            start_new_session=True)  # so a Ctrl-C meant for pytest does not reach it
        os.close(read_end)
        self._reaper_pipe = write_end

    def _stop_reaper(self) -> None:
        if self._reaper is not None:
            self._reaper.kill()
            self._reaper.wait()
            os.close(self._reaper_pipe)
            self._reaper = None

    def _pg_ctl_start(self) -> subprocess.CompletedProcess[str]:
        return self._run("pg_ctl", ["-D", str(self.datadir), "-l", str(self.logfile),
                                    "-o", f"-p {self.port}", "-t", str(int(_STARTUP_TIMEOUT)),
                                    "-w", "start"], check=False)

    def _start_server(self) -> None:
        # A free port can be taken between the probe and the start: try a few.
        for _ in range(5):
            self.port = free_port()
            proc = self._pg_ctl_start()
            if proc.returncode == 0:
                return
            if "already in use" not in self._log_tail(5):
                break
        raise RuntimeError(f"pg_ctl start failed:\n{proc.stdout}{proc.stderr}{self._log_tail()}")

    def is_running(self) -> bool:
        if self.base is None or not self.datadir.exists():
            return False
        return self._run("pg_ctl", ["-D", str(self.datadir), "status"], check=False).returncode == 0

    def kill(self) -> None:
        """Make the server go away now (immediate shutdown, no checkpoint); data dir kept."""
        self._run("pg_ctl", ["-D", str(self.datadir), "-m", "immediate", "-w", "stop"])

    def restart(self) -> None:
        """Bring the server back on the same port: clean stop if running, then start."""
        if self.is_running():
            self._run("pg_ctl", ["-D", str(self.datadir), "-m", "fast", "-w", "stop"])
        # Same port, so URLs handed out earlier keep working: no retry on another port.
        proc = self._pg_ctl_start()
        if proc.returncode != 0:
            raise RuntimeError(f"restart failed:\n{proc.stdout}{proc.stderr}{self._log_tail()}")

    def ensure_running(self) -> None:
        """Restart the server if an earlier test killed it and left it down."""
        if not self.is_running():
            self.restart()

    def stop(self) -> None:
        """Stop the server (immediately: its data is thrown away) and remove the folder.

        Safe to call twice, after kill(), or after a failed start()."""
        base, self.base = self.base, None
        _LIVE.discard(self)
        if base is None:
            return
        if (base / "data" / "postmaster.pid").exists():
            self.base = base  # _run needs it as cwd
            try:
                self._run("pg_ctl", ["-D", str(base / "data"), "-m", "immediate", "-w", "stop"],
                          check=False, timeout=30)
            except (OSError, subprocess.SubprocessError):
                pass  # best effort: the folder is removed either way
            finally:
                self.base = None
        shutil.rmtree(base, ignore_errors=True)
        self._stop_reaper()

    def __enter__(self) -> PostgresCluster:
        return self.start() if self.base is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- connecting ----------------------------------------------------------------------
    def dsn(self, dbname: str = "postgres", password: str | None = None) -> str:
        """A libpq key=value string for TCP on 127.0.0.1."""
        pw = self.password if password is None else password
        return (f"host=127.0.0.1 port={self.port} user={SUPERUSER} dbname={dbname} "
                f"password={_dsn_quote(pw)}")

    def url(self, dbname: str = "postgres", password: str | None = None) -> str:
        """postgresql://signal:PASSWORD@127.0.0.1:PORT/dbname"""
        pw = self.password if password is None else password
        return (f"postgresql://{SUPERUSER}:{quote(pw, safe='')}@127.0.0.1:{self.port}/"
                f"{quote(dbname, safe='')}")

    def _admin(self) -> psycopg.Connection[Any]:
        import psycopg  # Lazily: the SQLite tests must run where psycopg is absent.

        return psycopg.connect(self.dsn(), autocommit=True, connect_timeout=10)

    def create_database(self, name: str) -> str:
        """CREATE DATABASE from template0 (no copy of anything a test left in template1)."""
        from psycopg import sql

        with self._admin() as conn:
            conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0")
                         .format(sql.Identifier(name)))
        return name

    def drop_database(self, name: str) -> None:
        """Drop it even if a test left connections open (FORCE ends them)."""
        from psycopg import sql

        with self._admin() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                         .format(sql.Identifier(name)))

    def drop_connections(self, dbname: str | None = None, *, wait: bool = False) -> int:
        """End other clients' connections (to dbname, or all) while the server stays up.

        pg_terminate_backend only signals the backends; with ``wait`` this returns once
        they have exited, so the next statement on a dropped connection fails for sure."""
        with self._admin() as conn:
            pids = [int(r[0]) for r in conn.execute(
                "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"
                " AND (%s::text IS NULL OR datname = %s)", (dbname, dbname))]
            deadline = time.monotonic() + 30
            while wait and pids and time.monotonic() < deadline:
                left = conn.execute("SELECT count(*) FROM pg_stat_activity"
                                    " WHERE pid = ANY(%s)", (pids,)).fetchone()
                if left is None or left[0] == 0:
                    break
                time.sleep(0.01)
        return len(pids)

    def new_database_name(self, hint: str = "") -> str:
        """test_NNNN_<hint>: unique in this cluster, readable in logs, within 63 bytes."""
        self._db_counter += 1
        slug = re.sub(r"[^a-z0-9]+", "_", hint.lower()).strip("_")
        return f"test_{self._db_counter:04d}_{slug}"[:63].rstrip("_")


def _dsn_quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


# -- never leave a server behind -------------------------------------------------------------
# The watchdog's program: wait for EOF on stdin (our death), then stop and clean up.
_REAPER = """
import os, shutil, subprocess, sys
while os.read(0, 1):
    pass
base, stop = sys.argv[1], sys.argv[2:]
if os.path.exists(os.path.join(base, "data", "postmaster.pid")):
    subprocess.run(stop, stdin=subprocess.DEVNULL, timeout=60)
shutil.rmtree(base, ignore_errors=True)
"""
_LIVE: set[PostgresCluster] = set()
_STARTUPS: list[float] = []  # seconds, for the terminal summary


def _stop_all() -> None:
    for cluster in list(_LIVE):
        cluster.stop()


atexit.register(_stop_all)


# -- pytest plugin ---------------------------------------------------------------------------
def _unavailable(reason: str) -> NoReturn:
    """Skip outside CI (reason shown by -ra); under CI=true a missing server is a failure."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"PostgreSQL tests cannot run in CI: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL tests skipped: {reason}")


def require_postgres() -> Path:
    """check_available(), or skip/fail the calling test (see _unavailable)."""
    try:
        return check_available()
    except PostgresUnavailable as exc:
        reason = str(exc)
    _unavailable(reason)  # outside the except block: no chained traceback in the report


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """One server for the whole session, started on first use and always stopped."""
    with PostgresCluster(require_postgres()) as cluster:
        yield cluster


@pytest.fixture
def postgres_url(postgres_cluster: PostgresCluster,
                 request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, empty database for this test, as a postgresql:// URL with the password."""
    postgres_cluster.ensure_running()  # an earlier fault test may have left it down
    name = postgres_cluster.create_database(
        postgres_cluster.new_database_name(request.node.name))
    yield postgres_cluster.url(name)
    # Dropped so long sessions don't pile up databases (~7 MB each); the server may be
    # down if this test killed it, and the whole folder goes at session end anyway.
    with contextlib.suppress(Exception):
        if postgres_cluster.is_running():
            postgres_cluster.drop_database(name)


def pytest_report_header(config: pytest.Config) -> str:
    """Say up front whether the PostgreSQL tests can run, and with which binaries."""
    try:
        return f"postgres: {check_available()}"
    except PostgresUnavailable as exc:
        return f"postgres: unavailable ({exc})"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Keep the cost of the server visible: it is paid once per session."""
    if _STARTUPS:
        times = ", ".join(f"{t:.2f}" for t in _STARTUPS)
        terminalreporter.write_line(f"postgres: cluster start (initdb + pg_ctl) took {times} s")
