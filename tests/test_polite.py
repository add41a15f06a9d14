"""Polite polling over real HTTP, with an injected clock instead of sleeping."""

from __future__ import annotations

import datetime as dt
import json
from email.utils import format_datetime
from pathlib import Path

from _hostile import rows
from click.testing import CliRunner
from conftest import Clock, make_config
from scenario_server import ScenarioServer, ScriptedResponse
from test_cli import write_config

from signal_feeds import Store, run_fetch
from signal_feeds.cli.commands import cli
from signal_feeds.store import open_store

DEMO_HEADERS = (("Content-Type", "application/rss+xml; charset=utf-8"),)


def feed_body(server: ScenarioServer) -> bytes:
    import httpx

    return httpx.get(server.url("/feeds/demo-rss.xml")).content


def check_retry_after(server: ScenarioServer, db: Path, retry_after: str,
                      clock: Clock, *, times: int = 1) -> None:
    path = "/limited.xml"
    # The server's Date is the test clock's: an HTTP-date Retry-After is read against it.
    date = (("Date", format_datetime(clock.now, usegmt=True)),)
    server.script(path, [ScriptedResponse(status=429, headers=(
                             *date, *(("Retry-After", retry_after),) * times)),
                         ScriptedResponse(status=200, headers=DEMO_HEADERS,
                                          body=feed_body(server))])
    config = make_config(db, {"limited": server.url(path)})
    first = run_fetch(config, clock=clock).get("limited")
    assert (first.status, first.http_status) == ("retry_later", 429)
    assert first.retry_after == clock.now + __import__("datetime").timedelta(seconds=120)

    clock.advance(60)
    second = run_fetch(config, clock=clock, force=True).get("limited")
    assert second.status == "retry_later" and "Retry-After" in second.note
    assert len(server.requests_for(path)) == 1  # no request before Retry-After

    clock.advance(61)
    third = run_fetch(config, clock=clock).get("limited")
    assert (third.status, third.created) == ("fetched", 3)
    assert len(server.requests_for(path)) == 2


def test_retry_after_seconds(server: ScenarioServer, db_path: Path) -> None:
    check_retry_after(server, db_path, "120", Clock())


def test_a_retry_after_sent_twice_is_obeyed(server: ScenarioServer, db_path: Path) -> None:
    check_retry_after(server, db_path, "120", Clock(), times=2)


def test_retry_after_http_date(server: ScenarioServer, db_path: Path) -> None:
    clock = Clock()
    when = clock.now + __import__("datetime").timedelta(seconds=120)
    check_retry_after(server, db_path, format_datetime(when, usegmt=True), clock)


def test_a_pause_from_a_server_with_a_slow_clock_holds(server: ScenarioServer,
                                                      tmp_path: Path) -> None:
    # A CDN edge whose clock is five minutes slow asks for two minutes of quiet as a
    # date: read on our clock that date was three minutes past, so the pause was over
    # before it began and the host's other feed was asked at once.
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    theirs = now - dt.timedelta(minutes=5)
    server.script("/slow-clock/a.xml", [ScriptedResponse(status=429, headers=(
        ("Date", format_datetime(theirs, usegmt=True)),
        ("Retry-After", format_datetime(theirs + dt.timedelta(minutes=2), usegmt=True))))])
    server.put("/slow-clock/b.xml", feed_body(server))
    config = make_config(tmp_path / "signal.db", {"a": server.url("/slow-clock/a.xml"),
                                                  "b": server.url("/slow-clock/b.xml")},
                         concurrency=1, per_host=1)
    clock = Clock(now)
    report = run_fetch(config, force=True, clock=clock)
    a, b = report.get("a"), report.get("b")
    assert (a.status, a.retry_after) == ("retry_later", now + dt.timedelta(minutes=2))
    assert (b.status, b.http_status) == ("retry_later", None), b
    assert [r.path for r in server.requests if r.path.startswith("/slow-clock/")] == [
        "/slow-clock/a.xml"]


