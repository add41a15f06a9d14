"""Property-based tests (hypothesis): the URL policy, ``digest`` and ``identify``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from signal_feeds import ContradictionError, ParsedEntry, digest, identify
from signal_feeds.urls import normalize_link

# -- the URL policy -------------------------------------------------------------------------

_SCHEMES = st.sampled_from(["https", "http", "HTTPS", "hTTp", "javascript", "data", "file",
                            "ftp", "urn", "mailto", ""])
_HOSTS = st.one_of(
    st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9-]{0,10}[A-Za-z0-9])?(\.[A-Za-z]{2,5}){0,2}",
                  fullmatch=True),
    st.sampled_from(["127.0.0.1", "[::1]", "[2001:DB8::1]", "xn--bcher-kva.example",
                     "", "exa mple.org", "例え.jp"]),
)
_PART = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


@st.composite
def urls(draw: st.DrawFn) -> str:
    scheme = draw(_SCHEMES)
    userinfo = draw(st.sampled_from(["", "user@", "user:pw@", ":@", "@"]))
    host = draw(_HOSTS)
    port = draw(st.sampled_from(["", ":80", ":443", ":8080", ":0", ":99999", ":x"]))
    path = draw(st.sampled_from(["", "/", "/a/b", "/%7Euser", "/../x"])) + draw(_PART)
    query = draw(st.sampled_from(["", "?", "?a=1&b=2", "?utm_source=x"])) + draw(_PART)
    fragment = draw(st.sampled_from(["", "#", "#top", "#a#b"]))
    sep = draw(st.sampled_from(["://", ":", ":/", ""]))
    return f"{scheme}{sep}{userinfo}{host}{port}{path}{query}{fragment}"


_ANY_URL = st.one_of(urls(), st.text(max_size=40))
_BASES = st.one_of(st.none(), st.sampled_from(["https://example.org/feed/", "http://h.example",
                                               "https://user@h.example/x"]))


def _check_policy(out: str | None, allow_http: bool) -> None:
    if out is None:
        return
    parts = urlsplit(out)
    assert parts.scheme in (("https", "http") if allow_http else ("https",))
    assert "#" not in out and parts.fragment == ""
    assert "@" not in parts.netloc and parts.username is None and parts.password is None
    assert parts.hostname


@settings(max_examples=200, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(url=_ANY_URL, base=_BASES, allow_http=st.booleans())
def test_url_policy_is_idempotent_and_only_yields_plain_web_urls(
        url: str, base: str | None, allow_http: bool) -> None:
    once = normalize_link(url, base=base, allow_http=allow_http)
    _check_policy(once, allow_http)
    if once is not None:
        assert normalize_link(once, allow_http=allow_http) == once
        assert normalize_link(once, base=base, allow_http=allow_http) == once


# -- digest -------------------------------------------------------------------------------

_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**60, 2**60),
              st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20)),
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(st.text(max_size=8), children, max_size=4)),
    max_leaves=20,
)


def _reordered(value: Any) -> Any:
    """The same value with every dict's keys inserted in reverse order."""
    if isinstance(value, dict):
        return {k: _reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(v) for v in value]
    return value


@settings(max_examples=150, deadline=None, database=None)
@given(value=_JSON)
def test_digest_ignores_key_order(value: Any) -> None:
    assert digest(_reordered(value)) == digest(value)
    assert len(digest(value)) == 64


_DIGEST_IN_CHILD = """
import json, sys
from signal_feeds import digest
values = json.loads(sys.stdin.read())
print(json.dumps([digest(v) for v in values]))
"""


@settings(max_examples=2, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(_JSON, min_size=20, max_size=40))
def test_digest_is_stable_across_processes(values: list[Any]) -> None:
    expected = [digest(v) for v in values]
    for seed in ("1", "2"):  # different string hashing in each process
        proc = subprocess.run([sys.executable, "-c", _DIGEST_IN_CHILD],
                              input=json.dumps(values), capture_output=True, text=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}, check=True)
        assert json.loads(proc.stdout) == expected


