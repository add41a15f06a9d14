"""Issue 18, what a new user hits on day one: links, configuration and commands.

Real HTTP on 127.0.0.1 (pytest-httpserver), real SQLite files, the real command.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import shlex
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pytest_httpserver import HTTPServer

import signal_feeds
from signal_feeds import FetchRecord, Settings, SourceReport, load_config
from signal_feeds.cli.commands import cli
from signal_feeds.records import SourceState
from signal_feeds.run import pipeline
from signal_feeds.store import Store

REPO = Path(__file__).resolve().parent.parent

# Five items: an http link and no guid (kept), an https link, a javascript: link and no
# guid (skipped), a relative link and no guid (resolved against the feed URL), and a
# guid with a data: link (kept, without its link).
FEED = b"""<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0"><channel><title>Plain http blog</title><link>http://blog.example/</link>
<item><title>Over http</title><link>http://blog.example/posts/1</link>
  <pubDate>Mon, 02 Mar 2026 07:00:00 GMT</pubDate></item>
<item><title>Over https</title><link>https://blog.example/posts/2</link></item>
<item><title>Sneaky</title><link>javascript:alert(1)</link></item>
<item><title>Relative</title><link>/posts/3#comments</link></item>
<item><guid isPermaLink="false">post-4</guid><title>Inline</title>
  <link>data:text/html,hi</link></item>
