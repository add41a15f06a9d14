"""The core pipeline end to end: real HTTP on 127.0.0.1, on each store backend (a real
SQLite file, a real PostgreSQL server)."""

from __future__ import annotations

from pathlib import Path

from conftest import FIXTURES, Clock, dump, make_config
from conftest import query as rows_of
from scenario_server import ScenarioServer

from signal_feeds import digest, run_fetch
from signal_feeds.store import open_store


def demo_config(server: ScenarioServer, db: Path | str):  # type: ignore[no-untyped-def]
    return make_config(db, {"demo-rss": server.url("/feeds/demo-rss.xml"),
                            "demo-atom": server.url("/feeds/demo-atom.xml")})


def test_first_fetch_creates_then_304_rewrites_nothing(server: ScenarioServer,
                                                       database: Path | str) -> None:
    config = demo_config(server, database)
    first = run_fetch(config, force=True)
    assert [(r.source, r.status, r.http_status) for r in first.sources] == [
        ("demo-rss", "fetched", 200), ("demo-atom", "fetched", 200)]
    assert first.totals["created"] == 5 and first.totals["updated"] == 0
    entries_before = dump(database)["entries"]

    second = run_fetch(config, force=True)
    assert {r.status for r in second.sources} == {"not_modified"}
    assert {r.http_status for r in second.sources} == {304}
    assert dump(database)["entries"] == entries_before  # last_seen_at included: no rewrite

    # The validators went back byte for byte as the server sent them.
    for path in ("/feeds/demo-rss.xml", "/feeds/demo-atom.xml"):
        first_req, second_req = (r for r in server.requests_for(path))
        with open_store(database) as store:
            state = next(s for s in store.source_states() if s.url.endswith(path))
        assert second_req.header("If-None-Match") == state.etag
        assert second_req.header("If-Modified-Since") == state.last_modified
        assert state.etag.startswith('"') and state.last_modified.endswith("GMT")
        assert first_req.header("If-None-Match") is None


def test_corrected_title_updates_same_key_and_adds_version(server: ScenarioServer,
                                                           database: Path | str) -> None:
    config = demo_config(server, database)
    clock = Clock()
    run_fetch(config, clock=clock, force=True)
    key = digest(["demo-rss", "release-1"])
    with open_store(database) as store:
        before = store.entry(key)
    assert before is not None and before.title == "Заметки о выпуске"

    server.put("/feeds/demo-rss.xml",
               (FIXTURES / "variants" / "demo-rss-corrected.xml").read_bytes())
    clock.advance(60)
    report = run_fetch(config, clock=clock, force=True)
    rss = report.get("demo-rss")
    assert (rss.status, rss.created, rss.updated, rss.unchanged) == ("fetched", 0, 1, 2)
    with open_store(database) as store:
        after = store.entry(key)
        versions = store.versions(key)
    assert after is not None
    assert after.title == "Заметки о выпуске 1.0"
    assert after.key == before.key and after.fingerprint != before.fingerprint
    assert after.first_seen_at == before.first_seen_at
    assert after.last_seen_at > before.last_seen_at
    assert [v.title for v in versions] == ["Заметки о выпуске", "Заметки о выпуске 1.0"]


def _tracked_feed(query: str, title: str = "Tiny search",
                  description: str = "Words") -> bytes:
    return ('<rss version="2.0"><channel><title>Jo</title><link>https://jo.example/</link>'
            f"<item><guid>post-1</guid><title>{title}</title>"
            f"<link>https://jo.example/posts/tiny-search/{query}</link>"
            f"<description>{description}</description></item></channel></rss>").encode()


def test_tracking_parameters_on_a_link_make_no_new_version(server: ScenarioServer,
                                                          database: Path | str) -> None:
    # WordPress plugins add ?utm_source=rss to every link; mailing tools rotate a
    # campaign name. Neither is an edit of the post.
    config = make_config(database, {"jo": server.url("/jo.xml")})
    server.put("/jo.xml", _tracked_feed(""))
    run_fetch(config, force=True)
    key = digest(["jo", "post-1"])
    for query in ("?utm_source=rss&amp;utm_medium=rss", "?utm_campaign=dec&amp;fbclid=x"):
        server.put("/jo.xml", _tracked_feed(query))
        report = run_fetch(config, force=True).get("jo")
        assert (report.created, report.updated, report.unchanged) == (0, 0, 1), query
    with open_store(database) as store:
        assert [v.url for v in store.versions(key)] == ["https://jo.example/posts/tiny-search/"]
    # A real edit still is one, and the link is then stored as the feed gives it.
    server.put("/jo.xml", _tracked_feed("?utm_campaign=dec", title="Tiny search, fixed"))
    assert run_fetch(config, force=True).get("jo").updated == 1
    with open_store(database) as store:
        entry = store.entry(key)
    assert entry is not None
    assert entry.url == "https://jo.example/posts/tiny-search/?utm_campaign=dec"


