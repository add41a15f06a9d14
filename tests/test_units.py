"""Pure pieces: URL policy, digests (pinned), identity, parsing of fixture files."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import pytest
from conftest import FIXTURES

from signal_feeds import (
    ContradictionError,
    ParsedEntry,
    ParsedFeed,
    ParseError,
    digest,
    entry_key,
    identify,
    parse_feed,
)
from signal_feeds.identity.keys import classify_change, metadata_fingerprint
from signal_feeds.urls import check_link, normalize_link, without_tracking


def one_item(item: str, **options: str) -> ParsedFeed:
    """An RSS document of one item (its inner XML given), parsed."""
    return parse_feed(f'<rss version="2.0"><channel><title>t</title><item>{item}</item>'
                      "</channel></rss>".encode(), **options)


@pytest.mark.parametrize(("raw", "expected"), [
    ("HTTPS://Example.ORG:443/a/B?q=1&utm_source=x#frag", "https://example.org/a/B?q=1&utm_source=x"),
    ("https://example.org", "https://example.org/"),
    ("https://example.org:8443/x", "https://example.org:8443/x"),
    ("  https://example.org/x  ", "https://example.org/x"),
    ("https://[2001:DB8::1]:443/x", "https://[2001:db8::1]/x"),
    ("http://Example.org:80/a#x", "http://example.org/a"),
    ("javascript:alert(1)", None),
    ("data:text/html,hi", None),
    ("file:///etc/passwd", None),
    ("urn:signal:layout-1", None),
    ("https://user:pw@example.org/", None),
    ("https://example.org:99999/", None),
    ("", None),
    # A space is sent as %20 by every browser; a tab or a line break is not a link's.
    ("https://example.org/uploads/Annual report.pdf?x=a b",
     "https://example.org/uploads/Annual%20report.pdf?x=a%20b"),
    ("https://example.org/a\tb", None),
    ("https://example.org/a\nb", None),
    # A no-break space (an HTML &nbsp; in the link) is sent as %C2%A0.
    ("https://example.org/a\xa0b#top", "https://example.org/a%C2%A0b"),
    # U+0085 is a control character; it was kept inside a link, and normalizing the
    # result once more, with the fragment gone, stripped it (found by hypothesis).
    ("https://example.org/a\x85#top", None),
    ("https://example.org/a\u2028b", None),
])
def test_link_policy(raw: str, expected: str | None) -> None:
    assert normalize_link(raw) == expected


def test_https_only_is_a_setting_and_relative_links_resolve() -> None:
    assert normalize_link("http://example.org/x", require_https=True) is None
    assert normalize_link("https://example.org/x", require_https=True) == "https://example.org/x"
    # The older, inverted keyword still works for callers that pass it.
    assert normalize_link("http://example.org/x", allow_http=False) is None
    assert normalize_link("http://example.org/x", allow_http=True) == "http://example.org/x"
    assert normalize_link("/post/1#c", base="https://example.org/feed") == \
        "https://example.org/post/1"
    # A malformed host is refused, with or without a base, never raised (found by
    # hypothesis in test_properties).
    assert normalize_link("https://127.0.0.1[", base="https://example.org/feed/") is None
    assert normalize_link("https://127.0.0.1[") is None
    # Hosts as they are written in the wild stay as they were.
    for link in ("https://[2001:db8::1]:8080/p", "https://bücher.de/x", "http://127.0.0.1/",
                 "https://sub_domain.example.com/", "https://example.org./a"):
        assert normalize_link(link) == link


@pytest.mark.parametrize(("raw", "require_https", "reason"), [
    ("javascript:alert(1)", False, "scheme javascript: is not http or https"),
    ("data:text/html,hi", False, "scheme data: is not http or https"),
    ("file:///etc/passwd", False, "scheme file: is not http or https"),
    ("urn:signal:layout-1", False, "scheme urn: is not http or https"),
    ("https://user:pw@example.org/", False, "credentials in the URL"),
    ("http://example.org/", True, "scheme http: is not https"),
    ("https://127.0.0.1[", False, "malformed URL (Invalid IPv6 URL)"),
    # A host that is not one was "corrected" into another host: https://v1.fe/a,
    # https://[::1]/, https://ex%20ample.org/.
    ("https://[v1.fe]/a", False, "host [v1.fe] is not an IPv6 address"),
    ("https://[::1]x/", False, "'[::1]x' is not an IPv6 address and a port"),
    ("https://[::1]]/", False, "'[::1]]' is not an IPv6 address and a port"),
    ("https://ex ample.org/", False, "host 'ex%20ample.org' is not a host name"),
    ("https://ex%3Cample.org/", False, "host 'ex%3cample.org' is not a host name"),
    ("", False, ""),
    ("   ", False, ""),
    # A relative link with nothing to resolve it against (signal parse of a file without
    # --config) was "scheme (none) is not http or https".
    ("/2026/12/post", False, "relative link, and no feed address to resolve it against"),
    ("post.html", True, "relative link, and no feed address to resolve it against"),
])
def test_a_refused_link_says_why(raw: str, require_https: bool, reason: str) -> None:
    assert check_link(raw, require_https=require_https) == (None, reason)


def test_pinned_digests() -> None:
    # Pinned from sha256 of the literal canonical JSON text (computed outside Signal):
    # a change to the canonical JSON or the key layout must not slip by.
    assert digest(["demo-rss", "release-1"]) == (
        "501d09a13183dc575b98493046956d3d78ed35b2ff66223b44d177a25296a630")
    assert digest({"b": 1, "a": "é"}) == digest({"a": "é", "b": 1})
    assert digest(["a-b", "c"]) != digest(["a", "b-c"])
    entry = ParsedEntry(remote_id="release-1", url="https://example.org/releases/1",
                        title="Заметки о выпуске", published="2026-03-14T09:26:53Z", updated="")
    assert metadata_fingerprint(entry) == digest(
        {"title": "Заметки о выпуске", "url": "https://example.org/releases/1",
         "published": "2026-03-14T09:26:53Z", "updated": ""})
    assert metadata_fingerprint(entry) == (
        "1f693fa6c36f4f4d63e0ecbccc55d19c46ffc86a0d7c6cd47a1980f5dd587047")
    # The canonical JSON is json.dumps's with these options, whatever the value holds.
    for value in (["s", "é \u2028 \x1b \"q\""], {"z": [1.5, None, True], "a": {"b": ""}}):
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        assert digest(value) == hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_key_falls_back_to_url_and_never_invents_one() -> None:
    assert entry_key("s", "", "https://example.org/x") == digest(["s", "https://example.org/x"])
    assert entry_key("s", "id-1", "https://example.org/x") == digest(["s", "id-1"])
    assert entry_key("s", "", "") is None


def _entry(title: str, rid: str = "release-1") -> ParsedEntry:
    return ParsedEntry(remote_id=rid, url="", title=title, published="", updated="")


def test_identify_collapses_rejects_and_skips() -> None:
    same = identify("s", [_entry("A"), _entry("A"), _entry("B", "other"),
                          _entry("no id", rid="")])
    assert [r.remote_id for r in same.rows] == ["release-1", "other"]
    assert same.skipped == 1
    with pytest.raises(ContradictionError) as info:
        identify("s", [_entry("A"), _entry("A, corrected")])
    assert info.value.source_id == "s" and info.value.remote_id == "release-1"
    assert info.value.key == digest(["s", "release-1"])
    # The source, the key and the remote id, each named once (design: Identify).
    assert str(info.value) == (f"s: two different versions of one entry in one response "
                               f"(key {info.value.key}, remote id 'release-1'); the "
                               "response is rejected")
    # Items without a guid that all link to one page: the message says what happened.
    page = "https://example.org/news"
    with pytest.raises(ContradictionError) as info:
        identify("s", [ParsedEntry(remote_id="", url=page, title=t, published="",
                                   updated="") for t in ("Notice one", "Notice two")])
    assert str(info.value) == (f"s: two different entries without an id share the link "
                               f"'{page}' in one response, and neither a fragment of it "
                               f"nor a media file tells them apart (key {info.value.key}, "
                               "no remote id); the response is rejected")
    assert info.value.remote_id == "" and info.value.key == digest(["s", page])


def test_entries_without_an_id_on_one_page_are_known_by_what_tells_them_apart() -> None:
    # A changelog linking each release to an anchor of one page, a podcast linking each
    # episode to its home page: the whole response was rejected on every run. What an
    # entry is known by depends on the entry and the feed alone: a key never changes
    # when a second entry on the page appears (the first build of this keyed by the
    # link until then, and stored the first release again beside itself).
    def items(*parts: str) -> bytes:
        return ('<rss version="2.0"><channel><title>t</title><link>https://show.example/'
                "</link>" + "".join(parts) + "</channel></rss>").encode()

    def release(n: str) -> str:
        return f"<item><title>{n}</title><link>https://app.example/changes#v{n}</link></item>"

    def episode(n: str) -> str:
        return (f"<item><title>Ep {n}</title><link>https://show.example/</link><enclosure "
                f'url="https://cdn.example/{n}.mp3" type="audio/mpeg" length="1"/></item>')

    def keys(body: bytes) -> dict[str, str]:
        found = identify("s", parse_feed(body).entries)
        return {r.title: r.key for r in found.rows}

    alone, two = keys(items(release("1"))), keys(items(release("2"), release("1")))
    assert alone["1"] == two["1"] == digest(["s", "https://app.example/changes#v1"])
    assert two["2"] == digest(["s", "https://app.example/changes#v2"])
    one, both = keys(items(episode("1"))), keys(items(episode("2"), episode("1")))
    assert one["Ep 1"] == both["Ep 1"] == digest(["s", "https://cdn.example/1.mp3"])
    # Stored links keep the policy: no fragment.
    assert {e.url for e in parse_feed(items(release("1"))).entries} == {
        "https://app.example/changes"}
    # An episode with a page of its own is known by that page, as ever.
    own = ('<item><title>Ep 3</title><link>https://show.example/3</link><enclosure '
           'url="https://cdn.example/3.mp3" type="audio/mpeg" length="1"/></item>')
    assert keys(items(own))["Ep 3"] == digest(["s", "https://show.example/3"])


def test_classify_change() -> None:
    (row,) = identify("s", [_entry("A")]).rows
    assert classify_change(None, row) == "created"
    assert classify_change((row.fingerprint, row.content_fingerprint), row) == "unchanged"
    assert classify_change(("other", row.content_fingerprint), row) == "updated"
    assert classify_change((row.fingerprint, "other"), row) == "updated"


@pytest.mark.parametrize(("url", "clean"), [
    ("https://a.example/p?utm_source=rss&utm_medium=rss", "https://a.example/p"),
    ("https://a.example/p?id=3&UTM_Campaign=x&fbclid=1#c", "https://a.example/p?id=3#c"),
    ("https://a.example/p?id=3&b", "https://a.example/p?id=3&b"),  # untouched
    ("https://a.example/#/route?utm_source=1", "https://a.example/#/route?utm_source=1"),
    ("https://a.example/p?utm%5Fsource=1&a=%20", "https://a.example/p?a=%20"),
])
def test_without_tracking_keeps_the_rest_as_written(url: str, clean: str) -> None:
    assert without_tracking(url) == clean


def test_a_link_that_only_gains_or_rotates_tracking_parameters_is_no_new_version() -> None:
    (row,) = identify("s", [replace(_entry("A"), url="https://a.example/p")]).rows
    stored = (row.fingerprint, row.content_fingerprint)
    for moved in (row.url + "?utm_source=rss", row.url + "?utm_campaign=b&fbclid=9"):
        again = replace(row, url=moved, fingerprint=digest({
            "title": row.title, "url": moved, "published": row.published,
            "updated": row.updated}))
        assert classify_change(stored, again, stored_url=row.url) == "unchanged"
        assert classify_change(stored, again) == "updated"  # without the stored link
        # A real change beside it is one.
        retitled = replace(again, title="B", fingerprint=digest({
            "title": "B", "url": moved, "published": row.published,
            "updated": row.updated}))
        assert classify_change(stored, retitled, stored_url=row.url) == "updated"
    other = replace(row, url=row.url + "?page=2", fingerprint="x")
    assert classify_change(stored, other, stored_url=row.url) == "updated"


def test_demo_feeds_parse_into_rows() -> None:
    rss = parse_feed((FIXTURES / "demo-rss.xml").read_bytes())
    assert [e.remote_id for e in rss.entries][:2] == ["release-1", "release-2"]
    assert rss.ttl_seconds == 3600
    assert all("<script" not in e.summary for e in rss.entries)
    atom = parse_feed((FIXTURES / "demo-atom.xml").read_bytes())
    layout = next(e for e in atom.entries if e.remote_id == "urn:signal:layout-1")
    assert layout.url == "https://example.org/layout"  # fragment removed, urn: id kept as id
    assert layout.published.endswith("Z")


def test_doctype_and_entities_are_removed_before_parsing() -> None:
    body = (b'<?xml version="1.0"?>\n<!DOCTYPE rss [\n <!ENTITY a "aaaaaaaaaa">\n'
            b' <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">\n'
            b' <!ENTITY ext SYSTEM "file:///etc/passwd">\n]>\n'
            b'<rss version="2.0"><channel><title>t</title><item><guid>g</guid>'
            b'<title>x &b; &ext;</title></item></channel></rss>')
    feed = parse_feed(body)
    (entry,) = feed.entries
    assert "aaaaaaaaaa" not in entry.title and "root:" not in entry.title
    assert any("DOCTYPE" in w for w in feed.warnings)


def test_a_summary_copied_from_html_content_is_html() -> None:
    # feedparser fills ``summary`` from a lone Atom <content> or RSS <content:encoded>
    # but gives it no type: it is the content's HTML, not text to escape.
    atom = (b'<feed xmlns="http://www.w3.org/2005/Atom"><title>a</title><entry><id>e</id>'
            b'<title>t</title><content type="html">&lt;p&gt;Hi &lt;b&gt;there&lt;/b&gt;'
            b"&lt;/p&gt;</content></entry></feed>")
    rss = (b'<rss version="2.0" xmlns:content="http://purl.org/rss/1.0/modules/content/">'
           b"<channel><title>r</title><item><guid>e</guid><content:encoded><![CDATA["
           b"<p>Hi <b>there</b></p>]]></content:encoded></item></channel></rss>")
    for body in (atom, rss):
        (entry,) = parse_feed(body).entries
        assert entry.content == "<p>Hi <b>there</b></p>"
        assert entry.summary == entry.content
    # A summary of its own keeps its own type: plain text is escaped.
    text = atom.replace(b"<content", b"<summary>1 &lt; 2</summary><content")
    assert parse_feed(text).entries[0].summary == "1 &lt; 2"


_RELATIVE_HTML = ('&lt;p&gt;&lt;a href="/about"&gt;a&lt;/a&gt; &lt;img src="pic.png"&gt; '
                  '&lt;a href="#fn1"&gt;1&lt;/a&gt; &lt;a href="//cdn.example/x"&gt;x&lt;/a&gt; '
                  '&lt;a href="https://other.example/y"&gt;y&lt;/a&gt;&lt;/p&gt;')


@pytest.mark.parametrize(("body", "base"), [
    # RSS: the item's link is the page the HTML was written for.
    ('<rss version="2.0"><channel><title>r</title><item><link>/2026/post/</link>'
     f"<description>{_RELATIVE_HTML}</description></item></channel></rss>",
     "https://blog.example/2026/post/"),
    # No link: the feed's own address.
    ('<rss version="2.0"><channel><title>r</title><item><guid isPermaLink="false">g</guid>'
     f"<description>{_RELATIVE_HTML}</description></item></channel></rss>",
     "https://blog.example/feeds/all.xml"),
    # Atom: the element's xml:base wins, itself relative to the document.
    ('<feed xmlns="http://www.w3.org/2005/Atom"><title>a</title><entry><id>e</id>'
     '<link href="/elsewhere/"/><content type="html" xml:base="/2026/post/">'
     f"{_RELATIVE_HTML}</content></entry></feed>",
     "https://blog.example/2026/post/"),
    # An xml:base inherited from the feed element counts as well.
    ('<feed xmlns="http://www.w3.org/2005/Atom" xml:base="https://mirror.example/p/">'
     '<title>a</title><entry><id>e</id><link href="q/"/>'
     f'<summary type="html">{_RELATIVE_HTML}</summary></entry></feed>',
     "https://mirror.example/p/"),
])
def test_relative_references_in_html_are_made_absolute(body: str, base: str) -> None:
    (entry,) = parse_feed(body.encode(), url="https://blog.example/feeds/all.xml").entries
    html = entry.summary or entry.content
    origin, folder = "/".join(base.split("/", 3)[:3]), base.rsplit("/", 1)[0]
    assert f'href="{origin}/about"' in html
    assert f'src="{folder}/pic.png"' in html
    assert f'href="{base}#fn1"' in html
    assert 'href="https://cdn.example/x"' in html  # scheme-relative: the base's scheme
    assert 'href="https://other.example/y"' in html  # absolute: untouched


def test_relative_references_stay_relative_without_a_web_base() -> None:
    body = ('<rss version="2.0"><channel><title>r</title><item><guid>g</guid>'
            f"<description>{_RELATIVE_HTML}</description></item></channel></rss>").encode()
    for url in (None, "file:///tmp/feed.xml"):
        (entry,) = parse_feed(body, url=url).entries
        assert 'href="/about"' in entry.summary and 'src="pic.png"' in entry.summary
    # A malformed xml:base is passed over for the next candidate.
    atom = ('<feed xmlns="http://www.w3.org/2005/Atom"><title>a</title><entry><id>e</id>'
            '<content type="html" xml:base="http://[bad">'
            f"{_RELATIVE_HTML}</content></entry></feed>").encode()
    (entry,) = parse_feed(atom, url="https://blog.example/a.xml").entries
    assert 'src="https://blog.example/pic.png"' in entry.content


def _one_title(encoding: str, title: str, *, declare: bool = True) -> bytes:
    declaration = f'<?xml version="1.0" encoding="{encoding}"?>' if declare else ""
    return (declaration + '<rss version="2.0"><channel><title>c</title><item><guid>1</guid>'
            f"<title>{title}</title></item></channel></rss>").encode(encoding)


@pytest.mark.parametrize(("body", "content_type", "warned"), [
    # text/xml without a charset: the declaration or BOM names the encoding (RFC 7303),
    # not RFC 3023's US-ASCII default, so nothing is "overridden".
    (_one_title("utf-8", "Crème brûlée"), "text/xml", False),
    (_one_title("iso-8859-1", "Crème brûlée"), "text/xml", False),
    (_one_title("utf-16", "Crème brûlée"), "text/rss+xml", False),
    (_one_title("utf-8", "Crème brûlée", declare=False), "text/xml; qs=0.9", False),
    # A charset parameter still wins, and a body that is not what it says still warns.
    (_one_title("iso-8859-1", "Crème brûlée"), "text/xml; charset=iso-8859-1", False),
    (_one_title("cp1252", "Crème brûlée", declare=False), "text/xml", True),
])
def test_text_xml_without_a_charset_is_read_by_its_declaration(
        body: bytes, content_type: str, warned: bool) -> None:
    feed = parse_feed(body, content_type=content_type)
    assert feed.entries[0].title == "Crème brûlée"
    assert bool(feed.warnings) is warned, feed.warnings


@pytest.mark.parametrize(("body", "content_type", "notes"), [
    # A feed served as another text type is still read as XML: its declaration (or
    # UTF-8, XML's default) names the encoding. feedparser, by RFC 3023, assumed
    # US-ASCII and said the document "declared as us-ascii", which it never did.
    (_one_title("utf-8", "Crème brûlée"), "text/html",
     ("content type: text/html is not an XML media type",)),
    (_one_title("utf-8", "Crème brûlée", declare=False), "text/plain",
     ("content type: text/plain is not an XML media type",)),
    (_one_title("iso-8859-1", "Crème brûlée"), "text/html",
     ("content type: text/html is not an XML media type",)),
    # A UTF-8 feed behind a default Latin charset on such a type: both are said.
    (_one_title("utf-8", "Crème brûlée"), "text/html; charset=ISO-8859-1",
     ("character encoding: the server said charset=iso-8859-1, but the document is valid"
      " UTF-8 and does not declare another encoding: read as UTF-8; content type:"
      " text/html is not an XML media type",)),
    # With a charset of its own the type is feedparser's to name, as before.
    (_one_title("utf-8", "Crème brûlée"), "text/html; charset=utf-8",
     ("content type: text/html; charset=utf-8 is not an XML media type",)),
])
def test_a_feed_served_as_another_text_type_is_read_by_its_declaration(
        body: bytes, content_type: str, notes: tuple[str, ...]) -> None:
    feed = parse_feed(body, content_type=content_type)
    assert feed.entries[0].title == "Crème brûlée"
    assert feed.warnings == notes


def test_the_feeds_own_link_is_resolved_against_its_address() -> None:
    body = (b'<rss version="2.0"><channel><title>t</title><link>/blog/</link>'
            b"<item><guid>1</guid></item></channel></rss>")
    assert parse_feed(body, url="https://example.org/feed.xml").link == (
        "https://example.org/blog/")
    assert parse_feed(body).link == ""  # nothing to resolve it against


_OVERRULED = "the server said charset="


@pytest.mark.parametrize(("body", "content_type", "overruled"), [
    # UTF-8 bytes behind a default Latin charset: the header is the mistake.
    (_one_title("utf-8", "Crème brûlée"), "application/rss+xml; charset=ISO-8859-1", True),
    (_one_title("utf-8", "Crème brûlée", declare=False), 'text/xml; charset="us-ascii"', True),
    (_one_title("utf-8", "Crème brûlée"), "application/xml; charset=windows-1252", True),
    # Real Latin-1 bytes are not valid UTF-8: the header stands.
    (_one_title("iso-8859-1", "Crème brûlée", declare=False),
     "application/xml; charset=iso-8859-1", False),
    # The document itself says Latin-1: it is read as it says.
    (_one_title("iso-8859-1", "Crème brûlée"), "application/xml; charset=iso-8859-1", False),
    # ASCII bytes (accents as character references): nothing to overrule.
    (_one_title("utf-8", "Cr&#232;me br&#251;l&#233;e"), "text/xml; charset=iso-8859-1",
     False),
    # Any other header charset is not a server default: it is obeyed.
    (_one_title("utf-8", "Crème brûlée"), "application/xml; charset=utf-8", False),
    # A UTF-16 or UTF-32 charset on a document whose "<" is one byte cannot be right (it
    # was "not an RSS or Atom feed (SAXParseException ...)"); on UTF-16, it stands.
    (_one_title("utf-8", "Crème brûlée"), "application/xml; charset=utf-16", True),
    (_one_title("utf-8", "Crème brûlée", declare=False), "text/xml; charset=UTF-32", True),
    (_one_title("utf-16", "Crème brûlée"), "application/xml; charset=utf-16", False),
])
def test_a_utf8_feed_behind_a_default_latin_charset_is_read_as_utf8(
        body: bytes, content_type: str, overruled: bool) -> None:
    feed = parse_feed(body, content_type=content_type)
    assert feed.entries[0].title == "Crème brûlée"
    assert any(_OVERRULED in w for w in feed.warnings) is overruled, feed.warnings


_RU, _JA = "Заметки о выпуске", "リリースノートの日本語タイトル"


@pytest.mark.parametrize(("title", "body", "content_type", "overruled"), [
    # Valid UTF-8 behind another legacy charset than a Latin default: the header is as
    # much the mistake (it was stored as "Р—Р°РјРµС‚РєРё" without a word), since
    # text in a legacy charset almost never forms valid UTF-8 beyond ASCII.
    (_RU, _one_title("utf-8", _RU), "application/rss+xml; charset=windows-1251", True),
    (_RU, _one_title("utf-8", _RU, declare=False), "text/xml; charset=KOI8-R", True),
    (_JA, _one_title("utf-8", _JA), "application/xml; charset=shift_jis", True),
    (_JA, _one_title("utf-8", _JA), "application/xml; charset=gb2312", True),
    # Text that is in the charset the server names is read so.
    (_RU, _one_title("windows-1251", _RU), "application/xml; charset=windows-1251", False),
    (_RU, _one_title("windows-1251", _RU, declare=False),
     "application/xml; charset=windows-1251", False),
    (_RU, _one_title("koi8-r", _RU, declare=False), "text/xml; charset=koi8-r", False),
    (_JA, _one_title("shift_jis", _JA, declare=False), "text/xml; charset=shift_jis", False),
    (_JA, _one_title("euc-jp", _JA), "application/xml; charset=euc-jp", False),
])
def test_a_utf8_feed_behind_another_legacy_charset_is_read_as_utf8(
        title: str, body: bytes, content_type: str, overruled: bool) -> None:
    feed = parse_feed(body, content_type=content_type)
    assert feed.entries[0].title == title
    assert any(_OVERRULED in w for w in feed.warnings) is overruled, feed.warnings


_BOM_TITLE = "Заметки о выпуске, crème brûlée"


def _with_bom(codec: str, mark: bytes, declared: str) -> bytes:
    text = (f'<?xml version="1.0" encoding="{declared}"?><rss version="2.0"><channel>'
            f"<title>c</title><item><guid>1</guid><title>{_BOM_TITLE}</title></item>"
            "</channel></rss>")
    return mark + text.encode(codec)


@pytest.mark.parametrize(("body", "content_type", "warning"), [
    # A byte-order mark names the encoding beyond doubt, and RFC 7303 (3.3) and browsers
    # let it win over the charset parameter. feedparser let the header win: a UTF-8
    # feed with a BOM behind Russian hosting's charset=windows-1251 was stored as
    # "Р—Р°РјРµС‚РєРё", without a word; a UTF-16 one behind a default Latin charset as
    # "0<5B:8" (each character's NUL byte removed), or not at all.
    (_with_bom("utf-8", b"\xef\xbb\xbf", "utf-8"), "application/rss+xml; charset=windows-1251",
     "character encoding: the server said charset=windows-1251, but the document starts "
     "with a UTF-8 byte-order mark: read as UTF-8"),
    (_with_bom("utf-8", b"\xef\xbb\xbf", "utf-8"), 'text/xml; charset="KOI8-R"',
     "character encoding: the server said charset=koi8-r, but the document starts "
     "with a UTF-8 byte-order mark: read as UTF-8"),
    (_with_bom("utf-16-le", b"\xff\xfe", "utf-16"), "application/xml; charset=iso-8859-1",
     "character encoding: the server said charset=iso-8859-1, but the document starts "
     "with a UTF-16LE byte-order mark: read as UTF-16LE"),
    (_with_bom("utf-16-be", b"\xfe\xff", "utf-16"), "text/xml; charset=windows-1252",
     "character encoding: the server said charset=windows-1252, but the document starts "
     "with a UTF-16BE byte-order mark: read as UTF-16BE"),
    (_with_bom("utf-16-le", b"\xff\xfe", "utf-16"), "application/xml; charset=utf-16be",
     "character encoding: the server said charset=utf-16be, but the document starts "
     "with a UTF-16LE byte-order mark: read as UTF-16LE"),
    # The document's own declaration loses to its mark too (feedparser read the
    # declaration when the header said nothing).
    (_with_bom("utf-8", b"\xef\xbb\xbf", "windows-1251"), "application/rss+xml",
     "character encoding: the document declared windows-1251, but it starts with a "
     "UTF-8 byte-order mark: read as UTF-8"),
    (_with_bom("utf-8", b"\xef\xbb\xbf", "koi8-r"), None,
     "character encoding: the document declared koi8-r, but it starts with a "
     "UTF-8 byte-order mark: read as UTF-8"),
    # A charset or a declaration that agrees with the mark says nothing.
    (_with_bom("utf-16-le", b"\xff\xfe", "utf-16"), "application/xml; charset=UTF-16", ""),
    (_with_bom("utf-8", b"\xef\xbb\xbf", "utf-8"), "application/xml; charset=utf-8", ""),
    (_with_bom("utf-16-be", b"\xfe\xff", "utf-16"), None, ""),
])
def test_a_byte_order_mark_wins_over_a_charset_that_contradicts_it(
        body: bytes, content_type: str | None, warning: str) -> None:
    feed = parse_feed(body, content_type=content_type)
    assert feed.entries[0].title == _BOM_TITLE
    assert feed.warnings == ((warning,) if warning else ()), feed.warnings


def test_dates_feedparser_cannot_read_are_reported() -> None:
    # Left empty, such entries are listed by when Signal first saw them: the report says
    # why. One warning per document, not one per entry.
    dates = ["Tue, 01 Dec 2026 10:00:00 EST", "01/12/2026 10:00:00 +0100",
             "Tue, 31 Nov 2026 10:00:00 GMT"]
    items = "".join(f"<item><guid>g{i}</guid><pubDate>{d}</pubDate></item>"
                    for i, d in enumerate(dates))
    feed = parse_feed(f'<rss version="2.0"><channel><title>t</title>{items}'
                      "</channel></rss>".encode())
    assert [e.published for e in feed.entries] == ["2026-12-01T15:00:00Z", "", ""]
    assert feed.warnings == (
        "date '01/12/2026 10:00:00 +0100' and 1 more not understood; left empty",)
    first = items[:items.index("</item>") + len("</item>")]
    clean = parse_feed(f'<rss version="2.0"><channel><title>t</title>{first}'
                       "</channel></rss>".encode())
    assert clean.warnings == ()


def test_relative_guid_is_kept_as_given_and_links_resolve() -> None:
    # The key must not depend on the URL the feed was fetched from (a 301 would re-key).
    body = (b'<rss version="2.0"><channel><title>t</title>'
            b"<item><guid>/p/1</guid><link>/p/1#c</link></item></channel></rss>")
    (entry,) = parse_feed(body, url="https://example.org/feed").entries
    assert entry.remote_id == "/p/1"
    assert entry.url == "https://example.org/p/1"


def _escaped_html_feed() -> bytes:
    # Escaped HTML with many entity references (expat splits text at each of them),
    # text longer than the driver's buffer, CDATA and a malformed tail.
    para = "&lt;p&gt;Caf&amp;eacute; &amp;amp; cr&#232;me &lt;a href=&quot;/x&quot;&gt;x&lt;/a&gt;"
    items = "".join(
        f"<item><guid>g{i}</guid><title>T&amp;{i} &lt;b&gt;bold&lt;/b&gt;</title>"
        f"<link>https://example.org/{i}</link><description>{para * (40 + i * 400)}"
        f"</description><content:encoded><![CDATA[<p>cdata {i}</p>]]></content:encoded></item>"
        for i in range(3))
    return ('<?xml version="1.0"?><rss version="2.0" '
            'xmlns:content="http://purl.org/rss/1.0/modules/content/"><channel><title>t</title>'
            f"{items}</channel></rss>").encode()


def _mixed_scripts_feed() -> bytes:
    # C1 controls (by reference and raw), which feedparser maps to Windows-1252's
    # characters; text on both sides of the tuned table's bound; astral characters.
    text = ("&#150; &#128;uro \u0085 caf\u00e9 \u0416\u0436 \u05d0 \u0928 \u2014 "
            "\u3042\u4e2d\uac00 \U0001f600 \u2fff\u3000")
    return ('<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom">'
            f"<title>{text}</title><id>urn:f</id><entry><id>urn:e</id><title>{text}</title>"
            f'<summary type="html">&lt;p&gt;{text}&lt;/p&gt;</summary>'
            f"<author><name>{text}</name></author></entry></feed>").encode()


def _raw_parse(body: bytes) -> str:
    import feedparser

    result = feedparser.parse(body, resolve_relative_uris=False, sanitize_html=False)
    result["bozo_exception"] = repr(result.get("bozo_exception"))  # compared by identity
    return repr(result)


def test_the_worker_speedups_change_no_field(monkeypatch: pytest.MonkeyPatch) -> None:
    import feedparser.api
    import feedparser.mixin
    import feedparser.util

    from signal_feeds.parse import _speedups
    from signal_feeds.parse._speedups import tune_feedparser

    bodies = [p.read_bytes() for p in sorted(FIXTURES.rglob("*.xml"))]
    bodies += [_escaped_html_feed(), _mixed_scripts_feed()]
    plain = [parse_feed(b, allow_http_links=True) for b in bodies]
    plain_raw = [_raw_parse(b) for b in bodies]
    monkeypatch.setattr(feedparser.api, "PREFERRED_XML_PARSERS",
                        list(feedparser.api.PREFERRED_XML_PARSERS))
    monkeypatch.setattr(feedparser.mixin, "_cp1252", feedparser.mixin._cp1252)
    monkeypatch.setattr(feedparser.mixin, "copy", feedparser.mixin.copy)
    for name in ("get", "__getitem__", "__contains__", "__setitem__", "setdefault"):
        monkeypatch.setattr(feedparser.util.FeedParserDict, name,
                            getattr(feedparser.util.FeedParserDict, name))
    monkeypatch.setattr(feedparser.mixin, "_urljoin", feedparser.mixin._urljoin)
    mixin = feedparser.mixin._FeedParserMixin
    monkeypatch.setattr(mixin, "_sync_author_detail", mixin._sync_author_detail)
    monkeypatch.setattr(_speedups, "_installed", False)
    assert tune_feedparser()
    assert tune_feedparser()  # idempotent
    assert feedparser.api.PREFERRED_XML_PARSERS.count("signal_feeds.parse._sax") == 1
    tuned = [parse_feed(b, allow_http_links=True) for b in bodies]
    assert tuned == plain
    # feedparser's own result too, every key in its order (repr shows both).
    assert [_raw_parse(b) for b in bodies] == plain_raw
    assert len(plain[-2].entries[2].summary) > 48 * 1024  # the escaped text: > 64 KiB
    assert "\u2013" in plain[-1].entries[0].title  # &#150; read as Windows-1252's en dash


@pytest.mark.parametrize(("given", "stored"), [
    ("1733047200", "2024-12-01T10:00:00Z"),  # seconds since 1970 (feedparser: year 1733)
    ("1733047200123", "2024-12-01T10:00:00Z"),  # milliseconds
    ("999999999", "2001-09-09T01:46:39Z"),
    ("2026", "2026-01-01T00:00:00Z"),  # a year alone stays feedparser's reading
    ("20261201", "2026-12-01T00:00:00Z"),  # so does a compact ISO 8601 date
    ("20261205100000", "2026-12-05T10:00:00Z"),  # and time (feedparser: the day alone)
])
def test_a_unix_timestamp_is_read_as_one(given: str, stored: str) -> None:
    for element in ("pubDate", "atom:updated"):
        feed = parse_feed(
            '<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel><title>t'
            f"</title><item><guid>g</guid><{element}>{given}</{element}></item>"
            "</channel></rss>".encode())
        entry = feed.entries[0]
        assert (entry.published or entry.updated) == stored, element
        assert feed.warnings == ()


_DECLARED = (b'<?xml version="1.0" encoding="UTF-8"?>\n<rss version="2.0"><channel>'
             b"<title>T</title><item><guid>g</guid><title>Caf\xc3\xa9 &amp; co</title>"
             b"<description><![CDATA[<p>Hi</p>]]></description></item></channel></rss>")
_PHP = (b"<br />\n<b>Warning</b>:  Cannot modify header information - headers already sent "
        b"in <b>/var/www/wp-content/themes/t/functions.php</b> on line <b>12</b><br />\n")


@pytest.mark.parametrize(("body", "note"), [
    (b"\n\n" + _DECLARED, "white space before the XML declaration removed"),
    (b"\xef\xbb\xbf \r\n" + _DECLARED, "white space before the XML declaration removed"),
    (_PHP + _DECLARED, f"{len(_PHP)} bytes of text before the XML declaration removed"),
    (_DECLARED, None),
])
def test_what_comes_before_the_xml_declaration_is_dropped(body: bytes,
                                                          note: str | None) -> None:
    feed = parse_feed(body, content_type="application/rss+xml")
    assert [(e.title, e.summary) for e in feed.entries] == [("Café & co", "<p>Hi</p>")]
    assert feed.warnings == ((note,) if note else ())  # parsed strictly, not leniently


@pytest.mark.parametrize("body", [
    b"<rss version='2.0'><channel><title>x</title></channel></rss>\n" + _DECLARED,
    b"x" * 5000 + _DECLARED,  # more than 4 KB before it: left to the lenient reading
])
def test_a_lead_that_may_be_the_document_is_kept(body: bytes) -> None:
    from signal_feeds.parse.repairs import from_declaration

    assert from_declaration(body) == (body, "")


@pytest.mark.parametrize(("title", "shown", "repaired"), [
    ("pair &#55357;&#56832; end", "pair \U0001F600 end", 2),  # an emoji as UTF-16 pair
    ("hex pair &#xd83d;&#xDE00;", "hex pair \U0001F600", 2),
    ("alone &#xD800; here", "alone \ufffd here", 1),
    ("reversed &#56832;&#55357;", "reversed \ufffd\ufffd", 2),
    ("apart &#55357; &#56832;", "apart \ufffd \ufffd", 2),
    ("near misses &#55000; &#57344; &#x1F600;", "near misses \ud6d8 \ue000 \U0001F600", 0),
    ("past the last &#99999999; &#x110000;", "past the last \ufffd \ufffd", 2),
    ("far past &#" + "9" * 5000 + ";", "far past \ufffd", 1),  # more than int() reads
    # U+FFFE and U+FFFF, which XML also forbids: &#65535; is Java's end of a stream (-1)
    # written as a character. The whole document was read leniently, and the title
    # kept a noncharacter.
    ("end &#65535; &#xFFFE; &#x0ffff;", "end \ufffd \ufffd \ufffd", 3),
    ("allowed &#65533; &#xFFFD; &#x1FFFF;", "allowed \ufffd \ufffd \U0001ffff", 0),
    ("the last &#1114111; &#x10FFFF; &#0000001114111;", "the last " + "\U0010ffff " * 2
     + "\U0010ffff", 0),
])
def test_character_references_to_no_character_are_repaired(title: str, shown: str,
                                                         repaired: int) -> None:
    # XML forbids them, and feedparser's lenient parser failed on the whole document
    # ("UnicodeEncodeError: surrogates not allowed"): every entry was lost.
    feed = parse_feed(f'<rss version="2.0"><channel><title>t</title><item><guid>g</guid>'
                      f"<title>{title}</title><description>{title}</description></item>"
                      "</channel></rss>".encode())
    (entry,) = feed.entries
    assert (entry.title, entry.summary) == (shown, shown)
    assert feed.warnings == ((f"{repaired * 2} character reference(s) to no character "
                              "repaired",) if repaired else ())


@pytest.mark.parametrize(("ttl", "seconds"), [
    ("60", 3600),
    (" 30 ", 1800),
    ("99999999999999999999", 366 * 24 * 3600),  # fits the database: a year at most
    ("9" * 5000, 366 * 24 * 3600),  # more digits than int() reads
    ("\u00b2", None),  # a digit to str.isdigit, not to int(): the parse used to fail
    ("-5", None),
    ("1e3", None),
])
def test_a_feeds_ttl_is_read_within_bounds(ttl: str, seconds: int | None) -> None:
    feed = parse_feed(f'<rss version="2.0"><channel><title>t</title><ttl>{ttl}</ttl>'
                      "<item><guid>g</guid></item></channel></rss>".encode())
    assert feed.ttl_seconds == seconds


@pytest.mark.parametrize("body", [b"", b"  \n\t", b"\xef\xbb\xbf", b"\xef\xbb\xbf \r\n"])
def test_an_empty_body_is_called_empty(body: bytes) -> None:
    with pytest.raises(ParseError, match=r"^empty body: no feed to parse$"):
        parse_feed(body, content_type="application/rss+xml")


def _has_tz_database() -> bool:
    import zoneinfo

    try:
        zoneinfo.ZoneInfo("America/New_York")
    except zoneinfo.ZoneInfoNotFoundError:
        return False
    return True


_NEEDS_TZ = pytest.mark.skipif(not _has_tz_database(), reason="no tz database here")


@pytest.mark.parametrize(("date", "stored", "warned"), [
    ("Tue, 01 Dec 2026 10:00:00 CET", "2026-12-01T09:00:00Z", False),
    ("Tue, 01 Dec 2026 10:00:00 CEST", "2026-12-01T08:00:00Z", False),
    ("Tue, 01 Dec 2026 10:00 JST", "2026-12-01T01:00:00Z", False),
    ("Tue, 01 Dec 2026 23:30:00 AEDT", "2026-12-01T12:30:00Z", False),
    ("Tue, 01 Dec 2026 10:00:00 UTC", "2026-12-01T10:00:00Z", False),
    # Names feedparser knows keep its reading (nothing applied twice).
    ("Tue, 01 Dec 2026 10:00:00 EST", "2026-12-01T15:00:00Z", False),
    ("Tue, 01 Dec 2026 10:00:00 MET", "2026-12-01T09:00:00Z", False),
    ("Tue, 01 Dec 2026 10:00:00 GMT", "2026-12-01T10:00:00Z", False),
    ("Tue, 01 Dec 2026 10:00:00 +0100", "2026-12-01T09:00:00Z", False),
    # A name of several zones (India, Ireland, Israel) is read as UTC, and said so.
    ("Tue, 01 Dec 2026 10:00:00 IST", "2026-12-01T10:00:00Z", True),
    # After an ISO time too: it was UTC without a word, or (after a space) midnight.
    ("2026-12-01T10:00:00 IST", "2026-12-01T10:00:00Z", True),
    ("2026-12-01 10:00 IST", "2026-12-01T10:00:00Z", True),
    # A name of the tz database, with its summer time on that date: it was read as UTC
    # without a word.
    pytest.param("Tue, 01 Dec 2026 10:00:00 America/New_York", "2026-12-01T15:00:00Z",
                 False, marks=_NEEDS_TZ),
    pytest.param("Wed, 01 Jul 2026 10:00:00 America/New_York", "2026-07-01T14:00:00Z",
                 False, marks=_NEEDS_TZ),
    pytest.param("Tue, 01 Dec 2026 10:00:00 PST8PDT", "2026-12-01T18:00:00Z", False,
                 marks=_NEEDS_TZ),
    ("Tue, 01 Dec 2026 10:00 Mars/Olympus", "2026-12-01T10:00:00Z", True),
    # After an ISO time as well: read as UTC, or (PST8PDT) as PST and then "8PDT".
    pytest.param("2026-12-01 10:00:00 America/New_York", "2026-12-01T15:00:00Z", False,
                 marks=_NEEDS_TZ),
    pytest.param("2026-12-01 10:00 PST8PDT", "2026-12-01T18:00:00Z", False, marks=_NEEDS_TZ),
    pytest.param("2026-07-01T10:00 PST8PDT", "2026-07-01T17:00:00Z", False, marks=_NEEDS_TZ),
    ("2026-12-01T10:00 Mars/Olympus", "2026-12-01T10:00:00Z", True),
])
def test_a_zone_name_feedparser_reads_as_utc(date: str, stored: str, warned: bool) -> None:
    feed = one_item(f"<guid>g</guid><pubDate>{date}</pubDate>")
    assert feed.entries[0].published == stored
    assert feed.warnings == ((f"time zone of date {date!r} not known; read as UTC",)
                             if warned else ())


@pytest.mark.parametrize(("date", "stored"), [
    # feedparser reads the date of these and drops the time (and the zone).
    ("2026/12/01 10:00:00", "2026-12-01T10:00:00Z"),
    ("2026/12/01 10:00", "2026-12-01T10:00:00Z"),
    ("2026.12.01 10:00", "2026-12-01T10:00:00Z"),
    ("2026-12-01 10:00 CET", "2026-12-01T09:00:00Z"),
    ("2026-12-01 10:00:00 EST", "2026-12-01T15:00:00Z"),
    ("2026/12/01 10:00:00 +0100", "2026-12-01T09:00:00Z"),
    # What feedparser reads whole stays its reading.
    ("2026-12-01 10:00:00 +01:00", "2026-12-01T09:00:00Z"),
    ("2026-12-01T10:00:00", "2026-12-01T10:00:00Z"),
    ("2026/12/01", "2026-12-01T00:00:00Z"),
    ("2026/12/01 25:00", "2026-12-01T00:00:00Z"),  # no such time: the date alone
])
def test_a_numeric_date_keeps_its_time(date: str, stored: str) -> None:
    feed = one_item(f"<guid>g</guid><pubDate>{date}</pubDate>")
    assert feed.entries[0].published == stored


_ATOM_TITLE = ('<feed xmlns="http://www.w3.org/2005/Atom"><title type="html">{0}</title>'
               '<entry><id>1</id><title type="html">{0}</title></entry></feed>')
_RSS_TITLE = ('<rss version="2.0"><channel><title>{0}</title>'
              "<item><guid>1</guid><title>{0}</title></item></channel></rss>")


@pytest.mark.parametrize(("body", "title"), [
    # An HTML title's references are read, as a browser shows them (they used to be
    # stored as written: "Tom &amp; Jerry", "It&#8217;s here").
    (_ATOM_TITLE.format("Tom &amp;amp; Jerry"), "Tom & Jerry"),
    (_ATOM_TITLE.format("A &amp;lt;b&amp;gt; tag"), "A <b> tag"),
    (_RSS_TITLE.format("It&amp;#8217;s here"), "It\u2019s here"),
    (_RSS_TITLE.format("<![CDATA[Tom &amp; Jerry]]>"), "Tom & Jerry"),
    (_RSS_TITLE.format("A &lt;b&gt;bold&lt;/b&gt; post"), "A bold post"),
    # Text stays text: what it says is what is stored.
    (_RSS_TITLE.format("Use the &lt;title&gt; tag &amp; more"), "Use the <title> tag & more"),
    (_RSS_TITLE.format("AT&amp;T &amp; Q&amp;A"), "AT&T & Q&A"),
    ('<feed xmlns="http://www.w3.org/2005/Atom"><title>Tom &amp;amp; Jerry</title>'
     '<entry><id>1</id><title type="text">Tom &amp;amp; Jerry</title></entry></feed>',
     "Tom &amp; Jerry"),
])
def test_an_html_title_is_stored_as_the_text_it_shows(body: str, title: str) -> None:
    feed = parse_feed(body.encode())
    assert (feed.entries[0].title, feed.title) == (title, title)


@pytest.mark.parametrize(("body", "title"), [
    # Pretty-printed XML: the line breaks and indentation were stored in the title.
    (_RSS_TITLE.format("\n    A title that\n    spans lines\t and a tab\n  "),
     "A title that spans lines and a tab"),
    (_ATOM_TITLE.format("\n  An &lt;em&gt;HTML&lt;/em&gt;\n  title "), "An HTML title"),
    # An HTML title's line break and block edges part words (they ran together).
    (_ATOM_TITLE.format("Line one&lt;br/&gt;Line two"), "Line one Line two"),
    (_ATOM_TITLE.format("&lt;p&gt;One&lt;/p&gt;&lt;p title='a&gt;b'&gt;Two&lt;/p&gt;"),
     "One Two"),
    (_ATOM_TITLE.format("A&lt;b&gt;bold&lt;/b&gt;word"), "Aboldword"),  # inline: no space
    # A single space, several spaces in a row and a no-break space.
    (_RSS_TITLE.format("10\u00a0km  run"), "10\u00a0km run"),
])
def test_a_title_is_stored_on_one_line(body: str, title: str) -> None:
    feed = parse_feed(body.encode())
    assert (feed.entries[0].title, feed.title) == (title, title)


def test_an_author_and_a_json_feed_title_are_stored_on_one_line() -> None:
    rss = ('<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/"><channel>'
           "<title>t</title><item><guid>g</guid><dc:creator>\n   Jane\n   Doe\n "
           "</dc:creator></item></channel></rss>")
    assert parse_feed(rss.encode()).entries[0].author == "Jane Doe"
    json_feed = ('{"version": "https://jsonfeed.org/version/1.1", "title": "t", "items": '
                 '[{"id": "1", "title": "Two\\n  lines", "authors": [{"name": "Ana\\tLima"}]}]}')
    (entry,) = parse_feed(json_feed.encode(), content_type="application/feed+json").entries
    assert (entry.title, entry.author) == ("Two lines", "Ana Lima")


@pytest.mark.parametrize("item", [
    '<guid isPermaLink="false">tag:x,2026:a&amp;b&lt;c&gt;</guid>',
    "<guid>https://example.org/?p=1&amp;lang=en</guid>",  # the guid as the link too
    "<guid>1</guid><author>tom@example.org (Tom &amp; Jerry)</author>",
    "<guid>1</guid><dc:creator>Ann &lt;ann@example.org&gt;</dc:creator>",
    '<guid>1</guid><media:description>A &lt;b&gt;good&lt;/b&gt; film</media:description>',
    "<guid>1</guid><feedburner:origLink>https://example.org/?p=1&amp;c=2</feedburner:origLink>",
    # HTML's legacy references without a semicolon are no XML: "&copy=2" stays a parameter.
    "<guid>https://example.org/?a=1&amp;copy=2&amp;reg=3</guid>",
])
def test_a_feed_read_leniently_gives_the_entry_it_gives_read_strictly(item: str) -> None:
    # feedparser's lenient parser (for a document expat refuses) left character
    # references in ids and names: one stray character in a feed gave each entry whose
    # guid held an "&" a new key, and so a second copy.
    head = ('<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:media='
            '"http://search.yahoo.com/mrss/" xmlns:feedburner="http://rssnamespace.org/'
            'feedburner/ext/1.0"><channel><title>t{}</title>')
    strict = parse_feed(f"{head.format('')}<item>{item}</item></channel></rss>".encode())
    lenient = parse_feed(f"{head.format('&bogus;')}<item>{item}</item></channel></rss>"
                         .encode())
    assert any("leniently" in w for w in lenient.warnings)
    assert lenient.entries == strict.entries


_FEEDBURNER = ('<rss version="2.0" xmlns:feedburner="http://rssnamespace.org/feedburner/ext/'
               '1.0"><channel><title>t</title><item><guid isPermaLink="false">p1</guid>'
               "<link>https://feeds.feedburner.com/~r/blog/~3/x1/</link>{}</item>"
               "</channel></rss>")


@pytest.mark.parametrize(("link", "url"), [
    # Google Alerts links each result through a click counter.
    ("https://www.google.com/url?rct=j&amp;sa=t&amp;url=https://sqlite.org/releaselog/3_4"
     "5_2.html&amp;ct=ga&amp;cd=CAE&amp;usg=AOv", "https://sqlite.org/releaselog/3_45_2.html"),
    ("https://www.google.co.uk/url?q=http://a.example/x%3Fy%3D1&amp;sa=U",
     "http://a.example/x?y=1"),
    # Not such a redirect, or not to a web page: the link stands.
    ("https://evil.example/url?url=https://b.example/", "https://evil.example/url?url=https:"
     "//b.example/"),
    ("https://www.google.com/url?url=javascript:alert(1)",
     "https://www.google.com/url?url=javascript:alert(1)"),
])
def test_a_google_redirect_gives_the_page_it_leads_to(link: str, url: str) -> None:
    atom = ('<feed xmlns="http://www.w3.org/2005/Atom"><title>Google Alert - sqlite</title>'
            '<entry><id>tag:google.com,2013:googlealerts/feed:1</id><title>SQLite</title>'
            f'<link href="{link}"/></entry></feed>')
    (entry,) = parse_feed(atom.encode()).entries
    assert entry.url == url


def test_titles_and_names_lose_control_and_invisible_characters_only() -> None:
    from signal_feeds.parse.fields import plain_text

    assert plain_text(" Bundes\u00adverfassungs\u200bgericht\x1b[2J \u2028 Café ") == (
        "Bundesverfassungsgericht[2J Café")
    assert plain_text("Plain\x07 ASCII\tname") == "Plain ASCII name"
    assert plain_text("Σ\xa0no break") == "Σ\xa0no break"


def test_the_unix_epoch_is_no_date() -> None:
    # A publishing system's zero timestamp: listed by when Signal saw it, and warned of.
    for date in ("Thu, 01 Jan 1970 00:00:00 +0000", "1970-01-01T00:00:00Z", "0000000000"):
        feed = parse_feed(("<rss version='2.0'><channel><title>t</title><item><guid>g</guid>"
                           f"<pubDate>{date}</pubDate></item></channel></rss>").encode())
        assert feed.entries[0].published == "", date
        assert feed.warnings == (f"date {date!r} not understood; left empty",), date
    kept = parse_feed(b"<rss version='2.0'><channel><title>t</title><item><guid>g</guid>"
                      b"<pubDate>Thu, 01 Jan 1970 00:00:01 +0000</pubDate></item></channel>"
                      b"</rss>")
    assert kept.entries[0].published == "1970-01-01T00:00:01Z"


@pytest.mark.parametrize(("original", "url"), [
    # FeedBurner's link is its tracking redirect; the post's own address was dropped.
    ("<feedburner:origLink>https://blog.example/post?a=1&amp;b=2</feedburner:origLink>",
     "https://blog.example/post?a=1&b=2"),
    ("", "https://feeds.feedburner.com/~r/blog/~3/x1/"),
    # Not an address: the link stands.
    ("<feedburner:origLink>javascript:alert(1)</feedburner:origLink>",
     "https://feeds.feedburner.com/~r/blog/~3/x1/"),
])
def test_feedburner_gives_the_posts_own_link(original: str, url: str) -> None:
    (entry,) = parse_feed(_FEEDBURNER.format(original).encode()).entries
    assert entry.url == url
    atom = ('<feed xmlns="http://www.w3.org/2005/Atom" xmlns:feedburner="http://rssnamespace'
            '.org/feedburner/ext/1.0"><title>t</title><entry><id>p1</id><link rel="alternate"'
            ' href="http://feedproxy.google.com/~r/blog/~3/x1/"/>{}</entry></feed>')
    (entry,) = parse_feed(atom.format(original).encode()).entries
    assert entry.url == url.replace("https://feeds.feedburner.com",
                                    "http://feedproxy.google.com")


def test_bare_ampersands_and_html_entities_no_longer_garble_a_feed() -> None:
    # The two commonest faults of hand-made feeds. Either sent the whole document to
    # feedparser's lenient parser, which read "&lang" and "&copy" as HTML references:
    # the link below was stored as "?p=1\u2329=en\u00a9=1".
    body = (b'<rss version="2.0"><channel><title>Tom & Jerry&nbsp;&hellip;</title><item>'
            b"<guid>https://x.example/?p=1&lang=en</guid><title>Q & A &ndash; more</title>"
            b"<link>https://x.example/?p=1&lang=en&copy=1</link>"
            b"<description><![CDATA[<p>Fish &amp; chips & peas&nbsp;</p>]]></description>"
            b"<!-- a & b --></item></channel></rss>")
    feed = parse_feed(body)
    (entry,) = feed.entries
    assert (entry.remote_id, entry.url) == ("https://x.example/?p=1&lang=en",
                                           "https://x.example/?p=1&lang=en&copy=1")
    assert (feed.title, entry.title) == ("Tom & Jerry\u00a0\u2026", "Q & A \u2013 more")
    assert entry.summary == "<p>Fish &amp; chips &amp; peas&nbsp;</p>"  # CDATA as written
    assert feed.warnings == (
        "5 bare '&' read as text (XML writes it '&amp;')",
        "3 HTML character reference(s) such as '&nbsp;' read as the characters they name "
        "(XML defines none of them)")  # and no "read leniently": the parse was strict


def test_raw_control_characters_no_longer_make_a_feed_malformed() -> None:
    # A form feed or vertical tab pasted from a word processor, a terminal's ESC: one
    # sent the whole document to the lenient parser, and the summary kept it.
    feed = parse_feed(b'<rss version="2.0"><channel><title>T\x0cv</title><item><guid>1'
                      b"</guid><title>Page\x0b break</title><description>x\x08y"
                      b"</description></item></channel></rss>")
    (entry,) = feed.entries
    assert (feed.title, entry.title, entry.summary) == ("Tv", "Page break", "xy")
    assert feed.warnings == ("3 control character(s) removed (XML allows none)",)
    # Written as references they are no more allowed (in CDATA, HTML's reference to one
    # names nothing a reader can show either).
    feed = parse_feed(b'<rss version="2.0"><channel><title>T&#27;[2J &#x1B;v&#9;</title><item>'
                      b"<guid>1</guid><description><![CDATA[&#27;]]>x&#0;y&#x0000c;"
                      b"</description></item></channel></rss>")
    assert (feed.title, feed.entries[0].summary) == ("T[2J v", "xy")
    assert feed.warnings == ("5 control character(s) removed (XML allows none)",)


def test_a_link_or_title_key_too_long_to_index_is_bounded() -> None:
    from signal_feeds.identity.matching import normalize_title
    from signal_feeds.urls import MAX_URL_BYTES, check_link

    base = "https://example.org/"
    assert check_link(base + "a" * (MAX_URL_BYTES - len(base)))[0] is not None
    assert check_link(base + "a" * (MAX_URL_BYTES - len(base) + 1)) == (
        None, f"longer than {MAX_URL_BYTES} bytes")
    assert check_link(base + "é" * 1100)[1] == f"longer than {MAX_URL_BYTES} bytes"
    # A title key past 1 KiB is its digest: equal exactly when the titles are.
    long_title = "漢字 かな " * 200
    key = normalize_title(long_title)
    assert key.startswith("#") and len(key) == 65
    assert key == normalize_title(long_title.upper()) != normalize_title(long_title + " x")
    assert normalize_title("A short title of words") == "a short title of words"


_PERSON_RSS = ('<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/" '
               'xmlns:itunes="http://www.itunes.com/dtds/podcast-1.0.dtd"><channel><title>t'
               "</title><item><guid>g</guid>{}</item></channel></rss>")
_PERSON_ATOM = ('<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title><entry><id>1</id>'
                "{}</entry></feed>")


@pytest.mark.parametrize(("body", "stored"), [
    # The address feedparser joins to a name was stored with it.
    (_PERSON_ATOM.format("<author><name>Jane</name><email>noreply@blogger.com</email>"
                         "</author>"), "Jane"),
    (_PERSON_RSS.format("<author>jane@example.com (Jane Doe)</author>"), "Jane Doe"),
    (_PERSON_RSS.format("<author>Jane Doe &lt;jane@example.com&gt;</author>"), "Jane Doe"),
    # feedparser's split ends a domain after four letters: "ple (Jane Doe" was near.
    (_PERSON_RSS.format("<author>jane@blog.example (Jane Doe)</author>"), "Jane Doe"),
    (_PERSON_RSS.format("<author>host@pod.example (Host)</author>"
                        "<itunes:author>Host</itunes:author>"), "Host"),
    # Several authors: all of them, as JSON Feed's (feedparser kept only the last).
    (_PERSON_RSS.format("<dc:creator>Ana</dc:creator><dc:creator>Rui</dc:creator>"
                        "<dc:creator>Ana</dc:creator>"), "Ana, Rui"),
    (_PERSON_ATOM.format("<author><name>Ana</name></author><author><name>Rui</name>"
                         "</author>"), "Ana, Rui"),
    # Atom's authors with their addresses: only the last was stored (the list was used
    # only without addresses, for RSS text feedparser splits wrongly).
    (_PERSON_ATOM.format("<author><name>Ana</name><email>ana@x.example</email></author>"
                         "<author><name>Rui</name><email>rui@x.example</email></author>"),
     "Ana, Rui"),
    # An address alone, or text that is not a name and an address, stays as written.
    (_PERSON_RSS.format("<author>jane@example.com</author>"), "jane@example.com"),
    (_PERSON_RSS.format("<author>Jane (@jane@mastodon.social)</author>"),
     "Jane (@jane@mastodon.social)"),
])
def test_an_author_is_stored_by_name(body: str, stored: str) -> None:
    feed = parse_feed(body.encode())
    assert (feed.entries[0].author, feed.warnings) == (stored, ())


@pytest.mark.parametrize(("author", "stored"), [
    # arXiv's feeds name the authors as links; they used to be stored as markup.
    ('&lt;a href="https://arxiv.org/a/doe_j_1"&gt;Jane Doe&lt;/a&gt;, '
     '&lt;a href="https://arxiv.org/a/roe_j_1"&gt;John &amp;amp; Co&lt;/a&gt;',
     "Jane Doe, John & Co"),
    ("<![CDATA[<span>Ana</span>\n  <b>Lima</b>]]>", "Ana Lima"),
    # Without an end tag it is text: an ampersand, a bracket (a reference escaped once
    # more than XML needs is read, see below).
    ("Tom &amp;amp; Jerry", "Tom & Jerry"),
    ("Ana &lt;3 Lima", "Ana <3 Lima"),
])
def test_an_author_given_as_html_is_stored_as_its_text(author: str, stored: str) -> None:
    feed = parse_feed('<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/">'
                      f"<channel><title>t</title><item><guid>g</guid>"
                      f"<dc:creator>{author}</dc:creator></item></channel></rss>".encode())
    assert (feed.entries[0].author, feed.warnings) == (stored, ())


@pytest.mark.parametrize(("body", "stored"), [
    # WordPress saves a display name through esc_html and writes it in CDATA: "Tom &
    # Jerry" reached the store as "Tom &amp; Jerry".
    (_PERSON_RSS.format("<dc:creator><![CDATA[Tom &amp; Jerry]]></dc:creator>"),
     "Tom & Jerry"),
    (_PERSON_RSS.format("<dc:creator><![CDATA[Jane O&#039;Neil]]></dc:creator>"),
     "Jane O'Neil"),
    (_PERSON_RSS.format("<author>jg@example.org (Jos&amp;eacute; Garc&amp;iacute;a)</author>"),
     "José García"),
    (_PERSON_ATOM.format("<author><name>Lo&amp;#239;c</name></author>"), "Loïc"),
    # An ampersand that starts no reference is the name's own.
    (_PERSON_RSS.format("<dc:creator>AT&amp;T &amp;co</dc:creator>"), "AT&T &co"),
])
def test_an_author_escaped_twice_is_stored_as_the_name_it_is(body: str, stored: str) -> None:
    feed = parse_feed(body.encode())
    assert (feed.entries[0].author, feed.warnings) == (stored, ())


_THREE = ('<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>'
          + "".join(f"<item><guid>g{i}</guid><title>Title {i}</title>"
                    f"<description>Text {i}</description></item>" for i in range(3))
          + "</channel></rss>").encode()
_THREE_ATOM = ('<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>'
               + "".join(f"<entry><id>g{i}</id><title>Title {i}</title>"
                         f"<summary>Text {i}</summary></entry>" for i in range(3))
               + "</feed>").encode()


@pytest.mark.parametrize(("body", "kept"), [
    (_THREE, 3),
    (_THREE[:-5], 3),  # cut in the closing tags: every entry whole
    (_THREE[:_THREE.rindex(b"Text 2") + 3], 2),  # inside the last summary
    (_THREE[:_THREE.rindex(b"<title>Title 2")], 2),  # after the last guid
    (_THREE[:_THREE.rindex(b"</item>") + 4], 2),  # in its end tag: not known to be whole
    (_THREE_ATOM[:_THREE_ATOM.rindex(b"Text 1")], 1),
    (_THREE_ATOM[:-3], 3),
])
def test_an_entry_cut_by_the_end_of_the_document_is_not_read(body: bytes,
                                                              kept: int) -> None:
    # The lenient reading kept the cut entry (a title without its summary); stored, it
    # was "updated" by the next, whole document, a version the publisher never made.
    feed = parse_feed(body)
    assert [e.remote_id for e in feed.entries] == [f"g{i}" for i in range(kept)]
    assert all(e.summary == f"Text {i}" for i, e in enumerate(feed.entries))
    cut = [w for w in feed.warnings if "ends early" in w]
    if body in (_THREE, _THREE_ATOM):
        assert (cut, feed.incomplete) == ([], False)
    elif kept == 3:
        # Cut between entries: every entry read is whole, and the document is still
        # incomplete (its validators would earn a 304 for what was never read).
        assert cut == ["the document ends early (cut off in transit?): the 3 entries it "
                       "closed were read"]
        assert feed.incomplete
    else:
        assert cut == ["the document ends early (cut off in transit?): its last entry, "
                       "cut through, was not read"]
        assert feed.incomplete


@pytest.mark.parametrize(("body", "said"), [
    # "the 0 entries it closed were read", "the 1 entries ...".
    (b'<rss version="2.0"><channel><title>t</title></channel></rss',
     "the document ends early (cut off in transit?): it closed no entry"),
    (b'<rss version="2.0"><channel><title>t</title><item><guid>1</guid></item></channel>',
     "the document ends early (cut off in transit?): the 1 entry it closed was read"),
])
def test_a_document_that_ends_early_says_how_many_entries_it_closed(body: bytes,
                                                                   said: str) -> None:
    assert said in parse_feed(body).warnings


def test_a_document_broken_elsewhere_keeps_its_entries() -> None:
    # Only the end of the input cutting an entry short drops it; another error does not.
    body = _THREE.replace(b"Text 2", b"Text &nbsp;2")
    feed = parse_feed(body)
    assert len(feed.entries) == 3
    assert not [w for w in feed.warnings if "ends early" in w]


@pytest.mark.parametrize(("date", "stored"), [
    # feedparser reads none of these; the report called each "not understood".
    ("Saturday, December 5, 2026 9:00 AM", "2026-12-05T09:00:00Z"),
    ("December 5, 2026 12:30 AM", "2026-12-05T00:30:00Z"),
    ("Dec 5th, 2026 at 3:15 pm", "2026-12-05T15:15:00Z"),
    ("Dec 5, 2026", "2026-12-05T00:00:00Z"),
    ("Sat,05 Dec 2026 09:00:00 GMT", "2026-12-05T09:00:00Z"),
    ("Sat, 05 Dec 2026 09:00:00 GMT+1", "2026-12-05T08:00:00Z"),
    ("Tue, 1 Dec 26 10:00 GMT-05:00", "2026-12-01T15:00:00Z"),
    # A server's locale in its RFC 822 dates.
    ("Sa, 05 Dez 2026 09:00:00 +0100", "2026-12-05T08:00:00Z"),
    ("Mi, 02 Mär 2026 08:00:00 +0100", "2026-03-02T07:00:00Z"),
    ("jeu., 03 déc. 2026 10:00:00 +0100", "2026-12-03T09:00:00Z"),
    ("sáb, 05 dic 2026 09:00:00 CET", "2026-12-05T08:00:00Z"),
    ("5. Dezember 2026 10:15", "2026-12-05T10:15:00Z"),
    ("05 de diciembre de 2026", "2026-12-05T00:00:00Z"),
    # Drupal's medium date.
    ("Saturday, December 5, 2026 - 10:00", "2026-12-05T10:00:00Z"),
    ("Sat, 12/05/2026 - 10:00", ""),
    # No real moment, or no telling which: still unread, and said so.
    ("12/05/2026 09:00:00", ""),
    ("Sat, 31 Nov 2026 09:00:00 GMT", ""),
    ("Sat, 05 Dec 2026 24:00:00 GMT", ""),
    ("December 5, 2026 13:00 PM", ""),
    ("Sat, 05 Foo 2026 09:00:00 GMT", ""),
    ("Saturday, December 5, 2026 9:00 QQQ", ""),
    # White space is one space to the expressions: 20,000 spaces before a stray
    # character made their adjacent optional spaces backtrack for minutes.
    ("December 5, 2026 9:00" + " " * 20_000 + "!", ""),
    ("Sat,  05   Dec 2026\t09:00:00 \n GMT", "2026-12-05T09:00:00Z"),
])
def test_a_date_with_its_month_named_is_read(date: str, stored: str) -> None:
    assert_date_read(date, stored)


@pytest.mark.parametrize(("date", "stored"), [
    # An offset written after UTC or GMT: feedparser read "UTC+1" as UTC (an hour off),
    # "GMT+5:30" as 53 hours back (two days off), and after an ISO date and a space it
    # dropped the time; all without a warning.
    ("Sat, 05 Dec 2026 10:00:00 UTC+1", "2026-12-05T09:00:00Z"),
    ("Sat, 05 Dec 2026 10:00:00 UTC+01:00", "2026-12-05T09:00:00Z"),
    ("Sat, 05 Dec 2026 10:00:00 UTC-0500", "2026-12-05T15:00:00Z"),
    ("Sat, 05 Dec 2026 10:00:00 GMT+5:30", "2026-12-05T04:30:00Z"),
    ("Sat, 05 Dec 2026 10:00:00 utc+5:30", "2026-12-05T04:30:00Z"),
    ("2026-12-05T10:00:00 UTC+1", "2026-12-05T09:00:00Z"),
    ("2026-12-05 10:00:00 GMT+01:00", "2026-12-05T09:00:00Z"),
    ("2026-12-05 10:00 UTC-3", "2026-12-05T13:00:00Z"),
    # What feedparser read right stays so.
    ("Sat, 05 Dec 2026 10:00:00 GMT+0100", "2026-12-05T09:00:00Z"),
    ("Sat Dec 05 2026 10:00:00 GMT+0100 (Central European Standard Time)",
     "2026-12-05T09:00:00Z"),
])
def test_an_offset_after_utc_or_gmt_is_applied(date: str, stored: str) -> None:
    assert_date_read(date, stored)


def assert_date_read(date: str, stored: str) -> None:
    """An item's date is stored as ``stored``; "" means unread, with the warning."""
    feed = one_item(f"<guid>g</guid><pubDate>{date}</pubDate>")
    assert feed.entries[0].published == stored
    assert feed.warnings == (() if stored else
                             (f"date {date[:40]!r} not understood; left empty",))


