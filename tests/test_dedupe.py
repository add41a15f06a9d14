"""Cross-source duplicates: marked on the rows, never deleted; real HTTP, real SQLite."""

from __future__ import annotations

import contextlib
import json
import logging
import random
import sqlite3
import zlib
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import pytest
from click.testing import CliRunner
from conftest import execute, make_config, query
from scenario_server import ScenarioServer

from signal_feeds import Store, digest, run_fetch
from signal_feeds.cli.commands import cli
from signal_feeds.identity.matching import (
    POSTED_TOKENS,
    UNLISTED_RANK,
    DedupeRow,
    _window_hash,
    _words,
    canonical_key,
    clusters,
    jaccard,
    match_keys,
    match_url,
    normalize_title,
    pack_tokens,
    posted_tokens,
    prefix_tokens,
    shingles,
    sizes_may_match,
    titles_match,
    unpack_tokens,
)
from signal_feeds.parse.processes import ParserPool
from signal_feeds.store import open_store
from signal_feeds.store.sqlite.schema import _V2_INDEXES, SCHEMA_VERSION

STORY = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor "
         "incididunt ut labore et dolore magna aliqua.")


def rss(*items: dict[str, str]) -> bytes:
    """An RSS 2.0 document; each item has guid, title, link and optional description and
    pubDate."""
    parts = []
    for item in items:
        fields = [f"<guid isPermaLink='false'>{escape(item['guid'])}</guid>",
                  f"<title>{escape(item['title'])}</title>",
                  f"<link>{escape(item['link'])}</link>"]
        if "description" in item:
            fields.append(f"<description>{escape(item['description'])}</description>")
        if "date" in item:
            fields.append(f"<pubDate>{item['date']}</pubDate>")
        parts.append("<item>" + "".join(fields) + "</item>")
    return ("<?xml version='1.0' encoding='utf-8'?><rss version='2.0'><channel>"
            "<title>t</title><link>https://example.org/</link>"
            + "".join(parts) + "</channel></rss>").encode()


Fetch = Callable[[str, bytes], None]


@pytest.fixture(scope="module")
def parser() -> Iterator[ParserPool]:
    pool = ParserPool(workers=1)  # one pool for the module: spawning costs more than parsing
    yield pool
    pool.close()


@pytest.fixture
def fetch(server: ScenarioServer, database: Path | str, parser: ParserPool) -> Fetch:
    """Serve a body as a source's feed and fetch that one source into ``database``."""

    def run(source_id: str, body: bytes) -> None:
        server.put(f"/{source_id}.xml", body)
        report = run_fetch(make_config(database, {source_id: server.url(f"/{source_id}.xml")}),
                           force=True, parser=parser)
        assert report.sources[0].status == "fetched", report.sources[0]

    return run


