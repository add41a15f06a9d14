"""Conditional GET against the way Apache httpd answers (real HTTP, pytest-httpserver).

The handlers below repeat, header for header, what Apache 2.4 (checked on 2.4.68,
Debian's default configuration) was seen to send; Apache itself is not needed.
"""

from __future__ import annotations

import gzip
from pathlib import Path

from conftest import Clock, make_config, query
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from signal_feeds import run_fetch

RSS = ('<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>T</title>'
       "<item><guid>a</guid><title>Crème</title><link>https://blog.example/a</link></item>"
       "<item><guid>b</guid><title>Brûlée</title><link>https://blog.example/b</link></item>"
       "</channel></rss>").encode()
#: Apache's default FileETag: size and modification time, in hex.
FILE_ETAG = '"97bd-6620e193c9cb1"'
LAST_MODIFIED = "Mon, 07 Dec 2026 16:55:52 GMT"


def mod_deflate(request: Request) -> Response:
    """A static feed behind mod_deflate with ``DeflateAlterETag AddSuffix`` (the default).

    The compressed 200 carries the file's ETag with ``-gzip`` appended, but
    ``If-None-Match`` is compared with the file's own ETag, so the suffixed tag the
    client sends back never matches and every such request gets the whole body again
    (Apache bug 45023). ``If-None-Match`` wins over ``If-Modified-Since``; alone, the
    date earns a 304, whose ETag is the unsuffixed one (a 304 is not compressed).
    """
    not_modified = Response(status=304, headers={"ETag": FILE_ETAG,
                                                 "Last-Modified": LAST_MODIFIED})
    if_none_match = request.headers.get("If-None-Match")
    if if_none_match is not None:
        if if_none_match == FILE_ETAG:
            return not_modified
    elif request.headers.get("If-Modified-Since") == LAST_MODIFIED:
        return not_modified
    return Response(gzip.compress(RSS), headers={
        "ETag": FILE_ETAG[:-1] + '-gzip"', "Last-Modified": LAST_MODIFIED,
        "Content-Encoding": "gzip", "Vary": "Accept-Encoding",
        "Content-Type": "application/xml"})


def conditions(server: HTTPServer) -> list[tuple[str, str, int]]:
    """What each request asked with, and the status it got."""
    return [(request.headers.get("If-None-Match", ""),
             request.headers.get("If-Modified-Since", ""), response.status_code)
            for request, response in server.log]


def test_a_server_that_ignores_its_own_etag_is_asked_by_date(httpserver: HTTPServer,
                                                            tmp_path: Path) -> None:
    httpserver.expect_request("/feed.xml").respond_with_handler(mod_deflate)
    db = tmp_path / "s.db"
    config = make_config(db, {"apache": httpserver.url_for("/feed.xml")})
    clock = Clock()
    reports = []
    for _ in range(4):
        reports.append(run_fetch(config, clock=clock, force=True).get("apache"))
        clock.advance(3600)
    gzip_tag = FILE_ETAG[:-1] + '-gzip"'
    assert conditions(httpserver) == [
        ("", "", 200),
        # The -gzip tag comes back with the whole body: the server ignores it...
        (gzip_tag, LAST_MODIFIED, 200),
        # ...so the next request asks by date alone, and gets its 304, whose ETag (the
        # file's own) the server does honour from then on.
        ("", LAST_MODIFIED, 304),
        (FILE_ETAG, LAST_MODIFIED, 304),
    ]
    assert [r.status for r in reports] == ["fetched", "fetched", "not_modified",
                                           "not_modified"]
    assert (reports[0].created, reports[1].unchanged) == (2, 2)
    assert any("If-None-Match" in w and gzip_tag in w for w in reports[1].warnings)
    assert not reports[0].warnings and not reports[3].warnings
    assert query(db, "SELECT etag, last_modified FROM sources") == [
        (FILE_ETAG, LAST_MODIFIED)]
    assert query(db, "SELECT count(*) FROM entries") == [(2,)]


def test_an_ignored_etag_is_kept_when_there_is_no_date_to_ask_by(httpserver: HTTPServer,
                                                                 tmp_path: Path) -> None:
    def etag_only(request: Request) -> Response:
        return Response(RSS, headers={"ETag": '"v1"', "Content-Type": "application/xml"})

    httpserver.expect_request("/feed.xml").respond_with_handler(etag_only)
    config = make_config(tmp_path / "s.db", {"site": httpserver.url_for("/feed.xml")})
    for _ in range(3):
        assert run_fetch(config, force=True).get("site").status == "fetched"
    # Dropping it would leave the requests with no condition at all, not cheaper ones.
    assert [c[0] for c in conditions(httpserver)] == ["", '"v1"', '"v1"']