</channel></rss>
"""
JAVASCRIPT_REASON = "no id and no usable link (scheme javascript: is not http or https)"


def write_config(tmp_path: Path, url: str, *extra: str, source_extra: str = "") -> Path:
    path = tmp_path / "signal.toml"
    path.write_text("\n".join([
        "[settings]", 'database = "signal.db"', "min_interval = 0", *extra, "",
        "[[sources]]", 'id = "blog"', f'url = "{url}"', source_extra, ""]), encoding="utf-8")
    return path


@pytest.fixture
def feed_url(httpserver: HTTPServer) -> str:
    httpserver.expect_request("/feed.xml").respond_with_data(
        FEED, content_type="application/rss+xml")
    return str(httpserver.url_for("/feed.xml"))


def stored_rows(db: Path) -> list[dict[str, str]]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT id, remote_id, url, title, published, updated, fingerprint "
                            "FROM entries ORDER BY id").fetchall()
    finally:
        conn.close()
    names = ("id", "remote_id", "url", "title", "published", "updated", "fingerprint")
    return [dict(zip(names, row, strict=True)) for row in rows]


def fetch_json(config: Path) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["fetch", "--config", str(config), "--json"])
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return report


# -- 1. links -----------------------------------------------------------------------------


def test_http_links_are_kept_and_every_skip_has_its_reason(
        feed_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    records: list[FetchRecord] = []

    class RecordingStore(Store):
        """The real store; it also keeps the fetch record each response brings."""

        def apply_response(self, state: SourceState, rows: Any, fetch: FetchRecord,
                           *args: Any, **kwargs: Any) -> Any:
            records.append(fetch)
            return super().apply_response(state, rows, fetch, *args, **kwargs)

    monkeypatch.setattr(pipeline, "open_store", RecordingStore)
    report = fetch_json(write_config(tmp_path, feed_url))
    (source,) = report["sources"]
    assert (source["created"], source["skipped"]) == (4, 1)
    assert source["skipped_reasons"] == [JAVASCRIPT_REASON]
    assert source["error"] is None
    urls = {row["title"]: row["url"] for row in stored_rows(tmp_path / "signal.db")}
    assert urls == {"Over http": "http://blog.example/posts/1",
                    "Over https": "https://blog.example/posts/2",
                    "Relative": f"{feed_url.rsplit('/', 1)[0]}/posts/3",
                    "Inline": ""}
    (record,) = records
    assert record.skipped == 1 and record.skip_reasons == (JAVASCRIPT_REASON,)


def test_a_setting_requires_https_links(feed_url: str, tmp_path: Path) -> None:
    config = write_config(tmp_path, feed_url, "require_https_links = true")
    (source,) = fetch_json(config)["sources"]
    assert (source["created"], source["skipped"]) == (2, 3)
    assert source["skipped_reasons"] == [
        "no id and no usable link (scheme http: is not https) (2 entries)",
        "no id and no usable link (scheme javascript: is not https)"]
    assert {r["title"] for r in stored_rows(tmp_path / "signal.db")} == {"Over https", "Inline"}


def _fetched_rss(httpserver: HTTPServer, tmp_path: Path, title: str, items: str,
                 *settings: str) -> dict[str, Any]:
    """The report of one fetch of an RSS channel ``title`` holding ``items``, served
    on 127.0.0.1, with ``settings`` lines in the config."""
    path = f"/{title.lower()}.xml"
    httpserver.expect_request(path).respond_with_data(
        f'<rss version="2.0"><channel><title>{title}</title>{items}</channel></rss>',
        content_type="application/rss+xml")
    (source,) = fetch_json(write_config(tmp_path, httpserver.url_for(path), *settings))["sources"]
    return dict(source)


def test_a_refused_link_of_an_entry_with_an_id_is_reported(httpserver: HTTPServer,
                                                           tmp_path: Path) -> None:
    # An entry with a guid is stored whatever its link; a link refused by the policy
    # left the link column empty and the report silent (the reason showed only for an
    # entry without an id, which is skipped).
    source = _fetched_rss(httpserver, tmp_path, "Ids", (
        '<item><guid isPermaLink="false">j1</guid><title>One</title>'
        '<link>javascript:alert(1)</link></item>'
        '<item><guid isPermaLink="false">j2</guid><title>Two</title>'
        '<link>http://plain.example/2</link></item>'
        '<item><guid isPermaLink="false">j3</guid><title>Three</title></item>'),
        "require_https_links = true")
    assert (source["created"], source["skipped"]) == (3, 0)
    assert source["warnings"] == [
        "link left out of 1 entry (scheme http: is not https)",
        "link left out of 1 entry (scheme javascript: is not https)"]  # none for no link
    assert {r["url"] for r in stored_rows(tmp_path / "signal.db")} == {""}


def test_a_mailto_link_is_refused_for_its_scheme(httpserver: HTTPServer,
                                                 tmp_path: Path) -> None:
    # A "write to us" item: the "@" of its address was taken for a user name, and the
    # report sent the reader looking for credentials in the feed.
    source = _fetched_rss(httpserver, tmp_path, "Mail", (
        '<item><guid isPermaLink="false">m1</guid><title>Write to us</title>'
        '<link>mailto:letters@paper.example</link></item>'
        '<item><title>Or to the editor</title><link>mailto:ed@paper.example</link></item>'))
    assert source["warnings"] == ["link left out of 1 entry (scheme mailto: is not http or "
                                  "https)"]
    assert source["skipped_reasons"] == [
        "no id and no usable link (scheme mailto: is not http or https)"]


def test_the_text_report_gives_the_reasons() -> None:
    report = signal_feeds.RunReport(
        sources=(SourceReport(source="blog", status="fetched", skipped=1,
                              skip_reasons=(JAVASCRIPT_REASON,)),),
        started_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    assert f"skipped 1 ({JAVASCRIPT_REASON})" in report.lines()[0]


def test_the_text_report_gives_the_warnings() -> None:
    # Until now only --json carried them: a feed read leniently looked clean.
    report = signal_feeds.RunReport(
        sources=(SourceReport(source="blog", status="fetched", http_status=200, created=2,
                              warnings=("date 'Di, 01 Dez 2026' not understood; "
                                        "left empty",)),
                 SourceReport(source="two", status="fetched", http_status=200,
                              warnings=("a", "b"))),
        started_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    lines = report.lines()
    assert lines[0].endswith(
        "+2 ~0 =0 (warning: date 'Di, 01 Dez 2026' not understood; left empty)")
    assert lines[1].endswith("+0 ~0 =0 (2 warnings: a; b)")


def test_an_entry_with_neither_id_nor_link_says_so() -> None:
    from signal_feeds import ParsedEntry, identify

    found = identify("s", [ParsedEntry(remote_id="", url="", title="a", published="",
                                       updated="")] * 3)
    assert (found.skipped, found.skip_reasons) == (3, ("no id and no link (3 entries)",))


@pytest.mark.parametrize("items", [
    # A changelog: each release an anchor of one page.
    b"<item><title>2.3: dark mode</title><link>https://app.example/changes#v2.3</link></item>"
    b"<item><title>2.2: CSV export</title><link>https://app.example/changes#v2.2</link></item>",
    # A podcast without guids, every episode linked to the show's home page.
    b'<item><title>Ep 2</title><link>https://show.example/</link><enclosure '
    b'url="https://cdn.example/2.mp3" type="audio/mpeg" length="1"/></item>'
    b'<item><title>Ep 1</title><link>https://show.example/</link><enclosure '
    b'url="https://cdn.example/1.mp3" type="audio/mpeg" length="1"/></item>',
], ids=["changelog", "podcast"])
def test_entries_without_ids_on_one_page_are_stored_apart(
        httpserver: HTTPServer, tmp_path: Path, items: bytes) -> None:
    # Both were rejected on every run: "two different entries without an id share the
    # link ... so nothing tells them apart".
    body = (b"<rss version=\"2.0\"><channel><title>t</title><link>https://show.example/</link>"
            + items + b"</channel></rss>")
    httpserver.expect_request("/feed.xml").respond_with_data(
        body, content_type="application/rss+xml")
    config = write_config(tmp_path, httpserver.url_for("/feed.xml"))
    (first,) = fetch_json(config)["sources"]
    assert (first["status"], first["created"]) == ("fetched", 2), first
    result = CliRunner().invoke(cli, ["fetch", "--config", str(config), "--json", "--refresh"])
    (again,) = json.loads(result.stdout)["sources"]
    assert (again["created"], again["unchanged"]) == (0, 2), again
    dry = CliRunner().invoke(cli, ["parse", "--config", str(config), "--source-id", "blog",
                                   str(_saved(tmp_path, body))])
    with closing(sqlite3.connect(tmp_path / "signal.db")) as conn:
        stored = {key for (key,) in conn.execute("SELECT id FROM entries")}
    assert {e["id"] for e in json.loads(dry.stdout)["entries"]} == stored, dry.output


def _saved(tmp_path: Path, body: bytes) -> Path:
    path = tmp_path / "saved.xml"
    path.write_bytes(body)
    return path


def test_relative_references_in_stored_html_are_absolute(httpserver: HTTPServer,
                                                         tmp_path: Path) -> None:
    # Stored HTML is shown far from the page it came from: "pic.png" must name the
    # picture. The base is the address that answered (after a redirect), or the item's link.
    body = (b'<rss version="2.0"><channel><title>t</title>'
            b'<item><guid>a</guid><description>&lt;img src="pic.png"&gt;</description></item>'
            b'<item><guid>b</guid><link>/2026/post/</link>'
            b'<description>&lt;a href="#fn1"&gt;1&lt;/a&gt;</description></item>'
            b"</channel></rss>")
    httpserver.expect_request("/old.xml").respond_with_data(
        "", status=301, headers={"Location": httpserver.url_for("/feeds/new.xml")})
    httpserver.expect_request("/feeds/new.xml").respond_with_data(
        body, content_type="application/rss+xml")
    (source,) = fetch_json(write_config(tmp_path, httpserver.url_for("/old.xml")))["sources"]
    assert source["created"] == 2, source
    with closing(sqlite3.connect(tmp_path / "signal.db")) as conn:
        summaries = dict(conn.execute("SELECT remote_id, summary FROM entries"))
    origin = httpserver.url_for("/").rstrip("/")
    assert summaries == {
        "a": f'<img src="{origin}/feeds/pic.png">',
        "b": f'<a href="{origin}/2026/post/#fn1" rel="noopener noreferrer">1</a>'}


def test_a_utf8_feed_served_as_latin1_is_stored_as_written(httpserver: HTTPServer,
                                                           tmp_path: Path) -> None:
    # Servers with a default charset (Apache's AddDefaultCharset) label UTF-8 feeds
    # ISO-8859-1; read by the label, "Crème" would be stored as "CrÃ¨me".
    body = ('<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>t'
            "</title><item><guid>a</guid><title>Crème brûlée</title></item></channel></rss>")
    httpserver.expect_request("/feed.xml").respond_with_data(
        body.encode("utf-8"), content_type="application/rss+xml; charset=ISO-8859-1")
    (source,) = fetch_json(write_config(tmp_path, httpserver.url_for("/feed.xml")))["sources"]
    assert source["created"] == 1
    assert any("charset=iso-8859-1" in w for w in source["warnings"]), source
    assert [row["title"] for row in stored_rows(tmp_path / "signal.db")] == ["Crème brûlée"]


def test_a_feed_with_a_byte_order_mark_is_read_by_it_whatever_the_charset(
        httpserver: HTTPServer, tmp_path: Path) -> None:
    # A UTF-8 feed saved with a byte-order mark on a host whose default charset is
    # windows-1251: the mark wins (RFC 7303), as in a browser. Read by the header, the
    # title was stored as "Р—Р°РјРµС‚РєРё" and nothing said so.
    body = ('<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>t'
            "</title><item><guid>a</guid><title>Заметки о выпуске</title></item>"
            "</channel></rss>")
    httpserver.expect_request("/feed.xml").respond_with_data(
        b"\xef\xbb\xbf" + body.encode("utf-8"),
        content_type="application/rss+xml; charset=windows-1251")
    (source,) = fetch_json(write_config(tmp_path, httpserver.url_for("/feed.xml")))["sources"]
    assert source["created"] == 1
    assert source["warnings"] == [
        "character encoding: the server said charset=windows-1251, but the document "
        "starts with a UTF-8 byte-order mark: read as UTF-8"], source
    assert [row["title"] for row in stored_rows(tmp_path / "signal.db")] == [
        "Заметки о выпуске"]


def test_a_utf8_feed_served_without_a_content_type_is_read_as_utf8(
        httpserver: HTTPServer, tmp_path: Path) -> None:
    # No Content-Type header (a bucket's object nobody typed) and no XML declaration:
    # XML's default, UTF-8, holds. feedparser took HTTP's old ISO-8859-1 default
    # whenever it had headers, and a title with a character beyond Latin-1 in it (here
    # a reference) was stored as "CrÃ¨me it’s"; 'signal parse' of the same file, which
    # has no headers, read "Crème it’s".
    from werkzeug import Response

    body = ('<rss version="2.0"><channel><title>t</title><item><guid>a</guid>'
            "<title>Crème it&#8217;s</title><description>Crème it&#8217;s</description>"
            "</item></channel></rss>").encode()
    response = Response(body)
    del response.headers["Content-Type"]
    httpserver.expect_request("/feed.xml").respond_with_response(response)
    (source,) = fetch_json(write_config(tmp_path, httpserver.url_for("/feed.xml")))["sources"]
    assert source["created"] == 1 and not source.get("warnings"), source
    with closing(sqlite3.connect(tmp_path / "signal.db")) as conn:
        assert conn.execute("SELECT title, summary FROM entries").fetchall() == [
            ("Crème it’s", "Crème it’s")]


SITE = b"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Blog</title>
<link rel="stylesheet" href="/style.css">
<link rel="alternate" type="application/rss+xml" title="Posts" href="/feed/">
<link rel="alternate" hreflang="de" href="/de/">
</head><body><p>Welcome</p>
<link rel="alternate" type="application/rss+xml" href="/comments/feed/"></body></html>"""