@pytest.mark.parametrize(("date", "stored"), [
    # An offset without its colon that is not whole hours lost its minutes: India's
    # feeds, in PHP's DATE_ISO8601, were stored half an hour off.
    ("2026-12-03T10:00:00+0530", "2026-12-03T04:30:00Z"),
    ("2026-12-03T10:00:00-0330", "2026-12-03T13:30:00Z"),
    ("2026-12-03T10:00:00.25+0545", "2026-12-03T04:15:00Z"),
    ("2026-12-03 10:00 +0530", "2026-12-03T04:30:00Z"),
    # A zone name after an ISO time with its T was dropped (after a space, the time was).
    ("2026-12-03T10:00:00 EST", "2026-12-03T15:00:00Z"),
    ("2026-12-03T10:00CET", "2026-12-03T09:00:00Z"),
    ("2026-12-03T10:00:00+0100", "2026-12-03T09:00:00Z"),
    ("2026-12-03T10:00:00+05:30", "2026-12-03T04:30:00Z"),
    # A 12-hour clock: PM was taken for the zone, and the zone given was dropped.
    ("Thu, 03 Dec 2026 1:05 PM EST", "2026-12-03T18:05:00Z"),
    ("Thu, 03 Dec 2026 12:05 am +0100", "2026-12-02T23:05:00Z"),
    # RFC 850, dashes between day, month and year: not read at all.
    ("Thursday, 03-Dec-26 10:00:00 GMT", "2026-12-03T10:00:00Z"),
    ("03-Dec-2026", "2026-12-03T00:00:00Z"),
    # A two-digit year from 50 to 89 is 1950 to 1989 (RFC 5322, 4.3), as in the RFC 850
    # form; feedparser put it in 2050 to 2089, a date that held the top of every list.
    ("Mon, 01 Dec 69 10:00:00 GMT", "1969-12-01T10:00:00Z"),
    ("Mon, 01 Dec 69 10:00:00 CET", "1969-12-01T09:00:00Z"),
    ("Sun, 31 Dec 89 23:00:00 -0500", "1990-01-01T04:00:00Z"),
    ("01 Dec 50 10:00 GMT", "1950-12-01T10:00:00Z"),
    ("Wed, 01 Dec 49 10:00:00 GMT", "2049-12-01T10:00:00Z"),
    ("Wed, 01 Dec 99 10:00:00 GMT", "1999-12-01T10:00:00Z"),
])
def test_a_date_feedparser_misreads_is_read_whole(date: str, stored: str) -> None:
    for element in ("pubDate", "dc:date"):
        feed = parse_feed('<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/">'
                          f"<channel><title>t</title><item><guid>g</guid><{element}>{date}"
                          f"</{element}></item></channel></rss>".encode())
        entry = feed.entries[0]  # feedparser takes dc:date for the updated date
        assert (entry.published or entry.updated, feed.warnings) == (stored, ())
    atom = parse_feed('<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title><entry>'
                      f"<id>1</id><updated>{date}</updated></entry></feed>".encode())
    assert atom.entries[0].updated == stored


