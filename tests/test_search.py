"""Full-text search (issue 18, point 13): real HTTP on 127.0.0.1, on each store backend
(SQLite FTS5; PostgreSQL tsvector with the same query syntax)."""

from __future__ import annotations

import json
import shlex
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import pytest
from click.testing import CliRunner, Result
from conftest import Clock, make_config
from hypothesis import given, settings
from hypothesis import strategies as st
from scenario_server import ScenarioServer

from signal_feeds import digest, run_fetch
from signal_feeds.cli.commands import cli
from signal_feeds.errors import QueryError
from signal_feeds.parse.processes import ParserPool
from signal_feeds.store import open_store
from signal_feeds.store.fulltext import quote_punctuated_words, searchable_text
from signal_feeds.store.reading import search_entries
from signal_feeds.store.sqlite.schema import ENTRY_ORDER, ENTRY_ORDER_EXPR, SCHEMA_VERSION

STORY = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor "
         "incididunt ut labore et dolore magna aliqua.")


def rss(*items: dict[str, str]) -> bytes:
    parts = []
    for item in items:
        fields = "".join(f"<{tag}>{escape(item[key])}</{tag.split()[0]}>" for key, tag in (
            ("guid", 'guid isPermaLink="false"'), ("title", "title"), ("link", "link"),
            ("description", "description"), ("date", "pubDate")) if key in item)
        if "content" in item:
            fields += (f"<content:encoded>{escape(item['content'])}</content:encoded>")
        parts.append(f"<item>{fields}</item>")
    return ("<?xml version='1.0' encoding='utf-8'?><rss version='2.0' "
            "xmlns:content='http://purl.org/rss/1.0/modules/content/'><channel><title>t"
            "</title><link>https://example.org/</link>" + "".join(parts)
            + "</channel></rss>").encode()


Fetch = Callable[[str, bytes], None]


@pytest.fixture(scope="module")
def parser() -> Iterator[ParserPool]:
    pool = ParserPool(workers=1)
    yield pool
    pool.close()


@pytest.fixture
def fetch(server: ScenarioServer, database: Path | str, parser: ParserPool) -> Fetch:
    clock = Clock()

    def run(source_id: str, body: bytes) -> None:
        clock.advance(60)
        server.put(f"/{source_id}.xml", body)
        report = run_fetch(make_config(database, {source_id: server.url(f"/{source_id}.xml")}),
                           force=True, parser=parser, clock=clock)
        assert report.sources[0].status == "fetched", report.sources[0]

    return run


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def search_json(db: Path | str, *args: str) -> Any:
    result = invoke("search", *args, "--db", str(db), "--json")
    assert result.exit_code in (0, 1), result.output
    found = json.loads(result.output)
    assert result.exit_code == (0 if found["hits"] or "--rebuild" in args else 1)
    return found


def test_the_text_of_html_is_indexed_not_its_markup() -> None:
    html = ('<p>Caf&eacute; <a href="https://x.example/strong">opening</a>\n'
            "<strong>hours</strong> &amp; prices</p>")
    assert searchable_text(html) == "Café opening hours & prices"
    assert searchable_text("plain text, no tags") == "plain text, no tags"
    # It reads as a browser shows it: inline tags separate no words (a Mastodon
    # hashtag, a drop cap, a link before a full stop); block tags and line breaks do.
    assert searchable_text('<p>Hi <a href="/tags/rss" class="hashtag">#<span>rss</span>'
                           "</a></p><p><B>S</B>ignal<br>is<BR/>here &amp; <abbrev>x"
                           "</abbrev>y</p>") == "Hi #rss Signal is here & x y"
    assert searchable_text('<p>Read the <a href="/d">docs</a>, then <em>try</em>.</p>'
                           ) == "Read the docs, then try."
    assert searchable_text("") == ""


def test_index_rows_are_written_in_rowid_order() -> None:
    # The writer numbers a response's new entries from the end of the document back
    # (the reading order's tie-break); FTS5 writes a segment out every time a rowid is
    # not above the last one, which made index writes about five times slower.
    from signal_feeds.store.sqlite.search import FTS_TABLE, IndexChange, create_search_index

    with closing(sqlite3.connect(":memory:")) as conn:
        conn.execute("CREATE TABLE entries (id TEXT, seq INTEGER, title TEXT, summary TEXT, "
                     "content TEXT)")  # what the index is built from
        create_search_index(conn)
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        IndexChange((), [(seq, f"t{seq}", "", "") for seq in (5, 4, 3, 2, 1)]).apply(conn)
        conn.set_trace_callback(None)
        inserted = [int(s.split("VALUES (", 1)[1].split(",", 1)[0]) for s in statements
                    if s.startswith(f"INSERT INTO {FTS_TABLE} ")]
        assert inserted == [1, 2, 3, 4, 5]
        assert conn.execute(f"SELECT title FROM {FTS_TABLE} WHERE rowid = 4").fetchone() == (
            "t4",)


