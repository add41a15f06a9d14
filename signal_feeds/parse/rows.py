"""The parsed-row shapes, under the name the parse package has always given them; they
live in :mod:`signal_feeds.parsed` (the lowest layer, see there)."""

from __future__ import annotations

from signal_feeds.parsed import NORMALIZER_VERSION, ParsedEntry, ParsedFeed

__all__ = ["NORMALIZER_VERSION", "ParsedEntry", "ParsedFeed"]