@pytest.mark.parametrize(("date", "stored"), [
    # feedparser dropped the day (and the time) of a year-first date with a slash or dots:
    # all three were stored as 1 December.
    ("2026/12/05", "2026-12-05T00:00:00Z"),
    ("2026/12/05 10:00 CET", "2026-12-05T09:00:00Z"),
    ("2026.12.05", "2026-12-05T00:00:00Z"),
    # Dots put the day first; feedparser did not read these at all.
    ("05.12.2026 10:00", "2026-12-05T10:00:00Z"),
    ("5.12.2026, 10:00 Uhr", "2026-12-05T10:00:00Z"),
    ("05.12.2026 10:00:00 +0100", "2026-12-05T09:00:00Z"),
    # With a slash or a dash a day over 12 tells the order; feedparser read 13-12-2026
    # as nothing and 05-12-2026 as 20 December 2005.
    ("13/12/2026 09:00 PM", "2026-12-13T21:00:00Z"),
    ("12-13-2026", "2026-12-13T00:00:00Z"),
    ("12/13/2026 4:05 PM EST", "2026-12-13T21:05:00Z"),
    ("05-12-2026", ""),
    ("05/12/2026", ""),
    ("31.11.2026", ""),
    # ISO 8601 stays feedparser's, but for a 12-hour clock (it dropped the PM).
    ("2026-12-05", "2026-12-05T00:00:00Z"),
    ("2026-03-14 09:45 PM", "2026-03-14T21:45:00Z"),
])
def test_a_numeric_date_is_read_day_first_only_when_it_says_so(date: str, stored: str) -> None:
    assert_date_read(date, stored)