def test_the_parser_process_strips_the_html_as_the_writer_would() -> None:
    # The index text is computed next to the parse, off the writer's thread; a store
    # given it must index exactly what it would have computed itself.
    from signal_feeds.identity.search_text import SearchText
    from signal_feeds.parse.processes import ParseJob, parse_job
    from signal_feeds.parse.settings import ParseSettings

    body = rss({"guid": "1", "title": "T", "link": "https://b.example/1",
                "description": "<p>Caf&eacute; &amp; <b>bar</b></p>",
                "content": "<div>Opening <em>hours</em></div>"})
    outcome = parse_job(ParseJob(source_id="s", body=body, url="https://b.example/",
                                 content_type="", settings=ParseSettings()))
    (row,) = outcome.identified.rows  # type: ignore[attr-defined]
    assert outcome.search_texts == {row.key: SearchText.of(row.summary, row.content)}
    assert outcome.search_texts[row.key] == ("Café & bar", "Opening hours")


def test_title_summary_and_content_are_searched_best_first_with_snippets(
        fetch: Fetch, database: Path | str) -> None:
    fetch("blog", rss(
        {"guid": "t", "title": "Harvest festival in the valley", "link": "https://b.example/t",
         "description": STORY},
        {"guid": "s", "title": "Weekly notes", "link": "https://b.example/s",
         "description": "<p>We went to the <em>harvest</em> market on Sunday.</p>"},
        {"guid": "c", "title": "Photos", "link": "https://b.example/c",
         "description": STORY,
         "content": "<p>Pictures of the caf&eacute; near the harvest fair.</p>"},
        {"guid": "n", "title": "Unrelated", "link": "https://b.example/n",
         "description": '<p>See <a href="https://b.example/harvest">this</a>.</p>'}))
    hits = search_json(database, "harvest")["hits"]
    keys = [h["id"] for h in hits]
    # The title match ranks first; a word only in a link's address is not text.
    assert keys[0] == digest(["blog", "t"])
    assert set(keys) == {digest(["blog", k]) for k in "tsc"}
    snippets = {h["id"]: h["snippet"] for h in hits}
    assert snippets[digest(["blog", "t"])] == "[Harvest] festival in the valley"
    assert "the [harvest] market" in snippets[digest(["blog", "s"])]
    assert "<" not in "".join(snippets.values())
    # Accents and case are ignored; the text line shows the snippet under the entry.
    assert [h["id"] for h in search_json(database, "CAFE")["hits"]] == [digest(["blog", "c"])]
    text = invoke("search", "harvest market", "--db", str(database))
    assert text.exit_code == 0
    assert text.output.splitlines()[1].strip().startswith("We went to the [harvest] [market]")
    # FTS5 syntax: phrases, column filters, prefixes, NOT.
    assert [h["id"] for h in search_json(database, '"harvest fair"')["hits"]] == [
        digest(["blog", "c"])]
    assert [h["id"] for h in search_json(database, "title:harvest")["hits"]] == [
        digest(["blog", "t"])]
    assert len(search_json(database, "harv*")["hits"]) == 3
    assert len(search_json(database, "harvest NOT market")["hits"]) == 2
    nothing = invoke("search", "zeppelin", "--db", str(database))
    assert nothing.exit_code == 1 and nothing.output == ""


def test_an_item_with_only_html_content_is_searched_as_text(
        fetch: Fetch, database: Path | str) -> None:
    # feedparser copies a lone <content:encoded> into the summary without its type;
    # read as plain text, its markup was stored escaped and indexed as words.
    fetch("gallery", rss({"guid": "g", "title": "Gallery", "link": "https://g.example/1",
                          "content": '<p><img src="https://g.example/kite.png"> Kites '
                                     "over the <b>harbour</b></p>"}))
    (hit,) = search_json(database, "harbour")["hits"]
    assert "<" not in hit["snippet"] and "&lt;" not in hit["snippet"]
    assert "[harbour]" in hit["snippet"]
    for markup in ("img", "src", "png"):
        assert search_json(database, markup)["hits"] == [], markup


def test_a_snippet_reads_as_the_summary_does(fetch: Fetch, database: Path | str) -> None:
    # Every tag was a space in the index, so a link before a comma or a full stop,
    # the commonest thing in a blog's summary, left a space in front of it.
    fetch("docs", rss({"guid": "d", "title": "Notes", "link": "https://d.example/1",
                       "description": '<p>First release: <a href="https://d.example/docs">'
                                      "documentation</a>, <b>un</b>usual tests.</p>"}))
    (hit,) = search_json(database, "documentation")["hits"]
    assert hit["snippet"] == "First release: [documentation], unusual tests.", hit
    assert len(search_json(database, "unusual")["hits"]) == 1


