"""The blocking entry points called where an event loop already runs: a notebook
(Jupyter runs every cell inside one) or an async application."""

from __future__ import annotations

import asyncio
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import pytest
from _hostile import rows, write_config
from conftest import FIXTURES, make_config
from scenario_server import ScenarioServer
from threaded_socket import interrupt_when_waiting, silent_server

from signal_feeds import fetch_sources, parse_files, run_fetch
from signal_feeds.parse.processes import ParseJob, ParseOutcome, ParserPool


def test_run_fetch_works_inside_a_running_event_loop(server: ScenarioServer,
                                                     tmp_path: Path) -> None:
    config = make_config(tmp_path / "signal.db",
                         {"demo-rss": server.url("/feeds/demo-rss.xml")})

    async def cell() -> object:
        # What a notebook cell does: a plain call, with the notebook's loop running.
        loop_thread = threading.get_ident()
        report = run_fetch(config, force=True)
        assert threading.get_ident() == loop_thread
        return report

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine ... was never awaited" included
        report = asyncio.run(cell())
    rep = report.get("demo-rss")  # type: ignore[attr-defined]
    assert (rep.status, rep.created) == ("fetched", 3), rep
    assert rows(tmp_path / "signal.db",
                "SELECT count(*) FROM entries WHERE source_id = 'demo-rss'") == [(3,)]
    assert not [t for t in threading.enumerate() if t.name == "signal-run"]


def test_an_error_inside_reaches_the_caller_as_it_is(tmp_path: Path) -> None:
    missing = tmp_path / "no such folder" / "signal.db"
    config = make_config(missing, {"a": "https://a.example/feed.xml"})

    async def cell() -> str:
        try:
            run_fetch(config)
        except Exception as exc:  # noqa: BLE001 - the type is what is checked
            return f"{type(exc).__name__}: {exc}"
        return "no error"

    outcome = asyncio.run(cell())
    # A setup problem (exit 2 in the CLI), a StoreError to the library.
    assert outcome.startswith("DatabaseUnavailableError: "), outcome
    assert outcome.endswith(f"(the folder {missing.parent} does not exist)"), outcome


def test_parse_files_works_inside_a_running_event_loop() -> None:
    path = FIXTURES / "demo-rss.xml"

    async def cell() -> list[dict[str, object]]:
        return list(parse_files([path], source_id="demo-rss"))

    (result,) = asyncio.run(cell())
    assert result["ok"] is True, result
    assert len(result["entries"]) == 3  # type: ignore[arg-type]


_INTERRUPTED_CELL = """
import asyncio, sys, threading
from signal_feeds import load_config, run_fetch

async def cell():
    run_fetch(load_config(sys.argv[1]), force=True)

try:
    if sys.argv[2] == "asyncio.run":
        # asyncio.run's own Ctrl-C handler cancels the running task instead of raising.
        asyncio.run(cell())
    else:
        # As a notebook kernel runs a cell: Ctrl-C raises KeyboardInterrupt where the
        # main thread is.
        asyncio.new_event_loop().run_until_complete(cell())
except KeyboardInterrupt:
    print("interrupted")
# The run was cancelled and waited for, not left going on its helper thread.
print("left:", sorted(t.name for t in threading.enumerate() if t.name == "signal-run"))
"""


@pytest.mark.parametrize("loop", ["asyncio.run", "run_until_complete"])
def test_ctrl_c_stops_a_run_started_inside_a_running_event_loop(
        server: ScenarioServer, tmp_path: Path, loop: str) -> None:
    db = tmp_path / "signal.db"
    script = tmp_path / "cell.py"
    script.write_text(textwrap.dedent(_INTERRUPTED_CELL))
    with silent_server() as (silent, accepted):
        config = write_config(tmp_path / "signal.toml", db, {
            "demo": server.url("/feeds/demo-rss.xml"), "silent": f"{silent}/feed.xml"})
        returncode, out, err = interrupt_when_waiting(
            [sys.executable, str(script), str(config), loop], accepted)
    assert returncode == 0, err
    assert out == "interrupted\nleft: []\n", (out, err)
    assert rows(db, "PRAGMA integrity_check") == [("ok",)]
    assert rows(db, "SELECT count(*) FROM fetches WHERE source_id = 'silent'") == [(0,)]