@pytest.mark.parametrize("date", ["03", "0201-12-03T10:00:00Z", "Dec 3, 0201"])
def test_a_date_of_the_first_millennium_is_not_read(date: str) -> None:
    # feedparser reads "03" as the year 201, which was stored as "201-12-01T00:00:00Z":
    # three digits, sorted before every other date (found by fuzzing the date readers).
    feed = one_item(f"<guid>g</guid><pubDate>{date}</pubDate>")
    assert feed.entries[0].published == ""
    assert feed.warnings == (f"date {date!r} not understood; left empty",)
    # A date of long ago is a date: archives publish letters of 1850.
    assert one_item("<guid>g</guid><pubDate>Sat, 1 Jun 1850 00:00:00 GMT</pubDate>"
                    ).entries[0].published == "1850-06-01T00:00:00Z"


@pytest.mark.parametrize("date", ["2026-02-30T10:00:00Z", "2026-13-01T00:00:00Z",
                                  "2026-04-31", "2026-00-10T10:00:00+01:00"])
def test_an_iso_date_that_does_not_exist_is_not_read(date: str) -> None:
    # feedparser rolls it over into another date (2026-02-30 was stored as 2 March, month
    # 13 as January of the next year), where an RFC 822 one is not read at all.
    feed = one_item(f"<guid>g</guid><pubDate>{date}</pubDate>")
    assert feed.entries[0].published == ""
    assert feed.warnings == (f"date {date!r} not understood; left empty",)
    # The ends of a day and of a minute are times ISO 8601 writes (24:00, a leap second).
    for written, stored in (("2026-12-05T24:00:00Z", "2026-12-06T00:00:00Z"),
                            ("2026-02-28T10:00:00Z", "2026-02-28T10:00:00Z"),
                            ("2028-02-29", "2028-02-29T00:00:00Z")):
        assert one_item(f"<guid>g</guid><pubDate>{written}</pubDate>").entries[0].published \
            == stored, written