def test_a_snippet_highlights_only_what_the_query_matched(fetch: Fetch,
                                                          database: Path | str) -> None:
    # On PostgreSQL "title:harvest" showed the summary with its harvests highlighted,
    # and "fair NOT title:harvest" highlighted the harvest it had left out.
    fetch("blog", rss({"guid": "1", "title": "Harvest notes", "link": "https://b.example/1",
                       "description": "Harvest harvest harvest, then the harvest fair."},
                      {"guid": "2", "title": "Fair day", "link": "https://b.example/2",
                       "description": "The harvest fair opens at nine."}))
    hits = search_json(database, "title:harvest")["hits"]
    assert [h["snippet"] for h in hits] == ["[Harvest] notes"]
    (hit,) = search_json(database, "fair NOT title:harvest")["hits"]
    assert "[" not in hit["snippet"].replace("[fair]", "").replace("[Fair]", ""), hit


def test_duplicates_are_collapsed_as_in_signal_entries(fetch: Fetch, database: Path | str) -> None:
    story = {"title": "Release of version seven", "link": "https://proj.example/v7",
             "description": STORY, "date": "Mon, 02 Mar 2026 10:00:00 GMT"}
    fetch("publisher", rss({**story, "guid": "p"}))
    fetch("planet", rss({**story, "guid": "x", "link": "https://planet.example/1"}))
    hits = search_json(database, "version seven")["hits"]
    assert [h["id"] for h in hits] == [digest(["publisher", "p"])]
    assert hits[0]["also_in"] == ["planet"]
    every = search_json(database, "version seven", "--all")["hits"]
    assert {h["id"] for h in every} == {digest(["publisher", "p"]), digest(["planet", "x"])}
    # --source shows that source's own copy, as `signal entries --source` does.
    own = search_json(database, "version", "--source", "planet")["hits"]
    assert [h["id"] for h in own] == [digest(["planet", "x"])]


def test_a_story_is_found_by_words_only_a_copy_of_it_holds(fetch: Fetch,
                                                           database: Path | str) -> None:
    # The publisher's feed gives an excerpt; an aggregator's copy has the full text.
    # Collapsed, the search looked only at the canonical rows and found nothing.
    story = {"title": "Harvest festival in the valley", "link": "https://farm.example/h",
             "date": "Mon, 02 Mar 2026 10:00:00 GMT"}
    fetch("farm", rss({**story, "guid": "f", "description": "A short excerpt."}))
    fetch("planet", rss({**story, "guid": "p", "date": "Tue, 10 Mar 2026 10:00:00 GMT",
                         "description": "The full text: pumpkins, a tractor parade and "
                         "cider pressing in the old barn."}))
    publisher, copy = digest(["farm", "f"]), digest(["planet", "p"])
    hits = search_json(database, "cider")["hits"]
    assert [h["id"] for h in hits] == [publisher]  # the story, by its canonical copy
    assert "[cider]" in hits[0]["snippet"] and hits[0]["also_in"] == ["planet"]
    # A word both copies hold: still one hit per story.
    assert [h["id"] for h in search_json(database, "harvest")["hits"]] == [publisher]
    assert [h["id"] for h in search_json(database, "cider", "--all")["hits"]] == [copy]
    with open_store(database) as store:
        assert [h.entry.key for h in store.search("cider")] == [publisher]
        assert [h.entry.key for h in search_entries(store, "cider")] == [publisher]
        # --source: the copy stands for a canonical entry of its own source only.
        assert [h.entry.key for h in store.search("cider", source_id="planet")] == [copy]
        assert store.search("cider", source_id="farm") == []
        # --since selects stories as `signal entries --since` does: by the canonical
        # entry's date (the copy's own later date does not bring an older story in).
        assert store.search("cider", since="2026-03-05") == []
        assert [h.entry.key for h in store.search("cider", since="2026-03-02")] == [
            publisher]
    assert search_json(database, "cider", "--since", "2026-03-05")["hits"] == []
    assert search_json(database, "cider", "--limit", str(2 ** 63 - 1))["hits"][0]["id"] == (
        publisher)  # no overflow asking the backend for twice the limit


def test_source_since_and_limit_select_the_hits(fetch: Fetch, database: Path | str) -> None:
    fetch("a", rss(*({"guid": f"a{n}", "title": f"Garden diary day {n}",
                      "link": f"https://a.example/{n}",
                      "date": f"Mon, {n + 1:02d} Mar 2026 10:00:00 GMT"} for n in range(5))))
    fetch("b", rss({"guid": "b", "title": "Garden tools", "link": "https://b.example/1",
                    "date": "Sun, 01 Feb 2026 10:00:00 GMT"}))
    assert len(search_json(database, "garden")["hits"]) == 6
    assert {h["source_id"] for h in search_json(database, "garden", "--source", "b")["hits"]
            } == {"b"}
    assert len(search_json(database, "garden", "--since", "2026-03-03")["hits"]) == 3
    assert len(search_json(database, "garden", "--limit", "2")["hits"]) == 2
    with open_store(database) as store:
        assert len(search_entries(store, "garden", source_id="a", limit=4)) == 4


