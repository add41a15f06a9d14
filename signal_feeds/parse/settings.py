"""The settings that change what parsing makes of a body, as one small picklable value.

``signal fetch`` and ``signal parse`` both build it with :meth:`ParseSettings.from_settings`
from a source's effective settings, so a dry run normalizes exactly as a real run does.
Kept apart from the parser so that building one never loads feedparser.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from signal_feeds.config.source_list import DEFAULT_MAX_ENTRIES

if TYPE_CHECKING:
    from signal_feeds.config.source_list import Settings

__all__ = ["DEFAULT_MAX_ENTRIES", "ParseSettings", "entries_cut"]


def entries_cut(total: int, kept: int) -> str:
    """The warning for a feed with more entries than ``max_entries`` lets be read; it
    names the setting, which is where a user who wants them all would look."""
    return (f"the feed has {total} entries; only the first {kept} were read "
            "(the max_entries setting)")


@dataclass(frozen=True)
class ParseSettings:
    """What the parser needs from the configuration."""

    #: Refuse plain-http entry links (both http and https are kept by default: a link is
    #: stored, never fetched).
    require_https_links: bool = False
    #: Entries read from one response; the rest are dropped with a warning.
    max_entries: int = DEFAULT_MAX_ENTRIES

    def input_digest(self, body_digest: str) -> str:
        """What a parsed body is remembered by: the body's SHA-256 together with these
        settings, so that a byte-identical body is parsed again after a setting that
        changes the rows has changed ("" for no body)."""
        if not body_digest:
            return ""
        # The text is json.dumps([body_digest, asdict(self)], sort_keys=True, compact);
        # the settings' part is encoded once per settings, not once per response.
        text = f"[{json.dumps(body_digest)},{_settings_json(self)}]"
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    @classmethod
    def from_settings(cls, settings: Settings) -> ParseSettings:
        """The parse settings of a source's effective :class:`Settings`."""
        return cls(require_https_links=settings.require_https_links,
                   max_entries=settings.max_entries)


@functools.lru_cache(maxsize=64)
def _settings_json(settings: ParseSettings) -> str:
    return json.dumps(asdict(settings), sort_keys=True, separators=(",", ":"))