def test_a_site_address_given_for_its_feed_says_which_address_to_use(
        httpserver: HTTPServer, tmp_path: Path) -> None:
    # The commonest first-day mistake: the blog's address instead of its feed's. Nothing
    # is fetched or changed; the error names the feed the page itself links to.
    httpserver.expect_request("/").respond_with_data(SITE, content_type="text/html")
    config = write_config(tmp_path, httpserver.url_for("/"))
    result = CliRunner().invoke(cli, ["fetch", "--config", str(config), "--json"])
    assert result.exit_code == 1
    (source,) = json.loads(result.stdout)["sources"]
    assert source["status"] == "rejected"
    assert source["error"] == (
        "not an RSS or Atom feed: a web page that names its feed at "
        f"{httpserver.url_for('/feed/')} (use that address as the source's url)")
    assert len(httpserver.log) == 1  # the named feed was not fetched


def test_feed_links_of_a_page() -> None:
    from signal_feeds.parse.discovery import feed_links

    two = SITE.replace(b'hreflang="de" href="/de/"',
                       b'type="application/atom+xml" href="https://cdn.example/a.xml"')
    assert feed_links(two, "https://blog.example/") == [
        "https://blog.example/feed/", "https://cdn.example/a.xml"]
    refused = SITE.replace(b'href="/feed/"', b'href="javascript:alert(1)"')
    assert feed_links(refused, "https://blog.example/") == []  # the link policy applies
    assert feed_links(b"<rss><channel></channel></rss>", None) == []
    # Only the start of a page is read.
    late = b"<html><head>" + b" " * (300 * 1024) + SITE.split(b"<head>", 1)[1]
    assert feed_links(late, "https://blog.example/") == []