class _EndlessParser(ParserPool):
    """A pool whose every parse takes an hour: what a run meets inside a huge document."""

    def __init__(self) -> None:
        super().__init__(workers=1)
        self.started = asyncio.Event()

    async def parse(self, job: ParseJob) -> ParseOutcome:
        self.started.set()
        await asyncio.sleep(3600)
        raise AssertionError("never reached")


def test_a_run_stopped_while_a_document_is_parsed_stops_now_and_stores_nothing_of_it(
        server: ScenarioServer, tmp_path: Path) -> None:
    # It waited for the parse to end, then stored the document after the stop.
    config = make_config(tmp_path / "signal.db",
                         {"demo-rss": server.url("/feeds/demo-rss.xml")})
    parser = _EndlessParser()

    async def caller_with_a_timeout() -> None:
        run = asyncio.create_task(fetch_sources(config, parser=parser))
        await asyncio.wait_for(parser.started.wait(), 60)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(run, 30)

    try:
        asyncio.run(caller_with_a_timeout())
    finally:
        parser.close()
    assert rows(tmp_path / "signal.db", "SELECT count(*) FROM entries") == [(0,)]
    assert rows(tmp_path / "signal.db",
                "SELECT count(*) FROM sources WHERE lease_owner IS NOT NULL") == [(0,)]


def test_a_run_needs_none_of_the_hosts_default_executor(server: ScenarioServer,
                                                        tmp_path: Path) -> None:
    # An application that offloads its own blocking work to its loop's default
    # executor had every run wait behind that work: Signal read parse outcomes, gave
    # leases back and took host slots there.
    from concurrent.futures import ThreadPoolExecutor

    # By name, not by address: the name is looked up (on the default executor too,
    # before), an address is not.
    config = make_config(tmp_path / "signal.db", {
        "demo-rss": server.url("/feeds/demo-rss.xml").replace("127.0.0.1", "localhost"),
        "demo-atom": server.url("/feeds/demo-atom.xml")})
    release = threading.Event()

    async def main() -> tuple[int, bool]:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
        busy = loop.run_in_executor(None, release.wait, 60)  # the host's own job
        try:
            report = await asyncio.wait_for(fetch_sources(config, force=True), 30)
            return report.totals["created"], busy.done()
        finally:
            release.set()
            await busy

    created, host_job_done = asyncio.run(main())
    assert created == 5 and not host_job_done


def test_the_run_makes_no_store_call_on_the_host_event_loop(
        server: ScenarioServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The run read the source states and stored the config's order on the event loop's
    # own thread: while another program held the database (a store call then waits up
    # to busy_timeout), an async host's loop stood still. Here the store's first read
    # is slow, as it is behind such a lock.
    import time

    from signal_feeds import Store

    db = tmp_path / "signal.db"
    config = make_config(db, {"demo-rss": server.url("/feeds/demo-rss.xml")})
    read = Store.source_states_for

    def slow_read(self: Store, urls: dict[str, str]) -> object:
        time.sleep(1.0)
        return read(self, urls)

    monkeypatch.setattr(Store, "source_states_for", slow_read)
    gaps: list[float] = []

    async def host() -> None:
        loop = asyncio.get_running_loop()
        running = True

        async def tick() -> None:
            last = loop.time()
            while running:
                await asyncio.sleep(0.01)
                gaps.append(loop.time() - last)
                last = loop.time()

        ticker = asyncio.create_task(tick())
        try:
            report = await fetch_sources(config, force=True)
        finally:
            running = False
            await ticker
        assert report.get("demo-rss").status == "fetched"

    asyncio.run(host())
    # The loop went on ticking through the slow read (not a speed claim: a blocked
    # loop shows one gap of the whole second).
    assert gaps and max(gaps) < 0.9, max(gaps)


def test_a_blocking_call_leaves_the_callers_current_event_loop_set() -> None:
    # A synchronous program that set a current loop (asyncio.set_event_loop, as code
    # written for asyncio.get_event_loop() does) found it gone after one parse_files or
    # run_fetch: asyncio.run() clears the thread's current loop when it ends, and the
    # program's next get_event_loop() raised "There is no current event loop".
    def in_a_thread() -> object:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            (result,) = parse_files([FIXTURES / "demo-rss.xml"], source_id="demo-rss")
            assert result["ok"] is True
            return asyncio.get_event_loop() is loop
        except RuntimeError as exc:
            return str(exc)
        finally:
            asyncio.set_event_loop(None)
            loop.close()

    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(in_a_thread()))
    thread.start()
    thread.join()
    assert outcome == [True]
