"""The scenario server the tests use (tests/scenario_server.py), over real HTTP on
127.0.0.1: put() options, scripts, the request log and counters, and every scenario."""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from conftest import FIXTURES
from scenario_server import RequestRecord, ScenarioServer, ScriptedResponse


@pytest.fixture
def client(server: ScenarioServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=10.0) as c:
        yield c


# -- paths and put() options ----------------------------------------------------------------


def test_unknown_path_is_404(client: httpx.Client) -> None:
    assert client.get("/feeds/nope.xml").status_code == 404
    assert client.get("/scenario/nope").status_code == 404


def test_put_options_and_extra_headers_on_304(server: ScenarioServer, client: httpx.Client) -> None:
    server.put(
        "/plain",
        b"hello",
        content_type="text/plain",
        last_modified=False,
        headers={"Cache-Control": "max-age=60"},
    )
    first = client.get("/plain")
    assert first.headers["content-type"] == "text/plain"
    assert "last-modified" not in first.headers
    again = client.get("/plain", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304
    assert again.headers["cache-control"] == "max-age=60"

    server.put("/noetag", b"<feed/>", etag=False)
    response = client.get("/noetag")
    assert response.headers["content-type"] == "application/atom+xml; charset=utf-8"
    assert "etag" not in response.headers
    assert client.get("/noetag", headers={"If-None-Match": '"x"'}).status_code == 200


def test_rotate_etag(server: ScenarioServer, client: httpx.Client) -> None:
    server.put("/rot.xml", b"<rss/>", rotate_etag=True)
    etags = []
    etag = ""
    for _ in range(3):
        response = client.get("/rot.xml", headers={"If-None-Match": etag} if etag else {})
        assert response.status_code == 200
        assert response.content == b"<rss/>"
        etag = response.headers["etag"]
        etags.append(etag)
    assert len(set(etags)) == 3

    scenario = [client.get("/scenario/rotating-etag") for _ in range(2)]
    assert scenario[0].headers["etag"] != scenario[1].headers["etag"]
    assert scenario[0].content == scenario[1].content


def test_validator_variants(client: httpx.Client) -> None:
    etag_only = client.get("/scenario/etag-only")
    assert "etag" in etag_only.headers and "last-modified" not in etag_only.headers
    revalidated = client.get(
        "/scenario/etag-only", headers={"If-None-Match": etag_only.headers["etag"]}
    )
    assert revalidated.status_code == 304

    lm_only = client.get("/scenario/last-modified-only")
    assert "etag" not in lm_only.headers and "last-modified" in lm_only.headers
    revalidated = client.get(
        "/scenario/last-modified-only",
        headers={"If-Modified-Since": lm_only.headers["last-modified"]},
    )
    assert revalidated.status_code == 304

    none = client.get("/scenario/no-validators")
    assert "etag" not in none.headers and "last-modified" not in none.headers
    assert none.content == (FIXTURES / "demo-rss.xml").read_bytes()


def test_cache_and_expires_scenarios(client: httpx.Client) -> None:
    cached = client.get("/scenario/cache?max_age=600&age=100")
    assert cached.headers["cache-control"] == "max-age=600"
    assert cached.headers["age"] == "100"
    not_modified = client.get(
        "/scenario/cache?max_age=600&age=100", headers={"If-None-Match": cached.headers["etag"]}
    )
    assert not_modified.status_code == 304
    assert not_modified.headers["cache-control"] == "max-age=600"

    expires = client.get("/scenario/expires?in=3600")
    assert expires.status_code == 200
    assert expires.headers["expires"].endswith(" GMT")


# -- scripts and the log --------------------------------------------------------------------


def test_script_takes_responses_in_turn_and_repeats_the_last(
    server: ScenarioServer, client: httpx.Client
) -> None:
    server.script(
        "/scripted",
        [
            ScriptedResponse(status=503, headers=(("Retry-After", "5"),), body=b"busy"),
            ScriptedResponse(delay=0.2, body=b"<rss/>", headers=(("X-Step", "2"),)),
            ScriptedResponse(status=404),
        ],
    )
    first = client.get("/scripted")
    assert (first.status_code, first.headers["retry-after"], first.content) == (503, "5", b"busy")
    started = time.monotonic()
    second = client.get("/scripted")
    assert time.monotonic() - started >= 0.2
    assert (second.status_code, second.headers["x-step"], second.content) == (200, "2", b"<rss/>")
    assert [client.get("/scripted").status_code for _ in range(3)] == [404, 404, 404]
    assert len(server.requests_for("/scripted")) == 5


def test_request_log_keeps_headers_as_received(
    server: ScenarioServer, client: httpx.Client
) -> None:
    first = client.get("/feeds/demo-rss.xml")
    server.clear_log()
    client.get(
        "/feeds/demo-rss.xml?x=1",
        headers={
            "If-None-Match": first.headers["etag"],
            "If-Modified-Since": first.headers["last-modified"],
            "X-Odd-Case": 'W/"a b",  c',
        },
    )
    client.head("/feeds/demo-atom.xml")
    records = server.requests
    assert [(r.method, r.path) for r in records] == [
        ("GET", "/feeds/demo-rss.xml?x=1"),
        ("HEAD", "/feeds/demo-atom.xml"),
    ]
    record = records[0]
    assert isinstance(record, RequestRecord)
    assert record.headers["If-None-Match"] == first.headers["etag"]
    assert record.headers["If-Modified-Since"] == first.headers["last-modified"]
    assert record.headers["X-Odd-Case"] == 'W/"a b",  c'
    assert record.header("if-none-match") == first.headers["etag"]
    assert record.started <= record.finished < math.inf
    assert records[0].finished <= records[1].started
    assert [r.path for r in server.requests_for("/feeds/demo-rss.xml")] == [
        "/feeds/demo-rss.xml?x=1"
    ]
    assert server.requests_for("/feeds/demo-rss.xml?x=2") == []
    server.clear_log()
    assert server.requests == []


def test_peak_in_flight_counts_concurrent_requests(
    server: ScenarioServer, client: httpx.Client
) -> None:
    client.get("/feeds/demo-rss.xml")
    server.clear_log()
    assert server.peak_in_flight == 0
    client.get("/scenario/slow?delay=0.05")
    assert server.peak_in_flight == 1

    server.reset_peak()
    with ThreadPoolExecutor(max_workers=4) as pool:
        statuses = list(
            pool.map(lambda i: client.get(f"/scenario/slow?delay=0.5&n={i}").status_code, range(4))
        )
    assert statuses == [200] * 4
    assert server.peak_in_flight == 4
    slow = [r for r in server.requests if r.path.startswith("/scenario/slow?delay=0.5")]
    assert len(slow) == 4
    # All four overlapped: each started before any of them finished.
    assert max(r.started for r in slow) < min(r.finished for r in slow)

    server.reset_peak()
    for _ in range(3):
        client.get("/scenario/slow?delay=0.01")
    assert server.peak_in_flight == 1


# -- statuses and redirects -----------------------------------------------------------------


def test_status_429_with_retry_after(client: httpx.Client) -> None:
    response = client.get("/scenario/status/429?retry_after=120")
    assert response.status_code == 429
    assert response.headers["retry-after"] == "120"
    date = "Wed, 21 Oct 2026 07:28:00 GMT"
    response = client.get("/scenario/status/503", params={"retry_after": date})
    assert response.status_code == 503
    assert response.headers["retry-after"] == date
    gone = client.get("/scenario/status/410")
    assert gone.status_code == 410
    ok = client.get("/scenario/status/200?cache_control=max-age%3D30&age=5&expires=0")
    assert ok.content == (FIXTURES / "demo-rss.xml").read_bytes()
    assert (ok.headers["cache-control"], ok.headers["age"], ok.headers["expires"]) == (
        "max-age=30",
        "5",
        "0",
    )
    assert client.get("/scenario/status/abc").status_code == 400


def test_redirect_chain(server: ScenarioServer, client: httpx.Client) -> None:
    response = client.get(
        "/scenario/redirect-chain?statuses=301,308&to=/feeds/demo-atom.xml",
        follow_redirects=True,
    )
    assert response.status_code == 200
    assert [h.status_code for h in response.history] == [301, 308]
    assert len({str(h.url) for h in response.history}) == 2
    assert str(response.url) == server.url("/feeds/demo-atom.xml")
    assert response.content == (FIXTURES / "demo-atom.xml").read_bytes()

    single = client.get("/scenario/redirect?status=308&to=/feeds/demo-rss.xml")
    assert single.status_code == 308
    assert single.headers["location"] == "/feeds/demo-rss.xml"
    absolute = server.url("/feeds/demo-rss.xml")
    assert client.get("/scenario/redirect", params={"to": absolute}).headers[
        "location"
    ] == absolute


def test_redirect_loop_and_verbatim_location(client: httpx.Client) -> None:
    with pytest.raises(httpx.TooManyRedirects):
        client.get("/scenario/redirect-loop", follow_redirects=True)
    response = client.get("/scenario/redirect-to?location=file:///etc/passwd")
    assert 300 <= response.status_code < 400
    assert response.headers["location"] == "file:///etc/passwd"


def test_flaky_fails_n_times_then_succeeds(client: httpx.Client) -> None:
    path = "/scenario/flaky?fail=2&status=503"
    assert [client.get(path).status_code for _ in range(4)] == [503, 503, 200, 200]
    # Counted per full path and query: another query starts its own count.
    assert client.get("/scenario/flaky?fail=1&status=500").status_code == 500


# -- bounds ---------------------------------------------------------------------------------


def test_oversized_stops_sending_when_the_client_closes(server: ScenarioServer) -> None:
    size = 64 * 1024 * 1024
    received = 0
    with httpx.Client(timeout=10.0) as c, c.stream(
        "GET", server.url(f"/scenario/oversized?size={size}")
    ) as response:
        assert response.headers["content-length"] == str(size)
        for chunk in response.iter_raw():
            if received == 0:
                assert chunk.startswith(b'<?xml version="1.0"')
            received += len(chunk)
            if received >= 256 * 1024:
                break
    assert server.wait_idle(10.0)
    sent = server.bytes_sent("/scenario/oversized")
    assert received <= sent < size // 4


def test_oversized_small_body_is_complete_xml(client: httpx.Client) -> None:
    body = client.get("/scenario/oversized?size=200000").content
    assert len(body) == 200000
    assert body.startswith(b"<?xml") and body.endswith(b"</rss>\n")


def test_gzip_bomb_inflates_to_size(server: ScenarioServer) -> None:
    size = 32 * 1024 * 1024
    with httpx.Client(timeout=10.0) as c, c.stream(
        "GET", server.url(f"/scenario/gzip-bomb?size={size}")
    ) as response:
        assert response.headers["content-encoding"] == "gzip"
        compressed = b"".join(response.iter_raw())  # still compressed
    assert len(compressed) < size // 100
    inflater = zlib.decompressobj(31)
    total = 0
    data = memoryview(compressed)
    for start in range(0, len(data), 4096):
        total += len(inflater.decompress(data[start : start + 4096], 1 << 20))
        while inflater.unconsumed_tail:
            total += len(inflater.decompress(inflater.unconsumed_tail, 1 << 20))
    total += len(inflater.flush())
    assert total == size
    assert zlib.decompressobj(31).decompress(compressed, 64).startswith(b"<?xml")


def test_trickle_sends_slowly(client: httpx.Client) -> None:
    started = time.monotonic()
    response = client.get("/scenario/trickle?interval=0.05&size=6")
    assert response.content == (FIXTURES / "demo-rss.xml").read_bytes()[:6]
    assert time.monotonic() - started >= 0.25


def test_trickle_triggers_a_read_timeout_and_stops_early(server: ScenarioServer) -> None:
    with httpx.Client(timeout=httpx.Timeout(5.0, read=0.3)) as c, pytest.raises(
        httpx.ReadTimeout
    ):
        c.get(server.url("/scenario/trickle?interval=0.5&size=50"))
    assert server.wait_idle(5.0)
    assert server.bytes_sent("/scenario/trickle") < 5
    assert server.requests_for("/scenario/trickle")[0].finished < math.inf


def test_broken_responses(client: httpx.Client) -> None:
    with pytest.raises(httpx.TransportError):
        client.get("/scenario/reset")
    with pytest.raises(httpx.RemoteProtocolError):
        client.get("/scenario/wrong-length")
    assert client.get("/scenario/empty").content == b""
    html = client.get("/scenario/html")
    assert html.headers["content-type"].startswith("text/html")
    malformed = client.get("/scenario/malformed")
    assert malformed.content == (FIXTURES / "variants" / "malformed.xml").read_bytes()


def test_stop_ends_slow_requests_and_open_connections() -> None:
    server = ScenarioServer().start()
    with httpx.Client(timeout=60.0) as c:
        c.get(server.url("/feeds/demo-rss.xml"))  # leaves a keep-alive connection open
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(c.get, server.url("/scenario/slow?delay=30"))
            deadline = time.monotonic() + 10
            while server.in_flight == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            server.stop()
            # Without stop() ending it, the slow request would be answered with a 200.
            with pytest.raises(httpx.TransportError):
                pending.result()