BOT_CHECK = (b"<!DOCTYPE html><html lang=\"en-US\"><head><title>Just a moment...</title>"
             b"<meta http-equiv=\"refresh\" content=\"390\"></head><body>Checking your "
             b"browser</body></html>")


def test_a_page_that_names_no_feed_is_called_a_web_page_with_its_title(
        httpserver: HTTPServer, tmp_path: Path) -> None:
    # A bot check, a login wall or an error page answers 200 where the feed was: its
    # title says which, where the XML parser's complaint said nothing useful.
    assert fetched_with_error(httpserver, tmp_path, BOT_CHECK, "text/html") == (
        "rejected", "not an RSS or Atom feed: a web page titled 'Just a moment...' that "
        "names no feed")


def fetched_with_error(httpserver: HTTPServer, tmp_path: Path, body: bytes,
                       content_type: str) -> tuple[str, str]:
    """The status and error ``signal fetch --json`` reports for a source serving body."""
    httpserver.expect_request("/feed").respond_with_data(body, content_type=content_type)
    config = write_config(tmp_path, httpserver.url_for("/feed"))
    result = CliRunner().invoke(cli, ["fetch", "--config", str(config), "--json"])
    (source,) = json.loads(result.stdout)["sources"]
    return source["status"], source["error"]


def test_an_error_status_names_the_page_it_came_with(httpserver: HTTPServer,
                                                    tmp_path: Path) -> None:
    # A bot check or a firewall answers 403 with a page: its title says whose it is.
    httpserver.expect_request("/feed").respond_with_data(BOT_CHECK, status=403,
                                                         content_type="text/html")
    httpserver.expect_request("/gone").respond_with_data(
        b"<html><head><title>404 Not Found</title></head></html>", status=404,
        content_type="text/html")
    config = tmp_path / "signal.toml"
    config.write_text(
        f'[settings]\ndatabase = "{tmp_path / "signal.db"}"\n\n'
        f'[[sources]]\nid = "guarded"\nurl = "{httpserver.url_for("/feed")}"\n\n'
        f'[[sources]]\nid = "missing"\nurl = "{httpserver.url_for("/gone")}"\n',
        encoding="utf-8")
    result = CliRunner().invoke(cli, ["fetch", "--config", str(config), "--json"])
    errors = {s["source"]: s["error"] for s in json.loads(result.stdout)["sources"]}
    assert errors == {"guarded": "HTTP 403 Forbidden: a web page titled 'Just a moment...'",
                      "missing": "HTTP 404 Not Found"}


@pytest.mark.parametrize(("body", "said"), [
    (BOT_CHECK, "a web page titled 'Just a moment...'"),
    (b"\xef\xbb\xbf\n<!-- generated -->\n<html><head><title>\n  Sign in &amp; "
     b"continue\x1b[2J </title></head></html>", "a web page titled 'Sign in & continue[2J'"),
    (b"<html><body><title>Late</title></body></html>", "a web page"),  # the head's only
    (b"<!doctype html><title>" + b"x" * 200 + b"</title>", "a web page titled '"
     + "x" * 79 + "\u2026'"),
    (b"<rss version='2.0'><channel><title>Not a page</title></channel></rss>", ""),
    (b"Service unavailable", ""),
])
def test_web_page(body: bytes, said: str) -> None:
    from signal_feeds.parse.discovery import web_page

    assert web_page(body) == said


def test_an_xml_document_that_is_not_a_feed_says_what_it_is(httpserver: HTTPServer,
                                                            tmp_path: Path) -> None:
    # A sitemap or an OPML list given for a feed: the error names it, and what to do.
    opml = (b'<?xml version="1.0"?><opml version="2.0"><head><title>subs</title></head>'
            b'<body><outline text="x" xmlUrl="https://example.org/feed"/></body></opml>')
    assert fetched_with_error(httpserver, tmp_path, opml, "text/x-opml") == (
        "rejected", "not an RSS or Atom feed: an OPML subscription list (add the feeds it "
        "names with 'signal sources import-opml')")


@pytest.mark.parametrize(("body", "said"), [
    (b'\xef\xbb\xbf<?xml version="1.0"?>\n<!-- x --><?xml-stylesheet href="s.xsl"?>'
     b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"/>',
     "a sitemap, which lists a site's pages, not its news"),
    (b"<sitemapindex/>", "a sitemap index, which lists a site's sitemaps, not its news"),
    (b"<!DOCTYPE Error [<!ENTITY a 'b'>]>\n<Error><Code>AccessDenied</Code></Error>",
     "an XML document whose root element is <Error>"),
    (b"<soap:Envelope xmlns:soap='x'/>", "an XML document whose root element is <soap:Envelope>"),
    # Feeds, however broken, and what is not XML at all, are not described so.
    (b"<rss version='2.0'><channel>", ""),
    (b"<rdf:RDF xmlns:rdf='x'>", ""),
    (b"<atom:feed xmlns:atom='http://www.w3.org/2005/Atom'>", ""),
    (b"<html><body>x</body></html>", ""),
    (b"Service unavailable", ""),
    (b"{}", ""),
])
def test_other_xml(body: bytes, said: str) -> None:
    from signal_feeds.parse.discovery import other_xml

    assert other_xml(body) == said


