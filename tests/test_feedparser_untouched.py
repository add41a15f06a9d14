"""feedparser stays as it ships in the process that imports Signal; the tuning lives in
the parser processes only, and falls back to stock feedparser (with a log line) when
feedparser's internals are not what it expects."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_cli import write_config

from signal_feeds.demo.teaching_server import TeachingServer
from signal_feeds.parse import _speedups

# A host program, in a fresh interpreter, with no `if __name__ == "__main__"` guard: it
# notes feedparser's state before importing Signal, uses Signal three ways, then
# compares, and parses a long author with its own feedparser.parse.
HOST = textwrap.dedent("""
    import json, sys
    import feedparser, feedparser.api, feedparser.mixin
    from feedparser.util import FeedParserDict

    def state():
        return {"get": FeedParserDict.get, "getitem": FeedParserDict.__getitem__,
                "contains": FeedParserDict.__contains__, "setitem": FeedParserDict.__setitem__,
                "setdefault": FeedParserDict.setdefault, "urljoin": feedparser.mixin._urljoin,
                "parsers": list(feedparser.api.PREFERRED_XML_PARSERS),
                "parsers_type": type(feedparser.api.PREFERRED_XML_PARSERS),
                "copy": feedparser.mixin.copy, "cp1252": dict(feedparser.mixin._cp1252),
                "sync_author": feedparser.mixin._FeedParserMixin._sync_author_detail}

    AUTHOR = "x" * 2999 + "@"
    FEED = ('<rss version="2.0"><channel><title>t</title><item><guid>g</guid>'
            f'<author>{AUTHOR}</author></item></channel></rss>').encode()
    before = state()
    author_before = feedparser.parse(FEED)["entries"][0]["author"]

    import signal_feeds
    from pathlib import Path
    signal_feeds.parse_feed(FEED)
    feed_file = Path(sys.argv[2]) / "feed.xml"
    feed_file.write_bytes(FEED)
    parsed = list(signal_feeds.parse_files([feed_file]))
    report = signal_feeds.run_fetch(signal_feeds.load_config(sys.argv[1]), force=True)

    after = state()
    print(json.dumps({
        "same": {key: after[key] == before[key] for key in before},
        "author": [len(author_before), len(feedparser.parse(FEED)["entries"][0]["author"])],
        "parsed_ok": parsed[0]["ok"],
        "run": [s.status for s in report.sources],
    }))
""")


def test_using_signal_leaves_feedparser_as_it_ships(tmp_path: Path) -> None:
    script = tmp_path / "host.py"
    script.write_text(HOST, encoding="utf-8")
    with TeachingServer() as server:
        config = write_config(tmp_path, {"demo-rss": server.url("/feeds/demo-rss.xml")})
        proc = subprocess.run([sys.executable, str(script), str(config), str(tmp_path)],
                              capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["same"] == {key: True for key in result["same"]}, result
    assert result["author"] == [3000, 3000]
    assert result["parsed_ok"] is True
    assert result["run"] == ["fetched"]


def test_tuning_falls_back_to_stock_feedparser_when_an_internal_changed(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import feedparser
    import feedparser.api
    import feedparser.mixin
    from feedparser.util import FeedParserDict

    from signal_feeds.parse.feed import parse_feed

    body = (b'<rss version="2.0"><channel><title>t</title><item><guid>g</guid>'
            b"<title>caf\xc3\xa9 &#150;</title></item></channel></rss>")
    stock = parse_feed(body)
    monkeypatch.setattr(feedparser.api, "PREFERRED_XML_PARSERS",
                        tuple(feedparser.api.PREFERRED_XML_PARSERS))
    monkeypatch.setattr(_speedups, "_installed", False)
    get, copy_module = FeedParserDict.get, feedparser.mixin.copy
    getitem, urljoin = FeedParserDict.__getitem__, feedparser.mixin._urljoin
    table = feedparser.mixin._cp1252
    assert "PREFERRED_XML_PARSERS is a list" in _speedups.why_not_tuned()
    with caplog.at_level(logging.WARNING, logger="signal_feeds.parse"):
        assert _speedups.tune_feedparser() is False
    version = feedparser.__version__
    assert [r.getMessage() for r in caplog.records] == [
        f"parsing with stock feedparser: feedparser {version}'s internals differ: not "
        "feedparser.api.PREFERRED_XML_PARSERS is a list"]
    # Nothing was changed, and parsing works as stock.
    assert FeedParserDict.get is get and feedparser.mixin.copy is copy_module
    assert FeedParserDict.__getitem__ is getitem and feedparser.mixin._urljoin is urljoin
    assert feedparser.mixin._cp1252 is table
    assert parse_feed(body) == stock


def test_an_unknown_feedparser_version_is_not_tuned(monkeypatch: pytest.MonkeyPatch) -> None:
    import feedparser

    monkeypatch.setattr(feedparser, "__version__", "7.0.0")
    assert _speedups.why_not_tuned() == (
        "feedparser 7.0.0 is not a version these changes were checked against")