def test_tracking_parameters_reach_no_in_page_reference(server: ScenarioServer,
                                                         database: Path | str) -> None:
    # A footnote (#fn1) or a page of the post (?page=2) is written relative to the
    # post's page, and was made absolute against the link as the feed gave it: a
    # rotating campaign name then changed the body on every run, and each run stored
    # the post as updated, with a new version, although only the tracking moved.
    body = ('&lt;p&gt;Claim&lt;a href="#fn1"&gt;1&lt;/a&gt; and &lt;a href="?page=2"&gt;'
            'more&lt;/a&gt;&lt;/p&gt;&lt;p id="fn1"&gt;Source&lt;/p&gt;')
    config = make_config(database, {"jo": server.url("/jo.xml")})
    server.put("/jo.xml", _tracked_feed("", description=body))
    run_fetch(config, force=True)
    key = digest(["jo", "post-1"])
    for query in ("?utm_source=rss&amp;utm_campaign=a", "?utm_source=rss&amp;utm_campaign=b"):
        server.put("/jo.xml", _tracked_feed(query, description=body))
        report = run_fetch(config, force=True).get("jo")
        assert (report.created, report.updated, report.unchanged) == (0, 0, 1), query
    with open_store(database) as store:
        entry = store.entry(key)
        assert len(store.versions(key)) == 1
    assert entry is not None and entry.url == "https://jo.example/posts/tiny-search/"
    assert 'href="https://jo.example/posts/tiny-search/#fn1"' in entry.summary
    assert 'href="https://jo.example/posts/tiny-search/?page=2"' in entry.summary


def test_equal_titles_are_two_entries(server: ScenarioServer, database: Path | str) -> None:
    run_fetch(demo_config(server, database), force=True, source_ids=["demo-rss"])
    with open_store(database) as store:
        titled = [e for e in store.entries() if e.title == "Заметки о выпуске"]
    assert sorted(e.remote_id for e in titled) == ["release-1", "release-2"]
    assert len({e.key for e in titled}) == 2


def test_identical_repeats_collapse(server: ScenarioServer, database: Path | str) -> None:
    url = server.url("/feeds/variants/demo-rss-repeat.xml")
    report = run_fetch(make_config(database, {"repeat": url}), force=True)
    assert report.get("repeat").created == 2
    with open_store(database) as store:
        assert sorted(e.remote_id for e in store.entries()) == ["release-1", "release-2"]


def test_contradiction_rejects_whole_response_and_advances_nothing(
        server: ScenarioServer, database: Path | str) -> None:
    path = "/feeds/demo-rss.xml"
    config = make_config(database, {"demo-rss": server.url(path)})
    run_fetch(config, force=True)
    before = dump(database)
    with open_store(database) as store:
        state_before = store.source_state("demo-rss", server.url(path))

    server.put(path, (FIXTURES / "variants" / "demo-rss-contradiction.xml").read_bytes())
    report = run_fetch(config, force=True)
    rep = report.get("demo-rss")
    assert rep.status == "rejected" and not report.ok
    assert "release-1" in rep.error and digest(["demo-rss", "release-1"]) in rep.error
    after = dump(database)
    assert after["entries"] == before["entries"]
    assert after["entry_versions"] == before["entry_versions"]
    with open_store(database) as store:
        state = store.source_state("demo-rss", server.url(path))
    assert (state.etag, state.last_modified, state.body_digest) == (
        state_before.etag, state_before.last_modified, state_before.body_digest)

    # The next request is not answered 304: the body comes again.
    server.clear_log()
    run_fetch(config, force=True)
    (req,) = server.requests_for(path)
    assert req.header("If-None-Match") == state_before.etag
    assert run_fetch(config, force=True).get("demo-rss").status == "rejected"


