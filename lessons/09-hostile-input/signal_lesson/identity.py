"""Stable identity: which entry is this (the key), and is it still the same (the fingerprint)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass

from .errors import ContradictionError
from .parse import NORMALIZER_VERSION, Entry


def digest(value: object) -> str:
    """SHA-256 of canonical JSON: the same value gives the same digest everywhere."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def entry_key(source_id: str, remote_id: str, url: str) -> str | None:
    """digest([source_id, remote_id or url]); None when there is nothing to name it by."""
    name = remote_id or url
    return digest([source_id, name]) if name else None


def fingerprint(entry: Entry) -> str:
    """What the entry says now. A change here is an edit; the key stays the same."""
    return digest(
        {
            "title": entry.title,
            "url": entry.url,
            "published": entry.published,
            "updated": entry.updated,
        }
    )


@dataclass(frozen=True)
class Row:
    key: str
    source_id: str
    remote_id: str
    url: str
    title: str
    published: str
    updated: str
    fingerprint: str
    normalizer_version: int


@dataclass(frozen=True)
class Identified:
    """The rows of one response, in feed order, and how many entries had no identity."""

    source_id: str
    rows: tuple[Row, ...]
    skipped: int


def identify(source_id: str, entries: Iterable[Entry]) -> Identified:
    """Give every entry its key; collapse identical repeats, reject contradictions."""
    rows: dict[str, Row] = {}
    skipped = 0
    for entry in entries:
        key = entry_key(source_id, entry.remote_id, entry.url)
        if key is None:
            skipped += 1  # no id and no link: any key we made up would change next time
            continue
        row = Row(
            key=key,
            source_id=source_id,
            remote_id=entry.remote_id,
            url=entry.url,
            title=entry.title,
            published=entry.published,
            updated=entry.updated,
            fingerprint=fingerprint(entry),
            normalizer_version=NORMALIZER_VERSION,
        )
        seen = rows.setdefault(key, row)
        if seen.fingerprint != row.fingerprint:
            raise ContradictionError(source_id, key, entry.remote_id or entry.url)
    return Identified(source_id=source_id, rows=tuple(rows.values()), skipped=skipped)
