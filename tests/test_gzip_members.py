"""A gzip body of several members (RFC 1952 2.2: ``gzip -d`` returns them all), over
real HTTP on 127.0.0.1; what follows the last member when it begins no other."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from conftest import FIXTURES, make_config
from scenario_server import ScenarioServer, ScriptedResponse

from signal_feeds import run_fetch
from signal_feeds.errors import FetchError
from signal_feeds.http.decoding import CappedDecoder

FEED = (FIXTURES / "demo-rss.xml").read_bytes()
HALF = len(FEED) // 2
#: The feed in two members, as `cat a.gz b.gz` or a server compressing a stream in
#: pieces writes it; the first ends in the middle of the document.
MEMBERS = gzip.compress(FEED[:HALF]) + gzip.compress(FEED[HALF:])


def _fetch(server: ScenarioServer, db: Path, body: bytes, encoding: str = "gzip"):  # type: ignore[no-untyped-def]
    headers = (("Content-Type", "application/rss+xml"),)
    if encoding:
        headers += (("Content-Encoding", encoding),)
    server.script("/feed.xml", [ScriptedResponse(200, headers, body)])
    return run_fetch(make_config(db, {"gz": server.url("/feed.xml")}), force=True).get("gz")


@pytest.mark.parametrize(("encoding", "body"), [
    ("gzip", MEMBERS),
    ("gzip, gzip", gzip.compress(MEMBERS)),  # several members inside another coding
    ("", MEMBERS),  # an .xml.gz served as the file itself
])
def test_every_member_of_a_gzip_body_is_read(server: ScenarioServer, db_path: Path,
                                             encoding: str, body: bytes) -> None:
    # Only the first member was read: the document stopped in its middle, and only the
    # entries before the cut were stored.
    rep = _fetch(server, db_path, body, encoding)
    assert (rep.status, rep.created, rep.warnings) == ("fetched", 3, ()), rep


@pytest.mark.parametrize("trailing", [b"\x00" * 512, b"<html>junk</html>\n", b"\n"])
def test_bytes_after_the_last_member_are_left_out_with_a_warning(
        server: ScenarioServer, db_path: Path, trailing: bytes) -> None:
    rep = _fetch(server, db_path, MEMBERS + trailing)
    assert (rep.status, rep.created) == ("fetched", 3), rep
    assert rep.warnings == (f"{len(trailing)} bytes after the end of the compressed body "
                            "are not compressed data: left out",)


def test_the_members_together_are_under_the_cap() -> None:
    decoder = CappedDecoder("gzip", 10_000)
    with pytest.raises(FetchError) as caught:
        decoder.feed(gzip.compress(b"<" * 6_000) * 2)  # each member alone fits
    assert caught.value.reason == "too_large"


def test_members_are_read_however_the_body_is_cut() -> None:
    for size in (1, 7, 4096):
        decoder = CappedDecoder("gzip", 10_000_000)
        for i in range(0, len(MEMBERS), size):
            decoder.feed(MEMBERS[i:i + size])
        assert (decoder.finish(), decoder.trailing) == (FEED, 0)
