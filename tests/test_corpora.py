"""The worker-only feedparser tuning changes no row: every document of the public feed
corpora, parsed by tuned and by stock parser processes, gives identical outcomes (rows
with keys, fingerprints and every field; feed ttl; warnings; errors).

The corpora are data beside the project, never copied into it: ``../shared/corpora``
from the repository, or the directory in ``SIGNAL_CORPORA``. Absent, the test is skipped
with the reason (in CI it must be there: ``CI`` set makes a missing corpus a failure).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from signal_feeds.parse.processes import ParseJob, ParseOutcome, ParserPool
from signal_feeds.parse.settings import ParseSettings

REPO = Path(__file__).resolve().parent.parent

def _corpora() -> Path:
    if os.environ.get("SIGNAL_CORPORA"):
        return Path(os.environ["SIGNAL_CORPORA"])
    # ``../shared/corpora`` beside the repository (a git worktree sits a level deeper).
    for parent in REPO.parents:
        if (parent / "shared" / "corpora").is_dir():
            return parent / "shared" / "corpora"
    return REPO.parent / "shared" / "corpora"


CORPORA = _corpora()
NAMES = ("feedparser-tests", "feedvalidator-testcases")


def _documents() -> list[Path]:
    found = [path for name in NAMES if (CORPORA / name).is_dir()
             for path in sorted((CORPORA / name).rglob("*"))
             if path.is_file() and path.suffix in (".xml", ".json", ".opml")]
    if not found:
        reason = f"no feed corpora under {CORPORA} (set SIGNAL_CORPORA)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        print(reason)
        pytest.skip(reason)
    return found


def _parse_all(pool: ParserPool, paths: list[Path]) -> list[ParseOutcome]:
    async def run() -> list[ParseOutcome]:
        jobs = [ParseJob(source_id="corpus", body=path.read_bytes(), url="https://example.org/",
                         content_type="", settings=ParseSettings()) for path in paths]
        return list(await asyncio.gather(*(pool.parse(job) for job in jobs)))

    try:
        return asyncio.run(run())
    finally:
        pool.close()


def _comparable(outcome: ParseOutcome) -> tuple[object, ...]:
    return (outcome.identified, outcome.ttl_seconds, outcome.warnings, outcome.entries,
            outcome.message, dict(outcome.match_keys))


def test_tuned_and_stock_workers_give_identical_rows_on_the_corpora() -> None:
    paths = _documents()
    t0 = time.monotonic()
    tuned = _parse_all(ParserPool(), paths)
    t1 = time.monotonic()
    stock = _parse_all(ParserPool(tuned=False), paths)
    t2 = time.monotonic()
    print(f"{len(paths)} documents: tuned {t1 - t0:.1f} s, stock {t2 - t1:.1f} s")
    different = [str(path.relative_to(CORPORA)) for path, a, b in zip(paths, tuned, stock,
                                                                      strict=True)
                 if _comparable(a) != _comparable(b)]
    assert different == []
    # The tuned side was tuned (a feedparser whose internals differ falls back to stock
    # in every worker, and the comparison would then be stock against stock).
    assert {o.stock_reason for o in tuned} == {""}
    # The comparison saw real rows, not only errors.
    assert sum(o.entries for o in tuned) > 1000
    assert sum(1 for o in tuned if o.message == "") > len(paths) // 2


def _made_lenient(body: bytes) -> bytes | None:
    """``body`` with one entity XML does not know before the root's end tag: expat
    refuses it, so feedparser reads the whole document with its lenient parser."""
    end = max(body.rfind(b"</rss>"), body.rfind(b"</feed>"), body.rfind(b"</rdf:RDF>"))
    return body[:end] + b"<x>&bogus;</x>" + body[end:] if end > 0 else None


def test_a_stray_character_changes_no_entry_of_the_corpora() -> None:
    # One bad character anywhere sends a feed to feedparser's lenient parser, which
    # left character references in ids and names: every entry whose guid held an "&"
    # got a new key, and so a second copy, whenever a feed went bad for a day.
    from signal_feeds import ParseError, parse_feed

    compared, different = 0, []
    for path in _documents():
        body = path.read_bytes()
        broken = _made_lenient(body) if path.suffix == ".xml" else None
        if broken is None:
            continue
        try:
            strict = parse_feed(body, url="https://example.org/f")
            lenient = parse_feed(broken, url="https://example.org/f")
        except ParseError:
            continue
        if any("leniently" in w for w in strict.warnings) or not any(
                "leniently" in w for w in lenient.warnings):
            continue  # not well-formed already, or the stray character was not reached
        compared += 1
        if (strict.entries, strict.title) != (lenient.entries, lenient.title):
            different.append(str(path.relative_to(CORPORA)))
    assert different == []
    assert compared > 1000
