"""Reading the aggregate: entries, history, lookup and export (real HTTP; each store
backend: a real SQLite file, a real PostgreSQL server)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import resource
import sqlite3
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import feedparser
import pytest
from click.testing import CliRunner, Result
from conftest import Clock, make_config, query
from scenario_server import ScenarioServer

from signal_feeds import Store, digest, run_fetch
from signal_feeds.cli.commands import cli
from signal_feeds.config.opml import parse_opml
from signal_feeds.errors import QueryError
from signal_feeds.parse.processes import ParserPool
from signal_feeds.records import FetchRecord, SourceState
from signal_feeds.store import open_store
from signal_feeds.store.reading import (
    entry_history,
    entry_urn,
    export_entries,
    iter_export,
    list_entries,
    lookup,
    resolve_key,
    search_entries,
)
from signal_feeds.timeutil import format_time

STORY = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor "
         "incididunt ut labore et dolore magna aliqua.")


def rss(*items: dict[str, str]) -> bytes:
    parts = []
    for item in items:
        # isPermaLink="false": otherwise the guid is read as a link relative to the feed.
        fields = "".join(f"<{tag}>{escape(item[key])}</{tag.split()[0]}>" for key, tag in (
            ("guid", 'guid isPermaLink="false"'), ("title", "title"), ("link", "link"),
            ("description", "description"), ("date", "pubDate"), ("author", "author"))
            if key in item)
        parts.append(f"<item>{fields}</item>")
    return ("<?xml version='1.0' encoding='utf-8'?><rss version='2.0'><channel><title>t"
            "</title><link>https://example.org/</link>" + "".join(parts)
            + "</channel></rss>").encode()


Fetch = Callable[[str, bytes], None]


@pytest.fixture(scope="module")
def parser() -> Iterator[ParserPool]:
    pool = ParserPool(workers=1)
    yield pool
    pool.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def fetch(server: ScenarioServer, database: Path | str, parser: ParserPool, clock: Clock) -> Fetch:
    def run(source_id: str, body: bytes) -> None:
        clock.advance(60)  # each fetch a minute after the last: first seen is ordered
        server.put(f"/{source_id}.xml", body)
        report = run_fetch(make_config(database, {source_id: server.url(f"/{source_id}.xml")}),
                           force=True, parser=parser, clock=clock)
        assert report.sources[0].status == "fetched", report.sources[0]

    return run


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def as_json(*args: str) -> Any:
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


PUB = {"guid": "p-1", "title": "The big story of the week", "description": STORY,
       "link": "https://news.example/2026/big-story", "date": "Mon, 02 Mar 2026 10:00:00 GMT",
       "author": "ana@example.org (Ana)"}


@pytest.fixture
def aggregate(fetch: Fetch) -> dict[str, str]:
    """A publisher, a mirror and a planet carrying one story, plus two other entries."""
    fetch("publisher", rss(PUB, {"guid": "p-2", "title": "An older quiet announcement",
                                 "link": "https://news.example/2026/quiet",
                                 "date": "Sun, 01 Feb 2026 10:00:00 GMT"}))
    fetch("mirror", rss({**PUB, "guid": "m-1",
                         "link": "https://www.news.example/2026/big-story/?utm_source=m"}))
    fetch("planet", rss({**PUB, "guid": "x-1", "link": "https://planet.example/p/1"},
                        {"guid": "x-2", "title": "Planet meta: new members this month",
                         "link": "https://planet.example/p/2",
                         "date": "Tue, 03 Mar 2026 08:00:00 GMT"}))
    return {"publisher": digest(["publisher", "p-1"]), "quiet": digest(["publisher", "p-2"]),
            "mirror": digest(["mirror", "m-1"]), "planet": digest(["planet", "x-1"]),
            "meta": digest(["planet", "x-2"])}


def test_entries_newest_first_collapsed_filtered_and_limited(aggregate: dict[str, str],
                                                             database: Path | str) -> None:
    db = ("--db", str(database))
    shown = [e["id"] for e in as_json("entries", *db)["entries"]]
    assert shown == [aggregate["meta"], aggregate["publisher"], aggregate["quiet"]]
    every = as_json("entries", *db, "--all")["entries"]
    assert len(every) == 5
    assert [e["id"] for e in as_json("entries", *db, "--limit", "1")["entries"]] == [
        aggregate["meta"]]
    since = as_json("entries", *db, "--since", "2026-03-02")["entries"]
    assert [e["id"] for e in since] == [aggregate["meta"], aggregate["publisher"]]
    # A source's own copy is still that source's entry.
    mirror = as_json("entries", *db, "--source", "mirror")["entries"]
    assert [(e["id"], e["duplicate_of"]) for e in mirror] == [
        (aggregate["mirror"], aggregate["publisher"])]
    text = invoke("entries", *db)
    assert text.exit_code == 0 and "(+2: mirror, planet)" in text.output
    assert invoke("entries", *db, "--since", "March").exit_code == 2
    # The ends of the calendar: a traceback (OverflowError) where a zone moves the time
    # past year 1 or 9999; "0999-01-01T00:00" was written "999-..." and selected nothing.
    for edge in ("0001-01-01T00:00:00+05:00", "9999-12-31T23:00:00-05:00"):
        result = invoke("entries", *db, "--since", edge)
        assert result.exit_code == 2 and "is out of range in UTC" in result.output, (
            result.output)
        with open_store(database) as store, pytest.raises(QueryError, match="out of range"):
            list_entries(store, since=edge)
    assert len(as_json("entries", *db, "--since", "0999-01-01T00:00")["entries"]) == 3
    # The store's own methods read a since bound as the reading functions do: "+05:00"
    # was compared as text, "yesterday" selected nothing.
    with open_store(database) as store:
        offset = "2026-03-02T05:00:00+05:00"
        assert ([v.key for v in store.entry_views(source_id=None, since=offset, limit=None,
                                                  include_duplicates=True)]
                == [v.key for v in list_entries(store, since=offset, include_duplicates=True)])
        assert len(store.search("story", since=offset)) == len(
            search_entries(store, "story", since=offset))
        with pytest.raises(QueryError):
            store.search("story", since="yesterday")


def test_a_limit_below_one_is_refused_alike(aggregate: dict[str, str],
                                            database: Path | str) -> None:
    # `search --limit 0` exited 1 ("no hit") and `entries --limit 0` 0; in the library
    # search_entries(limit=-1) gave [] and read_changes(limit=0) a ValueError.
    db = ("--db", str(database))
    for args in (("entries", "--limit", "0"), ("search", "story", "--limit", "0"),
                 ("export", "--limit", "0"), ("changes", "--limit", "0")):
        result = invoke(*args, *db)
        assert result.exit_code == 2 and "0 is not at least 1" in result.output, args
    with open_store(database) as store:
        for call in (lambda: list_entries(store, limit=0),
                     lambda: search_entries(store, "story", limit=-1)):
            with pytest.raises(ValueError, match="limit must be at least 1"):
                call()
        assert len(list_entries(store, limit=None)) == 3
        # A limit past what a database integer holds: every row, not an OverflowError.
        assert len(list_entries(store, limit=10 ** 20)) == 3
        assert len(search_entries(store, "story", limit=10 ** 20, include_duplicates=True)
                   ) >= 1
    huge = as_json("entries", *db, "--limit", str(10 ** 20))
    assert len(huge["entries"]) == 3


def test_history_lists_every_version_with_when_it_was_seen(fetch: Fetch,
                                                           database: Path | str) -> None:
    fetch("publisher", rss(PUB))
    fetch("publisher", rss({**PUB, "title": "The big story of the week (corrected)"}))
    # A later response in which the entry is unchanged (another one is new).
    fetch("publisher", rss({**PUB, "title": "The big story of the week (corrected)"},
                           {"guid": "p-9", "title": "Something else entirely"}))
    key = digest(["publisher", "p-1"])
    found = as_json("history", key[:10], "--db", str(database))
    # The current version was last seen when the entry was: it showed the time of the
    # correction, as unchanged entries touch only their own row.
    assert found["versions"][-1]["last_seen_at"] == found["entry"]["last_seen_at"]
    assert found["entry"]["id"] == key
    assert found["entry"]["title"] == "The big story of the week (corrected)"
    versions = found["versions"]
    assert [v["title"] for v in versions] == ["The big story of the week",
                                              "The big story of the week (corrected)"]
    assert versions[0]["first_seen_at"] < versions[1]["first_seen_at"]
    assert all(v["last_seen_at"] >= v["first_seen_at"] for v in versions)
    missing = invoke("history", "0" * 64, "--db", str(database))
    assert missing.exit_code == 1 and "no entry" in missing.output
    with open_store(database) as store:
        with pytest.raises(QueryError, match="at least 4 hex digits"):
            resolve_key(store, key[:3])
        history = entry_history(store, key)
        assert history is not None and len(history.versions) == 2
        assert history.current == 1
    assert [v["current"] for v in versions] == [False, True]
    # Back to the first title: that version is current again, though it is not the
    # newest line (it read as if the correction were still current).
    fetch("publisher", rss(PUB))
    back = as_json("history", key[:10], "--db", str(database))
    assert [(v["title"], v["current"]) for v in back["versions"]] == [
        ("The big story of the week", True),
        ("The big story of the week (corrected)", False)]
    text = invoke("history", key[:10], "--db", str(database)).output.splitlines()
    assert text[1].endswith("(current)") and not text[2].endswith("(current)")
    # When each version was seen says UTC, as the dates beside it do (it read as local).
    assert re.match(r"  \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \.\. \S+Z  ", text[1]), text[1]



def test_history_says_when_only_the_text_of_an_untitled_post_changed(
        fetch: Fetch, database: Path | str) -> None:
    # A Mastodon post has no title, and an edit changes neither its link nor its date:
    # the two versions of an edited post were printed as the same line twice.
    post = {"guid": "https://social.example/@ana/1", "link": "https://social.example/@ana/1",
            "date": "Thu, 03 Dec 2026 20:15:31 +0000",
            "description": "<p>Just shipped 3.14 support, thanks @bob!</p>"}
    fetch("social", rss(post))
    fetch("social", rss({**post, "description": "<p>Just shipped 3.14 support, thanks @bob! "
                                                "(edited: typo)</p>"}))
    key = digest(["social", "https://social.example/@ana/1"])
    text = invoke("history", key[:10], "--db", str(database)).output.splitlines()
    assert text[0].endswith("“Just shipped 3.14 support, thanks @bob! (edited: typo)”")
    first, second = text[1:]
    assert "  -  https://social.example/@ana/1  published=" in first  # no title: "-"
    assert first.endswith("updated=-")
    assert second.endswith("updated=-  (text changed)  (current)")


def test_lookup_of_a_duplicates_link_answers_the_canonical_entry(
        aggregate: dict[str, str], database: Path | str) -> None:
    # The planet's own link matches only the planet's row, a marked duplicate.
    found = as_json("lookup", "https://planet.example/p/1", "--db", str(database))
    assert found["found"] is True
    assert found["canonical"]["id"] == aggregate["publisher"]
    assert [m["id"] for m in found["matches"]] == [aggregate["planet"]]
    # The mirror's spelling with other tracking parameters matches publisher and mirror.
    found = as_json("lookup", "http://news.example/2026/big-story?fbclid=abc",
                    "--db", str(database))
    assert found["canonical"]["id"] == aggregate["publisher"]
    assert {m["id"] for m in found["matches"]} == {aggregate["publisher"], aggregate["mirror"]}
    unknown = invoke("lookup", "https://nowhere.example/", "--db", str(database), "--json")
    assert unknown.exit_code == 1 and json.loads(unknown.output)["found"] is False
    with open_store(database) as store:
        result = lookup(store, "https://planet.example/p/1/")
        assert result is not None and result.canonical.also_in == ("mirror", "planet")


def test_exported_atom_round_trips_through_feedparser(aggregate: dict[str, str],
                                                      database: Path | str, tmp_path: Path) -> None:
    out = tmp_path / "export.atom"
    result = invoke("export", "--db", str(database), "--format", "atom", "--output", str(out))
    assert result.exit_code == 0, result.output
    ET.fromstring(out.read_bytes())  # well-formed XML
    parsed = feedparser.parse(out.read_bytes())
    assert parsed.bozo == 0 and parsed.version == "atom10"
    with open_store(database) as store:
        shown = list_entries(store, limit=None)
    assert len(shown) == 3
    assert [e.id for e in parsed.entries] == [entry_urn(v.key) for v in shown]
    assert [e.link for e in parsed.entries] == [v.url for v in shown]
    assert [e.title for e in parsed.entries] == [v.title for v in shown]
    story = parsed.entries[1]
    assert story.published.startswith("2026-03-02T10:00:00")
    assert "Lorem ipsum" in story.summary

    every = feedparser.parse(invoke("export", "--db", str(database), "--format", "atom",
                                    "--all").output.encode())
    assert {e.id for e in every.entries} == {entry_urn(k) for k in aggregate.values()}
    assert {e.link for e in every.entries} >= {"https://planet.example/p/1",
                                               "https://news.example/2026/big-story"}


def test_every_exported_atom_entry_has_a_link_or_a_content(fetch: Fetch,
                                                            database: Path | str) -> None:
    # RFC 4287 4.1.1: an entry with neither an alternate link nor a content made the
    # whole export invalid. Without a link, the summary stands as the content.
    fetch("notes", rss({"guid": "n-1", "title": "No link, a summary",
                        "description": "<p>What happened</p>"},
                       {"guid": "n-2", "title": "No link, nothing else"},
                       {"guid": "n-3", "title": "Linked", "link": "https://n.example/3",
                        "description": "kept as the summary"}))
    feed = ET.fromstring(invoke("export", "--db", str(database), "--format", "atom").output)
    ns = {"a": "http://www.w3.org/2005/Atom"}
    by_title = {e.findtext("a:title", namespaces=ns): e for e in feed.findall("a:entry", ns)}
    for entry in by_title.values():
        assert (entry.find("a:content", ns) is not None
                or entry.find("a:link[@rel='alternate']", ns) is not None)
    first = by_title["No link, a summary"]
    assert first.findtext("a:content", namespaces=ns) == "<p>What happened</p>"
    assert first.find("a:summary", ns) is None
    assert by_title["Linked"].findtext("a:summary", namespaces=ns) == "kept as the summary"
    assert by_title["Linked"].find("a:content", ns) is None


def test_an_atom_export_of_unchanged_data_is_the_same_bytes_every_time(
        fetch: Fetch, database: Path | str, clock: Clock) -> None:
    # An entry dated 2099 (a typo) made the export's own <updated> the moment of the
    # export: every export differed from the last, though nothing had changed, so a
    # static site or a mirror saw a new feed each time. Now the feed's <updated> is the
    # latest believable date, here when Signal first saw the future-dated entry.
    fetch("typo", rss({"guid": "t-1", "title": "Dated a century ahead",
                       "link": "https://t.example/1", "date": "Sat, 05 Dec 2099 10:00:00 GMT"},
                      {"guid": "t-2", "title": "Dated in the past",
                       "link": "https://t.example/2", "date": "Mon, 02 Mar 2026 10:00:00 GMT"}))
    seen = clock.now
    with open_store(database) as store:
        first = export_entries(store, format="atom", now=seen + dt.timedelta(hours=1))
        second = export_entries(store, format="atom", now=seen + dt.timedelta(days=3))
    assert first == second
    feed = ET.fromstring(first)
    ns = {"a": "http://www.w3.org/2005/Atom"}
    assert feed.findtext("a:updated", namespaces=ns) == format_time(seen)
    # The entry keeps what its feed said.
    assert "<updated>2099-12-05T10:00:00Z</updated>" in first
    cli_exports = [invoke("export", "--db", str(database), "--format", "atom").output
                   for _ in range(2)]
    assert cli_exports[0] == cli_exports[1] == first


def test_an_export_is_made_and_written_one_entry_at_a_time(aggregate: dict[str, str],
                                                          database: Path | str) -> None:
    # The whole document was built as one tree and then copied as text four times
    # before a byte was written: 12,000 entries took 151 MB for a 30 MB file. Now it
    # comes in pieces (the head, one per entry, the end), the same text as before.
    now = dt.datetime(2026, 12, 6, tzinfo=dt.UTC)
    with open_store(database) as store:
        for fmt in ("atom", "json"):
            pieces = list(iter_export(store, format=fmt, include_duplicates=True, now=now))
            whole = export_entries(store, format=fmt, include_duplicates=True, now=now)
            assert "".join(pieces) == whole
            assert len(pieces) == 2 + len(aggregate) + (fmt == "atom")
            if fmt == "json":
                assert json.loads(whole)["entries"][0]["id"] in aggregate.values()
                assert "".join(iter_export(store, format="json", source_id="none", now=now)
                               ).endswith('"entries": []\n}\n')
            else:
                assert feedparser.parse(whole.encode()).bozo == 0


PAUSED_EXPORT = """
import sys, time
from signal_feeds.cli.commands import cli
from signal_feeds.store import reading