@pytest.mark.parametrize(("body", "said"), [
    # A CDF channel, RSS 1.1, a channel without its <rss>: the parser names no format.
    (b"<CHANNEL><TITLE>Example</TITLE></CHANNEL>",
     "its root element is <CHANNEL>, but an RSS channel sits inside <rss> (RSS 2.0) or "
     "<rdf:RDF> (RSS 1.0)"),
    (b'<Channel xmlns="http://purl.org/net/rss1.1#"><title>x</title></Channel>',
     "its root element is <Channel>, but an RSS channel sits inside <rss> (RSS 2.0) or "
     "<rdf:RDF> (RSS 1.0)"),
    # RSS 1.0 with its channel in another namespace.
    (b'<rdf:RDF xmlns="http://my.netscape.com/publish/formats/rss-0.91.dtd" '
     b'xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><channel><title>x</title>'
     b"</channel></rdf:RDF>",
     "an RDF document with no RSS 1.0 <channel> (its elements belong to the namespace "
     "http://purl.org/rss/1.0/)"),
])
def test_a_feed_root_without_a_feed_says_what_is_wrong(body: bytes, said: str) -> None:
    from signal_feeds.errors import ParseError
    from signal_feeds.parse.feed import parse_feed

    with pytest.raises(ParseError) as caught:
        parse_feed(body, source_id="s")
    assert caught.value.message == f"not an RSS or Atom feed: {said}"


# -- 2. one normalization path for the dry run and the real run ------------------------


@pytest.mark.parametrize("extra", [(), ("require_https_links = true",)])
def test_signal_parse_gives_the_rows_signal_fetch_stores(
        feed_url: str, tmp_path: Path, extra: tuple[str, ...]) -> None:
    config = write_config(tmp_path, feed_url, *extra)
    fetched = fetch_json(config)["sources"][0]
    feed_file = tmp_path / "feed.xml"
    feed_file.write_bytes(FEED)
    result = CliRunner().invoke(cli, ["parse", str(feed_file), "--config", str(config),
                                      "--source-id", "blog"])
    assert result.exit_code == 0, result.output
    parsed = json.loads(result.stdout)
    assert sorted(parsed["entries"], key=lambda e: e["id"]) == stored_rows(
        tmp_path / "signal.db")
    assert parsed["skipped"] == fetched["skipped"]
    assert parsed["skipped_reasons"] == fetched["skipped_reasons"]


def test_signal_parse_reads_a_saved_gzip_file_as_a_fetch_would(tmp_path: Path) -> None:
    # A fetch undoes a gzip layer left on the body (an .xml.gz served as the file); the
    # dry run of the same bytes said "not an RSS or Atom feed".
    import gzip

    plain, packed = tmp_path / "feed.xml", tmp_path / "feed.xml.gz"
    plain.write_bytes(FEED)
    packed.write_bytes(gzip.compress(FEED))
    rows = [json.loads(CliRunner().invoke(cli, ["parse", str(path)]).stdout)["entries"]
            for path in (plain, packed)]
    assert rows[0] and rows[0] == rows[1]
    # Under the same cap as a download: a bomb is one file's error.
    config = tmp_path / "cap.toml"
    config.write_text("[settings]\nmax_body_bytes = 1000\n")
    bomb = tmp_path / "bomb.xml.gz"
    bomb.write_bytes(gzip.compress(b"<" * 100_000))
    result = CliRunner().invoke(cli, ["parse", str(bomb), "--config", str(config)])
    assert "larger than the cap of 1000 bytes" in result.output
    # So is a plain file over the cap: a fetch of it would fail (it was read whole and
    # parsed, however large).
    big = tmp_path / "big.xml"
    big.write_bytes(FEED + b" " * 1000)
    result = CliRunner().invoke(cli, ["parse", str(big), "--config", str(config)])
    assert json.loads(result.stdout) == {
        "file": str(big), "ok": False,
        "error": "body larger than the cap of 1000 bytes (the max_body_bytes setting)"}


def test_signal_parse_without_a_config_uses_the_defaults(tmp_path: Path) -> None:
    feed_file = tmp_path / "feed.xml"
    feed_file.write_bytes(FEED)
    result = CliRunner().invoke(cli, ["parse", str(feed_file)])
    parsed = json.loads(result.stdout)
    assert "http://blog.example/posts/1" in {e["url"] for e in parsed["entries"]}
    bad = CliRunner().invoke(cli, ["parse", str(feed_file), "--config",
                                   str(tmp_path / "none.toml")])
    assert bad.exit_code == 2 and "config file not found" in bad.output


def test_signal_parse_given_an_address_says_it_reads_files() -> None:
    # It printed "cannot read: No such file or directory" for "https:/example.org/feed",
    # the address with one of its slashes gone.
    result = CliRunner().invoke(cli, ["parse", "https://example.org/feed"])
    assert result.exit_code == 2
    assert "'https://example.org/feed' is an address" in result.output
    assert "curl -o feed.xml" in result.output and "Traceback" not in result.output