@contextlib.contextmanager
def own_connection(db: Path) -> Iterator[sqlite3.Connection]:
    """A connection of the test's own to the store's file (autocommit)."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


def markers(db: Path | str) -> dict[str, tuple[str, str, str, str]]:
    return {k: (a, b, c, d) for k, a, b, c, d in query(
        db, "SELECT id, dup_link, dup_title, dup_text, duplicate_of FROM entries")}


def run_cli(*args: str) -> Any:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


# -- pure decisions -----------------------------------------------------------------------


def test_match_url_ignores_scheme_www_slash_tracking_and_query_order() -> None:
    same = ["https://example.org/post/1?b=2&a=1",
            "http://www.example.org/post/1/?a=1&b=2",
            "https://WWW.Example.org:443/post/1?a=1&utm_source=rss&b=2&fbclid=x&gclid=y#top",
            "https://example.org/post/1/?utm_medium=feed&utm_campaign=z&a=1&b=2"]
    assert {match_url(u) for u in same} == {"example.org/post/1?a=1&b=2"}
    # A different page stays different: another value, another path, another port.
    assert match_url("https://example.org/post/1?a=2&b=2") != match_url(same[0])
    assert match_url("https://example.org/post/2?a=1&b=2") != match_url(same[0])
    assert match_url("https://example.org:8443/post/1?a=1&b=2") != match_url(same[0])
    assert match_url("") == "" and match_url("urn:x:y") == ""


def test_match_url_reads_a_link_however_it_is_encoded() -> None:
    # WordPress writes a Cyrillic or accented permalink percent-encoded in lower case,
    # another site as Unicode: the same page was two stories.
    same = ["https://пример.example/блог/café", "https://xn--e1afmkfd.example/блог/caf%C3%A9",
            "https://пример.example/%d0%b1%d0%bb%d0%be%d0%b3/caf%c3%a9/"]
    assert len({match_url(u) for u in same}) == 1
    assert match_url("https://example.org/%7Euser") == match_url("https://example.org/~user")
    # An encoded slash is no separator: another page.
    assert match_url("https://example.org/a%2Fb") != match_url("https://example.org/a/b")


def test_normalized_titles_ignore_case_punctuation_and_spacing() -> None:
    assert normalize_title("Big Story: About  the Thing!") == normalize_title(
        "big story about the thing")
    assert normalize_title("News") == ""  # too generic to identify a story
    # Two projects' releases, two shows' episodes: equal titles, different stories.
    for generic in ("Release 1.10.0", "release v2.3.1 (2026-12-05)", "Episode 1024",
                    "Version 12.0.1-rc2"):
        assert normalize_title(generic) == "", generic
    # Two words of letters, short: a series' title, which two blogs' posts of one week
    # share ("Weekly update" of two projects was one story, one of them hidden).
    for series in ("Weekly update", "Release notes", "Open thread", "Link roundup",
                   "Weekend reading"):
        assert normalize_title(series) == "", series
    assert normalize_title("Python 3.13.1 released") == "python 3 13 1 released"
    assert normalize_title("Rust 1.80 released") == "rust 1 80 released"
    assert normalize_title("Bundesverfassungsgericht kippt") == "bundesverfassungsgericht kippt"
    assert normalize_title("Заметки о выпуске") == "заметки о выпуске"


def test_the_size_filter_never_loses_a_pair_that_could_match() -> None:
    # Two texts whose prefix lengths say their sizes are too far apart are not compared
    # (a post against a text three times its length: most candidates in a database of
    # a million entries). Lossless: every pair of sizes Jaccard 0.9 allows passes.
    def keep(count: int) -> int:
        return len(prefix_tokens(frozenset(range(count))))

    sizes = list(range(1, 400)) + list(range(990, 1200))
    prefix = {n: keep(n) for n in sizes}
    for a in sizes:
        for b in sizes:
            if min(a, b) >= 0.9 * max(a, b):
                assert sizes_may_match(prefix[a], prefix[b]), (a, b)
    assert not sizes_may_match(keep(45), keep(150))  # ~300 bytes against ~1 KB
    assert not sizes_may_match(keep(5), keep(25))


def test_shingle_overlap_finds_near_identical_text_only() -> None:
    a = shingles("A title", STORY)
    assert jaccard(a, shingles("A title", STORY + " ")) == 1.0
    edited = shingles("A title", STORY.replace("aliqua", "aliqua indeed"))
    assert 0.9 <= jaccard(a, edited) < 1.0
    other = shingles("A title", "Completely different words about gardens and bicycles "
                                "and the weather in the mountains this week.")
    assert jaccard(a, other) < 0.1
    assert shingles("Short", "too short") == frozenset()


def test_shingle_hashes_are_pinned() -> None:
    # They are stored (entries.text_tokens, dedupe_text): a change to the hashing must be
    # a deliberate schema change that rebuilds them, never an accident.
    text = shingles("A title", STORY)
    assert len(text) == 19
    assert sorted(text)[:3] == [404409542207930922, 614693372529315783, 1120454642242389685]
    assert all(0 <= h < 2**63 for h in text)  # fits SQLite's signed INTEGER
    # The unrolled default path and the general one agree.
    words = [zlib.crc32(w.encode()) for w in _words("A title " + STORY)]
    assert text == {_window_hash(words[i:i + 3], 3) for i in range(len(words) - 2)}
    assert len(shingles("A title", STORY, size=4)) == 18


def _near_pairs(seed: int, sizes: tuple[int, int], count: int
                ) -> list[tuple[frozenset[int], frozenset[int]]]:
    """Random pairs of hash sets at Jaccard >= 0.9, as near-identical texts give."""
    rng = random.Random(seed)
    pairs = []
    while len(pairs) < count:
        base = frozenset(rng.getrandbits(63) for _ in range(rng.randint(*sizes)))
        drop = set(rng.sample(sorted(base), rng.randint(0, max(1, len(base) // 12))))
        other = frozenset((base - drop) | {rng.getrandbits(63)
                                           for _ in range(rng.randint(0, 3))})
        if jaccard(base, other) >= 0.9:
            pairs.append((base, other))
    return pairs


def test_prefix_filter_never_misses_a_pair_above_the_threshold() -> None:
    for base, other in _near_pairs(7, (5, 400), 300):
        assert set(prefix_tokens(base)) & set(prefix_tokens(other))


def test_posted_tokens_still_meet_for_near_identical_texts() -> None:
    # Up to about 40 shingles the whole prefix is posted: the prefix filter's guarantee.
    # Longer texts post five tokens, which miss a pair at 0.9 about once in 100,000.
    for lengths in ((5, 40), (41, 400)):
        for base, other in _near_pairs(8, lengths, 1000):
            mine, theirs = posted_tokens(prefix_tokens(base)), posted_tokens(prefix_tokens(other))
            assert len(mine) <= POSTED_TOKENS and set(mine) & set(theirs)


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)  # SQLite's own tables
def test_an_entry_posts_only_its_first_tokens(fetch: Fetch, db_path: Path) -> None:
    story = " ".join(f"{STORY} part {n}" for n in range(20))  # about 400 shingles
    fetch("s", rss(*({"guid": f"g{i}", "title": f"Headline number {i} for the test",
                      "link": f"https://pub.example/{i}", "description": f"{story} {i}"}
                     for i in range(3))))
    with Store(db_path), own_connection(db_path) as conn:
        stored = {seq: unpack_tokens(t)
                  for seq, t in conn.execute("SELECT seq, text_tokens FROM entries")}
        assert all(len(tokens) > POSTED_TOKENS for tokens in stored.values())
        postings: dict[int, list[int]] = {}
        for token, seq in conn.execute("SELECT token, entry FROM dedupe_text ORDER BY 1"):
            postings.setdefault(seq, []).append(token)
        assert postings == {seq: list(tokens[:POSTED_TOKENS]) for seq, tokens in stored.items()}


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)  # SQLite's own tables
def test_an_update_drops_the_postings_of_an_entry_written_before_the_cap(
        fetch: Fetch, db_path: Path) -> None:
    story = " ".join(f"{STORY} part {n}" for n in range(20))
    item = {"guid": "g", "title": "A headline long enough to match on",
            "link": "https://pub.example/g", "description": story}
    fetch("s", rss(item))
    with Store(db_path), own_connection(db_path) as conn:
        # Signal before the cap posted every stored token.
        seq, blob = conn.execute("SELECT seq, text_tokens FROM entries").fetchone()
        conn.executemany("INSERT OR IGNORE INTO dedupe_text (token, entry) VALUES (?, ?)",
                         [(t, seq) for t in unpack_tokens(blob)])
    fetch("s", rss(item | {"description": story + " with a new last sentence"}))
    with Store(db_path), own_connection(db_path) as conn:
        blob = conn.execute("SELECT text_tokens FROM entries").fetchone()[0]
        tokens = [t for (t,) in conn.execute("SELECT token FROM dedupe_text ORDER BY 1")]
        assert tokens == list(unpack_tokens(blob)[:POSTED_TOKENS])


def _row(key: str, source: str, seen: str, title: str = "", moment: str = "",
         rank: int = UNLISTED_RANK) -> DedupeRow:
    return DedupeRow(key=key, source_id=source, first_seen_at=seen, moment=moment or seen,
                     match_url="", norm_title=normalize_title(title), shingles=frozenset(),
                     rank=rank)


def test_canonical_is_earliest_dated_then_first_listed_then_smallest_key() -> None:
    rows = [_row("b", "s1", "2026-01-01T00:00:00Z"), _row("a", "s2", "2026-01-02T00:00:00Z"),
            _row("c", "s3", "2026-01-01T00:00:00Z")]
    assert canonical_key(rows) == "b"  # the earlier date wins over the smaller key
    # The entry's own date, not when Signal first saw it: a report seen first loses to
    # the original post dated before it.
    report = _row("r", "planet", "2026-01-01T00:00:00Z", moment="2026-01-05T00:00:00Z")
    original = _row("o", "blog", "2026-01-09T00:00:00Z", moment="2026-01-04T00:00:00Z")
    assert canonical_key([report, original]) == "o"
    # Same date: the source listed first in the config, whatever the keys.
    same = "2026-01-04T00:00:00Z"
    assert canonical_key([_row("a", "s1", same, rank=1), _row("z", "s2", same, rank=0)]) == "z"
    assert canonical_key([_row("a", "s1", same), _row("z", "s2", same, rank=5)]) == "z"


def test_clusters_are_connected_groups() -> None:
    links = {"a": ["b"], "b": ["a", "c"], "c": ["b"], "d": []}
    assert sorted(map(sorted, clusters("abcd", links.__getitem__))) == [["a", "b", "c"], ["d"]]


def test_equal_titles_match_only_across_sources_within_the_window() -> None:
    t = "A long enough headline"
    a = _row("a", "s1", "2026-01-01T00:00:00Z", t)
    assert titles_match(a, _row("b", "s2", "2026-01-02T12:00:00Z", t))
    assert not titles_match(a, _row("c", "s1", "2026-01-01T00:00:00Z", t))  # same source
    assert not titles_match(a, _row("d", "s2", "2026-01-09T00:00:00Z", t))  # outside window


# -- over HTTP into SQLite ----------------------------------------------------------------


def three_sources(fetch: Fetch) -> tuple[str, str, str]:
    """One story from a publisher, a mirror (same link, tracking parameters) and a
    planet (its own link, same title and text), fetched in that order."""
    fetch("publisher", rss({"guid": "p-1", "title": "The big story of the week",
                                        "link": "https://news.example/2026/big-story",
                                        "description": STORY}))
    fetch("mirror", rss({"guid": "m-1", "title": "The big story of the week",
                                     "link": "https://www.news.example/2026/big-story/"
                                             "?utm_source=mirror&utm_medium=rss",
                                     "description": STORY}))
    fetch("planet", rss({"guid": "x-1", "title": "The Big Story of the Week!",
                                     "link": "https://planet.example/p/123",
                                     "description": STORY}))
    return (digest(["publisher", "p-1"]), digest(["mirror", "m-1"]),
            digest(["planet", "x-1"]))


def test_one_story_in_three_sources_is_three_rows_shown_once(fetch: Fetch,
                                                            database: Path | str) -> None:
    publisher, mirror, planet = three_sources(fetch)
    with open_store(database) as store:
        assert store.count("entries") == 3  # nothing merged, nothing deleted

    marks = markers(database)
    assert marks[publisher] == ("", "", "", "")
    assert marks[mirror] == (publisher, publisher, publisher, publisher)
    # The planet's link differs: its title and text channels found it.
    assert marks[planet] == ("", publisher, publisher, publisher)

    shown = run_cli("entries", "--db", str(database), "--json")["entries"]
    assert [e["id"] for e in shown] == [publisher]
    assert shown[0]["also_in"] == ["mirror", "planet"]
    assert sorted(shown[0]["duplicates"]) == sorted([mirror, planet])

    every = run_cli("entries", "--db", str(database), "--all", "--json")["entries"]
    assert sorted(e["id"] for e in every) == sorted([publisher, mirror, planet])
    assert {e["id"]: e["duplicate_of"] for e in every} == {
        publisher: "", mirror: publisher, planet: publisher}


def test_the_original_post_is_canonical_even_when_seen_after_the_report(
        fetch: Fetch, database: Path | str) -> None:
    # The report ("planet") is fetched first; the original ("blog") arrives later but is
    # dated a day earlier: the original becomes canonical and the report's marker moves.
    item = {"title": "Release of version seven", "link": "https://proj.example/v7",
            "description": STORY}
    fetch("planet", rss({**item, "guid": "p", "date": "Tue, 03 Mar 2026 10:00:00 GMT"}))
    fetch("blog", rss({**item, "guid": "b", "date": "Mon, 02 Mar 2026 10:00:00 GMT"}))
    report, original = digest(["planet", "p"]), digest(["blog", "b"])
    assert markers(database)[original] == ("", "", "", "")
    assert markers(database)[report] == (original, original, original, original)
    # The report is edited: still a duplicate of the original.
    fetch("planet", rss({**item, "guid": "p", "title": "Release of version seven (mirror)",
                         "date": "Tue, 03 Mar 2026 10:00:00 GMT"}))
    assert markers(database)[report][0] == original  # same link
    assert markers(database)[original] == ("", "", "", "")
    with open_store(database) as store:
        assert store.recompute_duplicates().total_changed == 0


def test_two_projects_releases_with_one_title_are_two_stories(
        fetch: Fetch, database: Path | str) -> None:
    # Two repositories' release feeds, each with "Release 1.0.0" the same day: the
    # second was marked a duplicate of the first and hidden from `signal entries`.
    date = "Tue, 03 Mar 2026 10:00:00 GMT"
    fetch("alpha", rss({"title": "Release 1.0.0", "guid": "a", "date": date,
                        "link": "https://code.example/alpha/releases/1.0.0",
                        "description": "Alpha's first stable release."}))
    fetch("beta", rss({"title": "Release 1.0.0", "guid": "b", "date": date,
                       "link": "https://code.example/beta/releases/1.0.0",
                       "description": "Beta now parses feeds twice as fast."}))
    assert set(markers(database).values()) == {("", "", "", "")}



def _github_releases(repo: str) -> bytes:
    # GitHub's release feed; the notes GitHub writes for a release without pull requests
    # are one line, its compare link shown as the two tags.
    entries = "".join(
        f"<entry><id>tag:github.com,2008:Repository/{len(repo)}/{tag}</id>"
        f"<updated>{day}T10:00:00Z</updated>"
        f'<link rel="alternate" type="text/html" href="https://github.com/{repo}/releases/tag/{tag}"/>'
        f"<title>{tag}</title><content type=\"html\">&lt;p&gt;&lt;strong&gt;Full Changelog"
        f"&lt;/strong&gt;: &lt;a class=&quot;commit-link&quot; href=&quot;https://github.com/"
        f"{repo}/compare/{before}...{tag}&quot;&gt;&lt;tt&gt;{before}...{tag}&lt;/tt&gt;"
        f"&lt;/a&gt;&lt;/p&gt;</content><author><name>octocat</name></author></entry>"
        for tag, before, day in (("v1.2.3", "v1.2.2", "2026-12-01"),
                                 ("v1.2.2", "v1.2.1", "2026-11-01")))
    return ('<?xml version="1.0" encoding="UTF-8"?><feed xmlns="http://www.w3.org/2005/Atom">'
            f"<id>tag:github.com,2008:https://github.com/{repo}/releases</id>"
            f"<title>Release notes from {repo}</title><updated>2026-12-01T10:00:00Z</updated>"
            f"{entries}</feed>").encode()


def test_two_projects_released_in_step_are_two_stories(fetch: Fetch,
                                                        database: Path | str) -> None:
    # Two repositories released together, each "v1.2.3" with GitHub's one-line notes:
    # the same eleven words, of which only five hold a letter, and the second project's
    # releases were marked duplicates of the first's and hidden from `signal entries`.
    fetch("alpha", _github_releases("org/alpha"))
    fetch("beta", _github_releases("org/beta"))
    assert len(markers(database)) == 4
    assert set(markers(database).values()) == {("", "", "", "")}
    # Text with words to compare still matches across sources (see above).
    assert shingles("v1.2.3", "Full Changelog: v1.2.2...v1.2.3") == frozenset()
    assert shingles("v1.2.3", "Fixes the crash when the queue is empty on start") != frozenset()


def test_two_runs_in_opposite_orders_choose_the_same_canonical_rows(
        server: ScenarioServer, tmp_path: Path, parser: ParserPool) -> None:
    # Three sources carry the same story; "later" dates it a day after the other two,
    # which give the same time: the date decides first, then the config's order
    # ("zeta" is listed before "alpha"). Two databases fetch them in opposite orders.
    item = {"title": "Release of version seven", "link": "https://proj.example/v7",
            "description": STORY}
    bodies = {"later": rss({**item, "guid": "l", "date": "Wed, 04 Mar 2026 10:00:00 GMT"}),
              "alpha": rss({**item, "guid": "a", "date": "Tue, 03 Mar 2026 10:00:00 GMT"}),
              "zeta": rss({**item, "guid": "z", "date": "Tue, 03 Mar 2026 10:00:00 GMT"})}
    listed = ["zeta", "later", "alpha"]
    for sid, body in bodies.items():
        server.put(f"/{sid}.xml", body)
    chosen = []
    for name, fetch_order in (("one", ["later", "alpha", "zeta"]),
                              ("two", ["zeta", "alpha", "later"])):
        db = tmp_path / f"{name}.db"
        with Store(db) as store:
            assert store.set_source_order(listed)
            assert not store.set_source_order(listed)  # unchanged: nothing written
        # One source list; each run fetches one source of it (a run records the whole
        # list's order, not its selection).
        config = make_config(db, {sid: server.url(f"/{sid}.xml") for sid in listed})
        for sid in fetch_order:
            assert run_fetch(config, force=True, parser=parser, source_ids=[sid]).ok
        chosen.append(markers(db))
    zeta = digest(["zeta", "z"])
    assert chosen[0] == chosen[1]
    assert chosen[0][zeta] == ("", "", "", "")
    assert chosen[0][digest(["alpha", "a"])][3] == zeta
    assert chosen[0][digest(["later", "l"])][3] == zeta


def test_signal_dedupe_applies_a_reordered_config(server: ScenarioServer,
                                                 database: Path | str, tmp_path: Path) -> None:
    # Two copies of one story with the same date: the source listed first is canonical.
    # After the config was reordered, `signal dedupe` kept the old choice (only a fetch
    # stored the new order), though the README said it applied the new one.
    item = {"title": "Release of version seven", "link": "https://proj.example/v7",
            "description": STORY, "date": "Tue, 03 Mar 2026 10:00:00 GMT"}
    for sid in ("tie-a", "tie-b"):
        server.put(f"/{sid}.xml", rss({**item, "guid": sid}))

    def write(order: list[str]) -> Path:
        lines = ["[settings]", f'database = "{database}"', ""]
        for sid in order:
            lines += ["[[sources]]", f'id = "{sid}"', f'url = "{server.url(f"/{sid}.xml")}"']
        path = tmp_path / "signal.toml"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path

    a, b = digest(["tie-a", "tie-a"]), digest(["tie-b", "tie-b"])
    config = write(["tie-a", "tie-b"])
    assert CliRunner().invoke(cli, ["fetch", "--config", str(config)]).exit_code == 0
    assert markers(database)[b][3] == a
    write(["tie-b", "tie-a"])
    assert run_cli("dedupe", "--config", str(config), "--json")["duplicates"] == 1
    assert markers(database)[a][3] == b and markers(database)[b][3] == ""
    # With --db alone there is no config: the stored order stays as it is.
    run_cli("dedupe", "--db", str(database), "--json")
    assert markers(database)[a][3] == b


def test_undated_copies_found_in_one_run_go_by_the_config_order(
        server: ScenarioServer, database: Path | str, parser: ParserPool) -> None:
    # Neither copy has a date, so "first seen" decides; one run sees both at once. The
    # source listed first answers last: its copy must still be the canonical one, as it
    # is in every other run over the same feeds.
    from scenario_server import ScriptedResponse

    item = {"title": "An undated story told twice", "link": "https://pub.example/story",
            "description": STORY}
    listed = {"first": rss({**item, "guid": "f"}), "second": rss({**item, "guid": "s"})}
    server.script("/first.xml", [ScriptedResponse(body=listed["first"], delay=0.5)])
    server.put("/second.xml", listed["second"])
    config = make_config(database, {sid: server.url(f"/{sid}.xml") for sid in listed})
    report = run_fetch(config, force=True, parser=parser)
    assert [r.status for r in report.sources] == ["fetched", "fetched"]
    first, second = digest(["first", "f"]), digest(["second", "s"])
    assert markers(database)[first] == ("", "", "", "")
    assert markers(database)[second][3] == first
    seen = dict(query(database, "SELECT id, first_seen_at FROM entries"))
    assert seen[first] == seen[second]  # both when the run began


def test_dedupe_recomputes_the_same_markers_and_twice_changes_nothing(
        fetch: Fetch, database: Path | str) -> None:
    three_sources(fetch)
    fetch("other", rss({"guid": "o", "title": "Unrelated news item here",
                                         "link": "https://other.example/o"}))
    incremental = markers(database)
    execute(database,  # forget every marker
            "UPDATE entries SET dup_link = '', dup_title = '', dup_text = '', "
            "duplicate_of = '', match_url = '', norm_title = '', text_tokens = NULL",
            "DELETE FROM dedupe_text")

    first = run_cli("dedupe", "--db", str(database), "--json")
    assert first["total_changed"] == 5 and first["duplicates"] == 2
    assert markers(database) == incremental  # the same result as marking on write
    second = run_cli("dedupe", "--db", str(database), "--json")
    assert second["total_changed"] == 0 and second["changed"] == {
        "link": 0, "title": 0, "text": 0}
    assert markers(database) == incremental


def test_a_channel_only_clears_its_own_marker(fetch: Fetch, database: Path | str) -> None:
    publisher, mirror, _ = three_sources(fetch)
    # The mirror now links elsewhere: the link channel lets go, title and text remain.
    fetch("mirror", rss({"guid": "m-1", "title": "The big story of the week",
                                          "link": "https://mirror.example/copy",
                                          "description": STORY}))
    assert markers(database)[mirror] == ("", publisher, publisher, publisher)
    # Now it tells another story altogether: every channel lets go; it is shown again.
    fetch("mirror", rss({"guid": "m-1", "title": "Gardening in winter time",
                                          "link": "https://mirror.example/copy",
                                          "description": "Cover the roses and wait."}))
    assert markers(database)[mirror] == ("", "", "", "")
    shown = run_cli("entries", "--db", str(database), "--json")["entries"]
    assert sorted(e["id"] for e in shown) == sorted([publisher, mirror])
    with open_store(database) as store:
        assert store.recompute_duplicates().total_changed == 0  # incremental kept up with the split


def test_merging_clusters_points_every_row_at_the_oldest(fetch: Fetch,
                                                         database: Path | str) -> None:
    # A third source's entry has the first one's link and the second one's title: it
    # joins one cluster per channel, and duplicate_of follows the channel priority.
    fetch("one", rss({"guid": "1", "title": "First headline of the day",
                                       "link": "https://a.example/x"}))
    fetch("two", rss({"guid": "2", "title": "Second headline of the day",
                                       "link": "https://b.example/y"}))
    fetch("three", rss({"guid": "3", "title": "Second headline of the day",
                                         "link": "https://a.example/x?utm_source=t"}))
    one, two, three = (digest([s, g]) for s, g in (("one", "1"), ("two", "2"), ("three", "3")))
    marks = markers(database)
    assert marks[three][:2] == (one, two)
    assert marks[three][3] == one  # link has priority over title
    assert marks[one][3] == "" and marks[two][3] == ""
    with open_store(database) as store:
        assert store.recompute_duplicates().total_changed == 0


def test_a_marking_failure_stores_the_entry_unmarked(fetch: Fetch, server: ScenarioServer,
                                                     database: Path | str,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    fetch("publisher", rss({"guid": "p-1", "title": "The big story of the",
                                             "link": "https://news.example/s"}))

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("marking exploded")

    backend = "sqlite" if isinstance(database, Path) else "postgres"
    monkeypatch.setattr(f"signal_feeds.store.{backend}.dedupe.mark_new_entries", broken)
    with caplog.at_level(logging.WARNING, logger="signal_feeds"):
        fetch("mirror", rss({"guid": "m-1", "title": "The big story of the",
                                              "link": "https://news.example/s"}))
    assert "marking exploded" in caplog.text
    mirror = digest(["mirror", "m-1"])
    assert markers(database)[mirror] == ("", "", "", "")  # stored, unmarked
    with open_store(database) as store:
        assert store.entry(mirror) is not None
        assert store.source_state("mirror", server.url("/mirror.xml")).etag  # state committed
    monkeypatch.undo()
    run_cli("dedupe", "--db", str(database), "--json")
    assert markers(database)[mirror][3] == digest(["publisher", "p-1"])


def test_a_version_1_database_is_upgraded_in_place(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with Store(db):
        pass
    with closing(sqlite3.connect(db)) as conn, conn:  # turn it back into what version 1 wrote
        for name in [*_V2_INDEXES, "entries_dup_link", "entries_dup_title",
                     "entries_dup_text", "entries_search_filter", "entries_link_marked",
                     "entries_title_marked"]:
            conn.execute(f"DROP INDEX {name}")
        for column in ("match_url", "norm_title", "dup_link", "dup_title", "dup_text",
                       "duplicate_of", "text_tokens"):
            conn.execute(f"ALTER TABLE entries DROP COLUMN {column}")
        conn.execute("DROP TABLE dedupe_text")
        conn.execute("DROP TABLE entries_fts")  # version 1 had no search index
        conn.execute("INSERT INTO entries (id, source_id, fingerprint, first_seen_at, "
                     "last_seen_at, title) VALUES ('k', 's', 'f', 't', 't', 'kept')")
        conn.execute("PRAGMA user_version = 1")
    with Store(db) as store, own_connection(db) as conn:
        assert store.entry("k") is not None and store.entry("k").title == "kept"  # type: ignore[union-attr]
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 14
        assert [h.entry.key for h in store.search("kept")] == ["k"]  # indexed on upgrade
        columns = {r[1] for r in conn.execute("PRAGMA table_info(entries)")}
        assert {"dup_link", "dup_title", "dup_text", "duplicate_of", "match_url",
                "norm_title"} <= columns
        assert conn.execute("SELECT duplicate_of FROM entries").fetchone()[0] == ""


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)  # SQLite's own tables
def test_an_upgraded_database_follows_the_canonical_rule_of_today(fetch: Fetch,
                                                                   db_path: Path) -> None:
    # Up to version 5 the copy stored first was canonical. A database of then where the
    # aggregator was fetched first kept its later report as the story's canonical copy
    # after the upgrade, until someone happened to run `signal dedupe`.
    item = {"title": "Release of version seven", "link": "https://proj.example/v7",
            "description": STORY}
    fetch("orig", rss({**item, "guid": "o", "date": "Mon, 02 Mar 2026 10:00:00 GMT"}))
    fetch("agg", rss({**item, "guid": "g", "date": "Tue, 03 Mar 2026 10:00:00 GMT"}))
    today = markers(db_path)
    orig, agg = digest(["orig", "o"]), digest(["agg", "g"])
    assert today[agg][3] == orig and today[orig] == ("", "", "", "")
    with closing(sqlite3.connect(db_path)) as conn, conn:  # what version 5 chose
        channels = ("dup_link", "dup_title", "dup_text", "duplicate_of")
        for column, value in zip(channels, today[agg], strict=True):
            conn.execute(f"UPDATE entries SET {column} = ? WHERE id = ?",
                         (agg if value else "", orig))
            conn.execute(f"UPDATE entries SET {column} = '' WHERE id = ?", (agg,))
        conn.execute("DROP TABLE changes")  # what version 5 had
        conn.execute("DROP TABLE change_log")
        conn.execute("PRAGMA user_version = 5")
    assert markers(db_path)[orig][3] == agg
    with Store(db_path):
        pass
    assert markers(db_path) == today
    # The change log the upgrade starts agrees with the markers it leaves.
    logged = query(db_path, "SELECT e.id, c.duplicate_of FROM changes AS c JOIN "
                            "entry_versions AS v ON v.id = c.version_id JOIN entries AS e "
                            "ON e.seq = v.entry_seq")
    assert dict(logged) == {orig: "", agg: orig}


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)  # SQLite's own tables
def test_a_version_4_database_keeps_its_tokens_and_renames_its_versions(
        fetch: Fetch, db_path: Path) -> None:
    fetch("s", rss({"guid": "a", "title": "A headline long enough to match on",
                    "link": "https://pub.example/a", "description": STORY}))
    fetch("s", rss({"guid": "a", "title": "A corrected headline long enough to match",
                    "link": "https://pub.example/a", "description": STORY}))
    with closing(sqlite3.connect(db_path)) as conn, conn:  # turn it back into what version 4 wrote
        conn.execute("DROP INDEX entry_versions_seq_fp")
        conn.execute("ALTER TABLE entry_versions DROP COLUMN entry_seq")
        conn.execute("CREATE UNIQUE INDEX entry_versions_entry_fp "
                     "ON entry_versions (entry_id, fingerprint, content_fingerprint)")
        # A rebuild of the token table would drop this row: the upgrade must not rebuild.
        conn.execute("INSERT INTO dedupe_text (token, entry) VALUES (1, 999)")
        conn.execute("PRAGMA user_version = 4")
    (key,) = markers(db_path)
    with Store(db_path) as store, own_connection(db_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert [v.title for v in store.versions(key)] == [
            "A headline long enough to match on", "A corrected headline long enough to match"]
        assert conn.execute("SELECT count(*) FROM dedupe_text WHERE entry = 999"
                            ).fetchone()[0] == 1
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert "entry_versions_entry_fp" not in names and "entry_versions_seq_fp" in names
    fetch("s", rss({"guid": "a", "title": "A headline long enough to match on",
                    "link": "https://pub.example/a", "description": STORY}))
    with Store(db_path) as store:  # back to the first version: that row is seen again
        assert len(store.versions(key)) == 2


def _plan(conn: sqlite3.Connection, sql: str, args: tuple[object, ...] = ()) -> str:
    return " | ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, args))


def test_the_reads_use_indexes(db_path: Path) -> None:
    from signal_feeds.store.sqlite.dedupe import _candidates_sql
    from signal_feeds.store.sqlite.queries import LOOKUP_SQL, entries_query

    with Store(db_path), own_connection(db_path) as conn:
        # Every listing walks an index in reading order: no sort, whatever the filters.
        for source_id in (None, "s"):
            for since in (None, "2026-01-01"):
                for include_duplicates in (False, True):
                    sql, args = entries_query(source_id=source_id, since=since, limit=50,
                                               include_duplicates=include_duplicates)
                    plan = _plan(conn, sql, tuple(args))
                    assert "USING INDEX entries_" in plan and "TEMP B-TREE" not in plan, plan
        lookup_plan = _plan(conn, LOOKUP_SQL, ("x", "y"))
        assert "entries_match_url" in lookup_plan and "entries_url" in lookup_plan
        assert "entries_norm_title" in _plan(conn, "SELECT id FROM entries WHERE "
                                                   "norm_title = ?", ("x",))
        for column in ("dup_link", "dup_title", "dup_text"):  # partial: marked rows only
            assert f"entries_{column}" in _plan(
                conn, f"SELECT id FROM entries WHERE {column} = ? AND {column} != ''", ("x",))
        # The candidate lookup: token rows by primary key; keys of close ones by seq.
        candidate_plan = _plan(conn, _candidates_sql(8), (
            "u", "k", 51, "t", "k", 51, *(arg for t in range(8) for arg in (t, 1, 51))))
        assert "dedupe_text USING PRIMARY KEY (token=?)" in candidate_plan
        assert "entries_match_url" in candidate_plan and "entries_norm_title" in candidate_plan
        assert "entries_seq" in _plan(conn, "SELECT id FROM entries WHERE seq IN (?, ?)",
                                      (1, 2))
        versions_plan = _plan(conn, "SELECT * FROM entry_versions WHERE entry_seq = "
                              "(SELECT seq FROM entries WHERE id = ?) ORDER BY first_seen_at",
                              ("k",))
        assert "entry_versions_seq_fp" in versions_plan
        assert "sqlite_autoindex_entries_1" in versions_plan


def test_a_split_cluster_leaves_no_stale_marker(fetch: Fetch, database: Path | str) -> None:
    # The publisher has two entries for one page (a repost under a new guid). Rows of
    # one source never match each other, but both match the aggregator's copy, which
    # joins them into one cluster. When the copy moves away, the cluster falls apart.
    link = "https://pub.example/page"
    fetch("pub", rss({"guid": "a1", "title": "First post on the page", "link": link},
                     {"guid": "a2", "title": "The same page reposted", "link": link}))
    fetch("agg", rss({"guid": "b", "title": "Aggregated copy of it", "link": link}))
    a1, a2, b = digest(["pub", "a1"]), digest(["pub", "a2"]), digest(["agg", "b"])
    canon, other = sorted([a1, a2])  # same first seen: the smaller key
    assert markers(database)[other][3] == canon and markers(database)[b][3] == canon
    fetch("agg", rss({"guid": "b", "title": "Aggregated copy of it",
                      "link": "https://agg.example/elsewhere"}))
    assert markers(database)[other] == ("", "", "", "")
    assert markers(database)[b] == ("", "", "", "")
    with open_store(database) as store:
        assert store.recompute_duplicates().total_changed == 0


# A post and an aggregator's copy of it with two words added: 19 and 21 shingles, Jaccard
# 19/21 (at or above 0.9, near-identical), but the longer text's three prefix tokens
# share only one with the shorter's two.
POST = ("New restore residents shares high profit approved needs analysts review unclear "
        "analysts mayor river park storm were noise high after mayor.")


@pytest.mark.parametrize("first", ["pub", "agg"])
def test_near_identical_texts_match_whichever_is_fetched_first(
        fetch: Fetch, database: Path | str, first: str) -> None:
    # Whether two texts are compared must not depend on which of them asks: the copy
    # fetched second looks the first one up, and signal dedupe looks rows up in key order.
    copies = {"pub": rss({"guid": "p", "title": "", "link": "https://pub.example/p",
                          "description": POST, "date": "Mon, 02 Mar 2026 10:00:00 GMT"}),
              "agg": rss({"guid": "a", "title": "", "link": "https://agg.example/a",
                          "description": POST + " Read more",
                          "date": "Mon, 02 Mar 2026 12:00:00 GMT"})}
    post, copy = digest(["pub", "p"]), digest(["agg", "a"])
    assert jaccard(shingles("", POST), shingles("", POST + " Read more")) >= 0.9
    for source in sorted(copies, key=lambda s: s != first):
        fetch(source, copies[source])
    assert markers(database) == {post: ("", "", "", ""), copy: ("", "", post, post)}
    with open_store(database) as store:
        assert store.recompute_duplicates().total_changed == 0


def test_marking_on_write_always_equals_a_full_recompute(database: Path | str) -> None:
    # Random responses (new stories, copies, edits that join and split clusters) applied
    # through the store; after each one, recomputing everything must change nothing.
    import datetime as dt

    from signal_feeds.identity.keys import EntryRow
    from signal_feeds.store import FetchRecord, SourceState

    rng = random.Random(11)
    words = [f"word{i}" for i in range(60)]
    texts = [" ".join(rng.choice(words) for _ in range(12)) for _ in range(8)]
    now = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    with open_store(database) as store:
        for step in range(40):
            source = rng.choice(["s1", "s2", "s3", "s4"])
            rows = []
            for guid in rng.sample(range(6), rng.randint(1, 4)):
                story = rng.randrange(8)
                link = rng.choice([f"https://pub.example/{story}",
                                   f"https://www.pub.example/{story}/?utm_source=x",
                                   f"https://{source}.example/{guid}"])
                rows.append(EntryRow(
                    key=digest([source, str(guid)]), source_id=source, remote_id=str(guid),
                    url=link, title=f"Headline for story {story}" if rng.random() < 0.7
                    else f"Other title {step}", published="", updated="", author="",
                    summary=texts[story] if rng.random() < 0.7 else "", content="",
                    fingerprint=f"{link}|{story}|{step}", content_fingerprint=str(step)))
            now += dt.timedelta(minutes=1)
            store.apply_response(SourceState(source_id=source, url=f"https://{source}/"),
                                 rows, FetchRecord(source_id=source, started_at=now,
                                                   url="u", outcome="fetched"), now)
            report = store.recompute_duplicates()
            assert report.total_changed == 0, (step, report)
        assert report.duplicates


def test_a_key_that_becomes_too_common_unlinks_what_it_linked(database: Path | str) -> None:
    # One link, one title and one text in a source each: the first MAX_POSTINGS + 1 rows
    # are one cluster per channel. The next row makes every key too common to tell
    # stories apart, and a full recompute links none of them: marking on write must
    # clear the markers too, not only leave the newcomer alone.
    import datetime as dt

    from signal_feeds.identity.keys import EntryRow
    from signal_feeds.store import FetchRecord, SourceState
    from signal_feeds.store.marking import MAX_POSTINGS

    now = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    with open_store(database) as store:
        for n in range(MAX_POSTINGS + 3):
            source = f"s{n:02d}"
            now += dt.timedelta(minutes=1)
            row = EntryRow(
                key=digest([source, "g"]), source_id=source, remote_id="g",
                url="https://pub.example/story", title="The one headline every source has",
                published="", updated="", author="", summary=STORY, content="",
                fingerprint="f", content_fingerprint="c")
            store.apply_response(SourceState(source_id=source, url=f"https://{source}/"),
                                 [row], FetchRecord(source_id=source, started_at=now,
                                                    url="u", outcome="fetched"), now)
            marked = sum(1 for m in markers(database).values() if m[3])
            # Rows 2 to MAX_POSTINGS + 1 point at the first; from row MAX_POSTINGS + 2 on,
            # no row has MAX_POSTINGS or fewer others to match.
            assert marked == (n if n <= MAX_POSTINGS else 0), n
            assert store.recompute_duplicates().total_changed == 0, n
        assert all(m == ("", "", "", "") for m in markers(database).values())


def test_a_key_that_is_no_longer_too_common_links_again(database: Path | str) -> None:
    # A feed gives its home page as every item's link, and so does an aggregator's copy
    # of one item: MAX_POSTINGS + 3 rows share the link, too many to link any. The feed
    # is fixed and two items get their own links: the MAX_POSTINGS + 1 rows left share
    # it with at most MAX_POSTINGS others, and a full recompute links them: marking on
    # write must too, in the same store (which remembered the link as too common).
    import datetime as dt

    from signal_feeds.identity.keys import EntryRow
    from signal_feeds.store import FetchRecord, SourceState
    from signal_feeds.store.marking import MAX_POSTINGS

    home = "https://site.example/"
    now = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)

    def row(source: str, guid: str, link: str) -> EntryRow:
        return EntryRow(key=digest([source, guid]), source_id=source, remote_id=guid,
                        url=link, title="", published="", updated="", author="",
                        summary="", content="", fingerprint=link, content_fingerprint="")

    def apply(store: Store, source: str, rows: list[EntryRow]) -> None:
        nonlocal now
        now += dt.timedelta(minutes=1)
        store.apply_response(SourceState(source_id=source, url=f"https://{source}/"), rows,
                             FetchRecord(source_id=source, started_at=now, url="u",
                                         outcome="fetched"), now)

    with open_store(database) as store:
        apply(store, "feed", [row("feed", str(i), home) for i in range(MAX_POSTINGS + 2)])
        apply(store, "agg", [row("agg", "a", home + "?utm_source=agg")])
        assert not any(m[3] for m in markers(database).values())
        apply(store, "feed", [row("feed", str(i), f"{home}p/{i}") if i < 2 else row(
            "feed", str(i), home) for i in range(MAX_POSTINGS + 2)])
        incremental = markers(database)
        # Undated, first seen together: the smallest key of the feed's rows still sharing it.
        canonical = min(digest(["feed", str(i)]) for i in range(2, MAX_POSTINGS + 2))
        assert incremental[digest(["agg", "a"])][0] == canonical
        assert store.recompute_duplicates().total_changed == 0
    assert markers(database) == incremental


def test_parser_workers_send_the_same_match_keys_the_store_computes() -> None:
    from dataclasses import replace

    from signal_feeds.identity.matching import match_keys
    from signal_feeds.parse.processes import ParseJob, parse_job
    from signal_feeds.parse.settings import ParseSettings

    body = rss({"guid": "a", "title": "A headline long enough to match on",
                "link": "https://www.pub.example/a/?utm_source=rss", "description": STORY})
    outcome = parse_job(ParseJob(source_id="s", body=body, url="", content_type="",
                                 settings=ParseSettings()))
    (row,) = outcome.identified.rows  # type: ignore[attr-defined]
    sent = outcome.match_keys[row.key]
    assert sent == replace(match_keys(row.url, row.title, row.summary), shingles=frozenset())
    assert sent.tokens and sent.match_url == "pub.example/a"


@pytest.mark.parametrize(("title", "summary"), [
    ("Café Σίσυφος &amp; ﬁne",
     "<p>ΣΑΣ straße\u00ad word x\u0301y \u2026 İstanbul and more words</p>"),
    ("e\u0301 ends in a combining mark\u0301", "\u0301starts with one, then seven more words"),
    ("Title\u200b", "\u00a0summary of enough plain words to make shingles from"),
    ("", "eight words of a summary without any title here"),
])
def test_match_keys_read_the_title_as_the_separate_functions_do(title: str,
                                                                summary: str) -> None:
    # match_keys splits the title's words once for its key and its shingles.
    keys = match_keys("https://example.org/a", title, summary)
    assert keys.norm_title == normalize_title(title)
    assert keys.shingles == shingles(title, summary)
    assert keys.tokens == tuple(prefix_tokens(shingles(title, summary)))
    assert replace(keys, shingles=frozenset()) == match_keys(
        "https://example.org/a", title, summary, with_shingles=False)


def test_a_token_past_the_cap_is_remembered_and_not_looked_up_again(db_path: Path) -> None:
    from signal_feeds.store.marking import MAX_POSTINGS, CommonKeys
    from signal_feeds.store.sqlite.dedupe import _candidates

    common, rare = 11, 22
    with Store(db_path), own_connection(db_path) as conn:
        # Every row carries the common token; e0 the rare one too, as its stored tokens say.
        conn.executemany("INSERT INTO entries (id, source_id, fingerprint, first_seen_at, "
                         "last_seen_at, seq, text_tokens) VALUES (?, 'o', 'f', 't', 't', ?, ?)",
                         [(f"e{i}", i + 1, pack_tokens((common, rare) if i == 0 else (common,)))
                          for i in range(MAX_POSTINGS + 2)])
        # Token rows name entries by seq; e{i} has seq i + 1, and "new" is the last.
        conn.executemany("INSERT INTO dedupe_text (token, entry) VALUES (?, ?)",
                         [(common, i + 1) for i in range(MAX_POSTINGS + 2)]
                         + [(rare, 1), (rare, MAX_POSTINGS + 3)])
        conn.execute("INSERT INTO entries (id, source_id, fingerprint, first_seen_at, "
                     "last_seen_at, seq) VALUES ('new', 's', 'f', 't', 't', ?)",
                     (MAX_POSTINGS + 3,))
        row = DedupeRow(key="new", source_id="s", first_seen_at="t", moment="t",
                        match_url="", norm_title="", tokens=(common, rare),
                        seq=MAX_POSTINGS + 3)
        known = CommonKeys()
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        first = _candidates(conn, row, known)
        second = _candidates(conn, row, known)
        conn.set_trace_callback(None)
        assert known.knows("text", common) and not known.knows("text", rare)
        # Skipping the known token changes no answer: its postings were never used.
        assert first == second == {"link": [], "title": [], "text": ["e0"]}
        lookups = [sql for sql in statements if "dedupe_text" in sql]
        assert len(lookups) == 2
        # One lookup per token the row is found by: two the first time, then only the rare one.
        assert lookups[0].count("dedupe_text") == 2 and "token = 11 " in lookups[0]
        assert lookups[1].count("dedupe_text") == 1
        assert "token = 11 " not in lookups[1] and "token = 22 " in lookups[1]
