"""JSON Feed 1.0 and 1.1 give the same rows as RSS and Atom."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import pytest
from conftest import make_config
from pytest_httpserver import HTTPServer
from scenario_server import ScenarioServer
from werkzeug import Request, Response

from signal_feeds import ParseError, digest, parse_feed, run_fetch
from signal_feeds.parse.feed import ParsedEntry
from signal_feeds.parse.processes import ParserPool

RSS = b"""<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0"><channel><title>Same story</title><link>https://example.org/</link>
<item><guid isPermaLink="false">story-1</guid><title>Release 2.0 is out</title>
<link>https://example.org/posts/2-0?ref=feed</link>
<pubDate>Mon, 02 Mar 2026 10:00:00 +0300</pubDate>
<author>Ana Lima</author>
<description>Faster parsing and fewer surprises.</description></item>
</channel></rss>"""

ATOM = b"""<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>Same story</title>
<id>urn:x:feed</id><updated>2026-03-05T12:00:00Z</updated>
<entry><id>story-1</id><title>Release 2.0 is out</title>
<link rel="alternate" href="https://example.org/posts/2-0?ref=feed"/>
<published>2026-03-02T07:00:00Z</published><updated>2026-03-05T12:00:00Z</updated>
<author><name>Ana Lima</name></author>
<summary>Faster parsing and fewer surprises.</summary></entry></feed>"""


def json_feed(version: str, **item: Any) -> bytes:
    base: dict[str, Any] = {"id": "story-1", "url": "https://example.org/posts/2-0?ref=feed",
                            "title": "Release 2.0 is out",
                            "date_published": "2026-03-02T10:00:00+03:00",
                            "summary": "Faster parsing and fewer surprises.",
                            "content_text": "Faster parsing and fewer surprises."}
    if version == "1":
        base["author"] = {"name": "Ana Lima"}
    else:
        base["authors"] = [{"name": "Ana Lima"}]
    base.update(item)
    return json.dumps({"version": f"https://jsonfeed.org/version/{version}",
                       "title": "Same story", "home_page_url": "https://example.org/",
                       "items": [{k: v for k, v in base.items() if v is not None}]}).encode()


def comparable(entry: ParsedEntry) -> tuple[str, ...]:
    return (entry.remote_id, entry.url, entry.title, entry.published, entry.updated,
            entry.author, entry.summary)


@pytest.mark.parametrize("version", ["1", "1.1"])
def test_json_feed_gives_the_same_row_as_rss_and_atom(version: str) -> None:
    rss = parse_feed(RSS).entries[0]
    atom = parse_feed(ATOM).entries[0]
    feed = parse_feed(json_feed(version, date_modified="2026-03-05T12:00:00Z"))
    assert feed.version == {"1": "json1", "1.1": "json11"}[version]
    assert feed.title == "Same story" and feed.link == "https://example.org/"
    (entry,) = feed.entries
    assert comparable(entry) == comparable(atom)
    assert comparable(entry)[:4] == comparable(rss)[:4]  # RSS has no <updated>
    assert entry.published == "2026-03-02T07:00:00Z"
    assert entry.author == rss.author == "Ana Lima"
    assert entry.summary == rss.summary


def test_feed_level_authors_apply_to_entries_without_their_own() -> None:
    # RFC 4287 (4.2.1) and both JSON Feed versions say so; they were left empty, since
    # feedparser does not apply the rule (an Atom entry's source comes first).
    atom = ATOM.replace(b"<author><name>Ana Lima</name></author>", b"").replace(
        b"<id>urn:x:feed</id>", b"<id>urn:x:feed</id><author><name>Feed</name></author>")
    data = json.loads(json_feed("1.1", authors=None))
    data["authors"] = [{"name": "Feed"}]
    old = json.loads(json_feed("1", author=None))
    old["author"] = {"name": "Feed"}
    assert parse_feed(atom).entries[0].author == "Feed"
    assert parse_feed(json.dumps(data).encode()).entries[0].author == "Feed"
    assert parse_feed(json.dumps(old).encode()).entries[0].author == "Feed"
    sourced = atom.replace(b"<summary>", b"<source><id>urn:x:elsewhere</id><author><name>"
                                        b"Source</name></author></source><summary>")
    assert parse_feed(sourced).entries[0].author == "Source"
    # An entry's own author wins; RSS has no feed-level author to inherit.
    assert parse_feed(ATOM.replace(b"<id>urn:x:feed</id>", b"<id>urn:x:feed</id><author>"
                                   b"<name>Feed</name></author>")).entries[0].author == "Ana Lima"
    rss = RSS.replace(b"<author>Ana Lima</author>", b"").replace(
        b"<channel>", b"<channel><managingEditor>ed@example.org (Ed)</managingEditor>")
    assert parse_feed(rss).entries[0].author == ""


def test_url_policy_limits_and_sanitizing_apply() -> None:
    feed = parse_feed(json_feed(
        "1.1", id=12345, url="javascript:alert(1)", title="x" * 5000,
        content_html="<p>ok</p><script>alert('no')</script>", content_text=None,
        date_published="yesterday"))
    (entry,) = feed.entries
    assert entry.remote_id == "12345"  # numbers are read as strings
    assert entry.url == ""  # refused scheme
    assert len(entry.title) == 2048
    assert entry.content == "<p>ok</p>" and "script" not in entry.content
    assert entry.published == ""
    assert any("title cut" in w for w in feed.warnings)
    assert any("not RFC 3339" in w for w in feed.warnings)

    relative = parse_feed(json_feed("1.1", url="/posts/3#frag"),
                          url="https://example.org/feed.json").entries[0]
    assert relative.url == "https://example.org/posts/3"
    plain_http = json_feed("1.1", url="http://example.org/p")
    assert parse_feed(plain_http).entries[0].url == "http://example.org/p"
    https_only = parse_feed(plain_http, require_https_links=True).entries[0]
    assert (https_only.url, https_only.link_refused) == ("", "scheme http: is not https")
    escaped = parse_feed(json_feed("1", summary="<b>not markup</b>")).entries[0]
    assert escaped.summary == "&lt;b&gt;not markup&lt;/b&gt;"


def test_relative_references_in_content_html_resolve_against_the_item() -> None:
    html = '<p><a href="#fn1">1</a> <img src="pic.png"> <a href="/about">a</a></p>'
    item = parse_feed(json_feed("1.1", url="/2026/post/", content_html=html,
                                content_text=None),
                      url="https://example.org/feed.json").entries[0]
    assert item.content == (
        '<p><a href="https://example.org/2026/post/#fn1" rel="noopener noreferrer">1</a> '
        '<img src="https://example.org/2026/post/pic.png"> '
        '<a href="https://example.org/about" rel="noopener noreferrer">a</a></p>')
    no_link = parse_feed(json_feed("1.1", url=None, content_html=html, content_text=None),
                         url="https://example.org/feeds/f.json").entries[0]
    assert 'src="https://example.org/feeds/pic.png"' in no_link.content


def test_dispatch_by_body_or_content_type_and_clear_errors() -> None:
    body = b"\xef\xbb\xbf \n" + json_feed("1.1")
    assert parse_feed(body).version == "json11"
    assert parse_feed(json_feed("1"), content_type="application/feed+json").version == "json1"
    assert parse_feed(RSS, content_type="application/json").version == "rss20"
    with pytest.raises(ParseError, match="not a JSON Feed"):
        parse_feed(b'{"items": []}')
    with pytest.raises(ParseError, match="invalid JSON"):
        parse_feed(b'{"version": "https://jsonfeed.org/version/1.1", "items": [')
    with pytest.raises(ParseError, match="invalid JSON"):
        parse_feed(b"{" * 100_000 + b"}" * 100_000)  # deep nesting is an error, not a crash
    with pytest.raises(ParseError, match="not a JSON Feed"):
        parse_feed(b"[1, 2]", content_type="application/json")


@pytest.fixture(scope="module")
def parser() -> Iterator[ParserPool]:
    pool = ParserPool(workers=1)
    yield pool
    pool.close()


def test_json_feed_over_http_stores_the_same_rows_as_rss(server: ScenarioServer,
                                                         tmp_path: Path,
                                                         parser: ParserPool) -> None:
    server.put("/feed.xml", RSS)
    server.put("/feed.json", json_feed("1.1"), content_type="application/feed+json")
    stored = {}
    for name, path in (("rss", "/feed.xml"), ("json", "/feed.json")):
        db = tmp_path / f"{name}.db"
        report = run_fetch(make_config(db, {"same": server.url(path)}), force=True,
                           parser=parser)
        assert (report.sources[0].status, report.sources[0].created) == ("fetched", 1)
        with closing(sqlite3.connect(db)) as conn, conn:
            stored[name] = conn.execute(
                "SELECT id, remote_id, url, title, published, updated, author, summary, "
                "fingerprint FROM entries").fetchall()
    assert stored["json"] == stored["rss"]
    assert stored["json"][0][0] == digest(["same", "story-1"])


def test_a_server_that_negotiates_is_asked_for_json_feed_too(httpserver: HTTPServer,
                                                             tmp_path: Path,
                                                             parser: ParserPool) -> None:
    # One address, a page for browsers and the JSON Feed for clients that ask for it.
    def negotiate(request: Request) -> Response:
        if "application/feed+json" in request.headers.get("Accept", ""):
            return Response(json_feed("1.1"), content_type="application/feed+json")
        return Response("<html><body>Latest posts</body></html>", content_type="text/html")

    httpserver.expect_request("/posts").respond_with_handler(negotiate)
    report = run_fetch(make_config(tmp_path / "s.db", {"blog": httpserver.url_for("/posts")}),
                       force=True, parser=parser)
    assert (report.sources[0].status, report.sources[0].created) == ("fetched", 1)


def test_a_lone_surrogate_escape_is_replaced_and_the_feed_kept() -> None:
    # An emoji cut in half by a generator: json.loads keeps the lone surrogate, which no
    # UTF-8 text can hold; the whole feed was rejected ("surrogates not allowed").
    body = (b'{"version": "https://jsonfeed.org/version/1.1", "title": "J", "items": ['
            b'{"id": "1", "title": "Cut \\ud83d here", "content_text": "x \\udfff y"},'
            b'{"id": "2", "title": "Whole \\ud83d\\ude00", "content_text": "fine"}]}')
    feed = parse_feed(body, content_type="application/feed+json")
    assert [e.title for e in feed.entries] == ["Cut \ufffd here", "Whole \U0001F600"]
    assert feed.entries[0].content == "x \ufffd y"
    assert feed.warnings == ("2 unpaired UTF-16 surrogate(s) replaced with U+FFFD",)
    whole = parse_feed(body.replace(b"\\ud83d here", b"here").replace(b"\\udfff ", b""),
                       content_type="application/feed+json")
    assert whole.warnings == ()


def test_an_escaped_nul_is_removed_as_in_xml() -> None:
    # "\\u0000" went into the rows: PostgreSQL's text cannot hold it, and the same NUL in
    # an RSS document is removed (with a warning).
    body = (b'{"version": "https://jsonfeed.org/version/1.1", "title": "J", "items": ['
            b'{"id": "a\\u0000b", "title": "T\\u0000", "url": "https://example.org/x\\u0000",'
            b' "content_text": "x\\u0000y \\ud83d", "authors": [{"name": "A\\u0000"}]}]}')
    feed = parse_feed(body)
    entry = feed.entries[0]
    assert (entry.remote_id, entry.title, entry.url, entry.content, entry.author) == (
        "ab", "T", "https://example.org/x", "xy \ufffd", "A")
    assert feed.warnings == ("1 unpaired UTF-16 surrogate(s) replaced with U+FFFD",
                             "5 control character(s) removed (as from an XML feed)")


def test_control_characters_are_removed_as_from_xml() -> None:
    # An XML feed loses its C0 controls before parsing (a form feed, a terminal's ESC);
    # a JSON Feed kept every one but NUL, in its summaries and content.
    body = (b'{"version": "https://jsonfeed.org/version/1.1", "title": "J", "items": [{'
            b'"id": "1", "url": "https://example.org/1", "title": "T",'
            b' "content_text": "red \\u001b[31m\\fpage\\u0007 tab\\tline\\nend",'
            b' "summary": "C:\\\\boot"}]}')
    feed = parse_feed(body)
    entry = feed.entries[0]
    assert entry.content == "red [31mpage tab\tline<br>end"
    assert entry.summary == "C:\\boot"  # an escaped backslash is no control
    assert feed.warnings == ("3 control character(s) removed (as from an XML feed)",)


def test_a_line_break_written_raw_inside_a_string_is_read_with_a_warning() -> None:
    # Not JSON (a string may not hold a raw control character), but what a template that
    # pastes the post's HTML in writes; it was refused whole as "invalid JSON".
    body = (b'{"version": "https://jsonfeed.org/version/1.1", "title": "J", "items": [{'
            b'"id": "1", "url": "https://example.org/1", "title": "T",'
            b' "content_html": "<p>one\n\ttwo</p>\x07"}]}')
    feed = parse_feed(body)
    assert feed.entries[0].content == "<p>one\n\ttwo</p>"
    assert feed.warnings == (
        "control characters written raw inside JSON strings (not valid JSON); read leniently",
        "1 control character(s) removed (as from an XML feed)")
    with pytest.raises(ParseError, match="invalid JSON"):  # other faults are still refused
        parse_feed(b'{"version": "https://jsonfeed.org/version/1.1", "items": [1,]}')


def test_a_content_only_item_has_the_same_summary_as_in_rss_and_atom() -> None:
    # feedparser gives an RSS or Atom entry with only its content that content as the
    # summary too; a JSON Feed item said the same way had an empty summary, so the same
    # story stored different rows (and text duplicates, which compare the summary, missed).
    html = "<p>Hello <b>world</b></p>"
    rss_body = ('<rss version="2.0" xmlns:content="http://purl.org/rss/1.0/modules/content/">'
                "<channel><title>t</title><item><guid>g</guid><title>T</title>"
                f"<content:encoded><![CDATA[{html}]]></content:encoded></item></channel></rss>")
    atom_body = ('<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title><entry><id>g</id>'
                 f'<title>T</title><content type="html">{escape(html)}</content></entry></feed>')
    json_body = json.dumps({"version": "https://jsonfeed.org/version/1.1", "title": "t",
                            "items": [{"id": "g", "title": "T", "content_html": html}]})
    rows = [parse_feed(body.encode(), content_type=kind).entries[0] for body, kind in (
        (rss_body, "application/rss+xml"), (atom_body, "application/atom+xml"),
        (json_body, "application/feed+json"))]
    assert {(e.summary, e.content) for e in rows} == {(html, html)}
    text_only = parse_feed(json.dumps({"version": "https://jsonfeed.org/version/1.1",
                                       "items": [{"id": "g", "content_text": "a < b"}]}
                                      ).encode(), content_type="application/feed+json")
    assert (text_only.entries[0].summary, text_only.entries[0].content) == ("a &lt; b",) * 2


def test_rfc_822_dates_and_a_link_post_without_url() -> None:
    # Some generators write RSS's dates into JSON Feed; they were left empty, with one
    # warning per item. A link post may name only the page it is about.
    items = [{"id": "a", "external_url": "https://elsewhere.example/story",
              "content_text": "x", "date_published": "Mon, 02 Mar 2026 10:00:00 +0300",
              "date_modified": "Tue, 03 Mar 2026 10:00:00 GMT"},
             {"id": "b", "url": "https://example.org/b", "external_url": "https://e.example/",
              "content_text": "y", "date_published": "yesterday"},
             {"id": "c", "content_text": "z", "date_published": "last week"}]
    body = json.dumps({"version": "https://jsonfeed.org/version/1.1", "title": "t",
                       "items": items}).encode()
    feed = parse_feed(body)
    assert [(e.url, e.published, e.updated) for e in feed.entries] == [
        ("https://elsewhere.example/story", "2026-03-02T07:00:00Z", "2026-03-03T10:00:00Z"),
        ("https://example.org/b", "", ""),
        ("", "", "")]
    assert feed.warnings == ("date 'yesterday' and 1 more not RFC 3339; left empty",)


def test_a_date_out_of_range_is_left_empty_and_the_feed_kept() -> None:
    # An offset that takes the date before the year 1 or past 9999 raised OverflowError
    # out of parse_feed, and the whole feed was lost to one item's date.
    items = [{"id": "a", "content_text": "x", "date_published": "0001-01-01T00:00:00+01:00"},
             {"id": "b", "content_text": "y", "date_modified": "9999-12-31T23:59:59-01:00"},
             {"id": "c", "content_text": "z", "date_published": "0201-12-03T10:00:00Z"},
             {"id": "d", "content_text": "w", "date_published": "2026-12-03T10:00:00+0530"}]
    feed = parse_feed(json.dumps({"version": "https://jsonfeed.org/version/1.1", "title": "t",
                                  "items": items}).encode())
    assert [(e.remote_id, e.published, e.updated) for e in feed.entries] == [
        ("a", "", ""), ("b", "", ""), ("c", "", ""), ("d", "2026-12-03T04:30:00Z", "")]
    assert feed.warnings == (
        "date '0001-01-01T00:00:00+01:00' and 2 more not RFC 3339; left empty",)


@pytest.mark.parametrize(("date", "stored"), [
    # Not RFC 3339, but forms the RSS and Atom reader reads: they were left empty.
    ("2026-12-05 10:00 CET", "2026-12-05T09:00:00Z"),
    ("2026-12-05T10:00:00 EST", "2026-12-05T15:00:00Z"),
    ("05.12.2026 10:00", "2026-12-05T10:00:00Z"),
    ("2026/12/05", "2026-12-05T00:00:00Z"),
    ("05/12/2026", ""),
    # A zone nobody can name (IST: India, Ireland, Israel) is UTC, and said so.
    ("2026-12-05 10:00 IST", "2026-12-05T10:00:00Z"),
    # A Unix timestamp (seconds, milliseconds) was left empty here, read in RSS.
    ("1733047200", "2024-12-01T10:00:00Z"),
    ("1733047200000", "2024-12-01T10:00:00Z"),
    ("Sat, 05 Dec 2026 10:00:00 UTC+1", "2026-12-05T09:00:00Z"),
])
def test_a_json_feed_date_is_read_as_an_rss_date_would_be(date: str, stored: str) -> None:
    body = json.dumps({"version": "https://jsonfeed.org/version/1.1", "title": "t",
                       "items": [{"id": "a", "content_text": "x", "date_published": date}]})
    feed = parse_feed(body.encode())
    assert feed.entries[0].published == stored
    rss = parse_feed(f'<rss version="2.0"><channel><title>t</title><item><guid>a</guid>'
                     f"<pubDate>{date}</pubDate></item></channel></rss>".encode())
    assert rss.entries[0].published == stored
    assert ([w for w in feed.warnings if "time zone" in w]
            == [w for w in rss.warnings if "time zone" in w])


def test_a_version_written_with_http_or_left_out_is_read() -> None:
    # Both were refused whole as "not a JSON Feed". Generators of version 1's time wrote
    # http://jsonfeed.org/version/1; a hand-written template may leave the version out.
    http = json.loads(json_feed("1"))
    http["version"] = "http://jsonfeed.org/version/1"
    feed = parse_feed(json.dumps(http).encode())
    assert (feed.version, feed.warnings, len(feed.entries)) == ("json1", (), 1)
    missing = json.loads(json_feed("1.1"))
    del missing["version"]
    feed = parse_feed(json.dumps(missing).encode())
    assert feed.version == "json11" and len(feed.entries) == 1
    assert feed.warnings == ("no JSON Feed version given; read as 1.1",)
    # Something else than a feed still is not one, and says why.
    with pytest.raises(ParseError, match="no jsonfeed.org version, and no title"):
        parse_feed(b'{"items": [{"id": "1"}]}')
    with pytest.raises(ParseError, match="'https://example.org/v2' is not a jsonfeed.org"):
        parse_feed(b'{"version": "https://example.org/v2", "title": "t", "items": []}')


def test_a_date_written_as_a_json_number_is_read_as_a_timestamp() -> None:
    # Not a string, it was dropped without a word: no date and no warning.
    items = [{"id": "a", "content_text": "x", "date_published": 1733047200},
             {"id": "b", "content_text": "y", "date_modified": 1733047200000},
             {"id": "c", "content_text": "z", "date_published": True}]
    feed = parse_feed(json.dumps({"version": "https://jsonfeed.org/version/1.1", "title": "t",
                                  "items": items}).encode())
    assert [(e.published, e.updated) for e in feed.entries] == [
        ("2024-12-01T10:00:00Z", ""), ("", "2024-12-01T10:00:00Z"), ("", "")]
    assert feed.warnings == ("date 'True' not RFC 3339; left empty",)


def test_the_feeds_title_is_held_to_a_titles_limit_and_one_line() -> None:
    # An RSS or Atom feed's title is cut to an entry title's limit; a JSON Feed's was
    # stored whole (1 MB), with its line breaks.
    def title_of(title: str) -> tuple[str, tuple[str, ...]]:
        feed = parse_feed(json.dumps({"version": "https://jsonfeed.org/version/1.1",
                                      "title": title, "items": []}).encode())
        return feed.title, feed.warnings

    assert title_of("T" * 1_048_576) == ("T" * 2048,
                                         ("the feed's title cut to 2048 characters",))
    assert title_of(" Release\n\tnotes ") == ("Release notes", ())


def test_a_number_too_long_for_an_int_costs_only_its_field() -> None:
    # JSON allows any number of digits; Python's int refuses 4,300 and more, and the
    # whole feed was rejected ("use sys.set_int_max_str_digits() to increase the limit").
    digits = "9" * 5000
    feed = parse_feed(('{"version": "https://jsonfeed.org/version/1.1", "title": "t", '
                       f'"items": [{{"id": {digits}, "date_published": {digits}}}, '
                       '{"id": 7, "title": "kept"}]}').encode())
    whole = hashlib.sha256(digits.encode()).hexdigest()
    assert [(e.remote_id, e.published, e.title) for e in feed.entries] == [
        (f"{digits[:2048 - len(whole) - 2]}…#{whole}", "", ""), ("7", "", "kept")]
    assert feed.warnings[0].startswith("date '9999999999")


def test_items_without_an_id_are_known_as_rss_items_without_a_guid_are() -> None:
    # The spec requires an id, and some generators leave it out: such items are known by
    # their link, as RSS items without a guid are. A changelog linking each release to
    # an anchor of one page, and a podcast linking every episode to its home page, were
    # one key to JSON Feed (the response was rejected as a contradiction, with an error
    # saying that no fragment told them apart), and an episode with only its media file
    # was skipped; the same items in RSS were stored.
    from signal_feeds import identify

    def keys(*items: dict[str, Any]) -> dict[str, str]:
        body = json.dumps({"version": "https://jsonfeed.org/version/1.1", "title": "t",
                           "home_page_url": "https://show.example/", "items": list(items)})
        return {r.title: r.key for r in identify("s", parse_feed(body.encode())
                                                 .entries).rows}

    def release(n: str) -> dict[str, Any]:
        return {"title": n, "url": f"https://app.example/changes#v{n}", "content_text": n}

    def episode(n: str, url: str | None = "https://show.example/") -> dict[str, Any]:
        return {"title": f"Ep {n}", "url": url, "content_text": n, "attachments": [
            {"url": f"https://cdn.example/{n}.mp3", "mime_type": "audio/mpeg"}]}

    alone, two = keys(release("1")), keys(release("2"), release("1"))
    assert alone["1"] == two["1"] == digest(["s", "https://app.example/changes#v1"])
    assert two["2"] == digest(["s", "https://app.example/changes#v2"])
    one, both = keys(episode("1")), keys(episode("2"), episode("1"))
    assert one["Ep 1"] == both["Ep 1"] == digest(["s", "https://cdn.example/1.mp3"])
    assert keys(episode("3", url=None))["Ep 3"] == digest(["s", "https://cdn.example/3.mp3"])
    # An item with an id, or with a page of its own, is known as before.
    assert keys(dict(release("4"), id="r4"))["4"] == digest(["s", "r4"])
    assert keys(episode("5", "https://show.example/5"))["Ep 5"] == digest(
        ["s", "https://show.example/5"])
    # What is stored is the same as RSS stores.
    rss = parse_feed(b'<rss version="2.0"><channel><title>t</title><link>https://show.example/'
                     b'</link><item><title>Ep 3</title><enclosure url="https://cdn.example/'
                     b'3.mp3" type="audio/mpeg" length="1"/></item></channel></rss>')
    body = json.dumps({"version": "https://jsonfeed.org/version/1.1", "title": "t",
                       "home_page_url": "https://show.example/",
                       "items": [episode("3", url=None)]}).encode()
    assert parse_feed(body).entries[0].url == rss.entries[0].url == "https://cdn.example/3.mp3"
    assert parse_feed(json.dumps({"version": "https://jsonfeed.org/version/1.1", "title": "t",
                                  "items": [release("1")]}).encode()
                      ).entries[0].url == "https://app.example/changes"