def test_the_user_agent_setting_is_what_the_server_sees(server: ScenarioServer,
                                                       tmp_path: Path) -> None:
    # What an operator sets so that a publisher (or its CDN's bot rules) can tell who
    # polls and whom to write to: sent exactly, on every request.
    ua = "example-news-desk/2.1 (+https://news.example/feeds; feeds@news.example)"
    server.put("/ua.xml", feed_body(server))
    config = make_config(tmp_path / "signal.db", {"ua": server.url("/ua.xml")},
                         user_agent=ua)
    assert run_fetch(config).get("ua").status == "fetched"
    assert [r.header("User-Agent") for r in server.requests_for("/ua.xml")] == [ua]


def test_interval_is_respected_and_requests_are_conditional(server: ScenarioServer,
                                                           db_path: Path) -> None:
    paths = {"demo-rss": "/feeds/demo-rss.xml", "demo-atom": "/feeds/demo-atom.xml",
             "cached": "/scenario/cache?max_age=7200"}
    config = make_config(db_path, {k: server.url(v) for k, v in paths.items()},
                         min_interval=1800.0)
    clock = Clock()
    seen: dict[str, list[object]] = {k: [] for k in paths}
    for _ in range(12):  # six hours in half-hour steps
        for rep in run_fetch(config, clock=clock).sources:
            if rep.status != "not_due":
                seen[rep.source].append(clock.now)
        clock.advance(1800)
    # demo-rss asks for <ttl>60</ttl>, the cached path for max-age=7200, atom nothing.
    assert len(seen["demo-atom"]) == 12
    assert len(seen["demo-rss"]) == 6
    assert len(seen["cached"]) == 3
    for source, path in paths.items():
        requests = server.requests_for(path)
        assert len(requests) == len(seen[source])
        assert requests[0].header("If-None-Match") is None
        assert all(r.header("If-None-Match") for r in requests[1:]), source


def test_gone_stops_polling_until_reset(server: ScenarioServer, tmp_path: Path) -> None:
    path = "/gone.xml"
    server.script(path, [ScriptedResponse(status=410),
                         ScriptedResponse(status=200, headers=DEMO_HEADERS,
                                          body=feed_body(server))])
    config = write_config(tmp_path, {"old": server.url(path)})
    runner = CliRunner()
    fetch = ["fetch", "--config", str(config), "--json", "--force"]
    first = json.loads(runner.invoke(cli, fetch).output)["sources"][0]
    assert (first["status"], first["http_status"]) == ("gone", 410)
    again = json.loads(runner.invoke(cli, fetch).output)["sources"][0]
    assert again["status"] == "gone"
    assert len(server.requests_for(path)) == 1

    table = json.loads(runner.invoke(cli, ["sources", "--config", str(config),
                                           "--json"]).output)["sources"]
    assert table[0]["gone"] is True
    reset = runner.invoke(cli, ["sources", "--config", str(config), "--reset", "old"])
    assert reset.exit_code == 0, reset.output
    after = json.loads(runner.invoke(cli, fetch).output)["sources"][0]
    assert (after["status"], after["created"]) == ("fetched", 3)
    assert len(server.requests_for(path)) == 2


def test_permanent_redirect_chain_is_reported_as_moved(server: ScenarioServer,
                                                       db_path: Path) -> None:
    start = "/scenario/redirect-chain?statuses=301,308&to=/feeds/demo-rss.xml"
    config = make_config(db_path, {"moving": server.url(start)})
    first = run_fetch(config).get("moving")
    assert first.status == "moved" and first.created == 3
    assert first.moved_to == server.url("/feeds/demo-rss.xml")
    server.clear_log()
    # Later runs ask the new address and say what they did; moved_to still says where
    # the source lives (a "moved" line on every poll was cron mail on every run).
    second = run_fetch(config, force=True).get("moving")
    assert (second.status, second.http_status) == ("not_modified", 304)
    assert second.moved_to == server.url("/feeds/demo-rss.xml")
    (req,) = server.requests  # straight to the new URL, with its validators
    assert req.path == "/feeds/demo-rss.xml" and req.header("If-None-Match")
    with Store(db_path) as store:
        (state,) = store.source_states()
    assert state.url == server.url(start)  # the source list stays as written


