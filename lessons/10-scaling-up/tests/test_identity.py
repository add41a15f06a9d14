from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from signal_lesson.errors import ContradictionError, SignalError
from signal_lesson.identity import Identified, digest, entry_key, fingerprint, identify
from signal_lesson.parse import NORMALIZER_VERSION, Entry, parse_feed

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
RELEASE_1 = "501d09a13183dc575b98493046956d3d78ed35b2ff66223b44d177a25296a630"


def rows_of(name: str, source_id: str = "demo-rss") -> Identified:
    return identify(source_id, parse_feed((FIXTURES / name).read_bytes()))


def test_digest_is_sha256_of_canonical_json() -> None:
    value = {"b": "Заметки", "a": [1, "x"]}
    canonical = '{"a":[1,"x"],"b":"Заметки"}'
    assert digest(value) == hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    assert digest(value) == digest(json.loads(json.dumps(value)))


def test_known_digests() -> None:
    # The same values the lesson text shows; any change here changes every stored key.
    assert digest(["demo-rss", "release-1"]) == RELEASE_1
    assert digest(["a-b", "c"]) == (
        "a9504b44f8b6649d0d41a006af6f902532eb78b43e4a673efbc580621cb62e96")
    assert digest(["a", "b-c"]) == (
        "a00226e4a3587753b5b5d030d9d9f0dc5ebef2ad454893e369f44898fe59069f")


def test_naive_joining_collides_and_the_array_does_not() -> None:
    assert "-".join(["a-b", "c"]) == "-".join(["a", "b-c"])
    assert digest(["a-b", "c"]) != digest(["a", "b-c"])


def test_key_prefers_remote_id_then_url() -> None:
    assert entry_key("s", "id-1", "https://example.org/1") == digest(["s", "id-1"])
    assert entry_key("s", "", "https://example.org/1") == digest(["s", "https://example.org/1"])
    assert entry_key("s", "", "") is None


def test_equal_titles_are_two_entries() -> None:
    result = rows_of("demo-rss.xml")
    first, second, _ = result.rows
    assert first.title == second.title
    assert first.key != second.key
    assert first.key == RELEASE_1
    assert result.skipped == 0


def test_fingerprint_is_the_four_metadata_fields() -> None:
    entry = Entry("r", "https://example.org/r", "T", "2026-01-01T00:00:00Z", "")
    assert fingerprint(entry) == digest(
        {"title": "T", "url": "https://example.org/r",
         "published": "2026-01-01T00:00:00Z", "updated": ""})
    # remote_id is identity, not content: it is not in the fingerprint
    assert fingerprint(entry) == fingerprint(Entry("other", *list(vars(entry).values())[1:]))


def test_corrected_title_changes_fingerprint_not_key() -> None:
    before = rows_of("demo-rss.xml").rows
    after = rows_of("variants/demo-rss-corrected.xml").rows
    assert [r.key for r in before] == [r.key for r in after]
    assert before[0].fingerprint != after[0].fingerprint
    assert before[1:] == after[1:]


def test_identical_repeats_collapse() -> None:
    result = rows_of("variants/demo-rss-repeat.xml")
    assert [r.remote_id for r in result.rows] == ["release-1", "release-2"]


def test_contradiction_rejects_the_whole_response() -> None:
    with pytest.raises(ContradictionError) as caught:
        rows_of("variants/demo-rss-contradiction.xml")
    error = caught.value
    assert (error.source_id, error.key, error.remote_id) == ("demo-rss", RELEASE_1, "release-1")
    assert "demo-rss" in str(error) and RELEASE_1 in str(error) and "release-1" in str(error)
    assert isinstance(error, SignalError)


def test_no_id_no_link_is_skipped_and_counted() -> None:
    result = rows_of("variants/no-id-no-link.xml")
    assert [r.remote_id for r in result.rows] == ["schedule-2026"]
    assert result.skipped == 1


def test_url_is_the_fallback_key() -> None:
    entries = [Entry("", "https://example.org/a", "A", "", "")]
    (row,) = identify("s", entries).rows
    assert row.key == digest(["s", "https://example.org/a"])


def test_contradiction_between_url_keyed_entries_names_the_url() -> None:
    entries = [Entry("", "https://example.org/a", "A", "", ""),
               Entry("", "https://example.org/a", "B", "", "")]
    with pytest.raises(ContradictionError, match="remote id 'https://example.org/a'"):
        identify("s", entries)


def test_source_id_separates_publishers() -> None:
    ours = rows_of("demo-rss.xml").rows[0]
    theirs = rows_of("variants/other-source-same-id.xml", "harbour-tools").rows[0]
    assert ours.remote_id == theirs.remote_id == "release-1"
    assert ours.key != theirs.key


def test_rows_carry_the_normalizer_version() -> None:
    assert {r.normalizer_version for r in rows_of("demo-atom.xml").rows} == {NORMALIZER_VERSION}


def test_keys_do_not_depend_on_the_clock_or_the_order() -> None:
    rows = rows_of("demo-rss.xml").rows
    entries = parse_feed((FIXTURES / "demo-rss.xml").read_bytes())
    reversed_rows = identify("demo-rss", reversed(entries)).rows
    assert sorted(rows, key=lambda r: r.key) == sorted(reversed_rows, key=lambda r: r.key)