def test_of_equal_scores_the_entry_stored_last_comes_first(fetch: Fetch,
                                                           database: Path | str) -> None:
    # Titles of the same length and words score the same on both backends.
    fetch("a", rss(*({"guid": f"a{n}", "title": f"Garden diary day {n}",
                      "link": f"https://a.example/{n}"} for n in range(3))))
    fetch("b", rss(*({"guid": f"b{n}", "title": f"Garden diary day {n + 3}",
                      "link": f"https://b.example/{n}"} for n in range(2))))
    hits = search_json(database, "garden")["hits"]
    # A response's entries are stored from the document's end back, so its first item
    # (in a feed, usually the newest) is stored last.
    assert [h["title"] for h in hits] == [f"Garden diary day {n}" for n in (3, 4, 0, 1, 2)]


def test_the_index_follows_every_write_and_rebuilds_to_the_same(
        fetch: Fetch, database: Path | str) -> None:
    fetch("blog", rss({"guid": "1", "title": "Bridge over the river",
                       "link": "https://b.example/1", "description": STORY}))
    assert len(search_json(database, "bridge")["hits"]) == 1
    # The publisher corrects the title: the old word is gone from the index at once.
    fetch("blog", rss({"guid": "1", "title": "Tunnel under the river",
                       "link": "https://b.example/1", "description": STORY}))
    assert search_json(database, "bridge")["hits"] == []
    assert [h["title"] for h in search_json(database, "tunnel")["hits"]] == [
        "Tunnel under the river"]
    if isinstance(database, Path):  # SQLite's index is a table of its own
        with closing(sqlite3.connect(database)) as conn, conn:
            assert conn.execute("SELECT count(*) FROM entries_fts").fetchone()[0] == 1
    before = search_json(database, "river OR lorem")["hits"]
    rebuilt = search_json(database, "river", "--rebuild")
    assert rebuilt["indexed"] == 1
    again = invoke("search", "--rebuild", "--db", str(database))
    assert again.exit_code == 0 and "rebuilt: 1 entries" in again.output
    assert search_json(database, "river OR lorem")["hits"] == before


def test_bad_query_syntax_is_a_usage_error_naming_the_query(fetch: Fetch,
                                                            database: Path | str) -> None:
    fetch("blog", rss({"guid": "1", "title": "Anything", "link": "https://b.example/1"}))
    for query in ('"unbalanced', "AND AND", "nosuchcolumn:word", "(open", "   ", "OR",
                  "NOT anything", "anything OR"):
        result = invoke("search", query, "--db", str(database))
        assert result.exit_code == 2, (query, result.output)
        assert "Traceback" not in result.output and result.exception is not None
        assert isinstance(result.exception, SystemExit)
        if query.strip():
            assert repr(query) in result.output
    with open_store(database) as store, pytest.raises(QueryError) as caught:
        store.search('"unbalanced')
    assert caught.value.query == '"unbalanced'
    # The hint fits the mistake, alike on both backends ('near ""' and a hint about
    # punctuation told 'frog OR' nothing).
    for query, said in (
            ("anything OR", "syntax error at the end of the query (something is missing "
                            "at the end: a word after AND, OR, NOT, NEAR, a column such as "
                            "title: or a +)"),
            ("frog AND (toad", "syntax error at the end of the query (a ( is never "
                               "closed)"),
            ("title:", "syntax error at the end of the query"),
            ("anything +", "syntax error at the end of the query"),
            ("(open", "syntax error at the end of the query"),
            ("AND anything", 'syntax error near "AND" (AND in capitals joins two words; '
                             "write and to search for the word)"),
            ("open)", 'syntax error near ")" (parentheses come in pairs, around words)'),
            ('"open', "unterminated string (a double quote starts a phrase, and another "
                      "must end it)")):
        with open_store(database) as store, pytest.raises(QueryError) as caught:
            store.search(query)
        assert f"is not valid FTS5 syntax: {said}" in str(caught.value), (query, caught.value)
    assert invoke("search", "--db", str(database)).exit_code == 2  # no query, no --rebuild