def test_max_entries_reaches_the_parser(httpserver: HTTPServer, tmp_path: Path) -> None:
    items = "".join(f"<item><guid>g{i}</guid><title>t{i}</title></item>" for i in range(5))
    httpserver.expect_request("/many.xml").respond_with_data(
        f'<rss version="2.0"><channel><title>x</title>{items}</channel></rss>',
        content_type="application/rss+xml")
    config = write_config(tmp_path, httpserver.url_for("/many.xml"), "max_entries = 3")
    (source,) = fetch_json(config)["sources"]
    assert source["created"] == 3
    assert "the feed has 5 entries; only the first 3 were read (the max_entries setting)" \
        in source["warnings"]


def test_max_entries_caps_json_feed_too() -> None:
    items = [{"id": f"g{i}", "title": f"t{i}"} for i in range(4)]
    body = json.dumps({"version": "https://jsonfeed.org/version/1.1", "title": "j",
                       "items": items}).encode()
    feed = signal_feeds.parse_feed(body, max_entries=2)
    assert [e.remote_id for e in feed.entries] == ["g0", "g1"]
    assert "the feed has 4 entries; only the first 2 were read (the max_entries setting)" \
        in feed.warnings


# -- 6. every config problem at once ------------------------------------------------------


def test_fetch_prints_every_config_problem_and_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "signal.toml"
    path.write_text('[settings]\nper_host = 0\n\n[[sources]]\nid = "a"\n'
                    'ulr = "https://a.example/f"\n\n[[sources]]\nid = "B"\n'
                    'url = "https://b.example/f"\n', encoding="utf-8")
    result = CliRunner().invoke(cli, ["fetch", "--config", str(path)])
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0] == f"signal: error: {path}: 4 problems:"
    assert lines[1] == "  [settings]: per_host: must be at least 1"
    assert lines[2].startswith("  sources[0] (id 'a'): ulr: unknown key; did you mean url?")
    assert lines[3] == "  sources[0] (id 'a'): url: missing or not a string"
    assert lines[4].startswith("  sources[1]: id: 'B' is not a slug")


@pytest.mark.parametrize(("url", "hint"), [
    ("feed://blog.example/rss", "https://blog.example/rss"),  # a browser's feed: link
    ("feed:https://blog.example/atom", "https://blog.example/atom"),
    ("blog.example/feed", "https://blog.example/feed"),  # the scheme left out
    ("javascript:alert(1)", None),
    ("not a url", None),
])
def test_a_refused_source_url_comes_with_a_likely_fix(tmp_path: Path, url: str,
                                                      hint: str | None) -> None:
    path = write_config(tmp_path, url)
    result = CliRunner().invoke(cli, ["fetch", "--config", str(path)])
    assert result.exit_code == 2
    (problem,) = result.stderr.splitlines()  # one problem: on the error's own line
    assert problem.startswith(f"signal: error: {path}: sources[0] (id 'blog'): url: "
                              f"{url!r} refused: ")
    if hint:
        assert problem.endswith(f" (did you mean {hint!r}?)")
    else:
        assert "did you mean" not in problem


# -- 7. a database in a folder that does not exist ------------------------------------


@pytest.mark.parametrize("command", [
    ["fetch"], ["sources"], ["entries"], ["history", "abcdef12"], ["lookup", "https://x.example/"],
    ["export"], ["dedupe"],
])
def test_a_missing_database_folder_is_a_config_error(tmp_path: Path,
                                                     command: list[str]) -> None:
    config = write_config(tmp_path, "https://a.example/feed")
    missing = tmp_path / "no-such-folder"
    by_flag = CliRunner().invoke(cli, [*command, "--config", str(config),
                                       "--db", str(missing / "signal.db")])
    assert by_flag.exit_code == 2, by_flag.output
    assert f"the folder {missing} does not exist" in by_flag.stderr
    assert "unable to open" not in by_flag.output
    config.write_text(config.read_text().replace('"signal.db"', '"no-such-folder/s.db"'))
    by_setting = CliRunner().invoke(cli, [*command, "--config", str(config)])
    assert by_setting.exit_code == 2, by_setting.output
    assert by_setting.stderr.startswith(f"signal: error: {config}: [settings] database: "
                                        f"the folder {missing} does not exist")


@pytest.mark.parametrize("command", [["fetch"], ["entries"], ["sources"], ["search", "x"]])
def test_a_folder_given_as_the_database_is_a_config_error(tmp_path: Path,
                                                          command: list[str]) -> None:
    config = write_config(tmp_path, "https://a.example/feed")
    folder = tmp_path / "data"
    folder.mkdir()
    result = CliRunner().invoke(cli, [*command, "--config", str(config), "--db", str(folder)])
    # It was "cannot open database in data: unable to open database file", exit 1.
    assert result.exit_code == 2, result.output
    assert (f"--db {folder}: {folder} is a folder, not a database file; name a file in it "
            f"(e.g. {folder / 'signal.db'})") in result.stderr


def test_the_demo_database_folder_must_exist(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["demo", "--db", str(tmp_path / "nope" / "demo.db")])
    assert result.exit_code == 2 and "nope does not exist" in result.stderr


def test_the_demo_replaces_only_its_own_database(tmp_path: Path) -> None:
    real = tmp_path / "signal.db"
    with Store(real) as store:
        store.save_attempt(SourceState(source_id="mine", url="https://a.example/feed"),
                           FetchRecord(source_id="mine", url="https://a.example/feed",
                                       started_at=dt.datetime.now(dt.UTC), outcome="failed",
                                       error="x"))
    # It was deleted: "replaced if it was an earlier demo's" held only for non-Signal files.
    result = CliRunner().invoke(cli, ["demo", "--db", str(real)])
    assert result.exit_code != 0
    assert "holds sources other than the demo's (mine)" in result.stderr
    with Store(real) as store:
        assert [s.source_id for s in store.source_states()] == ["mine"]
    demo = tmp_path / "demo.db"
    for _ in range(2):  # an earlier demo's database is replaced
        result = CliRunner().invoke(cli, ["demo", "--db", str(demo)])
        assert result.exit_code == 0, result.output
    with Store(demo) as store:
        assert sorted(s.source_id for s in store.source_states()) == ["demo-atom", "demo-rss"]


