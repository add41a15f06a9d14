"""A deterministic corpus of RSS 2.0 and Atom feeds with realistic sizes.

Every feed is built from a seeded random generator, so the same (seed, index) always gives
the same bytes. :func:`changed_feed` gives the "publisher edited something" variant of a
feed: a few titles corrected and two new entries on top. A ``short`` corpus has the same
shape with short entries (a one-line title, a summary of about 300 bytes), as many real
feeds have.
"""

from __future__ import annotations

import datetime as dt
import os
import random
from dataclasses import dataclass, replace
from email.utils import format_datetime
from html import escape
from itertools import accumulate
from pathlib import Path

__all__ = [
    "Corpus",
    "Entry",
    "Feed",
    "build_feed",
    "changed_feed",
    "is_changed",
    "render",
    "tiny_feed",
    "write_changed_corpus",
    "write_corpus",
]

#: Titles edited and entries added in a changed feed.
EDITED_TITLES = 3
ADDED_ENTRIES = 2
#: One feed in ``CHANGE_EVERY`` changes.
CHANGE_EVERY = 10
#: Target size range, in bytes of HTML, of a short corpus's summaries (they come out
#: 245–360 bytes, 300 on average: whole sentences stop a little short of the target).
SHORT_SUMMARY = (275, 355)

_BASE_TIME = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)

_VOCABULARY = (
    "release notes update security patch kernel python library async sqlite feed reader "
    "archive network protocol cache header validator server client latency throughput "
    "memory database index transaction journal schema migration benchmark profile thread "
    "process signal parser entity document fragment station weather river mountain city "
    "garden harvest market budget policy review council community volunteer museum theatre "
    "festival concert history science research climate ocean forest energy transport "
    "railway bridge library school student teacher lecture seminar workshop conference "
    "café naïve résumé façade jalapeño smörgåsbord"
)
_COMMON = tuple(_VOCABULARY.split())