def test_digest_pinned_value() -> None:
    # Canonical JSON: sorted keys, no spaces, UTF-8, ensure_ascii off.
    import hashlib

    text = '["demo-rss","release-1"]'
    assert digest(["demo-rss", "release-1"]) == hashlib.sha256(text.encode()).hexdigest()
    assert digest({"b": 1, "a": "é"}) == hashlib.sha256('{"a":"é","b":1}'.encode()).hexdigest()


# -- identify -------------------------------------------------------------------------------

_ENTRIES = st.builds(
    ParsedEntry,
    remote_id=st.sampled_from(["", "a", "b", "urn:x"]),
    url=st.sampled_from(["", "https://example.org/1", "https://example.org/2"]),
    title=st.sampled_from(["", "T", "U"]),
    published=st.sampled_from(["", "2026-03-14T09:26:53Z"]),
    updated=st.just(""),
    author=st.sampled_from(["", "ana"]),
)


def _outcome(source_id: str, entries: list[ParsedEntry]) -> Any:
    try:
        result = identify(source_id, entries)
    except ContradictionError as exc:
        return ("contradiction", exc.key)
    return ("rows", sorted(result.rows, key=lambda r: r.key), result.skipped)


@settings(max_examples=200, deadline=None, database=None)
@given(entries=st.lists(_ENTRIES, max_size=8), data=st.data())
def test_identify_collapses_or_rejects_and_never_picks_by_order(
        entries: list[ParsedEntry], data: st.DataObject) -> None:
    outcome = _outcome("src", entries)
    shuffled = data.draw(st.permutations(entries))
    again = _outcome("src", list(shuffled))
    if outcome[0] == "rows":
        _, rows, skipped = outcome
        keys = [r.key for r in rows]
        assert len(keys) == len(set(keys))  # never two rows with one key
        assert skipped == sum(1 for e in entries if not (e.remote_id or e.url))
        assert again == outcome  # same rows whatever the order
        # Each row is exactly what every entry with its key said.
        for row in rows:
            same = {(e.title, e.url, e.published, e.author) for e in entries
                    if digest(["src", e.remote_id or e.url]) == row.key}
            assert same == {(row.title, row.url, row.published, row.author)}
    else:
        assert again[0] == "contradiction"  # rejected whatever the order


@pytest.mark.parametrize("source_id", ["a", "b"])
def test_identify_keys_depend_on_the_source(source_id: str) -> None:
    entry = ParsedEntry(remote_id="same", url="", title="t", published="", updated="")
    (row,) = identify(source_id, [entry]).rows
    assert row.key == digest([source_id, "same"])


# Characters that test the fast paths of word splitting: NFKC compatibility forms (the
# ellipsis and no-break space it replaces up front, fullwidth letters, ligatures, a
# combining mark after one of them), underscores, digits of other scripts, spaces.
_WORDISH = st.text(alphabet=st.sampled_from(
    list("ab Z_9.,;-\t\n") + ["\u2026", "\xa0", "\u0301", "\uff21", "\ufb01", "\u00bd",
                              "\u2160", "\u0663", "\u3000", "\u200b", "\u00e9", "\u1e9b",
                              "\u0323", "\u00df", "\u0130", "\u00ad", "\u2060",
                              "\ufeff"]), max_size=40)


@settings(max_examples=500, deadline=None, database=None)
@given(text=st.one_of(st.text(max_size=60), _WORDISH))
def test_the_fast_paths_of_word_splitting_change_nothing(text: str) -> None:
    import re
    import unicodedata

    from signal_feeds.identity.matching import _words
    from signal_feeds.identity.search_text import WITHOUT_INVISIBLE

    # (Characters shown as nothing inside a word are left out first: a soft hyphen does
    # not split "Bundes\xadverfassungs\xadgericht".)
    slow = re.findall(r"\w+", unicodedata.normalize(
        "NFKC", text.translate(WITHOUT_INVISIBLE)).casefold())
    assert _words(text) == slow
    assert _words(text.encode("ascii", "ignore").decode()) == re.findall(
        r"\w+", text.encode("ascii", "ignore").decode().lower())


