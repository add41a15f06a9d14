"""The status table through ``httpx.MockTransport``: what each answer means for a source.

No socket matters here, so no server: the transport answers from a table, as a library
user's own tests would (README, "Testing with httpx.MockTransport").
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from email.utils import format_datetime
from pathlib import Path

import httpx
import pytest
from conftest import FIXTURES, Clock, make_config

from signal_feeds import fetch_sources, run_fetch

FEED = (FIXTURES / "demo-rss.xml").read_bytes()
RSS = {"Content-Type": "application/rss+xml", "ETag": '"v1"'}
URL = "https://feeds.example/feed.xml"

Handler = Callable[[httpx.Request], httpx.Response]


def table(answers: dict[str, httpx.Response]) -> tuple[httpx.MockTransport, list[str]]:
    """A transport answering by URL; records every URL asked, in order."""
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return answers.get(str(request.url), httpx.Response(404))

    return httpx.MockTransport(handle), seen


def moved(status: int, to: str) -> httpx.Response:
    return httpx.Response(status, headers={"Location": to})


def test_200_then_304_with_the_validators_sent_back(db_path: Path) -> None:
    requests: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        if request.headers.get("If-None-Match") == '"v1"':
            return httpx.Response(304, headers={"ETag": '"v1"'})
        return httpx.Response(200, headers=RSS, content=FEED)

    config = make_config(db_path, {"s": URL})
    transport = httpx.MockTransport(handle)
    first = run_fetch(config, force=True, transport=transport).get("s")
    assert (first.status, first.http_status, first.created) == ("fetched", 200, 3)
    second = run_fetch(config, force=True, transport=transport).get("s")
    assert (second.status, second.http_status) == ("not_modified", 304)
    assert requests[0].headers.get("If-None-Match") is None
    assert "signal" in requests[0].headers["User-Agent"].lower()


@pytest.mark.parametrize(("statuses", "outcome"), [
    ((301,), "moved"), ((308,), "moved"), ((301, 308), "moved"),
    ((302,), "fetched"), ((307,), "fetched"), ((301, 302), "moved"), ((302, 301), "fetched"),
])
def test_redirect_chains(db_path: Path, statuses: tuple[int, ...], outcome: str) -> None:
    hops = [f"https://hop{i}.example/feed.xml" for i in range(len(statuses))] + [
        "https://final.example/feed.xml"]
    answers = {hops[i]: moved(status, hops[i + 1]) for i, status in enumerate(statuses)}
    answers[hops[-1]] = httpx.Response(200, headers=RSS, content=FEED)
    transport, seen = table(answers)
    rep = run_fetch(make_config(db_path, {"s": hops[0]}), force=True,
                    transport=transport).get("s")
    assert (rep.status, rep.created) == (outcome, 3), rep
    assert seen == hops
    # Only an unbroken run of permanent redirects from the start moves the source.
    permanent = 0
    for status in statuses:
        if status not in (301, 308):
            break
        permanent += 1
    assert rep.moved_to == (hops[permanent] if permanent else "")


@pytest.mark.parametrize(("status", "outcome", "error"), [
    (401, "failed", "HTTP 401 Unauthorized: the feed asks for a login, and Signal sends none"),
    (404, "failed", "HTTP 404 Not Found"),
    (410, "gone", "410 Gone"),
    (500, "failed", "HTTP 500 Internal Server Error"),
])
def test_error_statuses(db_path: Path, status: int, outcome: str, error: str) -> None:
    transport, _ = table({URL: httpx.Response(status)})
    rep = run_fetch(make_config(db_path, {"s": URL}), force=True, transport=transport).get("s")
    assert (rep.status, rep.http_status) == (outcome, status)
    assert error in rep.error


@pytest.mark.parametrize("status", [429, 503])
@pytest.mark.parametrize("as_date", [False, True])
def test_retry_after(db_path: Path, status: int, as_date: bool) -> None:
    clock = Clock()
    when = clock.now + dt.timedelta(seconds=120)
    value = format_datetime(when, usegmt=True) if as_date else "120"
    transport, seen = table({URL: httpx.Response(status, headers={"Retry-After": value})})
    config = make_config(db_path, {"s": URL})
    rep = run_fetch(config, clock=clock, force=True, transport=transport).get("s")
    assert (rep.status, rep.http_status, rep.retry_after) == ("retry_later", status, when)
    clock.advance(60)
    again = run_fetch(config, clock=clock, force=True, transport=transport).get("s")
    assert again.status == "retry_later" and len(seen) == 1  # not asked again before it


@pytest.mark.parametrize("private", ["127.0.0.1", "10.0.0.7", "[::1]", "169.254.169.254"])
def test_redirect_to_a_private_address_is_refused(db_path: Path, private: str) -> None:
    target = f"http://{private}/latest/meta-data/"
    transport, seen = table({URL: moved(302, target)})
    rep = run_fetch(make_config(db_path, {"s": URL}), force=True, transport=transport).get("s")
    assert rep.status == "failed"
    assert f"private or loopback one ({private.strip('[]')}) refused" in rep.error, rep.error
    assert seen == [URL]  # the private address was never asked


def test_redirect_loop(db_path: Path) -> None:
    other = "https://feeds.example/other.xml"
    transport, seen = table({URL: moved(302, other), other: moved(302, URL)})
    rep = run_fetch(make_config(db_path, {"s": URL}), force=True, transport=transport).get("s")
    assert rep.status == "failed" and f"redirect loop at {URL}" in rep.error
    assert seen == [URL, other]


def test_too_many_redirects(db_path: Path) -> None:
    hops = [f"https://feeds.example/{i}.xml" for i in range(8)]
    transport, seen = table({hops[i]: moved(302, hops[i + 1]) for i in range(7)})
    rep = run_fetch(make_config(db_path, {"s": hops[0]}, max_redirects=3), force=True,
                    transport=transport).get("s")
    assert rep.status == "failed" and "more than 3 redirects" in rep.error
    assert len(seen) == 4


BAD_LOCATIONS = [
    ("javascript:alert(1)", "redirect to a non-http(s) URL 'javascript:alert(1)' refused"),
    ("data:text/plain,hi", "redirect to a non-http(s) URL 'data:text/plain,hi' refused"),
    ("ftp://files.example/feed.xml",
     "redirect to a non-http(s) URL 'ftp://files.example/feed.xml' refused"),
    ("http://[::1", "redirect to an invalid URL 'http://[::1'"),
]


@pytest.mark.parametrize(("location", "error"), BAD_LOCATIONS)
def test_a_redirect_signal_does_not_follow_is_refused_by_name(
        db_path: Path, location: str, error: str) -> None:
    # The messages a run against a real server gives (tests/test_hostile_http.py): a
    # MockTransport must not change an outcome.
    transport, seen = table({URL: moved(302, location)})
    rep = run_fetch(make_config(db_path, {"s": URL}), force=True,
                    transport=transport).get("s")
    assert (rep.status, rep.error) == ("failed", error)
    assert seen == [URL]


@pytest.mark.parametrize(("location", "error"), BAD_LOCATIONS)
def test_through_a_ready_client_such_a_redirect_is_refused_too(
        db_path: Path, location: str, error: str) -> None:
    # httpx's client parses the Location first (and fails on some); the report still
    # says that the redirect was refused, not that the source's own URL is invalid.
    transport, _ = table({URL: moved(302, location)})
    client = httpx.AsyncClient(transport=transport)
    rep = run_fetch(make_config(db_path, {"s": URL}), force=True, client=client).get("s")
    assert rep.status == "failed" and rep.error.startswith("redirect to "), rep.error
    assert URL not in rep.error


def test_a_ready_client_is_used_and_closed_with_the_calls_event_loop(db_path: Path) -> None:
    # Left open, its idle connections stayed open after the loop they belong to ended:
    # nothing could use them again (the client is refused for another call).
    transport, seen = table({URL: httpx.Response(200, headers=RSS, content=FEED)})
    client = httpx.AsyncClient(transport=transport)
    rep = run_fetch(make_config(db_path, {"s": URL}), force=True, client=client).get("s")
    assert (rep.status, rep.created) == ("fetched", 3)
    assert seen == [URL] and client.is_closed


def test_awaited_runs_leave_the_callers_client_open(db_path: Path) -> None:
    transport, seen = table({URL: httpx.Response(200, headers=RSS, content=FEED)})

    async def twice() -> bool:
        async with httpx.AsyncClient(transport=transport) as client:
            for _ in range(2):
                await fetch_sources(make_config(db_path, {"s": URL}), force=True,
                                    client=client)
            return client.is_closed

    assert asyncio.run(twice()) is False
    assert seen == [URL, URL]


def test_the_readme_mock_transport_example_runs_as_printed(tmp_path: Path) -> None:
    """The README's "Testing with httpx.MockTransport" block, run as a user would paste
    it: a fresh interpreter in a folder with a signal.toml and a feed.xml, with Python's
    development mode on so that a leaked file or socket shows up on stderr."""
    import re
    import subprocess
    import sys

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text("utf-8")
    section = readme.split("### Testing with httpx.MockTransport", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found is not None, "the README section has no Python block"
    (tmp_path / "feed.xml").write_bytes(FEED)
    (tmp_path / "signal.toml").write_text(
        '[[sources]]\nid = "rss"\nurl = "https://feeds.example/feed.xml"\n\n'
        '[[sources]]\nid = "plain"\nurl = "http://blog.example/rss"\n', encoding="utf-8")
    proc = subprocess.run([sys.executable, "-X", "dev", "-c", found.group(1)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    # Development mode also turns on asyncio's debug mode, which reports each step of
    # the loop that took over 0.1 s: on a loaded machine, not a leak.
    stderr = re.sub(r"(?m)^Executing <.*> took \d+\.\d+ seconds\n", "", proc.stderr)
    assert (proc.returncode, stderr) == (0, ""), stderr[-3000:]


def test_a_permanent_redirect_to_plain_http_is_followed_but_not_adopted(db_path: Path) -> None:
    # It was adopted silently: every later poll of the reviewed https source went out
    # unencrypted. The https hops before the downgrade still count as a move.
    hops = ["https://old.example/feed.xml", "https://new.example/feed.xml",
            "http://new.example/feed.xml"]
    transport, seen = table({hops[0]: moved(301, hops[1]), hops[1]: moved(301, hops[2]),
                             hops[2]: httpx.Response(200, headers=RSS, content=FEED)})
    config = make_config(db_path, {"s": hops[0]})
    rep = run_fetch(config, force=True, transport=transport).get("s")
    assert (rep.status, rep.created, rep.moved_to) == ("moved", 3, hops[1])
    assert rep.warnings == (f"redirected from https to plain http ({hops[2]}): "
                            "the feed came unencrypted",)
    again = run_fetch(config, force=True, transport=transport).get("s")
    assert again.moved_to == hops[1] and seen[3:] == hops[1:]  # from the https address
    assert again.warnings == rep.warnings


def test_a_ready_client_serves_one_run_fetch_and_is_refused_after(db_path: Path) -> None:
    # Each run_fetch call has an event loop of its own, and the client's connections
    # stay bound to the first one: the second call failed every source with "internal
    # error: RuntimeError: Event loop is closed" (against a server that keeps
    # connections alive), and the third worked again.
    transport, _ = table({URL: httpx.Response(200, headers=RSS, content=FEED)})
    client = httpx.AsyncClient(transport=transport)
    config = make_config(db_path, {"s": URL})
    assert run_fetch(config, force=True, client=client).get("s").status == "fetched"
    with pytest.raises(ValueError, match="served a run_fetch call already"):
        run_fetch(config, force=True, client=client)
    # A transport serves any number of calls.
    for _ in range(2):
        assert run_fetch(config, force=True, transport=transport).get("s").status in (
            "fetched", "unchanged")