def test_same_remote_id_in_two_sources_gives_two_rows(server: ScenarioServer,
                                                      database: Path | str) -> None:
    config = make_config(database, {
        "demo-rss": server.url("/feeds/demo-rss.xml"),
        "other": server.url("/feeds/variants/other-source-same-id.xml")})
    run_fetch(config, force=True)
    with open_store(database) as store:
        rows = [e for e in store.entries() if e.remote_id == "release-1"]
    assert sorted(e.source_id for e in rows) == ["demo-rss", "other"]
    assert {e.key for e in rows} == {digest(["demo-rss", "release-1"]),
                                     digest(["other", "release-1"])}


def test_entry_without_id_or_link_is_skipped_and_counted(server: ScenarioServer,
                                                         database: Path | str) -> None:
    url = server.url("/feeds/variants/no-id-no-link.xml")
    report = run_fetch(make_config(database, {"nolink": url}))
    rep = report.get("nolink")
    assert (rep.created, rep.skipped) == (1, 1)
    assert report.totals["skipped"] == 1
    with open_store(database) as store:
        assert store.count("entries") == 1
        assert store.count("fetches") == 1


def test_missing_dates_stay_empty_and_zones_become_utc(server: ScenarioServer,
                                                       database: Path | str) -> None:
    config = make_config(database, {
        "nodates": server.url("/feeds/variants/no-dates.xml"),
        "zones": server.url("/feeds/variants/zones.xml")})
    run_fetch(config, force=True)
    with open_store(database) as store:
        nodates = store.entries(source_id="nodates")
        zones = store.entries(source_id="zones")
    assert nodates and all(e.published == "" and e.updated == "" for e in nodates)
    assert sorted(e.published for e in zones) == [
        "2026-03-01T06:00:00Z", "2026-03-01T06:00:00Z",
        "2026-03-01T12:00:00Z", "2026-03-01T12:00:00Z"]


def test_byte_identical_200_is_not_parsed_and_new_validators_are_stored(
        server: ScenarioServer, database: Path | str) -> None:
    path = "/scenario/rotating-etag"
    config = make_config(database, {"rot": server.url(path)})
    first = run_fetch(config, force=True).get("rot")
    with open_store(database) as store:
        etag1 = store.source_state("rot", server.url(path)).etag
    entries_before = dump(database)["entries"]

    class NoParse:
        workers = 1

        async def parse(self, job: object) -> object:
            raise AssertionError("a byte-identical body must not be parsed")

        def close(self) -> None:
            pass

    second = run_fetch(config, parser=NoParse(), force=True).get("rot")  # type: ignore[arg-type]
    assert (second.status, second.http_status) == ("fetched", 200)
    assert (second.created, second.updated, second.unchanged) == (0, 0, first.created)
    with open_store(database) as store:
        etag2 = store.source_state("rot", server.url(path)).etag
    assert etag2 and etag2 != etag1
    assert dump(database)["entries"] == entries_before


def test_a_byte_identical_body_reports_what_it_skipped_again(
        server: ScenarioServer, database: Path | str) -> None:
    # Not parsed again, the body still holds its skipped entries: the report and the
    # fetch row said "skipped 0" and gave no reason, unlike the run that parsed it.
    server.put("/skips.xml", (
        b'<rss version="2.0"><channel><title>Skips</title>'
        b'<item><guid>a</guid><title>Kept</title></item>'
        b'<item><title>Lost</title><link>javascript:void(0)</link></item>'
        b'<item><title>Lost too</title><link>data:text/html,x</link></item>'
        b'</channel></rss>'), etag=False, last_modified=False)  # each fetch a 200
    config = make_config(database, {"skips": server.url("/skips.xml")})
    first = run_fetch(config, force=True).get("skips")
    second = run_fetch(config, force=True).get("skips")
    assert (first.created, second.unchanged) == (1, 1)
    assert second.skipped == first.skipped == 2
    assert second.skip_reasons == first.skip_reasons and len(first.skip_reasons) == 2
    rows = rows_of(database, "SELECT skipped, skip_reasons FROM fetches ORDER BY id")
    assert [r[0] for r in rows] == [2, 2] and rows[0][1] == rows[1][1] != "[]"