def test_a_source_redirected_back_to_its_own_url_is_no_longer_moved(server: ScenarioServer,
                                                                    db_path: Path) -> None:
    # A site moves its feed, then moves it back (a migration undone): the address in the
    # source list is right again, and nothing is left for the user to change.
    body = feed_body(server)
    home, new = server.url("/home.xml"), server.url("/new.xml")
    server.script("/home.xml", [ScriptedResponse(status=301, headers=(("Location", new),)),
                                ScriptedResponse(status=200, headers=DEMO_HEADERS, body=body)])
    server.script("/new.xml", [ScriptedResponse(status=200, headers=DEMO_HEADERS, body=body),
                               ScriptedResponse(status=301, headers=(("Location", home),))])
    config = make_config(db_path, {"back": home})
    assert run_fetch(config).get("back").moved_to == new
    again = run_fetch(config, force=True).get("back")
    assert (again.status, again.moved_to) == ("fetched", "")
    with Store(db_path) as store:
        (state,) = store.source_states()
    assert (state.status, state.moved_to, state.request_url) == ("ok", "", home)
    server.clear_log()
    run_fetch(config, force=True)
    assert [r.path for r in server.requests] == ["/home.xml"]


def test_temporary_redirect_is_followed_and_forgotten(server: ScenarioServer,
                                                      db_path: Path) -> None:
    start = "/scenario/redirect?status=302&to=/feeds/demo-rss.xml"
    config = make_config(db_path, {"temp": server.url(start)})
    first = run_fetch(config).get("temp")
    assert (first.status, first.moved_to) == ("fetched", "")
    server.clear_log()
    run_fetch(config, force=True)
    assert server.requests[0].path == start


def test_per_host_limit_holds_with_many_sources(server: ScenarioServer,
                                                db_path: Path) -> None:
    sources = {f"s{i:02d}": server.url(f"/scenario/slow?delay=0.05&n={i}") for i in range(50)}
    config = make_config(db_path, sources, concurrency=20, per_host=2)
    server.reset_peak()
    report = run_fetch(config)
    assert all(r.status == "fetched" for r in report.sources)
    assert server.peak_in_flight == 2


def test_sources_table_and_progress(server: ScenarioServer, tmp_path: Path) -> None:
    config = write_config(tmp_path, {"demo-rss": server.url("/feeds/demo-rss.xml"),
                                     "missing": server.url("/feeds/missing.xml")})
    runner = CliRunner()
    runner.invoke(cli, ["fetch", "--config", str(config)])
    table = runner.invoke(cli, ["sources", "--config", str(config)])
    assert table.exit_code == 0
    lines = table.output.splitlines()
    assert lines[0].split()[:3] == ["id", "status", "last"]
    assert any(line.startswith("missing") and "HTTP 404" in line for line in lines)
    unknown = runner.invoke(cli, ["sources", "--config", str(config), "--reset", "nope"])
    assert unknown.exit_code == 2 and "nope" in unknown.output


def test_progress_only_on_a_terminal(server: ScenarioServer, tmp_path: Path) -> None:
    import os
    import pty
    import subprocess
    import sys

    config = write_config(tmp_path, {f"s{i}": server.url(f"/scenario/slow?delay=0.2&n={i}")
                                     for i in range(6)})
    cmd = [sys.executable, "-m", "signal_feeds", "fetch", "--config", str(config), "--force"]
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=follower, timeout=120,
                              check=False)
        os.close(follower)
        chunks = []
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(leader)
    progress = b"".join(chunks).decode()
    assert proc.returncode == 0
    assert "6/6 sources, 0 failed" in progress
    assert b"sources, 0 failed" not in proc.stdout  # the report itself is on stdout
    quiet = subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=120,
                           check=False)
    assert quiet.stderr == "" and quiet.stdout.startswith("{")


def test_sources_shows_moved(server: ScenarioServer, tmp_path: Path) -> None:
    start = "/scenario/redirect?status=308&to=/feeds/demo-atom.xml"
    config = write_config(tmp_path, {"moving": server.url(start)})
    runner = CliRunner()
    runner.invoke(cli, ["fetch", "--config", str(config)])
    table = runner.invoke(cli, ["sources", "--config", str(config)]).output
    assert f"moved to {server.url('/feeds/demo-atom.xml')}" in table


