"""Signal: aggregate RSS and Atom feeds from a fixed source list into SQLite.

```python
import signal_feeds

config = signal_feeds.load_config("signal.toml")
report = signal_feeds.run_fetch(config)
for source in report.sources:
    print(source.source, source.status, source.created, source.updated)
```

Names are imported on first use, so ``signal fetch`` on a run of 304s never pays for
loading the feed parser.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "config.source_list": ["Config", "Settings", "Source", "load_config", "parse_config"],
    "errors": ["ConfigError", "ContradictionError", "CursorError",
               "DatabaseUnavailableError", "FetchError",
               "ParseError", "QueryError", "ResourceLimitError", "SignalError",
               "StoreError"],
    "identity.keys": ["EntryRow", "Identified", "digest", "entry_key", "identify",
                 "metadata_fingerprint"],
    "config.opml": ["ImportReport"],
    "parse.feed": ["parse_feed"],
    "parsed": ["NORMALIZER_VERSION", "ParsedEntry", "ParsedFeed"],
    "parse.settings": ["ParseSettings"],
    "run.pipeline": ["Progress", "fetch_sources", "parse_files", "run_fetch"],
    "decide.report": ["RunReport", "SourceReport"],
    "records": ["ApplyCounts", "Change", "FetchRecord", "SourceState", "StoredEntry",
                "StoredVersion"],
    "store": ["Store", "open_store"],
    "store.protocol": ["DedupeReport", "DuplicateLink", "FeedStore"],
    "store.change_feed": ["read_changes"],
    "store.leases": ["HostGate", "Lease"],
    "store.reading": ["entry_history", "export_entries", "iter_export", "list_entries",
                      "lookup", "search_entries"],
    "store.views": ["EntryHistory", "EntryView", "LookupResult", "SearchHit"],
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "ApplyCounts",
    "Change",
    "Config",
    "ConfigError",
    "ContradictionError",
    "CursorError",
    "DatabaseUnavailableError",
    "DedupeReport",
    "DuplicateLink",
    "EntryHistory",
    "EntryRow",
    "EntryView",
    "FetchError",
    "FeedStore",
    "FetchRecord",
    "HostGate",
    "Identified",
    "ImportReport",
    "Lease",
    "LookupResult",
    "NORMALIZER_VERSION",
    "ParseError",
    "ParseSettings",
    "ParsedEntry",
    "ParsedFeed",
    "Progress",
    "QueryError",
    "ResourceLimitError",
    "RunReport",
    "SearchHit",
    "Settings",
    "SignalError",
    "Source",
    "SourceReport",
    "SourceState",
    "Store",
    "StoreError",
    "StoredEntry",
    "StoredVersion",
    "__version__",
    "digest",
    "entry_history",
    "entry_key",
    "export_entries",
    "fetch_sources",
    "identify",
    "iter_export",
    "list_entries",
    "load_config",
    "lookup",
    "metadata_fingerprint",
    "open_store",
    "parse_config",
    "parse_feed",
    "parse_files",
    "read_changes",
    "run_fetch",
    "search_entries",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'signal_feeds' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from signal_feeds.config.opml import ImportReport
    from signal_feeds.config.source_list import Config, Settings, Source, load_config, parse_config
    from signal_feeds.decide.report import RunReport, SourceReport
    from signal_feeds.errors import (
        ConfigError,
        ContradictionError,
        CursorError,
        DatabaseUnavailableError,
        FetchError,
        ParseError,
        QueryError,
        ResourceLimitError,
        SignalError,
        StoreError,
    )
    from signal_feeds.identity.keys import (
        EntryRow,
        Identified,
        digest,
        entry_key,
        identify,
        metadata_fingerprint,
    )
    from signal_feeds.parse.feed import parse_feed
    from signal_feeds.parse.settings import ParseSettings
    from signal_feeds.parsed import NORMALIZER_VERSION, ParsedEntry, ParsedFeed
    from signal_feeds.records import (
        ApplyCounts,
        Change,
        FetchRecord,
        SourceState,
        StoredEntry,
        StoredVersion,
    )
    from signal_feeds.run.pipeline import Progress, fetch_sources, parse_files, run_fetch
    from signal_feeds.store import Store, open_store
    from signal_feeds.store.change_feed import read_changes
    from signal_feeds.store.leases import HostGate, Lease
    from signal_feeds.store.protocol import DedupeReport, DuplicateLink, FeedStore
    from signal_feeds.store.reading import (
        entry_history,
        export_entries,
        iter_export,
        list_entries,
        lookup,
        search_entries,
    )
    from signal_feeds.store.views import EntryHistory, EntryView, LookupResult, SearchHit