def test_a_query_may_be_several_arguments_and_a_minus_word_is_explained(
        fetch: Fetch, database: Path | str) -> None:
    fetch("blog", rss({"guid": "1", "title": "Harvest festival", "link": "https://b.example/1"},
                      {"guid": "2", "title": "Harvest moon", "link": "https://b.example/2"}))
    # Unquoted words were "Got unexpected extra argument (festival)".
    joined = invoke("search", "harvest", "festival", "--db", str(database), "--json")
    assert joined.exit_code == 0, joined.output
    assert [h["title"] for h in json.loads(joined.output)["hits"]] == ["Harvest festival"]
    # A search box's minus is taken by click as an option ("No such option '-m'").
    minus = invoke("search", "harvest", "-moon", "--db", str(database))
    assert minus.exit_code == 2
    # Its hint is the one that works: after '--', FTS5 refuses "-moon" too.
    assert "write NOT before it: NOT moon" in minus.output
    after = invoke("search", "--db", str(database), "--", "harvest", "-moon")
    assert after.exit_code == 2 and "write NOT moon" in after.output
    assert "'--'" not in invoke("search", "--limt", "3", "harvest").output  # a typo


def test_queries_no_backend_could_answer_are_usage_errors(fetch: Fetch,
                                                         database: Path | str) -> None:
    # Emoji or punctuation alone (never indexed), parentheses nested 300 deep (a
    # RecursionError on PostgreSQL), bytes a Latin-1 terminal passed through (a
    # UnicodeEncodeError from sqlite3): each a traceback or a silent "no hit" before.
    fetch("blog", rss({"guid": "1", "title": "Harvest festival", "link": "https://b.example/1"}))
    for query, said in (("\U0001f389", "no word to search for"), ("!!", "no word"),
                        ("(" * 300 + "harvest" + ")" * 300, "nests parentheses 300 deep"),
                        ("caf\udce9", "is not UTF-8 text")):
        result = invoke("search", query, "--db", str(database))
        assert result.exit_code == 2, (query[:20], result.output)
        assert said in result.output and isinstance(result.exception, SystemExit)
        with open_store(database) as store, pytest.raises(QueryError, match=said):
            store.search(query)
    lookup = invoke("lookup", "https://b.example/\udcff", "--db", str(database))
    assert lookup.exit_code == 2 and "is not UTF-8 text" in lookup.output
    deep = "(" * 32 + "harvest" + ")" * 32  # as deep as is read
    assert invoke("search", deep, "--db", str(database)).exit_code == 0


def test_a_search_box_minus_gets_a_hint_that_fits(database: Path | str) -> None:
    # "-market" is a column filter to FTS5; the hint said to quote punctuated words
    # (on PostgreSQL until December 2026: 'syntax error near "-"').
    with open_store(database) as store:
        for query in ("harvest -market", "-market harvest", "harvest -market*"):
            with pytest.raises(QueryError) as caught:
                store.search(query)
            assert str(caught.value).endswith(
                "no such column: market (to leave out entries with a word, write NOT "
                "market)"), caught.value
        with pytest.raises(QueryError) as other:
            store.search("nosuchcolumn:word")
        assert str(other.value).endswith(
            "no such column: nosuchcolumn (the columns to search in are title:, summary: "
            "and content:; a word with a colon inside can be put in double quotes)")


def test_a_star_before_a_word_is_refused_with_a_hint(fetch: Fetch,
                                                    database: Path | str) -> None:
    # A search box's "*fest" (a word by its end). On SQLite a query starting with "*" is
    # one of FTS5's debugging queries: "*reads" failed the search ("cannot search
    # entries: no such cursor: 1", exit 1) and "*id" matched nothing, where PostgreSQL
    # refused both; "harvest *fest" was "harvest* fest" on both, and found nothing.
    fetch("blog", rss({"guid": "1", "title": "Harvest festival", "link": "https://b.example/1"}))
    for query in ("*reads", "*id", "* id", "*fest", "harvest *fest", "title:*fest",
                  "harvest (*fest)"):
        result = invoke("search", query, "--db", str(database))
        assert result.exit_code == 2, (query, result.output)
        assert (f"search query {query!r} puts a * before a word (a * ends the beginning "
                "of a word: harv* finds harvest; no query finds a word by its end)"
                in result.output), result.output
    # A star after a word, spaced as FTS5 allows, and one inside quotes are as before.
    for query in ("harv*", "harv *", '"harv"*', '"*" harvest'):
        with open_store(database) as store:
            assert [h.entry.title for h in store.search(query)] == ["Harvest festival"], query
    # A misplaced star or a search box's plus gets a hint that fits, not "quote it".
    for query, said in (
            ("harvest**", 'syntax error near "*" (a * ends the beginning of a word'),
            ("+harvest", 'syntax error near "+" (every word must occur already, so a '
                         "search box's +word is the word alone")):
        with open_store(database) as store, pytest.raises(QueryError) as caught:
            store.search(query)
        assert said in str(caught.value), (query, caught.value)


