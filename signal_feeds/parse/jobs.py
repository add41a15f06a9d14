"""What a parser process is given and what it returns, and the work itself: parse one
body, identify its entries, and derive what the writer needs (match keys, search text).

:mod:`signal_feeds.parse.processes` runs :func:`parse_job` in its workers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from signal_feeds.errors import ContradictionError, SignalError
from signal_feeds.identity.matching import MatchKeys, match_keys
from signal_feeds.identity.search_text import SearchText, search_texts
from signal_feeds.parse.settings import ParseSettings

__all__ = ["ParseJob", "ParseOutcome", "parse_job"]


@dataclass(frozen=True)
class ParseJob:
    """Everything a worker needs to turn a body into rows."""

    source_id: str
    body: bytes
    url: str
    content_type: str
    #: Built from the source's effective settings by ``ParseSettings.from_settings``
    #: (required: a job that quietly took defaults would normalize differently).
    settings: ParseSettings


@dataclass(frozen=True)
class ParseOutcome:
    """A worker's answer. Exceptions are returned as data: they cross the process
    boundary as plain fields."""

    identified: object | None = None  # identity.Identified (kept loose for pickling)
    ttl_seconds: int | None = None
    warnings: tuple[str, ...] = ()
    entries: int = 0
    error: str = ""
    #: ``"parse"`` or ``"contradiction"`` when ``error`` is set.
    kind: str = ""
    key: str = ""
    remote_id: str = ""
    #: Duplicate-matching keys of each row by entry key, computed here on the parser's
    #: core rather than in the writer (without shingles: the writer hashes a text again
    #: only if the text channel compares it).
    match_keys: Mapping[str, MatchKeys] = field(default_factory=dict)
    #: What full-text search indexes of each row, by entry key: stripping the HTML here
    #: takes it off the writer's thread, which bounds a cold run.
    search_texts: Mapping[str, SearchText] = field(default_factory=dict)
    #: The worker's formatted traceback when parsing failed unexpectedly.
    traceback: str = ""
    #: The feed's own title (what an export names the source by, after the config's).
    feed_title: str = ""
    #: The document stopped before its end (see :attr:`ParsedFeed.incomplete`).
    incomplete: bool = False
    #: Why the worker parsed with stock feedparser ("" when tuned, or when asked for
    #: stock): the parent logs it once.
    stock_reason: str = ""

    @property
    def message(self) -> str:
        """The error as reported, "" on success (a contradiction names its key)."""
        if self.error or self.identified is None:
            return self.error or "parser returned nothing"
        return ""


def parse_job(job: ParseJob) -> ParseOutcome:
    """Parse and identify one body (runs in a worker, or inline)."""
    from signal_feeds.identity.keys import identify
    from signal_feeds.parse.feed import parse_feed

    try:
        feed = parse_feed(job.body, source_id=job.source_id, url=job.url,
                          content_type=job.content_type,
                          require_https_links=job.settings.require_https_links,
                          max_entries=job.settings.max_entries)
        identified = identify(job.source_id, feed.entries)
    except ContradictionError as exc:
        return ParseOutcome(error=exc.message, kind="contradiction", key=exc.key,
                            remote_id=exc.remote_id)
    except SignalError as exc:
        return ParseOutcome(error=exc.message, kind="parse")
    except MemoryError:
        return ParseOutcome(error="parser ran out of memory", kind="parse")
    except RecursionError:
        return ParseOutcome(error="document nested too deeply", kind="parse")
    texts = search_texts(identified.rows)
    keys = {row.key: match_keys(row.url, row.title, row.summary,
                                summary_text=texts[row.key].summary, with_shingles=False)
            for row in identified.rows}
    return ParseOutcome(identified=identified, ttl_seconds=feed.ttl_seconds,
                        warnings=feed.warnings, entries=len(feed.entries), match_keys=keys,
                        search_texts=texts, feed_title=feed.title,
                        incomplete=feed.incomplete)