def test_no_month_name_means_two_months() -> None:
    from signal_feeds.parse.dates import MONTH_NAMES

    names = [name for month in MONTH_NAMES for name in month.split()]
    assert len(MONTH_NAMES) == 12 and len(names) == len(set(names))


@pytest.mark.parametrize(("item", "link"), [
    # Without a link element feedparser takes the guid for the link; a guid that is no
    # address was resolved against the feed's URL into a page that does not exist.
    ("<guid>123</guid>", ""),
    ("<guid>post-abc</guid>", ""),
    ("<guid>https://example.org/p/1</guid>", "https://example.org/p/1"),
    ("<guid>/p/9</guid>", "https://example.org/p/9"),
    ("<guid>123</guid><link>/real</link>", "https://example.org/real"),
    ("<link>/real</link><guid>123</guid>", "https://example.org/real"),
])
def test_a_guid_that_is_no_address_makes_no_link(item: str, link: str) -> None:
    feed = one_item(item, url="https://example.org/feed")
    assert feed.entries[0].url == link


def test_an_episode_with_neither_guid_nor_link_is_known_by_its_media_file() -> None:
    # It was skipped ("no id and no link"): a podcast's media file is what it links to.
    rss = one_item('<title>Ep. 11</title><enclosure url="/ep11.mp3" type="audio/mpeg"/>',
                   url="https://pod.example/feed")
    atom = parse_feed(b'<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title><entry>'
                      b'<title>Ep. 11</title><link rel="enclosure" href="/ep11.mp3"/>'
                      b"</entry></feed>", url="https://pod.example/feed")
    for feed in (rss, atom):
        assert [(e.remote_id, e.url) for e in feed.entries] == [
            ("", "https://pod.example/ep11.mp3")]
        assert len(identify("pod", feed.entries).rows) == 1
    # A guid or a link still comes first; a refused address is still refused.
    kept = one_item('<guid>ep-11</guid><enclosure url="https://pod.example/ep11.mp3"/>')
    assert (kept.entries[0].remote_id, kept.entries[0].url) == ("ep-11", "")
    refused = one_item('<enclosure url="javascript:alert(1)"/>')
    assert identify("pod", refused.entries).skip_reasons == (
        "no id and no usable link (scheme javascript: is not http or https)",)