def test_a_nul_in_a_query_separates_words(fetch: Fetch, database: Path | str) -> None:
    # SQLite read a NUL as the end of the query: "harvest<NUL>festival" was refused as
    # an unterminated string (once quoted), while PostgreSQL found the entry.
    fetch("blog", rss({"guid": "1", "title": "Harvest festival", "link": "https://b.example/1"}))
    with open_store(database) as store:
        for query in ("harvest\x00festival", "\x00harvest", "harvest\x00"):
            assert [h.entry.title for h in store.search(query)] == ["Harvest festival"]
        assert store.search("harv\x00est") == []  # two words, as with any control character
        with pytest.raises(QueryError, match="empty search query"):
            store.search("\x00")


def test_words_that_hold_punctuation_are_found_as_typed(fetch: Fetch,
                                                       database: Path | str) -> None:
    # covid-19 or node.js in a search box was refused as FTS5 syntax ("no such column:
    # 19", 'syntax error near "."'); each is now the phrase of its parts, on both backends.
    titles = {"1": "COVID-19 vaccine news", "2": "Node.js 22 is out", "3": "What's new in C++26",
              "4": "AT&T and e-mail", "5": "Writing C++ and C# side by side",
              "6": "#rust meetup at 10:30 with @bob", "7": "std::vector or $x? See "
              "https://github.com/foo/tinydb", "8": "Call hello() at start",
              "9": "1,000 users of Python, Zig and Go"}
    fetch("blog", rss(*({"guid": n, "title": t, "link": f"https://b.example/{n}"}
                        for n, t in titles.items())))
    for query, found in [("covid-19", {"1"}), ("node.js", {"2"}), ("what's", {"3"}),
                         ("e-mail", {"4"}), ("AT&T", {"4"}), ("title:node.js", {"2"}),
                         ("(node.js OR e-mail)", {"2", "4"}),
                         # The index holds words, not signs: both are the word "c".
                         ("C++", {"3", "5"}), ("C#", {"3", "5"}),
                         # A version after the signs was 'syntax error near "+"'.
                         ("C++26", {"3"}),
                         # Hashtags, handles, times, signs and addresses were "syntax
                         # error near #" or "no such column: https".
                         ("#rust", {"6"}), ("@bob", {"6"}), ("10:30", {"6"}),
                         ("meetup & bob", {"6"}), ("$x?", {"7"}), ("std::vector", {"7"}),
                         ("https://github.com/foo/tinydb", {"7"}), ("title:10:30", {"6"}),
                         ("tinydb*", {"7"}), ("node.js*", {"2"}),
                         # A comma outside NEAR() was 'syntax error near ","': in a
                         # number it is part of it, between words a list's.
                         ("1,000", {"9"}), ("python, zig", {"9"}), ("zig,go", set()),
                         ("title:1,000 users", {"9"}), ("NEAR(users go, 5)", {"9"}),
                         # A hyphen before the star too: "no such column: mail".
                         ("e-mail*", {"4"}), ("e-ma*", {"4"}), ("covid-1*", {"1"}),
                         ("title:e-mail*", {"4"}), ("title:e-ma*", {"4"}),
                         # 'syntax error near "+"', though "node.js*" was found.
                         ("c++2*", {"3"}),
                         # A function's name, as a programmer types it.
                         ("hello()", {"8"}), ("hello() start", {"8"})]:
        hits = search_json(database, query)["hits"]
        assert {h["url"].rsplit("/", 1)[1] for h in hits} == found, query
    # The phrase is of the parts in order: "19-covid" is not "covid-19".
    assert invoke("search", "19-covid", "--db", str(database)).exit_code == 1
    # A query wrong in another way is still refused, naming the query as typed.
    result = invoke("search", "node.js OR", "--db", str(database))
    assert result.exit_code == 2 and "'node.js OR'" in result.output


def test_accents_are_ignored_as_the_readme_says(fetch: Fetch, database: Path | str) -> None:
    # The README said "accents are ignored"; FTS5 removes only those of Latin letters,
    # PostgreSQL those of every script. Each backend as documented.
    fetch("blog", rss({"guid": "1", "title": "Café in Łódź", "link": "https://b.example/1",
                       "description": "Ελληνικά κείμενα"}))
    assert len(search_json(database, "cafe")["hits"]) == 1
    assert search_json(database, "lodz")["hits"] == []  # ł is a letter of its own
    greek = search_json(database, "ελληνικα")["hits"]
    assert len(greek) == (1 if str(database).startswith("postgresql://") else 0)