original = reading.iter_export

def half_then_pause(*args, **kwargs):
    pieces = iter(original(*args, **kwargs))  # read while the store is open

    def paused():
        yield next(pieces)
        yield next(pieces)
        print("half written", flush=True)
        time.sleep(600)
        yield from pieces
    return paused()

reading.iter_export = half_then_pause
cli(["export", "--db", sys.argv[1], "--format", "atom", "-o", sys.argv[2]])
"""


def _paused_export(database: Path | str, out: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", PAUSED_EXPORT, str(database), str(out)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "half written\n"
    return proc


def test_the_half_export_of_a_killed_run_is_removed_by_the_next_export(
        aggregate: dict[str, str], database: Path | str, tmp_path: Path) -> None:
    # A cron job's time limit (SIGKILL) stopped an export mid-file: the file it was
    # writing beside the export stayed there for good, one per kill, each as large as
    # what it had written.
    out = tmp_path / "site" / "feed.atom"
    out.parent.mkdir()
    out.write_text("the last good export\n", encoding="utf-8")

    def beside() -> set[str]:
        return {p.name for p in out.parent.iterdir()} - {"feed.atom"}

    killed = _paused_export(database, out)
    killed.kill()
    killed.communicate()
    abandoned = beside()
    running = _paused_export(database, out)
    try:
        written = beside() - abandoned
        assert len(abandoned) == len(written) == 1
        assert out.read_text(encoding="utf-8") == "the last good export\n"
        long_ago = time.time() - 3600
        for name in abandoned | written:
            os.utime(out.parent / name, (long_ago, long_ago))
        assert invoke("export", "--db", str(database), "--format", "atom",
                      "-o", str(out)).exit_code == 0
        assert feedparser.parse(out.read_bytes()).bozo == 0
        # The killed export's file is gone; the one an export still writes stays.
        assert beside() == written
    finally:
        running.kill()
        running.communicate()


def test_an_export_is_on_disk_before_it_replaces_the_last_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Renamed over FILE while its blocks were still only in memory, a reboot (XFS, ext4
    # without auto_da_alloc, ...) could leave FILE empty: neither the last export nor
    # this one. OPML imports into signal.toml already synced before replacing.
    from signal_feeds.cli import reading

    out = tmp_path / "feed.json"
    out.write_text("the last good export\n", encoding="utf-8")
    synced: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def replace(src: Any, dst: Any) -> None:
        assert str(src) in synced, "replaced before it was synced"
        real_replace(src, dst)

    monkeypatch.setattr(reading.os, "fsync", fsync)
    monkeypatch.setattr(reading.os, "replace", replace)
    reading.write_whole(out, ["{", "}\n"])
    assert out.read_text(encoding="utf-8") == "{}\n"
    assert len(synced) == 1


def test_an_export_that_cannot_be_written_whole_leaves_the_last_one_whole(
        aggregate: dict[str, str], database: Path | str, tmp_path: Path) -> None:
    # A full disk (here: a file size limit) truncated the last good export to what fit,
    # and a web server or a static-site build serving the file read half a feed; a
    # reader could also find it half-written at any time. Now the export is written
    # beside it and replaces it only when it is whole.
    out = tmp_path / "site" / "feed.atom"
    out.parent.mkdir()
    out.write_text("the last good export\n", encoding="utf-8")
    out.chmod(0o644)
    keep_open = None
    if isinstance(database, Path):  # its -shm file exists already: the limit spares it
        keep_open = sqlite3.connect(database)
        keep_open.execute("SELECT count(*) FROM entries").fetchall()

    def file_size_limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))

    try:
        result = subprocess.run(
            [sys.executable, "-m", "signal_feeds", "export", "--db", str(database),
             "--format", "atom", "-o", str(out)],
            preexec_fn=file_size_limit, capture_output=True, text=True, timeout=60)
    finally:
        if keep_open is not None:
            keep_open.close()
    assert result.returncode == 2, result.stderr
    assert result.stderr == (f"signal: error: --output {out}: cannot write it: "
                             "File too large\n")
    assert out.read_text(encoding="utf-8") == "the last good export\n"
    assert sorted(p.name for p in out.parent.iterdir()) == ["feed.atom"]
    # Written whole, it replaces the last one, with that one's permissions.
    assert invoke("export", "--db", str(database), "--format", "atom",
                  "-o", str(out)).exit_code == 0
    assert feedparser.parse(out.read_bytes()).bozo == 0
    assert out.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in out.parent.iterdir()) == ["feed.atom"]
    # A path that is not a file is written to as it is (not replaced).
    piped = subprocess.run([sys.executable, "-m", "signal_feeds", "export", "--db",
                            str(database), "--format", "atom", "-o", "/dev/stdout"],
                           capture_output=True, timeout=60)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == out.read_bytes()


def test_export_json_is_the_collapsed_selection(aggregate: dict[str, str],
                                                database: Path | str) -> None:
    data = json.loads(invoke("export", "--db", str(database)).output)
    assert data["collapsed"] is True
    assert [e["id"] for e in data["entries"]] == [aggregate["meta"], aggregate["publisher"],
                                                  aggregate["quiet"]]
    with open_store(database) as store:
        text = export_entries(store, format="json", include_duplicates=True, source_id="planet")
    assert {e["id"] for e in json.loads(text)["entries"]} == {aggregate["planet"],
                                                              aggregate["meta"]}


def test_export_opml_lists_the_configured_sources(tmp_path: Path) -> None:
    config = tmp_path / "signal.toml"
    config.write_text('[[sources]]\nid = "a"\nurl = "https://a.example/feed.xml"\n'
                      'title = "A & B <news>"\n\n[[sources]]\nid = "b"\n'
                      'url = "https://b.example/atom"\n', encoding="utf-8")
    result = invoke("export", "--config", str(config), "--format", "opml")
    assert result.exit_code == 0, result.output
    feeds = parse_opml(result.output.encode())
    assert [(f.title, f.url) for f in feeds] == [("A & B <news>", "https://a.example/feed.xml"),
                                                 ("b", "https://b.example/atom")]
    assert not (tmp_path / "signal.db").exists()  # an export makes no database


def test_export_opml_with_a_config_names_fetched_feeds_by_their_own_title(
        tmp_path: Path) -> None:
    # It gave the id ("b") while --db alone and the Atom export gave the feed's title.
    config = tmp_path / "signal.toml"
    config.write_text('[[sources]]\nid = "a"\nurl = "https://a.example/feed.xml"\n'
                      'title = "Mine"\n\n[[sources]]\nid = "b"\n'
                      'url = "https://b.example/atom"\n\n[[sources]]\nid = "c"\n'
                      'url = "https://c.example/rss"\n', encoding="utf-8")
    with Store(tmp_path / "signal.db") as store, store.batch():
        for sid, title in (("a", "A's own"), ("b", "Bee News")):
            url = f"https://{sid}.example/feed"
            store.save_attempt(
                SourceState(source_id=sid, url=url, status="fetched", feed_title=title),
                FetchRecord(source_id=sid, started_at=dt.datetime.now(dt.UTC), url=url,
                            outcome="fetched"))
    result = invoke("export", "--config", str(config), "--format", "opml")
    assert result.exit_code == 0, result.output
    assert [(f.title, f.url) for f in parse_opml(result.output.encode())] == [
        ("Mine", "https://a.example/feed.xml"), ("Bee News", "https://b.example/atom"),
        ("c", "https://c.example/rss")]


def test_reading_a_missing_database_is_a_clear_error(tmp_path: Path) -> None:
    result = invoke("entries", "--db", str(tmp_path / "nothing.db"))
    assert result.exit_code == 2 and "signal fetch" in result.output
    assert not (tmp_path / "nothing.db").exists()


# -- issue 18: dates, key prefixes, one default for library and CLI, export titles -------


def atom(*entries: dict[str, str]) -> bytes:
    parts = []
    for entry in entries:
        fields = "".join(f"<{tag}>{escape(entry[tag])}</{tag}>" for tag in
                         ("id", "title", "published", "updated") if tag in entry)
        parts.append(f"<entry>{fields}<link href='{escape(entry['link'])}'/></entry>")
    return ("<?xml version='1.0' encoding='utf-8'?><feed xmlns='http://www.w3.org/2005/Atom'>"
            "<title>Notes</title><id>urn:x:notes</id><updated>2026-03-01T00:00:00Z</updated>"
            + "".join(parts) + "</feed>").encode()


def test_an_entry_with_only_updated_is_listed_and_shown_by_that_date(
        fetch: Fetch, database: Path | str) -> None:
    # Fetched in December 2026: "old" has only <updated> (January), "new" a <published>
    # in February. Listed by first seen, "old" would come first and pass --since.
    fetch("notes", atom({"id": "urn:x:old", "title": "Only updated",
                         "updated": "2026-01-10T08:00:00Z", "link": "https://n.example/old"},
                        {"id": "urn:x:new", "title": "Published",
                         "published": "2026-02-10T08:00:00Z", "link": "https://n.example/new"}))
    old, new = digest(["notes", "urn:x:old"]), digest(["notes", "urn:x:new"])
    db = ("--db", str(database))
    listed = as_json("entries", *db)["entries"]
    assert [e["id"] for e in listed] == [new, old]
    assert [e["date"] for e in listed] == ["2026-02-10T08:00:00Z", "2026-01-10T08:00:00Z"]
    text = invoke("entries", *db).output.splitlines()
    assert text[1].startswith(f"{old[:12]}  2026-01-10 08:00  notes  Only updated")
    assert [e["id"] for e in as_json("entries", *db, "--since", "2026-02-01")["entries"]] == [
        new]
    with open_store(database) as store:
        assert [e.key for e in store.entries()] == [new, old]


def test_a_date_after_first_seen_does_not_hold_the_top_of_the_list(
        fetch: Fetch, database: Path | str) -> None:
    # A typo (2099) in one item: by its own date it would stay above every later entry.
    typo = {"guid": "typo", "title": "Dated 2099 by a typo", "link": "https://t.example/typo",
            "date": "Thu, 01 Jan 2099 00:00:00 GMT"}
    old = {"guid": "old", "title": "Last month", "link": "https://t.example/old",
           "date": "Sun, 01 Nov 2026 10:00:00 GMT"}
    fetch("blog", rss(typo, old))  # the clock says 2026-12-02 12:01
    fetch("blog", rss({"guid": "new", "title": "Written after the typo was first seen",
                       "link": "https://t.example/new", "date": "Wed, 02 Dec 2026 12:01:30 GMT"},
                      typo, old))
    keys = [digest(["blog", g]) for g in ("new", "typo", "old")]
    db = ("--db", str(database))
    listed = as_json("entries", *db)["entries"]
    assert [e["id"] for e in listed] == keys
    shown = listed[1]
    assert shown["published"] == "2099-01-01T00:00:00Z"  # the data keeps what the feed said
    assert shown["date"] == shown["first_seen_at"]
    assert shown["date"].startswith("2026-12-02T12:01:00")
    assert invoke("entries", *db).output.splitlines()[1].startswith(
        f"{keys[1][:12]}  2026-12-02 12:01  blog  Dated 2099 by a typo")
    assert as_json("entries", *db, "--since", "2027-01-01")["entries"] == []
    with open_store(database) as store:
        assert [e.key for e in store.entries()] == keys


def test_entries_of_one_date_are_listed_in_the_feeds_own_order(
        fetch: Fetch, database: Path | str) -> None:
    # An undated feed's entries are first seen together, and a feed dated by the day
    # gives several entries one date: they were listed by key, a random order.
    undated = [{"guid": f"u-{n}", "title": f"Undated {n}", "link": f"https://u.example/{n}"}
               for n in range(8, 0, -1)]  # newest first, as feeds list them
    fetch("undated", rss(*undated))
    day = "Sun, 01 Nov 2026 00:00:00 GMT"  # before the test clock's first seen
    by_day = [{"guid": f"r-{v}", "title": f"Release {v}", "link": f"https://r.example/{v}",
               "date": day} for v in ("2.9", "2.8", "2.7", "2.6", "2.5")]
    fetch("releases", rss(*by_day))
    # A later fetch: a new release of the same day comes before those seen earlier, and
    # a new undated entry before the older undated ones.
    fetch("releases", rss({**by_day[0], "guid": "r-3.0", "title": "Release 3.0"}, *by_day))
    fetch("undated", rss({"guid": "u-9", "title": "Undated 9", "link": "https://u.example/9"},
                         *undated))
    db = ("--db", str(database))
    expected_undated = [f"Undated {n}" for n in range(9, 0, -1)]
    expected_releases = ["Release 3.0"] + [f"Release {v}" for v in
                                           ("2.9", "2.8", "2.7", "2.6", "2.5")]
    for source, expected in (("undated", expected_undated), ("releases", expected_releases)):
        listed = as_json("entries", *db, "--source", source)["entries"]
        assert [e["title"] for e in listed] == expected, source
    listed = [e["title"] for e in as_json("entries", *db)["entries"]]
    assert listed == expected_undated + expected_releases
    with open_store(database) as store:
        assert [e.title for e in store.entries()] == listed


def test_the_fetch_row_keeps_why_entries_were_skipped(fetch: Fetch, database: Path | str) -> None:
    fetch("blog", rss({"guid": "kept", "title": "Kept", "link": "https://b.example/1"},
                      {"title": "No id, a script link", "link": "javascript:alert(1)"}))
    skipped, reasons = query(database,
                             "SELECT skipped, skip_reasons FROM fetches ORDER BY id DESC")[0]
    assert skipped == 1
    assert json.loads(reasons) == [
        "no id and no usable link (scheme javascript: is not http or https)"]


def _two_keys_with_one_prefix(source: str) -> tuple[str, str, str]:
    """Two remote ids whose keys start with the same 4 hex digits, and that prefix."""
    seen: dict[str, str] = {}
    for n in range(100_000):
        remote = f"item-{n}"
        prefix = digest([source, remote])[:4]
        if prefix in seen:
            return seen[prefix], remote, prefix
        seen[prefix] = remote
    raise AssertionError("no shared prefix")  # about 300 tries are enough


def test_any_unique_prefix_of_four_hex_digits_finds_the_entry(
        fetch: Fetch, database: Path | str) -> None:
    first, second, shared = _two_keys_with_one_prefix("blog")
    fetch("blog", rss({"guid": first, "title": "One", "link": "https://b.example/1"},
                      {"guid": second, "title": "Two", "link": "https://b.example/2"}))
    key = digest(["blog", first])
    db = ("--db", str(database))
    unique = next(n for n in range(4, 65) if key[:n] != digest(["blog", second])[:n])
    for prefix in (key[:unique], key[:unique].upper(), key):
        found = invoke("history", prefix, *db, "--json")
        assert found.exit_code == 0, found.output
        assert json.loads(found.output)["entry"]["id"] == key
    ambiguous = invoke("history", shared, *db)
    assert ambiguous.exit_code == 2
    assert "ambiguous" in ambiguous.output and "Traceback" not in ambiguous.output
    assert key in ambiguous.output and digest(["blog", second]) in ambiguous.output
    for bad, reason in (("8ab", "at least 4 hex digits"), ("xyz1", "hexadecimal")):
        result = invoke("history", bad, *db)
        assert result.exit_code == 2 and reason in result.output
    assert invoke("history", "0000" if shared != "0000" else "ffff", *db).exit_code == 1
    assert "at least 4 hex digits" in invoke("history", "--help").output


def test_store_entries_and_signal_entries_share_one_default(
        aggregate: dict[str, str], database: Path | str) -> None:
    with open_store(database) as store:
        library = [e.key for e in store.entries()]
        library_all = sorted(e.key for e in store.entries(include_duplicates=True))
    cli_default = [e["id"] for e in as_json("entries", "--db", str(database))["entries"]]
    cli_all = sorted(e["id"] for e in as_json("entries", "--db", str(database), "--all")
                     ["entries"])
    assert library == cli_default == [aggregate["meta"], aggregate["publisher"],
                                      aggregate["quiet"]]
    assert library_all == cli_all == sorted(aggregate.values())


def _source_titles(atom_text: str) -> set[str]:
    ns = {"a": "http://www.w3.org/2005/Atom"}
    root = ET.fromstring(atom_text)
    return {t.text or "" for t in root.findall("a:entry/a:source/a:title", ns)}


def test_the_atom_export_titles_sources_by_config_or_feed_never_by_id(
        server: ScenarioServer, tmp_path: Path, parser: ParserPool) -> None:
    db = tmp_path / "signal.db"
    server.put("/blog.xml", rss({"guid": "1", "title": "A post", "link": "https://b.example/1"}))
    config = tmp_path / "signal.toml"
    config.write_text(f'[settings]\ndatabase = "{db}"\nmin_interval = 0\n\n'
                      f'[[sources]]\nid = "blog"\nurl = "{server.url("/blog.xml")}"\n'
                      'title = "Ana\'s blog"\n', encoding="utf-8")
    assert invoke("fetch", "--config", str(config)).exit_code == 0
    with_config = invoke("export", "--config", str(config), "--format", "atom")
    assert with_config.exit_code == 0, with_config.output
    assert _source_titles(with_config.output) == {"Ana's blog"}
    # Without a config the feed's own title, as stored from its last parsed body.
    now = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    with Store(db) as store:
        state = store.source_state("blog", server.url("/blog.xml"))
        store.save_attempt(dataclasses.replace(state, feed_title="The blog's own title"),
                           FetchRecord(source_id="blog", started_at=now, url=state.url,
                                       outcome="fetched"))
        assert _source_titles(export_entries(store, format="atom")) == {
            "The blog's own title"}
    # Neither: no title at all, never the id posing as one.
    with Store(db) as store:
        state = store.source_state("blog", server.url("/blog.xml"))
        store.save_attempt(dataclasses.replace(state, feed_title=""),
                           FetchRecord(source_id="blog", started_at=now, url=state.url,
                                       outcome="fetched"))
        assert _source_titles(export_entries(store, format="atom")) == set()
        assert "<title>blog</title>" not in export_entries(store, format="atom")


def test_sources_with_only_a_database_lists_what_it_holds(
        fetch: Fetch, database: Path | str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A copy of someone's database and no source list: `signal sources --db` still shows
    # each source's state, as `signal entries --db` shows its entries.
    fetch("publisher", rss(PUB))
    fetch("planet", rss({**PUB, "guid": "x-1"}))
    monkeypatch.chdir(tmp_path)  # no signal.toml here
    listed = as_json("sources", "--db", str(database))["sources"]
    assert [(s["id"], s["status"], s["http_status"]) for s in listed] == [
        ("planet", "ok", 200), ("publisher", "ok", 200)]
    assert all(s["url"].endswith(f"/{s['id']}.xml") and not s["expired"] for s in listed)
    missing = tmp_path / "nothing.db"
    result = invoke("sources", "--db", str(missing))
    assert result.exit_code == 2 and "no database at" in result.output
    assert not missing.exists()
    # Its sources can be reset there too (that used to ask for signal.toml).
    reset = invoke("sources", "--db", str(database), "--reset", "planet")
    assert reset.exit_code == 0 and "planet: reset" in reset.output, reset.output
    assert {s["id"]: s["status"] for s in as_json("sources", "--db", str(database))[
        "sources"]}["planet"] == "reset"
    unknown = invoke("sources", "--db", str(database), "--reset", "nope")
    assert unknown.exit_code == 2
    assert "source 'nope' is not in the database" in unknown.output