_HASH_SETS = st.one_of(
    st.frozensets(st.integers(0, 2**63 - 1), max_size=400),  # shingle hashes: spread evenly
    st.frozensets(st.integers(0, 2**20), max_size=400),  # crowded at the bottom
    st.frozensets(st.integers(2**62, 2**63 - 1), max_size=400),  # none low
)


@settings(max_examples=300, deadline=None, database=None)
@given(items=_HASH_SETS, threshold=st.sampled_from([0.5, 0.8, 0.9, 0.95, 1.0]))
def test_prefix_tokens_are_the_smallest_of_the_set(items: frozenset[int],
                                                   threshold: float) -> None:
    import math

    from signal_feeds.identity.matching import prefix_tokens

    keep = len(items) - math.ceil(threshold * len(items) - 1e-9) + 1 if items else 0
    assert prefix_tokens(items, threshold=threshold) == sorted(items)[:keep]


#: Pieces of HTML as the sanitizer leaves it: "<" and "&" only in tags and references.
_INLINE = ("em", "b", "a", "span")
_MARKUP = st.lists(st.sampled_from(
    list("ab Z9.,/p#x\t\n") + ["&amp;", "&eacute;", "&#10;", "&lt;", "&gt;", "<p>", "</p>",
                                 "<br/>", "<div>", "</em>", "<em>", "<b>", "</b>",
                                 '<a href="/x?a=1&amp;b=2">', "</a>", "<span>",
                                 "\xa0", "\u2026", "\u00a8", "\u3000", "\u00e9"]),
    max_size=40).map("".join)