def test_a_304_to_a_request_without_validators_is_a_failure(server: ScenarioServer,
                                                           db_path: Path) -> None:
    # Some caches answer 304 whatever was asked. With nothing stored, taking it for "no
    # change" would leave the source empty and reported ok for good.
    path = "/always-304.xml"
    server.script(path, [ScriptedResponse(status=304),
                         ScriptedResponse(status=200, headers=(*DEMO_HEADERS,
                                                               ("ETag", '"v1"')),
                                          body=feed_body(server)),
                         ScriptedResponse(status=304)])
    config = make_config(db_path, {"s": server.url(path)})
    first = run_fetch(config, force=True).get("s")
    assert (first.status, first.http_status) == ("failed", 304)
    assert "without validators" in (first.error or "")
    assert server.requests_for(path)[0].header("If-None-Match") is None
    # The next answer is the feed; after it, a 304 to the conditional request is one.
    assert run_fetch(config, force=True).get("s").created == 3
    third = run_fetch(config, force=True).get("s")
    assert (third.status, third.error) == ("not_modified", None)
    assert server.requests_for(path)[2].header("If-None-Match") == '"v1"'
    with Store(db_path) as store:
        assert store.source_state("s", server.url(path)).error_count == 0


def test_a_fetch_row_times_the_request_not_the_wait_for_its_host(
        server: ScenarioServer, db_path: Path) -> None:
    # With one request at a time to the host, the second source waited for the first;
    # its fetch row counted that wait (about 2 s for a 1 s answer).
    sources = {f"s{i}": server.url(f"/scenario/slow?delay=1&n={i}") for i in range(2)}
    run_fetch(make_config(db_path, sources, per_host=1), force=True)
    durations = sorted(d for (d,) in rows(db_path, "SELECT duration_ms FROM fetches"))
    assert len(durations) == 2 and durations[-1] < 1800, durations


def test_a_host_that_asks_for_a_pause_gets_no_more_requests_until_it_ends(
        server: ScenarioServer, tmp_path: Path) -> None:
    # Ten feeds of one rate-limited site: each of the ten got its request and its 429
    # in the same run; the site said to stop after the first.
    for i in range(10):
        server.script(f"/limited/{i}.xml", [ScriptedResponse(
            status=429, headers=(("Retry-After", "3600"),))])
    server.put("/other.xml", feed_body(server))
    sources = {f"feed-{i}": server.url(f"/limited/{i}.xml") for i in range(10)}
    # Another host (the same server by another name) is not paused.
    sources["elsewhere"] = server.url("/other.xml").replace("127.0.0.1", "localhost")
    config = make_config(tmp_path / "signal.db", sources, per_host=1)
    clock = Clock(dt.datetime.now(dt.UTC))  # the command below runs on the real clock
    report = run_fetch(config, force=True, clock=clock)
    asked = [r for r in server.requests if r.path.startswith("/limited/")]
    assert len(asked) == 1
    answered = [r for r in report.sources if r.http_status == 429]
    paused = [r for r in report.sources if r.status == "retry_later" and r.http_status is None]
    assert len(answered) == 1 and len(paused) == 9
    assert all(r.retry_after is not None and r.note.startswith(
        f"not requested: 127.0.0.1 answered 429 to {answered[0].source}") for r in paused)
    assert report.get("elsewhere").status == "fetched"
    # The paused ones were not requested (no fetch row) and wait out the host's pause:
    # another worker on the database must not fetch them meanwhile.
    with Store(tmp_path / "signal.db") as store:
        states = {s.source_id: s for s in store.source_states()}
    until = answered[0].retry_after
    assert {sid for sid, s in states.items() if s.retry_after == until} == {
        f"feed-{i}" for i in range(10)}
    assert rows(tmp_path / "signal.db", "SELECT count(*) FROM fetches WHERE source_id "
                "LIKE 'feed-%'") == [(1,)]

    # A cron job ten minutes later: the hour is not over, so the host is not asked,
    # and the wait is as quiet as a source that is not due (no note, no line).
    clock.advance(600)
    later = run_fetch(config, clock=clock)
    assert len([r for r in server.requests if r.path.startswith("/limited/")]) == 1
    waiting = [r for r in later.sources if r.source.startswith("feed-")]
    assert {r.status for r in waiting} == {"retry_later"}
    assert all(r.note == "" and r.retry_after == answered[0].retry_after for r in waiting)
    assert later.get("elsewhere").status == "not_due"
    # The same through the command (its clock is the real one, inside the hour).
    result = CliRunner().invoke(cli, ["fetch", "--config", str(write_config(
        tmp_path, sources))])
    assert result.exit_code == 0 and "feed-" not in result.output, result.output
    # `signal sources` says why the host's other sources wait (they looked due).
    listed = CliRunner().invoke(cli, ["sources", "--config", str(tmp_path / "signal.toml"),
                                      "--json"])
    table = {r["id"]: r for r in json.loads(listed.output)["sources"]}
    told = answered[0].source
    assert table[told]["host_paused_until"] is None  # its own Retry-After says it
    waiting = [r for sid, r in table.items() if sid.startswith("feed-") and sid != told]
    assert len(waiting) == 9 and all(
        r["note"].startswith(f"waiting: 127.0.0.1 answered 429 to {told} with Retry-After "
                             "until ") and r["host_paused_until"] for r in waiting)
    assert table["elsewhere"]["host_paused_until"] is None

    # The hour over, the host is asked again.
    clock.advance(3600)
    run_fetch(config, clock=clock)
    assert len([r for r in server.requests if r.path.startswith("/limited/")]) > 1