def test_a_query_pasted_with_invisible_characters_finds_the_word(fetch: Fetch,
                                                              database: Path | str) -> None:
    # The index drops soft hyphens, zero-width spaces and word joiners, as a browser
    # shows them ("Bundes&shy;verfassungs&shy;gericht" is one word). A query copied from
    # such a page keeps them, and found nothing: each one split the word in two.
    fetch("blog", rss({"guid": "1", "title": "Bundes\u00adverfassungs\u00adgericht kippt",
                       "link": "https://b.example/1", "description": "Donau\u200bdampfschiff"}))
    for query in ("Bundes\u00adverfassungs\u00adgericht", "Donau\u200bdampf\u2060schiff",
                  "title:Bundes\u00adverfassungsgericht", '"kippt"'):
        (hit,) = search_json(database, query)["hits"]
        assert hit["remote_id"] == "1", query


def test_words_beside_parentheses_must_all_occur(fetch: Fetch,
                                                 database: Path | str) -> None:
    # FTS5 joins words side by side, but not a word and a parenthesis: "harvest (fair OR
    # market)" was 'syntax error near "OR"' on SQLite, with advice to write "or".
    fetch("blog", rss({"guid": "1", "title": "Harvest fair", "link": "https://b.example/1"},
                      {"guid": "2", "title": "Harvest market", "link": "https://b.example/2"},
                      {"guid": "3", "title": "Fish market", "link": "https://b.example/3"}))
    for query, found in [("harvest (fair OR market)", {"1", "2"}),
                         ("(fair OR market) harvest", {"1", "2"}),
                         ("(fish) (market)", {"3"}), ('"harvest"* (fair)', {"1"}),
                         ("title:harvest (fair OR fish)", {"1"}),
                         ("harvest NOT (fair) market", {"2"}),
                         # Words side by side are one operand, even of NOT (PostgreSQL
                         # read "harvest NOT fair market" as "... NOT fair AND market").
                         ("harvest NOT fair market", {"1", "2"}),
                         ("(market) ^fish", {"3"}), ("(fish) & (market)", {"3"}),
                         ("fish OR harvest (fair)", {"1", "3"})]:
        hits = search_json(database, query)["hits"]
        assert {h["url"].rsplit("/", 1)[1] for h in hits} == found, query
    # A column filter's group and a NEAR group are not words beside a parenthesis.
    assert len(search_json(database, "title:(harvest) NEAR (fish market)")["hits"]) == 0


def test_a_dash_on_its_own_is_left_out(fetch: Fetch, database: Path | str) -> None:
    # A headline pasted into the search box was refused: FTS5 reads "- photos" as a
    # column filter ("no such column: photos"), and "harvest -" as a query cut short.
    fetch("blog", rss({"guid": "1", "title": "Harvest festival - photos",
                       "link": "https://b.example/1"}))
    for query in ("Harvest festival - photos", "harvest -", "harvest -- photos",
                  "harvest - - photos"):
        hits = search_json(database, query)["hits"]
        assert [h["title"] for h in hits] == ["Harvest festival - photos"], query
    # Before a column filter it is FTS5's minus: the words anywhere but the title.
    assert search_json(database, "harvest - title:photos")["hits"] == []
    assert search_json(database, "harvest - {title}:photos")["hits"] == []


def test_an_entry_too_long_for_an_index_is_stored_and_found(fetch: Fetch,
                                                            database: Path | str) -> None:
    # On PostgreSQL a 3 KB link, a 2,000-character CJK title (6 KB) or 700 CJK characters
    # without a break failed the whole response: past a btree entry's ~2,700 bytes, or
    # past the longest lexeme (2,046 bytes). Both backends store the same rows now.
    long_link = "https://example.org/p?" + "&amp;".join(f"k{i}=v{i}" for i in range(300))
    fetch("blog", rss({"guid": "1", "title": "漢字" * 1000, "link": long_link},
                      {"guid": "2", "title": "Harbour notes", "link": "https://b.example/2",
                       "description": "harbour " + "字" * 700 + " lighthouse"}))
    hits = search_json(database, "lighthouse")["hits"]
    assert [h["title"] for h in hits] == ["Harbour notes"]
    with open_store(database) as store:
        (entry,) = [e for e in store.entries() if e.remote_id == "1"]
    assert entry.url == "" and entry.title == "漢字" * 1000  # the link refused, by name


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from([*"ab1é_ -.'&+#*^:\"(){},", "AND", "OR", "NOT", "NEAR",
                                  "title"]), max_size=10).map("".join))
def test_a_query_fts5_accepts_is_never_rewritten(query: str) -> None:
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(title, summary, content)")
        try:
            conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (query,)).fetchall()
        except sqlite3.OperationalError:
            return
    assert quote_punctuated_words(query) == query


_ORDER_INDEXES = {"entries_shown_order": "duplicate_of, {}",
                  "entries_source_order": "source_id, {}",
                  "entries_order": "{}"}


def build_order_indexes(conn: sqlite3.Connection, order: str) -> None:
    """The reading order's indexes as an older version built them, on ``order`` (the
    order by clause, ``expression DESC, id``)."""
    for name, columns in _ORDER_INDEXES.items():
        conn.execute(f"DROP INDEX {name}")
        conn.execute(f"CREATE INDEX {name} ON entries ({columns.format(order)})")


