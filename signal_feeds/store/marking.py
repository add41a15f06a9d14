"""Marking duplicates, the part every backend shares: which rows a pass clusters and
which markers change. The decisions (what matches, which row is canonical) are the pure
functions of :mod:`signal_feeds.identity.matching`; a backend supplies the lookups and
writes (:class:`MarkingBackend`) and a cache of the rows a pass reads (:class:`RowCache`).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Protocol

from signal_feeds.identity.matching import (
    CHANNELS,
    MATCHERS,
    DedupeRow,
    clusters,
    markers_for,
    sizes_may_match,
)

__all__ = ["MAX_POSTINGS", "TOKEN_SHARE", "CommonKeys", "MarkingBackend", "RowCache",
           "mark_clusters", "released_rows", "shares_tokens"]

#: A match key shared by more other rows than this is too common to tell stories apart
#: (a feed's home page as every item's link, "Weekly update", a boilerplate footer's
#: shingles). Skipping it keeps the cost of marking one entry bounded.
MAX_POSTINGS = 50
#: Share of a row's prefix tokens (as stored in ``entries.text_tokens``) a candidate
#: found by a posted token must have before its text is compared.
TOKEN_SHARE = 0.5


def shares_tokens(mine: Collection[int], theirs: Collection[int]) -> bool:
    """Whether two rows' prefix tokens overlap enough for their texts to be compared:
    :data:`TOKEN_SHARE` of the shorter prefix.

    The same answer whichever row asks. Taking the share of the asking row's own prefix
    let a text with two words more (an aggregator's "Read more": three prefix tokens to
    two, one shared) miss the post it copies while the post found it, so whether the two
    were marked depended on which was fetched first, and `signal dedupe` on their keys.
    """
    if not sizes_may_match(len(mine), len(theirs)):
        return False  # too different in length to be near-identical, whoever asks
    # (Callers asking about many candidates pass their own tokens as a set, made once.)
    own = mine if isinstance(mine, set | frozenset) else set(mine)
    common = len(own.intersection(theirs))
    return common >= max(1, math.ceil(min(len(mine), len(theirs)) * TOKEN_SHARE))


class CommonKeys:
    """Match keys already seen with more than :data:`MAX_POSTINGS` rows, by channel
    (``link``: match URLs, ``title``: normalized titles, ``text``: text tokens).

    Rows are never deleted, so such a key stays too common to look up: remembering it
    saves reading its capped postings for every new entry that carries it (a site's home
    page as every item's link; boilerplate such as "read more" or "appeared first on" in
    every entry of a feed), and writing more token postings. Bounded: forgotten
    wholesale past ``limit`` keys per channel, at worst a lookup is paid again.

    A key is also kept for :meth:`take_found` until the marking pass that found it asks:
    rows it linked while it was rarer must be clustered again.
    """

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self.known: dict[str, set[Any]] = {channel: set() for channel in CHANNELS}
        self._found: dict[str, set[Any]] = {channel: set() for channel in CHANNELS}

    def knows(self, channel: str, key: object) -> bool:
        return key in self.known[channel]

    def forget(self, channel: str, key: object) -> None:
        """``key`` is shared by few enough rows again (rows left it)."""
        self.known[channel].discard(key)

    def add(self, channel: str, key: object) -> None:
        known = self.known[channel]
        if key in known:
            return
        if len(known) >= self.limit:
            known.clear()
        known.add(key)
        self._found[channel].add(key)

    def take_found(self) -> dict[str, set[Any]]:
        """The keys found too common since the last call, by channel (only channels
        with some)."""
        found, self._found = self._found, {channel: set() for channel in CHANNELS}
        return {channel: keys for channel, keys in found.items() if keys}


class RowCache(Protocol):
    """The dedupe view of the rows one pass touches, loaded on first use."""

    cache: dict[str, DedupeRow]

    def load(self, keys: Iterable[str]) -> None: ...

    def get(self, key: str) -> DedupeRow: ...

    def exists(self, key: str) -> bool: ...

    def with_text(self, keys: Sequence[str]) -> list[DedupeRow]:
        """The rows with their shingles filled in."""
        ...


class MarkingBackend(Protocol):
    """What a store does for :func:`mark_clusters`, inside its open transaction."""

    def candidates(self, key: str) -> Mapping[str, list[str]]:
        """Rows sharing a match key with row ``key``, by channel (itself excluded);
        keys found too common go to the pass's :class:`CommonKeys`."""
        ...

    def old_cluster(self, column: str, row: DedupeRow, channel: str) -> list[str]:
        """Members of the cluster the row belonged to before this pass."""
        ...

    def stale_rows(self, channel: str, keys: Collection[Any]) -> list[str]:
        """Rows whose ``channel`` marker was set through one of ``keys`` (keys just
        found too common) while it was shared by fewer rows."""
        ...

    def write_markers(self, column: str, updates: Sequence[tuple[str, str]]) -> None:
        """Set ``column`` to each (marker, key)."""
        ...

    def sharing(self, channel: str, value: str) -> list[str]:
        """Rows whose ``channel`` match key is ``value``, at most ``MAX_POSTINGS + 2``."""
        ...