def test_validator_variants(server: ScenarioServer, database: Path | str) -> None:
    paths = {"etag-only": "/scenario/etag-only", "lm-only": "/scenario/last-modified-only",
             "none": "/scenario/no-validators", "rotating": "/scenario/rotating-etag"}
    config = make_config(database, {k: server.url(v) for k, v in paths.items()})
    run_fetch(config, force=True)
    server.clear_log()
    report = run_fetch(config, force=True)
    status = {r.source: r.status for r in report.sources}
    assert status == {"etag-only": "not_modified", "lm-only": "not_modified",
                      "none": "fetched", "rotating": "fetched"}
    assert all(r.created == 0 and r.updated == 0 for r in report.sources)
    req = {k: server.requests_for(v)[0] for k, v in paths.items()}
    assert req["etag-only"].header("If-None-Match") and not req["etag-only"].header(
        "If-Modified-Since")
    assert req["lm-only"].header("If-Modified-Since") and not req["lm-only"].header(
        "If-None-Match")
    assert not req["none"].header("If-None-Match") and not req["none"].header(
        "If-Modified-Since")


def test_a_failing_source_does_not_stop_the_others(server: ScenarioServer,
                                                   database: Path | str) -> None:
    config = make_config(database, {
        "broken": server.url("/feeds/variants/malformed.xml"),
        "missing": server.url("/feeds/nope.xml"),
        "demo-rss": server.url("/feeds/demo-rss.xml")})
    report = run_fetch(config, force=True)
    assert report.get("demo-rss").created == 3
    assert report.get("missing").status == "failed"
    assert "404" in report.get("missing").error
    assert not report.ok


def _feedburner_feed(token: str) -> bytes:
    # FeedBurner's shape: the item links to its tracking redirect, gives the post's own
    # address as origLink, and ends the text with a one-pixel image named by a token.
    return ('<rss version="2.0" xmlns:feedburner="http://rssnamespace.org/feedburner/ext/1.0">'
            "<channel><title>Old blog</title><link>https://old.example/</link><item>"
            "<title>Post A</title><guid isPermaLink=\"false\">tag:old.example,2026:a</guid>"
            f"<link>http://feedproxy.google.com/~r/Old/~3/{token}/a.html</link>"
            "<description>Text of A.&lt;img src=\"https://old.example/a.jpg\" width=\"640\" "
            f"height=\"480\"&gt;&lt;img src=\"http://feeds.feedburner.com/~r/Old/~4/{token}\""
            ' height="1" width="1" alt=""/&gt;</description>'
            "<feedburner:origLink>https://old.example/a.html</feedburner:origLink>"
            "</item></channel></rss>").encode()


def test_a_renamed_web_bug_makes_no_new_version(server: ScenarioServer,
                                                database: Path | str) -> None:
    # FeedBurner names a new tracking image (and redirect) for the same post now and
    # then; each rename was stored as an edit, a new version and a change.
    config = make_config(database, {"old": server.url("/old.xml")})
    server.put("/old.xml", _feedburner_feed("AbCdEf"))
    assert run_fetch(config, force=True).get("old").created == 1
    server.put("/old.xml", _feedburner_feed("XyZ123"))
    report = run_fetch(config, force=True).get("old")
    assert (report.created, report.updated, report.unchanged) == (0, 0, 1)
    key = digest(["old", "tag:old.example,2026:a"])
    with open_store(database) as store:
        entry = store.entry(key)
        assert len(store.versions(key)) == 1
    assert entry is not None and entry.url == "https://old.example/a.html"
    # The picture with a size of its own stays; the pixel, which reports each reading
    # of the stored copy to a counter, is not stored.
    assert entry.summary == ('Text of A.<img src="https://old.example/a.jpg" width="640" '
                             'height="480">')


def _spelled_feed(*links: str, guid: str = "") -> bytes:
    items = "".join(f"<item>{f'<guid>{guid}</guid>' if guid else ''}<title>Été {n}</title>"
                    f"<link>{link}</link></item>" for n, link in enumerate(links))
    return (f'<rss version="2.0"><channel><title>Actu</title><link>https://actu.example/'
            f"</link>{items}</channel></rss>").encode()