def assert_order_indexes_are_current(conn: sqlite3.Connection) -> None:
    indexes = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'"))
    assert all(indexes[name].endswith(f"({columns.format(ENTRY_ORDER)})")
               for name, columns in _ORDER_INDEXES.items())


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)  # SQLite's own files
def test_a_version_5_database_gets_the_index_and_the_new_columns(
        fetch: Fetch, database: Path | str) -> None:
    fetch("blog", rss({"guid": "1", "title": "Museum night", "link": "https://b.example/1",
                       "description": "<p>Doors open at <b>nine</b>.</p>"}))
    old_order = "COALESCE(NULLIF(published, ''), first_seen_at) DESC, id"
    with closing(sqlite3.connect(database)) as conn, conn:  # turn it back into what version 5 wrote
        conn.execute("DROP TABLE entries_fts")
        conn.execute("DROP TABLE source_order")
        conn.execute("ALTER TABLE fetches DROP COLUMN skip_reasons")
        conn.execute("ALTER TABLE sources DROP COLUMN feed_title")
        build_order_indexes(conn, old_order)
        conn.execute("PRAGMA user_version = 5")
    with open_store(database) as store:
        assert [h.entry.title for h in store.search("nine")] == ["Museum night"]
    with closing(sqlite3.connect(database)) as conn, conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 14
        assert_order_indexes_are_current(conn)
        assert conn.execute("SELECT skip_reasons FROM fetches").fetchone()[0] == "[]"
        # The reading query walks the rebuilt index instead of sorting.
        plan = " ".join(r[3] for r in conn.execute(
            f"EXPLAIN QUERY PLAN SELECT * FROM entries WHERE duplicate_of = '' "
            f"ORDER BY {ENTRY_ORDER} LIMIT 5"))
        assert "entries_shown_order" in plan and "TEMP B-TREE" not in plan
    # A later fetch writes to the new columns; opening again changes nothing.
    fetch("blog", rss({"guid": "2", "title": "Museum day", "link": "https://b.example/2"}))
    with open_store(database) as store:
        assert len(store.search("museum")) == 2


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)  # SQLite's own files
@pytest.mark.parametrize(("version", "order"), [
    (8, "COALESCE(NULLIF(published, ''), NULLIF(updated, ''), first_seen_at) DESC, id"),
    (9, f"{ENTRY_ORDER_EXPR} DESC, id")])
def test_an_older_database_gets_the_reading_order_of_version_10(
        fetch: Fetch, database: Path | str, version: int, order: str) -> None:
    fetch("blog", rss({"guid": "1", "title": "Museum night", "link": "https://b.example/1"}))
    with closing(sqlite3.connect(database)) as conn, conn:  # what that version wrote
        build_order_indexes(conn, order)
        conn.execute(f"PRAGMA user_version = {version}")
    with open_store(database) as store:
        assert [e.title for e in store.entries()] == ["Museum night"]
    with closing(sqlite3.connect(database)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 14
        assert_order_indexes_are_current(conn)
        for where, index in (("duplicate_of = ''", "entries_shown_order"),
                             ("source_id = 'blog'", "entries_source_order")):
            plan = " ".join(r[3] for r in conn.execute(
                f"EXPLAIN QUERY PLAN SELECT * FROM entries WHERE {where} "
                f"ORDER BY {ENTRY_ORDER} LIMIT 5"))
            assert index in plan and "TEMP B-TREE" not in plan


def test_the_readme_search_examples_run_as_printed(fetch: Fetch, database: Path | str) -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Searching\n", 1)[1].split("\n## ", 1)[0]
    commands = [line.split("  #", 1)[0] for line in section.splitlines()
                if line.startswith("signal search")]
    assert len(commands) >= 5
    fetch("blog", rss({"guid": "1", "title": "Harvest festival release",
                       "link": "https://b.example/1", "description": STORY,
                       "date": "Mon, 02 Mar 2026 10:00:00 GMT"}))
    for command in commands:
        args = shlex.split(command)[1:]
        result = invoke(*args, "--db", str(database))
        assert result.exit_code == 0, (command, result.output)


def test_the_characters_a_query_piece_cannot_hold_as_written_are_ascii_punctuation_only() -> None:
    # The class is written out as the ASCII it refuses (a negated class over every code
    # point took 5 ms to compile at each start): pinned here against its meaning.
    from signal_feeds.store.fulltext import _NOT_FTS5
    meaningful = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_\x1a*^+-:")
    refused = "".join(chr(c) for c in range(0x110000) if _NOT_FTS5.match(chr(c)))
    assert refused == "".join(chr(c) for c in range(128) if chr(c) not in meaningful)