def test_an_atom_entry_with_out_of_line_content_is_linked_to_it() -> None:
    # RFC 4287 4.1.3.2: <content src> gives the content's address, and such an entry
    # need not have an alternate link. It had no link (an id that is no address) or its
    # id as one; a link element still comes first.
    body = (b'<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>'
            b'<entry><id>urn:x:1</id><content type="text/html" src="/full/1.html"/></entry>'
            b'<entry><id>https://example.org/id/2</id><content src="https://cdn.example/2"/>'
            b'</entry><entry><id>urn:x:3</id><link href="https://example.org/3"/>'
            b'<content src="https://cdn.example/3"/></entry></feed>')
    feed = parse_feed(body, url="https://example.org/feed")
    assert [(e.remote_id, e.url) for e in feed.entries] == [
        ("urn:x:1", "https://example.org/full/1.html"),
        ("https://example.org/id/2", "https://cdn.example/2"),
        ("urn:x:3", "https://example.org/3")]


def test_an_atom_id_that_is_no_address_makes_no_link() -> None:
    body = (b'<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>'
            b'<entry><id>1</id><link rel="self" href="https://example.org/e/1.atom"/></entry>'
            b"<entry><id>https://example.org/e/2</id></entry></feed>")
    feed = parse_feed(body, url="https://example.org/feed")
    assert [e.url for e in feed.entries] == ["", "https://example.org/e/2"]