def released_rows(backend: MarkingBackend, rows: RowCache, keys: Sequence[str],
                  common: CommonKeys) -> dict[str, list[str]]:
    """Rows still sharing a link or title that one of the updated rows ``keys`` left,
    by channel, where few enough rows share it now (``MAX_POSTINGS + 1`` or fewer) for
    it to link them again; such a key is no longer known as too common.

    Rows change their links and titles (a feed that gave its home page as every item's
    link is fixed), so a key can fall back under the cap, and a full recompute links
    the rows that still share it; their clusters are computed again here too.
    """
    found: dict[str, list[str]] = {channel: [] for channel in CHANNELS}
    for key in keys:
        if not rows.exists(key):
            continue
        for channel, value in rows.get(key).left.items():
            sharing = backend.sharing(channel, value)
            if len(sharing) <= MAX_POSTINGS + 1:
                common.forget(channel, value)
                found[channel] += sharing
    return found


def mark_clusters(backend: MarkingBackend, rows: RowCache, keys: Sequence[str], *,
                  created: Collection[str], everything: bool,
                  common: CommonKeys, released: Mapping[str, Sequence[str]] | None = None
                  ) -> tuple[dict[str, int], set[str]]:
    """Cluster the rows ``keys`` (and, unless ``everything``, the old clusters of the
    ones not ``created`` now and the :func:`released_rows`, found here unless given) in
    every channel and write the markers that changed.

    Returns the changed markers per channel and the keys of the rows changed.
    """
    found: dict[str, Mapping[str, list[str]]] = {}
    changed = dict.fromkeys(CHANNELS, 0)
    touched: set[str] = set()
    done: dict[str, set[str]] = {channel: set() for channel in CHANNELS}
    if released is None and not everything:
        released = released_rows(backend, rows, [k for k in keys if k not in created], common)

    def recluster(channel: str, seeds: Sequence[str]) -> None:
        column, match = CHANNELS[channel], MATCHERS[channel]

        def neighbours(key: str) -> list[str]:
            if key not in found:
                found[key] = backend.candidates(key)
            others = found[key][channel]
            if not others:  # most rows share no key with another
                return []
            rows.load(others)
            # Rows of one source never match each other (every matcher says so): drop
            # them before the text channel pays for their shingles.
            source = rows.get(key).source_id
            others = [k for k in others if k in rows.cache and rows.cache[k].source_id != source]
            if not others:
                return []
            if channel == "text":
                row, *compared = rows.with_text([key, *others])
            else:
                row, compared = rows.get(key), [rows.get(k) for k in others]
            return [other.key for other in compared if match(row, other)]

        updates: list[tuple[str, str]] = []
        for group in clusters(seeds, neighbours):
            done[channel].update(group)
            if len(group) == 1 and not rows.get(next(iter(group))).markers.get(channel):
                continue  # alone and unmarked: the common case, nothing to write
            for key, marker in markers_for(rows.get(k) for k in group).items():
                if rows.get(key).markers.get(channel, "") != marker:
                    updates.append((marker, key))
                    touched.add(key)
        if updates:
            backend.write_markers(column, updates)
        changed[channel] += len(updates)

    for channel, column in CHANNELS.items():
        seeds: list[str] = list(keys)
        if not everything:
            # Rows that shared a cluster with a changed row may now fall apart or join
            # another: their whole old clusters are recomputed too. A row created just
            # now was in no cluster, and no marker can name it yet.
            for key in keys:
                if key not in created and rows.exists(key):
                    seeds.extend(backend.old_cluster(column, rows.get(key), channel))
            seeds.extend((released or {}).get(channel, ()))
        seeds = list(dict.fromkeys(seeds))
        rows.load(seeds)
        recluster(channel, [k for k in seeds if k in rows.cache])
    # A key shared by more than MAX_POSTINGS rows links none (a full recompute finds it
    # too common from the start), but while it was rarer it linked rows whose markers
    # still say so: they are clustered again. A full recompute seeded every row.
    while found_now := common.take_found():
        if everything:
            break
        for channel, found_keys in found_now.items():
            stale = [k for k in dict.fromkeys(backend.stale_rows(channel, found_keys))
                     if k not in done[channel]]
            rows.load(stale)
            stale = [k for k in stale if k in rows.cache]
            if stale:
                recluster(channel, stale)
    return changed, touched