def test_a_forced_run_says_which_sources_a_hosts_pause_kept_it_from_asking(
        server: ScenarioServer, tmp_path: Path) -> None:
    # `signal fetch --force` after another feed of the host was told to wait printed
    # that feed's line alone: the other source, not asked, had no line and no note
    # (one more retry_later in the summary), though --force was asked for.
    server.script("/busy.xml", [ScriptedResponse(status=429,
                                                 headers=(("Retry-After", "3600"),))])
    server.put("/calm.xml", feed_body(server))
    config = write_config(tmp_path, {"calm": server.url("/calm.xml"),
                                     "busy": server.url("/busy.xml")})
    assert CliRunner().invoke(cli, ["fetch", "--config", str(config)]).exit_code == 0
    forced = CliRunner().invoke(cli, ["fetch", "--config", str(config), "--force"])
    assert forced.exit_code == 0
    calm = next(line for line in forced.output.splitlines() if line.startswith("calm "))
    assert calm.endswith(": --force does not override Retry-After (127.0.0.1 answered 429 "
                         "to busy with Retry-After)"), forced.output
    report = json.loads(CliRunner().invoke(
        cli, ["fetch", "--config", str(config), "--force", "--json"]).output)
    assert {r["source"]: r["note"] for r in report["sources"]} == {
        "calm": "--force does not override Retry-After",  # its own pause, stored by now
        "busy": "--force does not override Retry-After"}
    assert len([r for r in server.requests if r.path == "/calm.xml"]) == 1


def test_an_hourly_cron_job_polls_an_hourly_source_every_run(server: ScenarioServer,
                                                            database: Path | str) -> None:
    # Counted from the end of the exchange and with no slack, the next run of an hourly
    # cron job found the source due a moment later: it was skipped ("leased" once the
    # claim refused it), and polled every other hour.
    server.put("/hourly.xml", feed_body(server))
    config = make_config(database, {"hourly": server.url("/hourly.xml")}, min_interval=3600)
    clock = Clock()
    assert run_fetch(config, clock=clock).get("hourly").status == "fetched"
    clock.advance(3600 - 30)  # this run's cron job started a little earlier in its minute
    assert run_fetch(config, clock=clock).get("hourly").status == "not_modified"
    clock.advance(3600 - 90)  # a minute and a half early is early
    assert run_fetch(config, clock=clock).get("hourly").status == "not_due"


def test_a_paused_host_is_not_reached_through_a_redirect_either(server: ScenarioServer,
                                                               tmp_path: Path) -> None:
    # Feeds served from one name and redirected to a rate-limited CDN: the pause was
    # checked against the first host only, and the CDN got every request.
    server.script("/cdn/a.xml", [ScriptedResponse(status=429,
                                                  headers=(("Retry-After", "3600"),))])
    server.put("/cdn/b.xml", feed_body(server))
    cdn = server.url("/cdn/").replace("127.0.0.1", "localhost")
    server.script("/feeds/b.xml", [ScriptedResponse(status=302, headers=(
        ("Location", cdn + "b.xml"),))])
    config = make_config(tmp_path / "signal.db", {"a": cdn + "a.xml",
                                                  "b": server.url("/feeds/b.xml")},
                         concurrency=1)
    report = run_fetch(config, force=True)
    assert report.get("a").http_status == 429
    b = report.get("b")
    assert (b.status, b.http_status) == ("retry_later", None)
    assert b.note == "not requested: localhost answered 429 to a with Retry-After"
    asked = [r.path for r in server.requests if not r.path.startswith("/feeds/demo")]
    assert asked == ["/cdn/a.xml", "/feeds/b.xml"]