_MIXED = "Café ".encode() + "“quoted” – ok".encode("cp1252")  # UTF-8, then Windows-1252


@pytest.mark.parametrize(("declaration", "content_type", "title"), [
    # Read whole as Windows-1252, the UTF-8 "é" became "Ã©"; now each stray byte is.
    ('<?xml version="1.0" encoding="UTF-8"?>', None, "Café “quoted” – ok"),
    ("", "application/rss+xml; charset=utf-8", "Café “quoted” – ok"),
    ("", None, "Café “quoted” – ok"),
    # Another encoding named by the document or the server is believed.
    ('<?xml version="1.0" encoding="ISO-8859-1"?>', None, "CafÃ© “quoted” – ok"),
    ("", "application/rss+xml; charset=windows-1252", "CafÃ© “quoted” – ok"),
])
def test_a_utf8_document_with_some_windows_1252_bytes(declaration: str,
                                                      content_type: str | None,
                                                      title: str) -> None:
    body = (f'{declaration}<rss version="2.0"><channel><title>t</title><item><guid>g</guid>'
            "<title>").encode() + _MIXED + b"</title></item></channel></rss>"
    feed = parse_feed(body, content_type=content_type)
    assert feed.entries[0].title == title
    repaired = ("character encoding: 3 byte(s) that are not UTF-8 in a UTF-8 document read "
                "as Windows-1252")
    assert (repaired in feed.warnings) is title.startswith("Café")