class _BrowserReading(HTMLParser):
    """The text of sanitized HTML as a browser lays it out, read by the standard
    library's parser: a reference independent of the regular expressions under test."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.parts.append("" if tag in _INLINE else " ")

    def handle_endtag(self, tag: str) -> None:
        self.parts.append("" if tag in _INLINE else " ")

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


@settings(max_examples=400, deadline=None, database=None)
@given(title=_MARKUP, summary=_MARKUP)
def test_shingles_from_the_search_text_are_the_shingles_of_the_html(title: str,
                                                                    summary: str) -> None:
    # Parser processes hash the summary's search text (already stripped for the index)
    # instead of stripping the HTML again: the stored tokens must not change. The words
    # are those a browser shows: block tags and line breaks separate words, inline tags
    # do not, references are decoded.
    import html

    from signal_feeds.identity.matching import _words, shingles
    from signal_feeds.identity.search_text import searchable_text

    shown = "".join(_BrowserReading(summary).parts)
    assert searchable_text(summary) == " ".join(shown.split())
    words = _words(html.unescape(title) + " " + shown)
    assert _words(html.unescape(title) + " " + searchable_text(summary)) == words
    assert shingles(title, summary) == shingles(title, summary,
                                                summary_text=searchable_text(summary))


# -- stored HTML -----------------------------------------------------------------------------

_FRAGMENTS = st.sampled_from([
    "<img ", "src=", "data-src=", "data-lazy-src=", "data-original=", "onerror=", "alt=",
    '"', "'", ">", "<", "/>", "javascript:alert(1)", "data:image/gif;base64,R0l=", "/a.jpg",
    "<noscript>", "</noscript>", "<iframe src=x>", "</iframe>", "<script>", "</script>",
    "<video ", "<audio ", "<source ", "<picture>", "poster=", "autoplay ", " ", "x",
    "<a href=", "<style>", "<p>", "</p>", "&lt;", "&gt;", "&amp;", "=",
])


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, attrs))


@settings(max_examples=400, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(_FRAGMENTS, max_size=30))
def test_what_the_stored_html_helps_with_never_gets_past_the_sanitizer(
        parts: list[str]) -> None:
    # Moving lazy images' addresses and unwrapping fallbacks rewrites markup before nh3
    # reads it: whatever the input, the output has no script, no handler, no autoplay,
    # and every address it keeps is a web address.
    from signal_feeds.parse.fields import as_html
    stored = as_html("".join(parts), {"type": "text/html"}, "https://blog.example/post")
    parser = _Tags()
    parser.feed(stored)
    parser.close()
    for tag, attrs in parser.found:
        assert tag not in {"script", "style", "iframe", "noscript"}
        for name, value in attrs:
            assert not name.startswith("on") and name not in {"autoplay", "style"}
            if name in {"src", "href", "poster"}:
                assert urlsplit(value or "").scheme in {"http", "https"}, stored


# -- OPML export ------------------------------------------------------------------------------

#: What XML 1.0 cannot carry, even as a character reference.
_NOT_XML = "[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]"


@settings(max_examples=200, deadline=None, database=None)
@given(titles=st.lists(st.text(max_size=20), min_size=1, max_size=4))
def test_an_exported_source_list_always_reads_back(titles: list[str]) -> None:
    # Whatever a title holds, the document is XML its own import reads: every feed comes
    # back with its address, id and title (less what XML cannot carry, and its edges'
    # white space, which the import strips).
    import re

    from signal_feeds.config.opml import opml_document, parse_opml

    feeds = [(title, f"https://h.example/{n}", f"s{n}") for n, title in enumerate(titles)]
    back = parse_opml(opml_document(feeds).encode("utf-8", "surrogatepass"))
    assert [(f.title, f.url, f.source_id) for f in back] == [
        (re.sub(_NOT_XML, "", title).strip(), url, sid) for title, url, sid in feeds]


# -- dates, schedule, decisions ------------------------------------------------------------

_DATE_PIECES = st.lists(st.sampled_from([
    "2026", "-", "12", "05", "T", " ", ":", "10", "00", "59", "60", "24", "Z", "+0530",
    "+05:30", "-2359", "CET", "GMT", "UTC+1", "GMT+5:30", "America/New_York", "PST8PDT", "PM",
    "Dec", "Dezember", "Saturday,", ",", ".", "/", "31", "9999", "0001", "1733047200",
    "20261205T100000Z", "Uhr", "IST", "\x00", "é", "٣", "²"]), max_size=12).map("".join)


@settings(max_examples=300, deadline=None, database=None)
@given(text=st.one_of(st.text(max_size=40), _DATE_PIECES))
def test_a_date_is_read_as_utc_or_left_empty_and_never_raises(text: str) -> None:
    import datetime as dt

    from feedparser.datetimes import _parse_date

    from signal_feeds.parse.dates import EARLIEST, entry_date, text_date

    raw = {"published": text, "published_parsed": _parse_date(text)}
    for read in (text_date(text), entry_date(raw, "published")):
        if read:
            assert read >= EARLIEST
            dt.datetime.strptime(read, "%Y-%m-%dT%H:%M:%SZ")  # four-digit year, UTC


@settings(max_examples=300, deadline=None, database=None)
@given(status=st.one_of(st.just("error"), st.integers(100, 599)), errors=st.integers(0, 10**6),
       low=st.floats(0, 366 * 86400), high=st.floats(0, 366 * 86400),
       headers=st.dictionaries(st.sampled_from(["cache-control", "expires", "retry-after",
                                                "date", "age"]),
                               st.sampled_from(["max-age=60", "no-store", "120", "0", "junk",
                                                "Wed, 21 Oct 2015 07:28:00 GMT",
                                                "max-age=99999999999999999999"]), max_size=4),
       ttl=st.one_of(st.none(), st.integers(0, 10**12)), jitter=st.floats(0, 0.999))
def test_the_next_poll_is_never_before_the_minimum_and_backoff_grows_to_its_cap(
        status: Any, errors: int, low: float, high: float, headers: dict[str, str],
        ttl: int | None, jitter: float) -> None:
    import datetime as dt

    from signal_feeds.decide.schedule import (
        DEFAULT_BACKOFF_CAP,
        LONGEST_RETRY_AFTER,
        next_poll,
    )

    now = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    sent = now - dt.timedelta(seconds=3)

    def due(count: int) -> dt.datetime | None:
        return next_poll(now=now, status=status, headers=headers, error_count=count,
                         min_interval=low, max_interval=high, ttl_seconds=ttl,
                         jitter=jitter, sent=sent).next_due_at

    first = due(errors)
    if status == 410:
        assert first is None
        return
    assert first is not None and first >= sent + dt.timedelta(seconds=low)
    ok = status != "error" and 200 <= status < 400
    longest = max(low, high) if ok else max(DEFAULT_BACKOFF_CAP, low)
    floor = now + dt.timedelta(seconds=LONGEST_RETRY_AFTER) if status in (429, 503) else sent
    assert first <= max(floor, sent + dt.timedelta(seconds=longest))
    if not ok:
        later = due(errors + 1)
        assert later is not None and later >= first


@settings(max_examples=300, deadline=None, database=None)
@given(url=_ANY_URL)
def test_every_spelling_of_a_link_is_one_link(url: str) -> None:
    # Stored rows are found again under any spelling a feed switches to: each spelling
    # passes the link policy unchanged and has the link's one form.
    from signal_feeds.urls import link_form, link_spellings

    link = normalize_link(url, allow_http=True)
    if link is None:
        return
    for spelling in link_spellings(link):
        assert normalize_link(spelling, allow_http=True) == spelling
        assert link_form(spelling) == link_form(link)


#: What a failed request leaves as it was: the stored copy's validators and digest, the
#: feed's title and caching headers, where the source moved to, its last success.
_KEPT_ON_FAILURE = ("etag", "last_modified", "body_digest", "body_normalizer_version",
                    "body_entries", "ttl_seconds", "cache_headers", "moved_to", "fetch_url",
                    "feed_title", "last_success_at")


@settings(max_examples=300, deadline=None, database=None)
@given(data=st.data(), status=st.sampled_from([200, 206, 300, 304, 401, 404, 410, 429, 500,
                                               503, 0]),
       low=st.floats(0, 366 * 86400), errors=st.integers(0, 50))
def test_a_failure_keeps_the_stored_state_and_every_outcome_waits_its_minimum(
        data: st.DataObject, status: int, low: float, errors: int) -> None:
    import datetime as dt

    from signal_feeds.decide.decider import Decider, FetchFailure, ParseFacts, ResponseFacts
    from signal_feeds.records import SourceState

    now = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    state = SourceState(
        source_id="s", url="https://a.example/feed", error_count=errors,
        fetch_url=data.draw(st.sampled_from(["", "https://b.example/feed"])),
        etag=data.draw(st.sampled_from(["", '"e1"'])), last_modified="Wed, 21 Oct 2015",
        body_digest=data.draw(st.sampled_from(["", "d1"])), body_entries=3, ttl_seconds=600,
        cache_headers=(("cache-control", "max-age=600"),), feed_title="Blog",
        moved_to=data.draw(st.sampled_from(["", "https://b.example/feed"])),
        last_success_at=now - dt.timedelta(days=2))
    headers = data.draw(st.dictionaries(st.sampled_from(["etag", "retry-after", "location"]),
                                        st.sampled_from(['"e2"', "120", "junk"]), max_size=2))
    response: ResponseFacts | FetchFailure = (
        FetchFailure(url=state.url, message="timeout") if status == 0 else ResponseFacts(
            status=status, url=state.url, headers=headers,
            body_digest=data.draw(st.sampled_from(["", "d1", "d2"]))))
    decider = Decider("s", now=now, started=now - dt.timedelta(seconds=2), min_interval=low,
                      max_interval=86400.0)
    parse = isinstance(response, ResponseFacts) and decider.must_parse(state, response)
    new = decider.after_fetch(state, response, ParseFacts(
        entries=1, error=data.draw(st.sampled_from(["", "not a feed"]))) if parse else None).state
    assert new.last_fetch_at == decider.started
    if new.gone:
        assert new.next_due_at is None
        return
    assert new.next_due_at is not None
    assert new.next_due_at >= decider.started + dt.timedelta(seconds=low)
    if new.error_count:
        assert new.error_count == errors + 1
        assert all(getattr(new, name) == getattr(state, name) for name in _KEPT_ON_FAILURE)
    else:
        assert new.feed_title and new.last_success_at == decider.started