def test_a_bare_503_or_429_fails_and_backs_off(server: ScenarioServer, tmp_path: Path) -> None:
    # Without Retry-After the server named no time: reported as retry_later with exit 0,
    # a feed down for good never showed under -q and never failed a run.
    server.script("/down.xml", [ScriptedResponse(status=503)])
    server.script("/busy.xml", [ScriptedResponse(status=429)])
    config = write_config(tmp_path, {"down": server.url("/down.xml"),
                                     "busy": server.url("/busy.xml")})
    result = CliRunner().invoke(cli, ["fetch", "--config", str(config), "-q"])
    assert result.exit_code == 1, result.output
    assert "HTTP 503 Service Unavailable" in result.output
    assert "HTTP 429 Too Many Requests" in result.output
    with Store(tmp_path / "signal.db") as store:
        states = {s.source_id: s for s in store.source_states()}
    assert {s.status for s in states.values()} == {"failed"}
    assert all(s.error_count == 1 and s.retry_after is None for s in states.values())


def test_a_bare_429_leaves_the_hosts_other_feeds_alone_for_the_run(
        server: ScenarioServer, tmp_path: Path) -> None:
    # A rate limiter that names no time (nginx's limit_req answers a bare 429) still
    # says "too many requests": the run went on to ask the site's every other feed,
    # each got its 429 and was backed off.
    for i in range(6):
        server.script(f"/bare-limit/{i}.xml", [ScriptedResponse(status=429)])
    server.put("/elsewhere.xml", feed_body(server))
    sources = {f"feed-{i}": server.url(f"/bare-limit/{i}.xml") for i in range(6)}
    sources["elsewhere"] = server.url("/elsewhere.xml").replace("127.0.0.1", "localhost")
    db = tmp_path / "signal.db"
    config = make_config(db, sources, per_host=1, concurrency=1)
    clock = Clock(dt.datetime.now(dt.UTC))
    report = run_fetch(config, clock=clock)
    asked = [r.path for r in server.requests if r.path.startswith("/bare-limit/")]
    assert asked == ["/bare-limit/0.xml"]
    told = report.get("feed-0")
    assert (told.status, told.http_status) == ("failed", 429)
    paused = [report.get(f"feed-{i}") for i in range(1, 6)]
    assert all((r.status, r.http_status, r.retry_after) == ("retry_later", None, None)
               and r.note == "not requested: 127.0.0.1 answered 429 to feed-0 without "
               "Retry-After; asked again next run" for r in paused), paused
    assert report.get("elsewhere").status == "fetched"
    # Nothing stored for the feeds not asked: no fetch row, no backoff, still due.
    assert rows(db, "SELECT source_id FROM fetches WHERE source_id LIKE 'feed-%'") == [
        ("feed-0",)]
    with Store(db) as store:
        states = {s.source_id: s for s in store.source_states()}
    assert all(states[f"feed-{i}"].error_count == 0 and states[f"feed-{i}"].next_due_at
               is None for i in range(1, 6))
    # `signal sources` holds no pause for them: it lasted the run.
    listed = CliRunner().invoke(cli, ["sources", "--config",
                                      str(write_config(tmp_path, sources)), "--json"])
    assert all(r["host_paused_until"] is None for r in json.loads(listed.output)["sources"])
    # The next run asks the host again (the told feed backs off): one request a run.
    clock.advance(1)
    run_fetch(config, clock=clock)
    asked = [r.path for r in server.requests if r.path.startswith("/bare-limit/")]
    assert asked == ["/bare-limit/0.xml", "/bare-limit/1.xml"]