def test_a_windows_1252_document_labelled_utf8_is_read_as_before() -> None:
    # No valid UTF-8 beyond ASCII at all: feedparser's reading as Windows-1252 stands.
    body = (b'<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel><title>t'
            b"</title><item><guid>g</guid><title>") + "Crème “brûlée”".encode(
                "cp1252") + b"</title></item></channel></rss>"
    feed = parse_feed(body)
    assert feed.entries[0].title == "Crème “brûlée”"
    assert feed.warnings == ("character encoding: document declared as utf-8, but parsed "
                             "as windows-1252",)


_WRITTEN_WITH_ZONE = [
    "%a, %d %b %Y %H:%M:%S {z}", "%d %b %Y %H:%M:%S {z}", "%a, %d %b %y %H:%M {z}",
    "%Y-%m-%dT%H:%M:%S{z}", "%Y-%m-%dT%H:%M:%S.25{z}", "%Y-%m-%d %H:%M:%S {z}",
    "%Y-%m-%dT%H:%M{z}", "%a %b %d %Y %H:%M:%S {z}", "%A, %d-%b-%y %H:%M:%S {z}",
    "%Y/%m/%d %H:%M:%S {z}", "%d.%m.%Y %H:%M {z}", "%a, %d %b %Y %I:%M %p {z}",
    "%B %d, %Y %I:%M %p {z}", "%d %B %Y %H:%M {z}"]
_WRITTEN_WITHOUT_ZONE = ["%Y-%m-%d", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y/%m/%d",
                         "%Y.%m.%d", "%d.%m.%Y", "%d.%m.%Y %H:%M", "%B %d, %Y", "%A, %B %d, %Y",
                         "%d %B %Y", "%a, %d %b %Y", "%Y-%m-%d %I:%M %p", "%a %b %d %H:%M:%S %Y",
                         "%d-%b-%Y", "%m/%d/%Y %I:%M %p", "%d/%m/%Y %H:%M", "%Y%m%dT%H%M%S"]
_ZONES = [("+0000", 0), ("+05:30", 330), ("+0530", 330), ("-0800", -480), ("-03:30", -210),
          ("GMT", 0), ("Z", 0), ("EST", -300), ("PDT", -420), ("CET", 60), ("JST", 540)]


def test_a_date_is_stored_right_or_not_at_all() -> None:
    # Every way of writing these moments that the stored date was checked against: it is
    # the moment, or empty (and reported) when the text cannot tell day from month. Each
    # misreading fixed here used to store a wrong date without a word.
    import datetime as dt

    moments = [dt.datetime(2026, 12, 5, 9, 7, 3), dt.datetime(2026, 3, 14, 21, 45),
               dt.datetime(2027, 1, 1, 0, 5, 59)]
    written = [(moment.strftime(form.replace("{z}", zone)),
                moment - dt.timedelta(minutes=minutes), form)
               for moment in moments for form in _WRITTEN_WITH_ZONE for zone, minutes in _ZONES]
    written += [(moment.strftime(form), moment, form) for moment in moments
                for form in _WRITTEN_WITHOUT_ZONE]
    wrong, unread = [], set()
    for text, moment, form in written:
        if "%S" not in form:
            moment = moment.replace(second=0)
        if not any(f"%{c}" in form for c in "HI"):
            moment = moment.replace(hour=0, minute=0, second=0)
        stored = one_item(f"<guid>g</guid><pubDate>{text}</pubDate>").entries[0].published
        if stored == "":
            unread.add(form)
        elif stored != moment.strftime("%Y-%m-%dT%H:%M:%SZ"):
            wrong.append((text, stored))
    assert wrong == [], wrong
    assert unread == {"%m/%d/%Y %I:%M %p", "%d/%m/%Y %H:%M"}


def test_an_encoding_warning_names_who_declared_the_encoding() -> None:
    # feedparser says "document declared as utf-8" when the server's charset did, and
    # the document itself declared windows-1252, the encoding it was read in.
    body = _one_title("windows-1252", "Café “quoted”")
    feed = parse_feed(body, content_type="application/xml; charset=utf-8")
    assert feed.entries[0].title == "Café “quoted”"
    assert feed.warnings == ("character encoding: the server said charset=utf-8, but the "
                             "document is not in it: parsed as windows-1252",)
    # The document's own (wrong) declaration is still the document's.
    mislabelled = _one_title("windows-1252", "Café").replace(b"windows-1252", b"utf-8")
    assert parse_feed(mislabelled).warnings == (
        "character encoding: document declared as utf-8, but parsed as windows-1252",)


def test_an_encoding_warning_does_not_say_the_document_declared_what_it_did_not() -> None:
    # A Windows-1252 document that declares no encoding, served with a type but no
    # charset: UTF-8, XML's default, did not fit. feedparser said the document was
    # "declared as utf-8", which nothing had said.
    body = _one_title("cp1252", "Café “quoted”", declare=False)
    for content_type in (None, "application/rss+xml", "text/xml"):
        feed = parse_feed(body, content_type=content_type, url="https://example.org/feed")
        assert feed.entries[0].title == "Café “quoted”"
        assert feed.warnings == (
            "character encoding: no encoding declared, and the document is not UTF-8 "
            "(XML's default): parsed as windows-1252",), content_type


def test_a_byte_order_mark_makes_a_few_stray_bytes_windows_1252_not_the_whole() -> None:
    # The mark says UTF-8 whatever the server's charset; a stray Windows-1252 byte in it
    # is read as one, and the valid UTF-8 around it stays (it was "Ñ¨" for "Ѩ").
    body = (b"\xef\xbb\xbf" + '<rss version="2.0"><channel><title>t</title><item><guid>g'
            "</guid><title>Ѩ and ".encode() + b"\x93quoted\x94</title></item></channel></rss>")
    for content_type in (None, "text/xml; charset=iso-8859-1"):
        feed = parse_feed(body, content_type=content_type)
        assert feed.entries[0].title == "Ѩ and “quoted”", content_type
        assert ("character encoding: 2 byte(s) that are not UTF-8 in a UTF-8 document read "
                "as Windows-1252") in feed.warnings[0], feed.warnings


def test_characters_shown_as_nothing_do_not_split_words() -> None:
    # German sites write "Bundes&shy;verfassungs&shy;gericht": searched for, and compared
    # with another source's title without them, it was three words.
    from signal_feeds.identity.matching import normalize_title
    from signal_feeds.identity.search_text import searchable_text

    feed = one_item("<guid>g</guid><title>Bundes&#173;verfassungs&#173;gericht kippt "
                    "Wahlrechts&#173;reform</title><description>Donau&#8203;dampfschiff "
                    "&amp; Wort&#8288;verbinder</description>")
    (entry,) = feed.entries
    assert entry.title == "Bundesverfassungsgericht kippt Wahlrechtsreform"
    assert searchable_text(entry.summary) == "Donaudampfschiff & Wortverbinder"
    assert normalize_title("Bundes\xadverfassungs\xadgericht kippt") == normalize_title(
        "Bundesverfassungsgericht kippt") == "bundesverfassungsgericht kippt"
    # A zero-width joiner draws an emoji or a Persian word: it stays.
    assert one_item("<guid>g</guid><title>Family \U0001F468\u200d\U0001F469 day"
                    "</title>").entries[0].title == "Family \U0001F468\u200d\U0001F469 day"


_CLUSTERS = {"flag": "\U0001F1EB\U0001F1F7", "family": "\U0001F468\u200d\U0001F469",
             "accent": "e\u0301", "tone": "\U0001F44D\U0001F3FD", "conjunct": "\u0915\u094d\u0937"}


@pytest.mark.parametrize("cluster", sorted(_CLUSTERS.values()))
def test_a_cut_title_or_author_never_splits_a_character_as_drawn(cluster: str) -> None:
    # A title or an author past its limit was cut by code points: half a flag (a lone
    # "🇫"), a man and a dangling joiner for a family, an "e" for "é".
    lead = "x" * 2047  # the limit (2,048) falls inside the cluster
    feed = one_item(f"<guid>g</guid><title>{lead}{cluster} more</title>"
                    f"<author>a@b.example ({'y' * 511}{cluster})</author>")
    (entry,) = feed.entries
    assert entry.title == lead
    assert entry.author == "y" * 511
    assert "title cut to 2048 characters in 1 entries" in feed.warnings


def test_a_quoted_text_in_a_message_never_splits_a_character_as_drawn() -> None:
    # A page's title quoted in an error ("a web page titled ...") is cut to 80.
    from signal_feeds.errors import shown

    assert shown("x" * 78 + "\U0001F1EB\U0001F1F7", 80) == "x" * 78 + "\U0001F1EB\U0001F1F7"
    assert shown("x" * 78 + "\U0001F1EB\U0001F1F7!", 80) == "x" * 78 + "\u2026"
    # A cluster alone past the limit (a hostile stack of accents) is still cut to it.
    assert len(shown("e" + "\u0301" * 200, 80)) == 80
