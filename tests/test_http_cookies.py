"""Cookies set along a redirect chain: sent on its later hops, never kept (real HTTP,
pytest-httpserver)."""

from __future__ import annotations

from pathlib import Path

from conftest import make_config
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from signal_feeds import run_fetch

RSS = (b'<?xml version="1.0"?><rss version="2.0"><channel><title>T</title>'
       b"<item><guid>a</guid><title>Hello</title></item></channel></rss>")


def cookie_check(request: Request) -> Response:
    """A site that answers only a client holding its cookie, and hands it out with a
    redirect back to the same address."""
    if request.cookies.get("seen") == "1":
        return Response(RSS, content_type="application/rss+xml")
    return Response(status=302, headers={"Location": request.path,
                                         "Set-Cookie": "seen=1; Path=/; HttpOnly"})


def cookies_sent(server: HTTPServer) -> list[str]:
    return [request.headers.get("Cookie", "") for request, _ in server.log]


def test_a_cookie_check_redirect_is_followed_with_its_cookie(httpserver: HTTPServer,
                                                             tmp_path: Path) -> None:
    httpserver.expect_request("/feed").respond_with_handler(cookie_check)
    config = make_config(tmp_path / "s.db", {"site": httpserver.url_for("/feed")})
    report = run_fetch(config, force=True)
    (source,) = report.sources
    assert (source.status, source.created, source.error) == ("fetched", 1, None)
    assert cookies_sent(httpserver) == ["", "seen=1"]
    # Nothing is kept: the next run asks without the cookie and is sent through again.
    run_fetch(config, force=True)
    assert cookies_sent(httpserver) == ["", "seen=1", "", "seen=1"]


def test_a_cookie_goes_only_to_the_host_that_set_it(httpserver: HTTPServer,
                                                    tmp_path: Path) -> None:
    other = httpserver.url_for("/feed").replace("localhost", "127.0.0.1")
    assert other != httpserver.url_for("/feed")
    httpserver.expect_request("/start").respond_with_response(Response(
        status=302, headers={"Location": other, "Set-Cookie": "token=secret; Path=/"}))
    httpserver.expect_request("/feed").respond_with_data(RSS,
                                                         content_type="application/rss+xml")
    config = make_config(tmp_path / "s.db", {"site": httpserver.url_for("/start")})
    (source,) = run_fetch(config, force=True).sources
    assert source.status == "fetched"
    assert cookies_sent(httpserver) == ["", ""]


def test_a_cookie_that_never_satisfies_the_site_ends_at_the_redirect_limit(
        httpserver: HTTPServer, tmp_path: Path) -> None:
    httpserver.expect_request("/feed").respond_with_response(Response(
        status=302, headers={"Location": "/feed", "Set-Cookie": "seen=1; Path=/"}))
    config = make_config(tmp_path / "s.db", {"site": httpserver.url_for("/feed")},
                         max_redirects=3)
    (source,) = run_fetch(config, force=True).sources
    assert source.status == "failed"
    assert source.error == "more than 3 redirects"
    assert len(httpserver.log) == 4


def test_a_redirect_back_without_a_cookie_is_still_a_loop(httpserver: HTTPServer,
                                                          tmp_path: Path) -> None:
    httpserver.expect_request("/feed").respond_with_response(Response(
        status=302, headers={"Location": "/feed"}))
    config = make_config(tmp_path / "s.db", {"site": httpserver.url_for("/feed")})
    (source,) = run_fetch(config, force=True).sources
    assert source.status == "failed"
    assert source.error is not None and source.error.startswith("redirect loop at ")
    assert len(httpserver.log) == 1


def test_a_permanent_cookie_check_back_to_the_same_address_is_not_a_move(
        httpserver: HTTPServer, tmp_path: Path) -> None:
    def permanent_check(request: Request) -> Response:
        if request.cookies.get("seen") == "1":
            return Response(RSS, content_type="application/rss+xml")
        return Response(status=301, headers={"Location": request.path,
                                             "Set-Cookie": "seen=1; Path=/"})

    httpserver.expect_request("/feed").respond_with_handler(permanent_check)
    config = make_config(tmp_path / "s.db", {"site": httpserver.url_for("/feed")})
    (source,) = run_fetch(config, force=True).sources
    assert (source.status, source.moved_to) == ("fetched", "")