def test_a_pause_told_through_a_redirect_holds_for_the_host_that_told_it(
        server: ScenarioServer, tmp_path: Path) -> None:
    # The next runs took the pause's host from the source's own address: a feed that a
    # temporary redirect sends to a CDN answering 429 paused its own host, which never
    # asked, and not the CDN, which did.
    cdn = server.url("/cdn/").replace("127.0.0.1", "localhost")
    server.script("/a.xml", [ScriptedResponse(status=302, headers=(
        ("Location", cdn + "a.xml"),))])
    server.script("/cdn/a.xml", [ScriptedResponse(status=429,
                                                  headers=(("Retry-After", "3600"),))])
    server.put("/b.xml", feed_body(server))
    server.put("/cdn/c.xml", feed_body(server))
    config = make_config(tmp_path / "signal.db", {"a": server.url("/a.xml")})
    clock = Clock()
    assert run_fetch(config, clock=clock).get("a").status == "retry_later"
    clock.advance(600)
    both = make_config(tmp_path / "signal.db", {"a": server.url("/a.xml"),
                                                "b": server.url("/b.xml"),
                                                "c": cdn + "c.xml"})
    later = run_fetch(both, clock=clock)
    assert later.get("b").status == "fetched"  # 127.0.0.1 asked for nothing
    assert (later.get("c").status, later.get("c").http_status) == ("retry_later", None)
    assert not [r for r in server.requests if r.path == "/cdn/c.xml"]


def test_a_pause_stored_before_the_host_was_remembered_keeps_its_host(
        server: ScenarioServer, database: Path | str) -> None:
    # A database from before retry_host: the pause fell back to the told source's own
    # address, where a redirect had sent it elsewhere; the last fetch row has the host.
    from conftest import execute

    cdn = server.url("/cdn/").replace("127.0.0.1", "localhost")
    server.script("/a.xml", [ScriptedResponse(status=302, headers=(
        ("Location", cdn + "a.xml"),))])
    server.script("/cdn/a.xml", [ScriptedResponse(status=429,
                                                  headers=(("Retry-After", "3600"),))])
    config = make_config(database, {"a": server.url("/a.xml")})
    clock = Clock(dt.datetime.now(dt.UTC))
    assert run_fetch(config, clock=clock).get("a").status == "retry_later"
    # Back to what the schema before it held (SQLite 12, PostgreSQL 7).
    execute(database, "ALTER TABLE sources DROP COLUMN retry_host")
    execute(database, "ALTER TABLE sources DROP COLUMN cache_headers")
    if isinstance(database, str):
        execute(database, "UPDATE schema_version SET version = 7")
    else:
        execute(database, "PRAGMA user_version = 12")
    with open_store(database) as store:
        assert store.source_state("a", server.url("/a.xml")).retry_host == "localhost"


def test_resetting_the_told_source_ends_its_hosts_pause_for_all(
        server: ScenarioServer, database: Path | str) -> None:
    # The host's other sources keep the pause as their own Retry-After (so that other
    # workers leave them alone); `sources --reset` of the told source left them waiting.
    server.script("/t.xml", [ScriptedResponse(status=429,
                                              headers=(("Retry-After", "3600"),)),
                             ScriptedResponse(status=200, headers=DEMO_HEADERS,
                                              body=feed_body(server))])
    server.put("/s.xml", feed_body(server))
    sources = {"t": server.url("/t.xml"), "s": server.url("/s.xml")}
    config = make_config(database, sources, concurrency=1, per_host=1)
    first = run_fetch(config)
    assert (first.get("t").http_status, first.get("s").status) == (429, "retry_later")
    with open_store(database) as store:
        assert store.source_state("s", sources["s"]).retry_after is not None
        assert store.reset_source("t")
        assert store.source_state("s", sources["s"]).retry_after is None
    again = run_fetch(config)
    assert again.get("s").status == "fetched"


def test_a_run_over_some_sources_keeps_the_pause_another_was_told(
        server: ScenarioServer, tmp_path: Path) -> None:
    # `signal fetch --source s` after `--source t` was told 429: the run read only s's
    # state, knew nothing of the pause, and asked the host again within its hour.
    server.script("/t.xml", [ScriptedResponse(status=429,
                                              headers=(("Retry-After", "3600"),))])
    server.put("/s.xml", feed_body(server))
    sources = {"t": server.url("/t.xml"), "s": server.url("/s.xml")}
    config = make_config(tmp_path / "signal.db", sources)
    clock = Clock(dt.datetime.now(dt.UTC))
    told = run_fetch(config, source_ids=["t"], clock=clock).get("t")
    assert told.http_status == 429
    clock.advance(60)
    later = run_fetch(config, source_ids=["s"], force=True, clock=clock).get("s")
    # Waited out as quietly as in a run over every source (told in an earlier run).
    assert (later.status, later.http_status, later.retry_after) == (
        "retry_later", None, told.retry_after)
    assert [r.path for r in server.requests if r.path in ("/t.xml", "/s.xml")] == ["/t.xml"]


