"""A source list of thousands, most of them on a few hosts: the order a run asks for its
sources in, and what that does to how many requests can be in flight at once."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from conftest import FIXTURES, make_config
from scenario_server import ScenarioServer
from test_cli import write_config

from signal_feeds import Store, run_fetch
from signal_feeds.cli.commands import cli
from signal_feeds.decide.order import spread_by_host
from signal_feeds.run.claims import Claims

FEED = (FIXTURES / "demo-rss.xml").read_bytes()


@pytest.mark.parametrize(("hosts", "order"), [
    ([], []),
    (["a"], [0]),
    (["a", "b", "c"], [0, 1, 2]),  # one source each: the config's order
    # A host's run in the config is spread over the whole: a0 b0 a1 a2 b1 a3.
    (["a", "a", "a", "a", "b", "b"], [0, 4, 1, 2, 5, 3]),
    # Two hosts of three, one after the other in the config, alternate.
    (["a", "a", "a", "b", "b", "b"], [0, 3, 1, 4, 2, 5]),
    # A source alone on its host goes in the middle of a large host's run.
    (["a", "a", "a", "a", "z"], [0, 1, 4, 2, 3]),
    # Each host keeps its own sources in the config's order.
    (["b", "a", "b", "a"], [0, 1, 2, 3]),
])
def test_spread_by_host(hosts: list[str], order: list[int]) -> None:
    assert spread_by_host(hosts) == order


def test_spread_by_host_keeps_each_stretch_in_proportion() -> None:
    # 1,000 sources on one host, 1,000 on a second, 500 on a third, then 125 hosts of 20
    # (an operator's list with feeds.feedburner.com and medium.com in bulk).
    hosts = (["big1"] * 1000 + ["big2"] * 1000 + ["mid"] * 500
             + [f"small{i // 20}" for i in range(2500)])
    order = spread_by_host(hosts)
    assert sorted(order) == list(range(len(hosts)))
    for start in range(0, len(order), 500):  # every tenth of the run asks each its share
        stretch = [hosts[i] for i in order[start:start + 500]]
        assert (stretch.count("big1"), stretch.count("big2"), stretch.count("mid")) == (
            100, 100, 50)


def test_a_hosts_run_of_sources_in_the_config_does_not_hold_up_the_others(
        db_path: Path) -> None:
    # 16 sources of one host listed before 16 of another, one request at a time per host.
    # Asked in the config's order, the run's claims (two chunks of `concurrency`) held
    # only the first host's sources: they went one by one while the second host, which
    # could take a request at the same time, waited for all of them.
    asked: list[str] = []

    async def handle(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.host)
        await asyncio.sleep(0.001)
        return httpx.Response(200, headers={"Content-Type": "application/rss+xml"},
                              content=FEED)

    sources = {f"{host[0]}{i:02d}": f"https://{host}/feed{i}.xml"
               for host in ("alpha.example", "beta.example") for i in range(16)}
    config = make_config(db_path, sources, concurrency=4, per_host=1)
    report = run_fetch(config, transport=httpx.MockTransport(handle))
    assert [r.source for r in report.sources] == list(sources)  # reported in order
    assert {r.status for r in report.sources} == {"fetched"}
    assert len(asked) == 32
    assert set(asked[:4]) == {"alpha.example", "beta.example"}
    # Each host's sources keep the config's order among themselves.
    assert asked.count("alpha.example") == asked.count("beta.example") == 16


def test_a_claim_looks_at_its_window_not_at_every_waiting_source(db_path: Path) -> None:
    # Every due source waits for its claim from the start of the run, and each claim
    # copied the whole waiting list to take its window of a few chunks: 50,000 sources
    # in chunks of 20 made 2,500 copies of up to 50,000 items, seconds of the event loop.
    class Counting(dict[str, Any]):
        looked = 0

        def items(self) -> Iterator[tuple[str, Any]]:  # type: ignore[override]
            for item in super().items():
                Counting.looked += 1
                yield item

    async def claim_all(store: Store) -> int:
        async def call(work: Callable[[], Any]) -> Any:
            return work()

        claims = Claims(store, call, owner="w", lease_seconds=600, chunk=2, force=True,
                        clock=lambda: dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.UTC))
        claims._waiting = Counting()  # type: ignore[assignment]
        running = asyncio.create_task(claims.run())
        asked = [asyncio.create_task(claims.take(f"s{i}", f"https://h.example/{i}.xml"))
                 for i in range(400)]
        got = 0
        for i, task in enumerate(asked):  # each fetched and written in turn
            got += (await task) is not None
            claims.fetched(f"s{i}")
            claims.finished(f"s{i}")
        running.cancel()
        return got

    with Store(db_path) as store:
        assert asyncio.run(claim_all(store)) == 400
    assert Counting.looked < 400 * 10  # the whole list each time: 20,200


def test_sources_shows_only_the_states_asked_for(server: ScenarioServer,
                                                 tmp_path: Path) -> None:
    # 5,000 sources make a table of 5,001 lines; the operator wants the few that failed.
    config = write_config(tmp_path, {"demo-rss": server.url("/feeds/demo-rss.xml"),
                                     "missing": server.url("/feeds/missing.xml"),
                                     "also-missing": server.url("/feeds/gone-too.xml")})
    runner = CliRunner()
    runner.invoke(cli, ["fetch", "--config", str(config)])
    table = runner.invoke(cli, ["sources", "--config", str(config), "--status", "failed"])
    assert table.exit_code == 0
    assert [line.split()[0] for line in table.output.splitlines()] == [
        "id", "missing", "also-missing"]
    both = runner.invoke(cli, ["sources", "--config", str(config), "--json",
                               "--status", "ok", "--status", "failed"])
    assert len(json.loads(both.output)["sources"]) == 3
    typo = runner.invoke(cli, ["sources", "--config", str(config), "--status", "faild"])
    assert typo.exit_code == 2 and "'failed'" in typo.output


def test_sources_reads_every_state_at_once(server: ScenarioServer, db_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # A read per source was 5,000 round trips to a PostgreSQL server for one table.
    from signal_feeds.run.source_status import source_table

    urls = {f"s{i:03d}": server.url(f"/feeds/s{i:03d}.xml") for i in range(120)}
    urls["demo-rss"] = server.url("/feeds/demo-rss.xml")
    config = make_config(db_path, urls)
    run_fetch(config, source_ids=["demo-rss"])

    def one_by_one(*args: object) -> None:
        raise AssertionError("source_state() asked once per source")

    monkeypatch.setattr(Store, "source_state", one_by_one)
    rows = source_table(config)
    assert [row["id"] for row in rows] == list(urls)
    assert {row["id"]: row["status"] for row in rows}["demo-rss"] == "ok"