def _vocabulary(size: int) -> tuple[str, ...]:
    """The common words above, then made-up words of two to four syllables."""
    rng = random.Random("signal-bench-vocabulary")
    onsets = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "st", "tr", "pl"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ou", "é"]
    words = list(dict.fromkeys(_COMMON))
    seen = set(words)
    while len(words) < size:
        word = "".join(rng.choice(onsets) + rng.choice(vowels)
                       for _ in range(rng.randint(2, 4)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return tuple(words)


#: Words are drawn with Zipf's law (the frequency of the k-th word proportional to 1/k)
#: over a 20,000-word vocabulary, as in natural text: a few words are everywhere, most
#: are rare. (A uniform 100-word vocabulary made every three-word phrase recur in
#: hundreds of entries, which no real corpus does, and which duplicate detection pays
#: for in candidates to compare.)
_WORDS = _vocabulary(20_000)
_CUMULATIVE = tuple(accumulate(1 / (k + 1) for k in range(len(_WORDS))))


def _word(rng: random.Random) -> str:
    return rng.choices(_WORDS, cum_weights=_CUMULATIVE)[0]


@dataclass(frozen=True)
class Entry:
    guid: str
    title: str
    link: str
    summary_html: str
    published: dt.datetime


@dataclass(frozen=True)
class Feed:
    slug: str
    kind: str  # "rss" or "atom"
    title: str
    home: str
    entries: tuple[Entry, ...]

    @property
    def filename(self) -> str:
        return f"{self.slug}.xml"


@dataclass(frozen=True)
class Corpus:
    """``feeds`` feeds of ``entries`` entries each, from ``seed``; ``short`` entries have
    summaries of about 300 bytes instead of 1–2 KB."""

    feeds: int
    entries: int
    seed: int = 20261202
    short: bool = False

    def slugs(self) -> list[str]:
        return [feed_slug(i) for i in range(self.feeds)]

    @property
    def total_entries(self) -> int:
        return self.feeds * self.entries

    @property
    def changed_indices(self) -> list[int]:
        return [i for i in range(self.feeds) if is_changed(i)]


def feed_slug(index: int) -> str:
    return f"feed-{index + 1:04d}"


def is_changed(index: int) -> bool:
    """Whether feed ``index`` is one of the "one in ten" that change."""
    return index % CHANGE_EVERY == 0


def _sentence(rng: random.Random, low: int, high: int) -> str:
    """Words until the text is between ``low`` and ``high`` characters long."""
    target = rng.randint(low, high)
    words: list[str] = []
    length = -1
    while True:
        word = _word(rng)
        if length + 1 + len(word) > target and length >= low:
            break
        words.append(word)
        length += 1 + len(word)
        if length >= target:
            break
    text = " ".join(words)[:high]
    return text[0].upper() + text[1:]


def _summary(rng: random.Random, home: str) -> str:
    """1–2 KB of HTML: paragraphs with links, emphasis and a few entities."""
    target = rng.randint(1000, 2000)
    parts: list[str] = []
    size = 0
    while size < target:
        sentence = escape(_sentence(rng, 60, 160))
        kind = rng.random()
        if kind < 0.3:
            path = "-".join(_word(rng) for _ in range(3))
            para = f'<p>{sentence} <a href="{home}/notes/{escape(path)}">read more</a>.</p>'
        elif kind < 0.55:
            para = f"<p>{sentence} &mdash; <em>{escape(_word(rng))}</em> &amp; co.</p>"
        elif kind < 0.7:
            para = f"<p>&ldquo;{sentence}&rdquo; &hellip; costs &euro;{rng.randint(1, 999)}.</p>"
        else:
            para = f"<p>{sentence}.</p>"
        parts.append(para)
        size += len(para)
    return "\n".join(parts)


def _short_summary(rng: random.Random, home: str) -> str:
    """About 300 bytes of HTML (``SHORT_SUMMARY``): one paragraph of two or three
    sentences, sometimes with a link, emphasis or an entity."""
    target = rng.randint(*SHORT_SUMMARY)
    kind = rng.random()
    if kind < 0.3:
        path = "-".join(_word(rng) for _ in range(3))
        wrap = f'<p>{{}} <a href="{home}/notes/{escape(path)}">read more</a></p>'
    elif kind < 0.5:
        wrap = f"<p>{{}} &mdash; <em>{escape(_word(rng))}</em></p>"
    else:
        wrap = "<p>{}</p>"
    budget = target - len(wrap.format("").encode())
    sentences: list[str] = []
    used = -1
    while budget - used - 1 >= 30:
        room = budget - used - 1
        sentence = escape(_sentence(rng, min(60, room // 2), min(140, room - 1))) + "."
        sentences.append(sentence)
        used += 1 + len(sentence.encode())
    return wrap.format(" ".join(sentences))


def build_feed(corpus: Corpus, index: int) -> Feed:
    """Feed ``index`` of ``corpus`` (even indices RSS 2.0, odd ones Atom), newest first."""
    # The short corpus draws from its own streams: it is not a truncated long one.
    rng = random.Random(f"{corpus.seed}:short:{index}" if corpus.short
                        else f"{corpus.seed}:{index}")
    summary = _short_summary if corpus.short else _summary
    slug = feed_slug(index)
    kind = "rss" if index % 2 == 0 else "atom"
    home = f"https://{slug}.example.org"
    entries = []
    for n in range(corpus.entries):
        number = corpus.entries - n
        path = "-".join(_word(rng) for _ in range(4))
        entries.append(
            Entry(
                guid=f"{slug}-entry-{number:05d}"
                if kind == "rss"
                else f"tag:{slug}.example.org,2026:entry-{number:05d}",
                title=_sentence(rng, 40, 90),
                link=f"{home}/{2026 - n // 400}/{path}-{number}",
                summary_html=summary(rng, home),
                published=_BASE_TIME - dt.timedelta(hours=3 * n, minutes=rng.randint(0, 59)),
            )
        )
    return Feed(slug, kind, f"{_sentence(rng, 15, 40)} ({slug})", home, tuple(entries))


def changed_feed(corpus: Corpus, feed: Feed) -> Feed:
    """``feed`` with ``EDITED_TITLES`` titles corrected and ``ADDED_ENTRIES`` new entries."""
    rng = random.Random(f"{corpus.seed}:{feed.slug}:changed")
    entries = list(feed.entries)
    for pos in range(min(EDITED_TITLES, len(entries))):
        target = 1 + pos * 2 if 1 + pos * 2 < len(entries) else pos
        entries[target] = replace(entries[target], title=entries[target].title + " (corrected)")
    added = []
    for k in range(ADDED_ENTRIES):
        number = corpus.entries + ADDED_ENTRIES - k
        added.append(
            Entry(
                guid=f"{feed.slug}-entry-{number:05d}"
                if feed.kind == "rss"
                else f"tag:{feed.slug}.example.org,2026:entry-{number:05d}",
                title=_sentence(rng, 40, 90),
                link=f"{feed.home}/2026/new-{number}",
                summary_html=_summary(rng, feed.home),
                published=_BASE_TIME + dt.timedelta(hours=ADDED_ENTRIES - k),
            )
        )
    return replace(feed, entries=tuple(added + entries))


def tiny_feed(slug: str, entries: int) -> bytes:
    """A small RSS document (short items, no HTML): for scenarios where the network, not
    parsing, should be what takes the time."""
    items = "".join(
        f"<item><title>{slug} item {n}</title><link>https://{slug}.example.org/{n}</link>"
        f'<guid isPermaLink="false">{slug}-{n}</guid>'
        f"<pubDate>{format_datetime(_BASE_TIME - dt.timedelta(hours=n))}</pubDate>"
        f"<description>Item {n} of {slug}.</description></item>"
        for n in range(entries)
    )
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n<rss version="2.0"><channel>'
        f"<title>{slug}</title><link>https://{slug}.example.org/</link>"
        f"<description>Latency feed {slug}</description>{items}</channel></rss>\n"
    ).encode()


def _iso(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def render(feed: Feed) -> bytes:
    """The feed document as UTF-8 bytes."""
    if feed.kind == "rss":
        return _render_rss(feed).encode("utf-8")
    return _render_atom(feed).encode("utf-8")


def _render_rss(feed: Feed) -> str:
    items = []
    for e in feed.entries:
        items.append(
            "<item>"
            f"<title>{escape(e.title)}</title>"
            f"<link>{escape(e.link)}</link>"
            f'<guid isPermaLink="false">{escape(e.guid)}</guid>'
            f"<pubDate>{format_datetime(e.published)}</pubDate>"
            f"<description>{escape(e.summary_html)}</description>"
            "</item>"
        )
    newest = feed.entries[0].published if feed.entries else _BASE_TIME
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n<rss version="2.0"><channel>'
        f"<title>{escape(feed.title)}</title><link>{feed.home}/</link>"
        f"<description>Benchmark feed {feed.slug}</description>"
        f"<lastBuildDate>{format_datetime(newest)}</lastBuildDate>\n"
        + "\n".join(items)
        + "\n</channel></rss>\n"
    )


def _render_atom(feed: Feed) -> str:
    items = []
    for e in feed.entries:
        items.append(
            "<entry>"
            f"<id>{escape(e.guid)}</id>"
            f'<title type="text">{escape(e.title)}</title>'
            f'<link rel="alternate" href="{escape(e.link)}"/>'
            f"<published>{_iso(e.published)}</published>"
            f"<updated>{_iso(e.published)}</updated>"
            "<author><name>Benchmark Author</name></author>"
            f'<summary type="html">{escape(e.summary_html)}</summary>'
            "</entry>"
        )
    newest = feed.entries[0].published if feed.entries else _BASE_TIME
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<feed xmlns="http://www.w3.org/2005/Atom">'
        f"<title>{escape(feed.title)}</title>"
        f"<id>tag:{feed.slug}.example.org,2026:feed</id>"
        f'<link rel="alternate" href="{feed.home}/"/>'
        f"<updated>{_iso(newest)}</updated>\n" + "\n".join(items) + "\n</feed>\n"
    )


def write_corpus(corpus: Corpus, directory: Path) -> list[Feed]:
    """Write every feed of ``corpus`` into ``directory``; returns the feeds."""
    directory.mkdir(parents=True, exist_ok=True)
    feeds = [build_feed(corpus, i) for i in range(corpus.feeds)]
    for feed in feeds:
        (directory / feed.filename).write_bytes(render(feed))
    return feeds


def write_changed_corpus(corpus: Corpus, base: Path, directory: Path) -> list[str]:
    """``directory`` = ``base`` with one feed in ten changed; returns the changed slugs.

    Unchanged feeds are hard links to the base files (same inode, so the same mtime, size,
    ETag and Last-Modified for a static server); changed ones are new files.
    """
    directory.mkdir(parents=True, exist_ok=True)
    changed = []
    for index in range(corpus.feeds):
        target = directory / f"{feed_slug(index)}.xml"
        target.unlink(missing_ok=True)
        if is_changed(index):
            feed = build_feed(corpus, index)
            target.write_bytes(render(changed_feed(corpus, feed)))
            changed.append(feed.slug)
        else:
            os.link(base / target.name, target)
    return changed
