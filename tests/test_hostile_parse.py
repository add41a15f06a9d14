"""Hostile documents whose parse time grew faster than their size: what the sanitizer
and feedparser are handed is bounded. (Asserted on what they are given, never on
time: the machine is shared.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import nh3
import pytest
from _hostile import item, rss

from signal_feeds import parse_feed
from signal_feeds.parse import sanitize
from signal_feeds.parse.fields import DEFAULT_FIELD_LIMITS, FieldLimiter, as_html

# nh3's time grows with (number of "&") x (length of the text holding them): 2 MB of
# this took 15 s in one <description>.
AMP = "<b>x</b>" + "& " * 200_000
ATOM = '<feed xmlns="http://www.w3.org/2005/Atom"><id>urn:f</id>'


@pytest.fixture
def handed() -> Iterator[list[int]]:
    """The length of every value handed to nh3.clean while the test runs."""
    lengths: list[int] = []

    class Spy:
        @staticmethod
        def clean(value: str, **options: Any) -> str:
            lengths.append(len(value))
            return nh3.clean(value, **options)

    saved = sanitize.nh3
    sanitize.nh3 = Spy  # type: ignore[assignment]
    try:
        yield lengths
    finally:
        sanitize.nh3 = saved


#: The most of a value the sanitizer is given, by field (``read_bound``; an author read
#: as HTML has a bound of its own).
BOUNDS = {"summary": 65_536 + 16_384, "content": 262_144 + 65_536, "title": 2048 + 16_384,
          "author": 16_384}
CASES = {
    "description": (rss(item("g", "t", f"<description><![CDATA[{AMP}]]></description>")),
                    "summary", "summary cut to 65536 characters in 1 entries"),
    "content": (rss(item("g", "t", f"<content:encoded><![CDATA[{AMP}]]></content:encoded>"))
                .replace(b"<rss ", b'<rss xmlns:content="http://purl.org/rss/1.0/modules/'
                                   b'content/" '),
                "content", "content cut to 262144 characters in 1 entries"),
    "caption": (rss(item("g", "t", '<media:description type="html"><![CDATA['
                                   f"{AMP}]]></media:description>"))
                .replace(b"<rss ", b'<rss xmlns:media="http://search.yahoo.com/mrss/" '),
                "summary", "summary cut to 65536 characters in 1 entries"),
    "html-title": (f'{ATOM}<title>t</title><entry><id>e</id><title type="html"><![CDATA['
                   f"{AMP}]]></title></entry></feed>".encode(),
                   "title", "title cut to 2048 characters in 1 entries"),
    "feed-title": (f'{ATOM}<title type="html"><![CDATA[{AMP}]]></title><entry><id>e</id>'
                   "</entry></feed>".encode(),
                   "title", "the feed's title cut to 2048 characters"),
    "author-name": (f"{ATOM}<title>t</title><entry><id>e</id><author><name><![CDATA["
                    f"{AMP}]]></name></author></entry></feed>".encode(),
                    "author", "author cut to 512 characters in 1 entries"),
    "json-content": (json.dumps({"version": "https://jsonfeed.org/version/1.1", "title": "t",
                                 "items": [{"id": "1", "content_html": AMP}]}).encode(),
                     "content", "content cut to 262144 characters in 1 entries"),
}


@pytest.mark.parametrize("case", CASES)
def test_the_sanitizer_never_sees_a_whole_hostile_value(handed: list[int], case: str) -> None:
    body, field, warning = CASES[case]
    feed = parse_feed(body)
    assert len(feed.entries) == 1
    assert warning in feed.warnings
    assert handed and max(handed) <= BOUNDS[field] < len(AMP)


def _article(size: int, *, removed: str = "") -> str:
    """Ordinary HTML of about ``size`` characters: paragraphs, links, images, entities;
    ``removed``: attributes the sanitizer removes, on each paragraph."""
    part = (f'<p class="note"{removed}>Caf&eacute; &amp; bar: <a href="https://example.org/'
            'a?x=1&amp;y=2">a link</a>, <img src="https://example.org/i.png" alt="a '
            '&quot;photo&quot;"> and <em>more</em> text &#8217;here&#8217;, as usual.</p>\n')
    return part * (size // len(part) + 1)


@pytest.mark.parametrize(("field", "size"), [("summary", 100_000), ("summary", 85_000),
                                             ("content", 400_000)])
def test_a_value_cut_before_sanitizing_is_stored_as_the_whole_one_was(field: str,
                                                                     size: int) -> None:
    # Whenever the part sanitized still fills the field: the same stored text and the
    # same warning as sanitizing the whole value first.
    from signal_feeds.parse.fields import read_bound

    detail = {"type": "text/html"}
    value = _article(size)
    assert len(value) > read_bound(DEFAULT_FIELD_LIMITS[field])
    old, new = FieldLimiter(DEFAULT_FIELD_LIMITS), FieldLimiter(DEFAULT_FIELD_LIMITS)
    whole = old(field, as_html(value, detail, "https://example.org/p"))
    assert new(field, value, lambda v: as_html(v, detail, "https://example.org/p")) == whole
    assert old.cut == new.cut == {field: 1}
    # Plain text, escaped: the same too.
    text = value.replace("<", " < ")
    assert (FieldLimiter(DEFAULT_FIELD_LIMITS)(field, text, lambda v: as_html(v, None))
            == FieldLimiter(DEFAULT_FIELD_LIMITS)(field, as_html(text, None)))


def test_markup_that_sanitizing_removes_leaves_less_than_the_limit() -> None:
    # Past the bound, markup the sanitizer removes is not made up for: the field holds
    # less than its limit, still whole HTML, and is reported as cut.
    limiter = FieldLimiter(DEFAULT_FIELD_LIMITS)
    removed = ' style="color: red; margin: 0 auto; font-family: serif" data-block="x"' * 2
    value = _article(200_000, removed=removed)
    stored = limiter("summary", value, lambda v: as_html(v, {"type": "html"}))
    assert 40_000 < len(stored) < DEFAULT_FIELD_LIMITS["summary"]
    assert stored.endswith("</p>") and limiter.cut == {"summary": 1}


def test_an_image_pasted_into_a_post_does_not_cut_the_text_after_it() -> None:
    # A 400 KB data: image (which the sanitizer drops) spent the bound on its address,
    # and the story after it was lost, with a warning that the content was cut.
    body = rss(item("g", extra="<description><![CDATA[<p>Intro</p><img src=\"data:image/"
                    "png;base64," + "A" * 400_000 + "\" alt='chart'><p>The story.</p>]]>"
                    "</description>"))
    feed = parse_feed(body, source_id="s", url="https://e.org/")
    assert feed.entries[0].summary == ('<p>Intro</p><img alt="chart"><p>The story.</p>')
    assert not [w for w in feed.warnings if "cut" in w]


@pytest.mark.parametrize("html", [
    '<img src="https://ex.com/c.png" alt="Data: revenue grew {long}">',  # an alt text
    '<a href="https://ex.com/" title="data: {long}">x</a>',  # a title
    '<pre><code>&lt;img src="data:image/png;base64,{long}"&gt;</code></pre>',  # code
    '<p>set x = "data:text/plain,{long}" in your config</p>',  # text
])
def test_what_only_mentions_data_is_not_taken_out(html: str) -> None:
    # Taken out before the cut, it vanished with no warning; nh3 keeps all of these.
    value = html.format(long="A" * 2_000) + "<p>" + "x" * 90_000 + "</p>"
    body = rss(item("g", extra=f"<description><![CDATA[{value}]]></description>"))
    feed = parse_feed(body, source_id="s", url="https://e.org/")
    assert "summary cut to 65536 characters in 1 entries" in feed.warnings
    assert feed.entries[0].summary == parse_feed(
        rss(item("g", extra=f"<description><![CDATA[{value[:81_920]}]]></description>")),
        source_id="s", url="https://e.org/").entries[0].summary


def test_a_value_under_the_bound_is_rendered_whole() -> None:
    from signal_feeds.parse.fields import read_bound

    rendered: list[str] = []
    limiter = FieldLimiter({"summary": 10})
    value = "x" * read_bound(10)
    assert limiter("summary", value, lambda v: rendered.append(v) or v[:5]) == "x" * 5
    assert rendered == [value] and limiter.cut == {}
    # Past the bound, the field counts as cut even when what is rendered is short.
    assert limiter("summary", value + "y", lambda v: v[:5]) == "x" * 5
    assert limiter.cut == {"summary": 1}


def test_a_cut_before_sanitizing_splits_no_reference() -> None:
    from signal_feeds.parse.fields import bounded

    assert bounded("ab &amp; cd", 6) == "ab "
    assert bounded("ab &#8217;", 8) == "ab "
    assert bounded("ab &amp; cd", 8) == "ab &amp;"
    assert bounded("ab & cd", 4) == "ab "
    assert bounded("abc", 2) == "ab"


# -- namespace declarations --------------------------------------------------------------

def _declaring(count: int) -> str:
    """``count`` elements, each declaring a prefix of its own and using it."""
    return "".join(f'<x{i}:y xmlns:x{i}="urn:{i}">v</x{i}:y>' for i in range(count))


def test_namespace_prefixes_past_the_cap_are_not_declared() -> None:
    # feedparser's strict parser searches every prefix declared so far for each element
    # of a namespace it does not know: 20,000 such elements took 9 s, 100,000 over a
    # minute. What it is handed declares at most the cap's number of prefixes.
    import feedparser

    from signal_feeds.parse.feed import defuse

    body = rss(item("a", "first", _declaring(2000)) + item("b", "second"))
    data, _ = defuse(body)
    assert len(feedparser.parse(data)["namespaces"]) <= 100
    # The document is then read leniently (the elements that used them are no longer
    # well-formed), and its entries are all stored.
    feed = parse_feed(body)
    assert [(e.remote_id, e.title) for e in feed.entries] == [("a", "first"), ("b", "second")]
    assert feed.warnings[0] == ("1900 namespace declaration(s) of prefixes past the first "
                                "100 removed")
    assert feed.warnings[1].startswith("feed is not well-formed, read leniently:")


def test_a_document_within_the_cap_is_left_as_it_was() -> None:
    from signal_feeds.parse.feed import MAX_NAMESPACES, defuse

    # As many prefixes as allowed, each declared again and again (inline SVG in posts
    # declares xlink in every drawing): nothing is removed, the parse stays strict.
    svg = '<svg xmlns:xlink="http://www.w3.org/1999/xlink"/>' * 200
    body = rss(item("a", "t", _declaring(MAX_NAMESPACES - 1) * 2
                    + f"<description><![CDATA[{svg}]]></description>"))
    data, warnings = defuse(body)
    assert data.count(b"xmlns:") == body.count(b"xmlns:") and warnings == ()
    assert parse_feed(body).warnings == ()
    # A value left unclosed at the end of the document is never taken away with it.
    whole = rss(item("a", "t", _declaring(MAX_NAMESPACES)))
    cut = whole[:whole.index(b"</item>")] + b'<e xmlns:late="urn:late'
    data, warnings = defuse(cut)
    assert data.endswith(b' xmlns:late="urn:late') and warnings == ()


def test_an_xml_error_says_where_it_is_without_parser_internals() -> None:
    from signal_feeds.errors import ParseError

    # Random bytes: "(SAXParseException: <unknown>:2:0: ...)" before, a line and column
    # in the document as re-encoded for the parser, not as sent.
    with pytest.raises(ParseError) as caught:
        parse_feed(b"\x8f\x03garbage", source_id="s")
    assert caught.value.message == ("not an RSS or Atom feed (XML error: "
                                    "not well-formed (invalid token))")
    feed = parse_feed(rss(item("a", "first") + "<item><title>b</b></title></item>"))
    assert [w for w in feed.warnings if "well-formed" in w] == [
        "feed is not well-formed, read leniently: mismatched tag"]


def test_a_long_xml_base_is_not_handed_to_the_parser() -> None:
    # feedparser joins the base in effect with itself at every start tag, and keeps one
    # an element set in effect to the end of the document: after a 1 MB xml:base, each
    # later tag cost 3 ms (10,000 empty elements took half a minute).
    import feedparser

    from signal_feeds.parse.feed import defuse

    long = "https://example.org/" + "x" * 1_000_000
    body = (f'<feed xmlns="http://www.w3.org/2005/Atom"><title xml:base="{long}">t</title>'
            f"<id>urn:f</id><entry base='{long}'><id>a</id><title>first</title>"
            '<content type="html" xml:base="https://example.org/posts/">&lt;a href="p"&gt;'
            "x&lt;/a&gt;</content></entry></feed>").encode()
    data, warnings = defuse(body)
    assert warnings == ("2 xml:base attribute(s) longer than 2048 bytes removed",)
    entry = feedparser.parse(data)["entries"][0]
    assert len(entry["title_detail"]["base"]) < 100
    # A base of a link's length is kept, and resolves the content's links as before.
    feed = parse_feed(body)
    assert [(e.remote_id, e.title) for e in feed.entries] == [("a", "first")]
    assert feed.entries[0].content == '<a href="https://example.org/posts/p" rel="noopener ' \
                                      'noreferrer">x</a>'
    # In any case (a lenient parse lowers attribute names), and only a base.
    data, warnings = defuse(f'<rss><channel XML:Base = "{long}" database="{long}">'
                            "</channel></rss>".encode())
    assert warnings == ("1 xml:base attribute(s) longer than 2048 bytes removed",)
    assert data.count(b"https://example.org/") == 1 and b" database=" in data
