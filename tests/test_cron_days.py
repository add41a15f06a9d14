"""Fifteen hours of `signal fetch` every 15 minutes, without waiting: feeds on
127.0.0.1 change with an injected clock, and after every run what is stored, what the
change feed delivers and when each source was asked are checked against what the server
served. The long version of this (a month, 19 feeds) found nothing these checks miss;
this one keeps the parts that interact over time in one run."""

from __future__ import annotations

import datetime as dt
import sqlite3
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import Clock, make_config
from test_faults import InlineParser

from signal_feeds import digest, open_store, read_changes, run_fetch
from signal_feeds.cli.commands import _fetch_lines

H = 3600.0
T0 = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
Item = tuple[str, str, str, str]  # guid, title, pubDate ("" for none), description


def _posts(age: float, every: float, window: int) -> list[int]:
    last = int(age // every)
    return list(range(last, max(-1, last - window), -1))


def _edited(age: float) -> list[Item]:
    """A post every 6 hours; its title's typo is fixed after 2 hours, its body
    rewritten after 8."""
    out = []
    for i in _posts(age, 6 * H, 4):
        since = age - i * 6 * H
        word = "quik" if since < 2 * H else "quick"
        body = "first draft" if since < 8 * H else "rewritten"
        out.append((f"e-{i}", f"Post {i}: the {word} brown fox",
                    format_datetime(T0 + dt.timedelta(seconds=i * 6 * H), usegmt=True),
                    f"{body} {i}"))
    return out


def _plain(prefix: str, dated: bool) -> Callable[[float], list[Item]]:
    def items(age: float) -> list[Item]:
        return [(f"{prefix}-{i}", f"{prefix} note {i} on harbour cranes",
                 format_datetime(T0 + dt.timedelta(seconds=i * 5 * H), usegmt=True)
                 if dated else "", f"{prefix} body {i}") for i in _posts(age, 5 * H, 4)]
    return items


FEEDS: dict[str, Callable[[float], list[Item]]] = {
    "edited": _edited, "undated": _plain("undated", False),
    "rotating": _plain("rotating", True), "flaky": _plain("flaky", True),
    "limited": _plain("limited", True)}
#: Seconds since T0 during which a feed answers an error instead.
DOWN = {"flaky": (2 * H, 6 * H, 500, {}),
        "limited": (11.5 * H, 13.5 * H, 429, {"Retry-After": "7200"})}


def _rss(items: list[Item]) -> bytes:
    parts = ["<?xml version='1.0' encoding='utf-8'?><rss version='2.0'><channel>"
             "<title>t</title><link>http://example.org/</link><description>d</description>"]
    for guid, title, pub, desc in items:
        parts.append(f"<item><guid isPermaLink='false'>{guid}</guid><title>{title}</title>"
                     f"<link>http://example.org/{guid}</link>"
                     + (f"<pubDate>{pub}</pubDate>" if pub else "")
                     + f"<description>{desc}</description></item>")
    return ("".join(parts) + "</channel></rss>").encode()


class World:
    """The feeds' server: answers depend on ``clock``; logs every request and every
    body it served."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.log: list[tuple[str, dt.datetime, int, str | None]] = []
        self.served: dict[str, list[tuple[dt.datetime, list[Item]]]] = defaultdict(list)
        self.etags: dict[str, int] = defaultdict(int)
        self.lock = threading.Lock()

    def answer(self, name: str, inm: str | None) -> tuple[int, dict[str, str], bytes]:
        age = (self.clock.now - T0).total_seconds()
        start, end, status, headers = DOWN.get(name, (0.0, 0.0, 0, {}))
        if start <= age < end:
            return status, headers, b"not now"
        items = FEEDS[name](age)
        body = _rss(items)
        if name == "rotating":  # the same body under a new ETag every time: never a 304
            self.etags[name] += 1
            etag = f'"r{self.etags[name]}"'
        else:
            etag = f'"{digest(body.decode())[:16]}"'
            if inm == etag:
                return 304, {"ETag": etag}, b""
        self.served[name].append((self.clock.now, items))
        return 200, {"ETag": etag, "Content-Type": "application/rss+xml"}, body

    def handler(self) -> type[BaseHTTPRequestHandler]:
        world = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                name = self.path.rsplit("/", 1)[-1]
                with world.lock:
                    status, headers, body = world.answer(
                        name, self.headers.get("If-None-Match"))
                    world.log.append((name, world.clock.now, status,
                                      self.headers.get("If-None-Match")))
                self.send_response(status)
                for key, value in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

        return Handler


@pytest.fixture
def world() -> Iterator[tuple[World, int]]:
    clock = Clock(T0)
    found = World(clock)
    server = ThreadingHTTPServer(("127.0.0.1", 0), found.handler())
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield found, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


Seen = dict[str, tuple[dt.datetime, dt.datetime]]


def _expected(world: World) -> tuple[dict[str, list[Item]], Seen]:
    """Per entry key: its versions in the order served; and when the first and the last
    parsed body (one not byte-identical to the one before) held it."""
    versions: dict[str, list[Item]] = defaultdict(list)
    seen: Seen = {}
    for name, bodies in world.served.items():
        previous: list[Item] | None = None
        for when, items in bodies:
            parsed = items != previous
            previous = items
            for it in items:
                key = digest([name, it[0]])
                if not versions[key] or versions[key][-1] != it:
                    versions[key].append(it)
                if parsed:
                    seen[key] = (seen.get(key, (when, when))[0], when)
    return versions, seen


def _stamp(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_fifteen_hours_of_cron_runs_stores_reports_and_schedules_what_was_served(
        world: tuple[World, int], tmp_path: Path) -> None:
    w, port = world
    db = tmp_path / "signal.db"
    config = make_config(db, {name: f"http://127.0.0.1:{port}/feed/{name}" for name in FEEDS},
                         min_interval=H)
    cursors: dict[str, str | None] = {"every run": None, "now and then": None}
    delivered: dict[str, list[tuple[str, str]]] = {name: [] for name in cursors}

    def consume(reader: str) -> None:
        with open_store(db) as store:
            while batch := read_changes(store, after=cursors[reader], limit=7):
                delivered[reader] += [(c.key, c.kind) for c in batch]
                cursors[reader] = batch[-1].cursor

    noisy = []
    for tick in range(60):
        # cron starts each run a few seconds after the quarter hour, never the same
        w.clock.now = T0 + dt.timedelta(minutes=15 * tick, seconds=(tick * 7) % 5)
        report = run_fetch(config, clock=w.clock, parser=InlineParser())
        failed = {s.source for s in report.sources if s.status == "failed"}
        assert failed <= {"flaky"}, report.lines()
        assert report.ok == (not failed)
        if _fetch_lines(report, verbose=False, quiet=True):
            noisy.append(tick)
        consume("every run")
        if tick % 20 == 19:
            consume("now and then")
    consume("now and then")

    versions, seen = _expected(w)
    con = sqlite3.connect(db)
    stored = {key: (first, last) for key, first, last in con.execute(
        "SELECT id, first_seen_at, last_seen_at FROM entries")}
    assert set(stored) == set(versions)
    for key, history in versions.items():
        count = con.execute("SELECT count(*) FROM entry_versions WHERE entry_id = ?",
                            (key,)).fetchone()[0]
        assert count == len(set(history)), history
        assert (_stamp(stored[key][0]), _stamp(stored[key][1])) == seen[key]
        # The change feed: created once, then one update per edit, to both readers.
        want = [(key, "created")] + [(key, "updated")] * (len(history) - 1)
        for reader in delivered:
            assert [c for c in delivered[reader] if c[0] == key] == want, reader
    assert delivered["every run"] == delivered["now and then"]
    # The typo fix and the rewrite of each post were seen: three versions of each but
    # the newest.
    assert [len(v) for k, v in versions.items() if v[0][0].startswith("e-")].count(3) >= 1

    requests: dict[str, list[tuple[dt.datetime, int, str | None]]] = defaultdict(list)
    for name, when, status, inm in w.log:
        requests[name].append((when, status, inm))
    # The 429 paused the host (every source here) for its Retry-After.
    told = next(when for when, status, _ in requests["limited"] if status == 429)
    paused = told + dt.timedelta(seconds=2 * H)
    quarter = dt.timedelta(minutes=15)
    for name, asked in requests.items():
        for (when, status, _), (after, _, _) in zip(asked, asked[1:], strict=False):
            gap = (after - when).total_seconds()
            assert gap >= (2 * H if status == 429 else H - 60), (name, when, status)
            if status in (200, 304):  # not starved
                due = when + dt.timedelta(seconds=H)
                if told - quarter <= due and when < paused:
                    due = max(due, paused)
                else:
                    assert not told < after < paused, (name, after)
                assert after <= due + quarter + dt.timedelta(minutes=1), (name, when)
        # Every request after the first names the copy stored (rotating: its last ETag).
        assert all(inm for _, _, inm in asked[1:]), name
    flaky = requests["flaky"]
    failures = [i for i, (_, status, _) in enumerate(flaky) if status == 500]
    gaps = [(flaky[i + 1][0] - flaky[i][0]).total_seconds() / H for i in failures]
    assert gaps == sorted(gaps) and gaps[-1] >= 3.9  # backs off further each time
    back = failures[-1] + 1
    assert flaky[back][1] == 200
    assert (flaky[back + 1][0] - flaky[back][0]).total_seconds() < H + 16 * 60  # reset
    # -q printed a line only in the runs that asked the flaky source while it failed.
    failing_runs = {int((when - T0).total_seconds() // 900) for when, s, _ in flaky
                    if s == 500}
    assert set(noisy) == failing_runs

    # The fetch log can be pruned (README, "What grows"): nothing is decided from it.
    con.execute("DELETE FROM fetches")
    con.commit()
    w.log.clear()
    w.clock.now += dt.timedelta(hours=1)
    report = run_fetch(config, clock=w.clock, parser=InlineParser())
    assert {s.status for s in report.sources} <= {"not_modified", "fetched"}
    assert len(w.log) == len(FEEDS) and all(inm for *_, inm in w.log)
    assert con.execute("SELECT count(*) FROM fetches").fetchone()[0] == len(FEEDS)
    con.close()