def test_a_link_spelled_another_way_is_the_same_entry(server: ScenarioServer,
                                                      database: Path | str) -> None:
    # A feed without guids that wrote /actualités/été one day and
    # /actualit%C3%A9s/%C3%A9t%C3%A9 the next (a CMS upgrade, a CDN rewriting links)
    # stored every entry a second time; so did a host written as IDNA, and /%7Euser.
    config = make_config(database, {"actu": server.url("/actu.xml")})
    first = "https://bücher.example/actualités/été?q=crème&amp;p=~1"
    server.put("/actu.xml", _spelled_feed(first))
    assert run_fetch(config, force=True).get("actu").created == 1
    for link in ("https://bücher.example/actualit%C3%A9s/%C3%A9t%C3%A9?q=cr%C3%A8me&amp;p=~1",
                 "https://xn--bcher-kva.example/actualit%c3%a9s/été?q=crème&amp;p=%7E1",
                 "https://BÜCHER.example/actualités/%C3%A9t%C3%A9?q=crème&amp;p=%7e1"):
        server.put("/actu.xml", _spelled_feed(link))
        report = run_fetch(config, force=True).get("actu")
        assert (report.created, report.updated, report.unchanged) == (0, 0, 1), link
    stored = rows_of(database, "SELECT id, url FROM entries")
    assert stored == [(digest(["actu", "https://bücher.example/actualités/été?q=crème&p=~1"]),
                       "https://bücher.example/actualités/été?q=crème&p=~1")]


def test_links_that_only_look_alike_stay_two_entries(server: ScenarioServer,
                                                     database: Path | str) -> None:
    # An escaped slash is no separator, and %E9 (Latin-1) is not the UTF-8 é: other
    # pages, other entries.
    config = make_config(database, {"actu": server.url("/actu.xml")})
    # faß.example is xn--fa-hia.example (IDNA 2008, as requests send it), not fass.
    server.put("/actu.xml", _spelled_feed("https://a.example/x/a%2Fb", "https://a.example/%E9",
                                          "https://faß.example/"))
    run_fetch(config, force=True)
    server.put("/actu.xml", _spelled_feed("https://a.example/x/a/b", "https://a.example/é",
                                          "https://fass.example/"))
    assert run_fetch(config, force=True).get("actu").created == 3
    # Two spellings of one link in one response are the feed's two items, as given.
    server.put("/actu.xml", _spelled_feed("https://a.example/ç", "https://a.example/%C3%A7"))
    assert run_fetch(config, force=True).get("actu").created == 2
    assert rows_of(database, "SELECT count(*) FROM entries") == [(8,)]


def test_a_respelled_link_makes_no_new_version(server: ScenarioServer,
                                               database: Path | str) -> None:
    # An entry with a guid whose link changed only its spelling was stored as updated,
    # with a new version, although nothing a reader sees had changed.
    config = make_config(database, {"actu": server.url("/actu.xml")})
    server.put("/actu.xml", _spelled_feed("https://a.example/café", guid="g"))
    run_fetch(config, force=True)
    server.put("/actu.xml", _spelled_feed("https://a.example/caf%c3%a9", guid="g"))
    report = run_fetch(config, force=True).get("actu")
    assert (report.created, report.updated, report.unchanged) == (0, 0, 1)
    with open_store(database) as store:
        assert [v.url for v in store.versions(digest(["actu", "g"]))] == [
            "https://a.example/café"]


def test_a_site_moved_to_https_keeps_its_entries_without_guids(
        server: ScenarioServer, database: Path | str) -> None:
    # A feed without guids whose site moved from http to https (its links now https)
    # stored each entry again under the new link: `signal entries` listed every story
    # twice (one source's copies are never marked duplicates) and the change feed
    # announced them all as new. The stored entry keeps its key; its link is updated.
    config = make_config(database, {"actu": server.url("/actu.xml")})
    server.put("/actu.xml", _spelled_feed("http://actu.example/one", "https://actu.example/two"))
    assert run_fetch(config, force=True).get("actu").created == 2
    server.put("/actu.xml", _spelled_feed("https://actu.example/one", "http://actu.example/two"))
    report = run_fetch(config, force=True).get("actu")
    assert (report.created, report.updated, report.unchanged) == (0, 2, 0)
    stored = sorted(rows_of(database, "SELECT id, url FROM entries"))
    assert stored == sorted([(digest(["actu", "http://actu.example/one"]),
                              "https://actu.example/one"),
                             (digest(["actu", "https://actu.example/two"]),
                              "http://actu.example/two")])
    # Both schemes of one link in one response are the feed's two items, as given; a
    # link with a port of its own is not taken for the other scheme's.
    server.put("/actu.xml", _spelled_feed("http://actu.example/three",
                                          "https://actu.example/three",
                                          "https://actu.example:8443/one"))
    assert run_fetch(config, force=True).get("actu").created == 3
