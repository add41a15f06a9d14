"""Hostile XML over real HTTP on 127.0.0.1.

One ``signal fetch`` subprocess fetches every hostile document of this module together
with two healthy sources, so each test below checks one source of the same run: the
hostile ones end with a clear error or a safe result, the healthy ones are stored, the
run's own process stays under 300 MB and the run ends in bounded time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

import pytest
from _hostile import RSS_LIMIT, CliRun, item, rows, rss, run_cli_fetch, write_config
from scenario_server import ScenarioServer

from signal_feeds import identify, parse_feed
from signal_feeds.parse.feed import DEFAULT_MAX_ENTRIES, defuse

SECRET = "signal-secret-marker-7f3a"
ATOM = '<?xml version="1.0" encoding="utf-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom">'


def billion_laughs() -> bytes:
    levels = ['<!ENTITY lol0 "lol">'] + [
        f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)]
    return rss(item("laughs", "&lol9;"), prolog=f"<!DOCTYPE rss [{''.join(levels)}]>\n")


def quadratic_blowup() -> bytes:
    # One 100 KB plain entity referenced 20,000 times: a 160 KB file, 2 GB expanded.
    entity = "A" * 100_000
    body = rss(item("quadratic", "q", "<description>" + "&a;" * 20_000 + "</description>"),
               prolog=f'<!DOCTYPE rss [<!ENTITY a "{entity}">]>\n')
    assert len(body) < 170_000
    return body


@dataclass(frozen=True)
class Case:
    body: bytes
    content_type: str = "application/rss+xml; charset=utf-8"


def cases(secret_file: Path, probe: str) -> dict[str, Case]:
    """Every hostile document, by source id. ``probe`` is a URL prefix on the test
    server: any request under it is an external entity or DTD that was fetched."""
    long_author = "a" * 100_000 + "@" + "b" * 100 + ".org"
    hundred_k = "".join(item(f"e{i}", f"entry {i}") for i in range(100_000))
    laughs_u32 = billion_laughs().replace(b'encoding="utf-8"', b'encoding="utf-32"')
    return {
        "billion-laughs": Case(billion_laughs()),
        "quadratic": Case(quadratic_blowup()),
        "xxe-file": Case(rss(item("xxe-file", "&xxe;"), prolog=(
            f'<!DOCTYPE rss [<!ENTITY xxe SYSTEM "file://{secret_file}">]>\n'))),
        "xxe-http": Case(rss(item("xxe-http", "&xxe;"), prolog=(
            f'<!DOCTYPE rss SYSTEM "{probe}/dtd" [<!ENTITY xxe SYSTEM "{probe}/entity">]>\n'))),
        "param-entity": Case(rss(item("param", "p"), prolog=(
            f'<!DOCTYPE rss [<!ENTITY % ext SYSTEM "{probe}/param"> %ext;'
            '<!ENTITY % a "<!ENTITY b \'bbbbbbbbbb\'>"> %a;]>\n'))),
        "long-author": Case(rss(item("author", "a", f"<author>{long_author}</author>")
                                + item("author-cdata", "c",
                                       f"<author><![CDATA[{long_author}]]></author>")
                                + item("author-split", "s",
                                       f"<author>x<!-- -->{long_author}</author>"))),
        "long-atom-email": Case(
            (ATOM + "<title>t</title><id>urn:x</id><entry><id>urn:e</id><title>e</title>"
             f"<author><name>n</name><email>{long_author}</email></author></entry></feed>"
             ).encode(), "application/atom+xml"),
        "nul-and-bad-utf8": Case(rss(item("nul", "be\x00fore")).replace(
            b"<title>be", b"<title>\xff\xfe\xc3be")),
        "wrong-charset": Case(
            rss(item("charset", "Привет"), encoding="windows-1251").replace(
                b'encoding="windows-1251"', b'encoding="utf-8"'),
            "application/rss+xml; charset=utf-8"),
        "utf32-doctype": Case(laughs_u32.decode("utf-8").encode("utf-32-le"),
                              "application/rss+xml"),
        "truncated": Case(rss(item("whole", "whole") + item("cut", "cut"))[:-60]),
        "html-page": Case(b"<!DOCTYPE html><html><head><title>Home</title></head><body>"
                          b"<p>Not a feed</p></body></html>", "text/html; charset=utf-8"),
        "empty": Case(b""),
        "hundred-k": Case(rss(hundred_k)),
        "ten-mb-title": Case(rss(item("big-title", "T" * 10_000_000))),
    }


@dataclass
class XmlRun:
    run: CliRun
    db: Path
    server: ScenarioServer
    probe_path: str


@pytest.fixture(scope="module")
def xml_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[XmlRun]:
    tmp = tmp_path_factory.mktemp("hostile-xml")
    secret = tmp / "secret.txt"
    secret.write_text(SECRET, encoding="utf-8")
    with ScenarioServer() as server:
        probe_path = "/probe"
        sources = {"good-rss": server.url("/feeds/demo-rss.xml"),
                   "good-atom": server.url("/feeds/demo-atom.xml")}
        for sid, case in cases(secret, server.url(probe_path)).items():
            server.put(f"/hostile/{sid}.xml", case.body, content_type=case.content_type)
            sources[sid] = server.url(f"/hostile/{sid}.xml")
        db = tmp / "signal.db"
        config = write_config(tmp / "signal.toml", db, sources)
        yield XmlRun(run_cli_fetch(config), db, server, probe_path)


def _stored(db: Path, sid: str) -> list[tuple[str, str, str, str]]:
    return rows(db, "SELECT remote_id, title, author, summary FROM entries "
                    "WHERE source_id = ? ORDER BY remote_id", sid)


def _assert_nothing_written(db: Path, sid: str) -> None:
    assert _stored(db, sid) == []
    (state,) = rows(db, "SELECT etag, last_modified, body_digest FROM sources WHERE id = ?", sid)
    assert state == ("", "", "")  # no validators, no digest: the next run asks again


def test_run_is_bounded_and_healthy_sources_are_stored(xml_run: XmlRun) -> None:
    run = xml_run.run
    assert run.peak_rss < RSS_LIMIT, f"peak RSS {run.peak_rss / 2**20:.0f} MB"
    assert run.seconds < 60
    assert run.returncode == 1  # some sources were rejected; the others ran
    for sid, created in (("good-rss", 3), ("good-atom", 2)):
        rep = run.source(sid)
        assert (rep["status"], rep["created"]) == ("fetched", created), rep
        assert len(_stored(xml_run.db, sid)) == created
    every = {r["source"] for r in run.report["sources"]}
    assert len(every) == len(run.report["sources"]) == 2 + 15


@pytest.mark.parametrize("sid", ["billion-laughs", "quadratic"])
def test_entity_expansion_is_defused(xml_run: XmlRun, sid: str) -> None:
    rep = xml_run.run.source(sid)
    assert rep["status"] == "fetched", rep
    assert "DOCTYPE/ENTITY declarations removed" in rep["warnings"]
    for _, title, _, summary in _stored(xml_run.db, sid):
        assert "lollol" not in title and "AAAA" not in title + summary


@pytest.mark.parametrize("sid", ["xxe-file", "xxe-http", "param-entity"])
def test_external_entities_read_and_request_nothing(xml_run: XmlRun, sid: str) -> None:
    rep = xml_run.run.source(sid)
    assert rep["status"] == "fetched", rep
    assert "DOCTYPE/ENTITY declarations removed" in rep["warnings"]
    everything = repr(rows(xml_run.db, "SELECT * FROM entries"))
    assert SECRET not in everything
    assert not [r for r in xml_run.server.requests
                if r.path.startswith(xml_run.probe_path)]


@pytest.mark.parametrize("sid", ["long-author", "long-atom-email"])
def test_long_author_is_cut_quickly(xml_run: XmlRun, sid: str) -> None:
    rep = xml_run.run.source(sid)
    assert rep["status"] == "fetched", rep
    assert rep["duration_ms"] < 10_000
    assert any("author" in w and "cut" in w for w in rep["warnings"]), rep["warnings"]
    stored = _stored(xml_run.db, sid)
    assert stored and all(len(author) <= 512 for _, _, author, _ in stored)


def test_nul_bytes_and_invalid_utf8_are_read_leniently(xml_run: XmlRun) -> None:
    rep = xml_run.run.source("nul-and-bad-utf8")
    assert rep["status"] == "fetched", rep
    assert "NUL bytes removed" in rep["warnings"]
    ((remote_id, title, _, _),) = _stored(xml_run.db, "nul-and-bad-utf8")
    assert remote_id.endswith("nul") and "\x00" not in title and title.endswith("before")


def test_wrong_declared_charset_is_noticed(xml_run: XmlRun) -> None:
    rep = xml_run.run.source("wrong-charset")
    assert rep["status"] == "fetched", rep
    assert any(w.startswith("character encoding:") for w in rep["warnings"])
    ((_, title, _, _),) = _stored(xml_run.db, "wrong-charset")
    # The bytes are not UTF-8: the fallback (windows-1252) reads them, as mojibake.
    assert len(title) == len("Привет") and "\ufffd" not in title


def test_declarations_hidden_in_another_encoding_are_removed(xml_run: XmlRun) -> None:
    rep = xml_run.run.source("utf32-doctype")
    assert rep["status"] == "fetched", rep
    assert "DOCTYPE/ENTITY declarations removed" in rep["warnings"]
    ((_, title, _, _),) = _stored(xml_run.db, "utf32-doctype")
    assert title == "&lol9;"  # an undefined entity stays text; nothing expanded


def test_truncated_xml_keeps_the_complete_entries(xml_run: XmlRun) -> None:
    rep = xml_run.run.source("truncated")
    assert rep["status"] == "fetched", rep
    assert any("not well-formed" in w for w in rep["warnings"])
    assert "whole" in [r[1] for r in _stored(xml_run.db, "truncated")]


@pytest.mark.parametrize(("sid", "reason"), [("html-page", "not an RSS or Atom feed"),
                                             ("empty", "empty body")])
def test_not_a_feed_is_rejected_and_nothing_written(xml_run: XmlRun, sid: str,
                                                     reason: str) -> None:
    rep = xml_run.run.source(sid)
    assert (rep["status"], rep["http_status"]) == ("rejected", 200), rep
    assert reason in rep["error"]
    _assert_nothing_written(xml_run.db, sid)


def test_hundred_thousand_entries_are_capped(xml_run: XmlRun) -> None:
    rep = xml_run.run.source("hundred-k")
    assert (rep["status"], rep["created"]) == ("fetched", DEFAULT_MAX_ENTRIES), rep
    assert (f"the feed has 100000 entries; only the first {DEFAULT_MAX_ENTRIES} were read "
            "(the max_entries setting)" in rep["warnings"])
    (count,) = rows(xml_run.db, "SELECT count(*) FROM entries WHERE source_id = ?",
                    "hundred-k")[0]
    assert count == DEFAULT_MAX_ENTRIES


def test_ten_megabyte_title_is_cut(xml_run: XmlRun) -> None:
    rep = xml_run.run.source("ten-mb-title")
    assert rep["status"] == "fetched", rep
    assert "title cut to 2048 characters in 1 entries" in rep["warnings"]
    ((_, title, _, _),) = _stored(xml_run.db, "ten-mb-title")
    assert title == "T" * 2048


# -- the defusing itself, without HTTP ---------------------------------------------------

@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be",
                                   "utf-7"])
def test_declarations_are_found_in_every_encoding(codec: str) -> None:
    doc = billion_laughs().decode("utf-8").replace('encoding="utf-8"', f'encoding="{codec}"')
    data, warnings = defuse(doc.encode(codec))
    assert b"<!DOCTYPE" not in data and b"<!ENTITY" not in data
    assert "DOCTYPE/ENTITY declarations removed" in warnings
    feed = parse_feed(doc.encode(codec))
    assert [e.remote_id for e in feed.entries] == ["laughs"]


def test_utf16_without_bom_cannot_hide_a_doctype_between_nuls() -> None:
    doc = billion_laughs().decode("utf-8").split("?>", 1)[1]  # no XML declaration
    data, warnings = defuse(doc.encode("utf-16-le"))
    assert b"<!DOCTYPE" not in data and b"<!ENTITY" not in data
    assert "NUL bytes removed" in warnings


def test_a_doctype_in_a_posts_cdata_costs_no_entry() -> None:
    # A lesson on HTML: "<!DOCTYPE" in the post's text, then an apostrophe. Cutting from
    # there to the next '>' outside quotes took the rest of the feed with it, and the
    # report blamed a connection cut short.
    post = ("<content:encoded><![CDATA[<p>Every page starts with <!DOCTYPE, which isn't "
            "a tag.</p><pre><!DOCTYPE html></pre>]]></content:encoded>")
    doc = rss(item("a", "HTML basics", post) + item("b", "Don't panic") + item("c"),
              channel="").replace(b"<rss ", b'<rss xmlns:content='
                                  b'"http://purl.org/rss/1.0/modules/content/" ')
    feed = parse_feed(doc)
    assert [e.remote_id for e in feed.entries] == ["a", "b", "c"]
    assert feed.warnings == ()
    assert "Every page starts with" in feed.entries[0].content


@pytest.mark.parametrize("hiding", [
    "<!-- {decl} -->",
    "<!-- <a -->{decl}",  # feedparser's first element: its entities come from before it
    "<!-- <a --><![CDATA[\n{decl}\n]]>",  # a section the prolog cannot hold
    "<?pi <a ?><!-- -->{decl}",
    "<?pi <![CDATA[ ?>{decl}<!-- ]]> -->",
])
def test_a_declaration_before_the_root_is_removed_wherever_it_hides(hiding: str) -> None:
    entity = "A" * 100_000
    decl = f'<!DOCTYPE rss [\n<!ENTITY a "{entity}">\n]>\n<!ENTITY b "{entity}">\n'
    body = rss(item("q", "q", "<description>" + "&a;&b;" * 5_000 + "</description>"),
               prolog=hiding.format(decl=decl) + "\n")
    data, warnings = defuse(body)
    assert entity.encode() not in data
    assert "DOCTYPE/ENTITY declarations removed" in warnings
    feed = parse_feed(body)
    assert all(len(e.summary) < 100_000 for e in feed.entries)


def test_author_cut_keeps_characters_and_references_whole() -> None:
    author = "é" * 700 + "&amp;" * 100
    feed = parse_feed(rss(item("g", "t", f"<author>{author}</author>")))
    (entry,) = feed.entries
    assert entry.author == "é" * 512
    assert not any(w.startswith("feed is not well-formed") for w in feed.warnings)


def test_an_element_with_a_hundred_thousand_attributes_is_read_quickly() -> None:
    # The standard library's SAX attributes find each name by a linear search, and
    # feedparser looks up every one: 100,000 attributes (1 MB) took minutes to parse.
    from signal_feeds.parse.feed import MAX_ATTRIBUTES

    many = " ".join(f'a{i}="x"' for i in range(100_000))
    body = (f'<rss version="2.0"><channel><title>t</title><item><guid>g</guid>'
            f"<title {many}>kept</title><enclosure {many} url='https://x.example/a.mp3'/>"
            "</item></channel></rss>").encode()
    feed = parse_feed(body)
    assert [e.title for e in feed.entries] == ["kept"]
    assert feed.warnings == (f"attributes past the first {MAX_ATTRIBUTES} removed from "
                             "2 element(s)",)
    # A tag that is only long (a large URL) keeps its attributes.
    url = "https://x.example/a?" + "&amp;k=v" * 10_000
    body = (f'<rss version="2.0"><channel><title>t</title><item><guid>g</guid>'
            f'<enclosure url="{url}" length="1" type="audio/mpeg"/></item></channel></rss>'
            ).encode()
    assert parse_feed(body).warnings == ()


def test_entries_never_closed_are_capped_too() -> None:
    # The cap counts end tags before parsing; the lenient reading makes an entry of
    # every unclosed <item> too, and 100,000 of them all went through.
    items = "".join(f"<item><guid>g{i}</guid>" for i in range(200))
    feed = parse_feed(f'<rss version="2.0"><channel><title>t</title>&nbsp;{items}'
                      "</channel></rss>".encode(), max_entries=50)
    assert len(feed.entries) == 50
    assert "the feed has 200 entries; only the first 50 were read (the max_entries setting)" \
        in feed.warnings


def test_a_summary_cut_at_its_limit_is_whole_html() -> None:
    # Cut after sanitizing, a summary ended inside `alt="`: shown before the next
    # entry's summary (`<p>z" onerror="alert(1)" x=y</p>`), a browser read that text as
    # the image's attributes, onerror included.
    from html.parser import HTMLParser

    from signal_feeds.parse.fields import DEFAULT_FIELD_LIMITS

    limit = DEFAULT_FIELD_LIMITS["summary"]
    tail = '<img src="https://e.example/a.png" alt="photo">'
    for inside in (3, 20, 40):  # the cut lands this far into the image's tag
        words = "word " * limit
        pad = "<p>" + words[:limit - inside - len("<p></p>")] + "</p>"
        summary = pad + tail
        feed = parse_feed(rss(item("g", "t", f"<description>{escape(summary)}</description>")))
        stored = feed.entries[0].summary
        assert len(stored) <= limit and "summary cut to" in " ".join(feed.warnings)
        parser = HTMLParser()
        parser.feed(stored)
        assert parser.rawdata == ""  # nothing left unread: no tag or attribute open
        assert not stored.rstrip().endswith(('alt="', "alt=", "<img"))


def test_two_long_ids_that_differ_past_the_limit_are_two_entries() -> None:
    # They shared their first 2,048 characters, so one key: the feed was rejected on
    # every fetch as holding "two different versions" of one entry.
    shared = "https://news.example/rss/articles/CBMi" + "x" * 2100
    feed = parse_feed(rss(item(f"{shared}A", "first") + item(f"{shared}B", "second")))
    first, second = (e.remote_id for e in feed.entries)
    assert len(first) == len(second) == 2048 and first != second
    assert first.startswith(shared[:1900])
    assert len(identify("s", feed.entries).rows) == 2


def test_a_cut_that_closing_cannot_fit_keeps_the_text() -> None:
    # Closing 65,000 open elements adds more than the cut takes off: shrinking to fit
    # emptied the field. The cut's text is kept instead, escaped.
    from signal_feeds.parse.fields import FieldLimiter

    limiter = FieldLimiter({"summary": 65536})
    kept = limiter("summary", "<b>x" * 100_000 + "&lt;tail")
    assert 65536 // 4 <= len(kept) <= 65536 and set(kept) == {"x"}, len(kept)


def test_a_tz_database_zone_at_the_end_of_the_calendar_costs_only_that_date() -> None:
    # past 9999 in UTC: an OverflowError failed the whole feed ("parser failed").
    feed = parse_feed(rss(item("a", "t", "<pubDate>Fri, 31 Dec 9999 23:00:00 America/New_York"
                                        "</pubDate>") + item("b")))
    assert [e.remote_id for e in feed.entries] == ["a", "b"]