# -- 9. no dead ends after the demo ---------------------------------------------------


def _program(name: str) -> list[str]:
    """The installed console script next to this Python, else the same module."""
    script = Path(sys.executable).with_name(name)
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", {"signal": "signal_feeds", "sqlite-utils": "sqlite_utils"}[name]]


def test_every_command_the_demo_prints_works_as_printed(tmp_path: Path) -> None:
    demo_dir, elsewhere = tmp_path / "demo", tmp_path / "elsewhere"
    demo_dir.mkdir()
    elsewhere.mkdir()  # no signal.toml here, and not where the database is
    demo = subprocess.run([*_program("signal"), "demo"], cwd=demo_dir, capture_output=True,
                          text=True, timeout=300, check=False)
    assert demo.returncode == 0, demo.stderr
    tail = demo.stdout.split("Read it:\n", 1)[1].splitlines()
    commands = [shlex.split(line) for line in tail]
    assert [c[:2] for c in commands] == [["signal", "entries"], ["signal", "history"],
                                         ["sqlite-utils", "rows"]]
    for command in commands:
        proc = subprocess.run([*_program(command[0]), *command[1:]], cwd=elsewhere,
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, (command, proc.stderr)
        assert proc.stdout.strip(), command


def test_reading_without_config_or_db_says_what_to_pass(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["entries"])
    assert result.exit_code == 2
    assert "pass --db PATH" in result.stderr and "--config PATH" in result.stderr
    missing = CliRunner().invoke(cli, ["entries", "--db", "nonexist.db"])
    assert missing.exit_code == 2
    assert missing.stderr == "signal: error: no database at nonexist.db; run 'signal fetch' first\n"


def test_no_message_of_the_package_shows_a_placeholder() -> None:
    for path in (REPO / "signal_feeds").rglob("*.py"):
        assert "<config>" not in path.read_text(encoding="utf-8"), path


# -- 10. every setting documented -------------------------------------------------------

#: Settings added on other branches at the same time; checked once they exist here.
_ADDED_IN_PARALLEL = {"proxy": None, "busy_timeout": 60.0}


def _readme_settings() -> dict[str, list[str]]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("### Settings", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    table = {}
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        table[cells[0].strip("`")] = cells[1:]
    return table


def _documented_default(cell: str) -> object:
    match = re.match(r"`([^`]*)`|none", cell)
    assert match, cell
    if match.group(0) == "none":
        return None
    text = match.group(1).replace("<version>", signal_feeds.__version__)
    if text in ("true", "false"):
        return text == "true"
    if text == '""':
        return ""
    try:
        return float(text)
    except ValueError:
        return text


def test_the_readme_documents_every_setting_with_its_default() -> None:
    table = _readme_settings()
    fields = {f.name: f.default for f in dataclasses.fields(Settings)}
    expected = {**{k: v for k, v in _ADDED_IN_PARALLEL.items() if k not in fields}, **fields}
    assert set(table) == set(expected)
    for name, default in expected.items():
        default_cell, unit, meaning = table[name]
        if isinstance(default, Path):
            default = str(default)
        if isinstance(default, int | float) and not isinstance(default, bool):
            default = float(default)
        assert _documented_default(default_cell) == default, name
        assert unit and meaning, name
    # The bounds a value is checked against are in the table too.
    from signal_feeds.config import values

    for name in values._AT_LEAST_ONE:
        assert "at least 1" in table[name][2], name
    for name in values._ABOVE_ZERO:
        assert "more than 0" in table[name][2], name
    for name, most in values._AT_MOST.items():
        days = most / (24 * 3600)
        assert ("at most a day" if days == 1 else f"at most {days:g} days") in table[name][2], name


# -- 11. library and command agree --------------------------------------------------------


def test_no_error_is_none_in_python_and_null_in_json() -> None:
    rep = SourceReport(source="a", status="fetched")
    assert rep.error is None and rep.to_dict()["error"] is None


def test_the_types_public_functions_return_are_exported() -> None:
    for name in ("EntryView", "EntryHistory", "LookupResult", "Progress", "DedupeReport",
                 "ApplyCounts", "FetchRecord", "SourceState", "RunReport", "SourceReport",
                 "ParseSettings", "ImportReport"):
        assert name in signal_feeds.__all__
        assert isinstance(getattr(signal_feeds, name), type), name


def _package_classes() -> dict[str, type]:
    """Every public class defined in a public module of the package, by name."""
    import importlib
    import inspect
    import pkgutil

    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(signal_feeds.__path__, "signal_feeds."):
        # Private modules are left out (``__main__`` and ``parse._worker_main`` run on
        # import), and so is the optional PostgreSQL store.
        if any(part.startswith("_") for part in info.name.split(".")) or \
                ".postgres" in info.name:
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and value.__module__ == info.name \
                    and not name.startswith("_"):
                found[name] = value
    return found


def test_every_class_a_public_function_or_method_returns_is_exported() -> None:
    # Not a list kept by hand: every return annotation of every exported function, and of
    # every public method and property of every exported class, is read.
    import inspect

    classes = _package_classes()
    missing: dict[str, list[str]] = {}
    for name in signal_feeds.__all__:
        value = getattr(signal_feeds, name)
        functions: list[tuple[str, Any]] = []
        if inspect.isfunction(value):
            functions.append((name, value))
        elif inspect.isclass(value):
            for attr, member in vars(value).items():
                if attr.startswith("_") and attr != "__enter__":
                    continue
                member = member.fget if isinstance(member, property) else member
                member = getattr(member, "__func__", member)  # classmethod, staticmethod
                if inspect.isfunction(member):
                    functions.append((f"{name}.{attr}", member))
        for where, function in functions:
            returned = str(function.__annotations__.get("return", ""))
            for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", returned):
                if word in classes and word not in signal_feeds.__all__:
                    missing.setdefault(word, []).append(where)
    assert not missing, missing


def test_help_summaries_are_whole_sentences() -> None:
    import click

    def commands(group: click.Group) -> list[click.Command]:
        found: list[click.Command] = []
        for command in group.commands.values():
            found.append(command)
            if isinstance(command, click.Group):
                found += commands(command)
        return found

    for command in commands(cli):
        summary = command.get_short_help_str(limit=45)
        assert summary.endswith((".", "?")) and not summary.endswith("..."), command.name
    top = CliRunner().invoke(cli, ["--help"], terminal_width=60)
    listed = top.output.split("Commands:\n", 1)[1].splitlines()
    assert len(listed) == len(cli.commands)
    assert all(line.rstrip().endswith((".", "?")) for line in listed), listed


def test_a_missing_source_list_says_how_to_get_one(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # The first `signal fetch` after the demo, in a folder without signal.toml, said only
    # "config file not found". It now says what the file holds, and which command writes
    # one from another reader's export; that command works where no file exists yet.
    monkeypatch.chdir(tmp_path)
    missing = CliRunner().invoke(cli, ["fetch"])
    assert missing.exit_code == 2
    assert "[[sources]]" in missing.output and "import-opml" in missing.output
    (tmp_path / "subs.opml").write_text(
        '<?xml version="1.0"?><opml version="2.0"><body><outline text="A" type="rss" '
        'xmlUrl="https://a.example/feed"/></body></opml>', encoding="utf-8")
    imported = CliRunner().invoke(cli, ["sources", "import-opml", "subs.opml"])
    assert imported.exit_code == 0, imported.output
    assert [s.id for s in load_config(tmp_path / "signal.toml").sources] == ["a"]


@pytest.mark.parametrize("command", [["entries"], ["search", "http"], ["export"],
                                     ["changes"]])
def test_a_source_id_nobody_knows_is_an_error_not_an_empty_list(
        feed_url: str, tmp_path: Path, command: list[str]) -> None:
    # `--source blgo` printed nothing and exited 0 (search: 1), which reads as "no
    # entries yet" for a source that does not exist.
    config = write_config(tmp_path, feed_url)
    fetch_json(config)
    typo = CliRunner().invoke(cli, [*command, "--config", str(config), "--source", "blgo"])
    assert typo.exit_code == 2, typo.output
    assert "no source 'blgo'" in typo.stderr and "did you mean blog?" in typo.stderr
    # The database alone knows it too; a listed source not fetched yet is no error.
    by_db = CliRunner().invoke(cli, [*command, "--db", str(tmp_path / "signal.db"),
                                     "--source", "blgo"])
    assert by_db.exit_code == 2 and "did you mean blog?" in by_db.stderr
    config.write_text(config.read_text(encoding="utf-8") + '[[sources]]\nid = "later"\n'
                      'url = "https://later.example/feed"\n', encoding="utf-8")
    listed = CliRunner().invoke(cli, [*command, "--config", str(config), "--source",
                                      "later"])
    assert listed.exit_code == (1 if command[0] == "search" else 0), listed.output
    assert "no source" not in listed.stderr


def test_fetch_and_reset_name_the_source_meant(feed_url: str, tmp_path: Path) -> None:
    config = write_config(tmp_path, feed_url)
    for command in (["fetch", "--source", "blgo"], ["sources", "--reset", "blgo"]):
        result = CliRunner().invoke(cli, [*command, "--config", str(config)])
        assert result.exit_code == 2, result.output
        assert "blgo" in result.stderr
        assert "did you mean blog?" in result.stderr


def test_of_several_alternate_links_the_page_itself_is_kept() -> None:
    # feedparser keeps the last alternate as the link: here the French translation.
    body = (b'<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title><id>f</id>'
            b"<entry><id>e1</id><title>a</title>"
            b'<link rel="alternate" type="application/pdf" href="https://a.example/2.pdf"/>'
            b'<link rel="alternate" type="text/html" href="https://a.example/2.html"/>'
            b'<link rel="alternate" hreflang="fr" type="text/html" href="https://a.example/fr/2"/>'
            b'<link rel="enclosure" href="https://a.example/2.mp3"/></entry>'
            b"<entry><id>e2</id><title>b</title>"
            b'<link rel="alternate" hreflang="fr" type="text/html" href="https://a.example/fr/3"/>'
            b'<link rel="alternate" hreflang="de" href="https://a.example/de/3"/></entry>'
            b"<entry><id>e3</id><title>c</title>"
            b'<link rel="alternate" href="https://a.example/4"/></entry></feed>')
    feed = signal_feeds.parse_feed(body)
    assert [e.url for e in feed.entries] == [
        "https://a.example/2.html", "https://a.example/fr/3", "https://a.example/4"]
