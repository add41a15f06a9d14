"""httpx is imported by the first request, not before (each check in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

HTTP_MODULES = ("httpx", "httpcore", "anyio", "h11", "certifi")


def _loaded_after(code: str, cwd: Path) -> list[str]:
    script = textwrap.dedent(code) + textwrap.dedent(f"""
        import sys
        print("loaded:" + ",".join(m for m in {HTTP_MODULES!r} if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=cwd, check=True,
                         capture_output=True, text=True).stdout
    last = out.strip().splitlines()[-1]
    assert last.startswith("loaded:"), out
    return [m for m in last.removeprefix("loaded:").split(",") if m]


def test_importing_the_pipeline_and_the_cli_loads_no_http_library(tmp_path: Path) -> None:
    loaded = _loaded_after("""
        import signal_feeds.cli.commands
        import signal_feeds.run.pipeline
    """, tmp_path)
    assert loaded == []


def test_a_run_where_nothing_is_fetched_loads_no_http_library(tmp_path: Path) -> None:
    (tmp_path / "signal.toml").write_text(textwrap.dedent("""
        [settings]
        database = "signal.db"

        [[sources]]
        id = "old"
        url = "http://feeds.example/old.xml"
        owner = "someone"
        review_by = 2000-01-01
    """), encoding="utf-8")
    loaded = _loaded_after("""
        from signal_feeds.config.source_list import load_config
        from signal_feeds.run.pipeline import run_fetch

        report = run_fetch(load_config("signal.toml"))
        assert [s.status for s in report.sources] == ["expired"], report
    """, tmp_path)
    assert loaded == []


def test_the_first_request_loads_httpx(tmp_path: Path) -> None:
    # The other side of the two tests above: a run that makes a request does load it
    # (here to a port nobody listens on: the request fails, the import has happened).
    (tmp_path / "signal.toml").write_text(textwrap.dedent("""
        [settings]
        database = "signal.db"
        connect_timeout = 2.0

        [[sources]]
        id = "one"
        url = "http://127.0.0.1:9/feed.xml"
    """), encoding="utf-8")
    loaded = _loaded_after("""
        from signal_feeds.config.source_list import load_config
        from signal_feeds.run.pipeline import run_fetch

        report = run_fetch(load_config("signal.toml"))
        assert [s.status for s in report.sources] == ["failed"], report
    """, tmp_path)
    assert "httpx" in loaded and "httpcore" in loaded