def test_a_304_without_cache_control_keeps_the_max_age_its_200_gave(
        server: ScenarioServer, database: Path | str) -> None:
    # RFC 9111 §4.3.4: a 304 freshens the stored response; headers it does not repeat
    # stay. The source was polled again after min_interval (an hour), not two.
    import datetime as dt

    body = feed_body(server)
    server.script("/cc.xml", [
        ScriptedResponse(status=200, headers=(*DEMO_HEADERS, ("ETag", '"v1"'),
                                              ("Cache-Control", "max-age=7200")), body=body),
        ScriptedResponse(status=304, headers=(("ETag", '"v1"'),)),
        ScriptedResponse(status=304, headers=(("ETag", '"v1"'),
                                              ("Cache-Control", "max-age=10800")))])
    config = make_config(database, {"cc": server.url("/cc.xml")}, min_interval=3600.0)
    clock = Clock()
    for status, wait in (("fetched", 2), ("not_modified", 2), ("not_modified", 3)):
        rep = run_fetch(config, clock=clock, force=True).get("cc")
        assert rep.status == status, rep
        assert rep.next_due is not None
        assert abs(rep.next_due - (clock.now + dt.timedelta(hours=wait))).total_seconds() < 5
        clock.advance(60)
    with open_store(database) as store:
        assert store.source_state("cc", server.url("/cc.xml")).cache_headers == (
            ("cache-control", "max-age=10800"),)


def test_a_raised_min_interval_holds_from_the_next_run(server: ScenarioServer,
                                                       database: Path | str) -> None:
    # A host asked for fewer requests, and min_interval went from an hour to six. The
    # next poll had been scheduled under the old hour: a cron job every five minutes
    # polled it again an hour after the last request, and only then every six.
    server.put("/asked.xml", feed_body(server))
    url = server.url("/asked.xml")
    clock = Clock()
    polled: list[float] = []

    def cron(hours: float, min_interval: float) -> None:
        config = make_config(database, {"asked": url}, min_interval=min_interval)
        end = clock.now + dt.timedelta(hours=hours)
        while clock.now < end:
            rep = run_fetch(config, clock=clock).get("asked")
            if rep.status != "not_due":
                polled.append((clock.now - Clock().now).total_seconds() / 3600)
            clock.advance(300)

    cron(2.5, 3600.0)  # polled at 0, 1 and 2 hours
    with open_store(database) as store:
        assert store.source_state("asked", url).next_due_at == Clock().now + dt.timedelta(
            hours=3)
    # `signal sources` says when the next run will poll it, under the new setting.
    from signal_feeds.run.source_status import source_table

    raised = make_config(database, {"asked": url}, min_interval=6 * 3600.0)
    (row,) = source_table(raised)
    assert row["next_due_at"] == "2026-12-02T20:00:00.000000Z"
    cron(9.5, 6 * 3600.0)  # the last request was at 2 h: next at 8 h, then 14 h
    assert polled == [0, 1, 2, 8]
    assert len(server.requests_for("/asked.xml")) == 4


def test_sources_says_its_times_are_utc(server: ScenarioServer, tmp_path: Path) -> None:
    # The table cut the "Z" off its UTC times: in New York, "next due 13:00:07" read as
    # local time was five hours off.
    config = write_config(tmp_path, {"demo-rss": server.url("/feeds/demo-rss.xml")})
    runner = CliRunner()
    runner.invoke(cli, ["fetch", "--config", str(config)])
    (row,) = json.loads(runner.invoke(cli, ["sources", "--config", str(config),
                                            "--json"]).output)["sources"]
    line = runner.invoke(cli, ["sources", "--config", str(config)]).output.splitlines()[1]
    for column in ("last_fetch_at", "next_due_at"):
        assert row[column][:19] + "Z" in line.split(), (column, line)
