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
    "config": ["Config", "Settings", "Source", "load_config", "parse_config"],
    "errors": ["ConfigError", "ContradictionError", "FetchError", "ParseError",
               "SignalError", "StoreError"],
    "identity": ["EntryRow", "Identified", "digest", "entry_key", "identify",
                 "metadata_fingerprint"],
    "parse": ["parse_feed"],
    "rows": ["NORMALIZER_VERSION", "ParsedEntry", "ParsedFeed"],
    "pipeline": ["parse_files", "run_fetch"],
    "report": ["RunReport", "SourceReport"],
    "store": ["SourceState", "Store", "StoredEntry", "StoredVersion"],
    "store.reading": ["entry_history", "export_entries", "list_entries", "lookup"],
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "Config",
    "ConfigError",
    "ContradictionError",
    "EntryRow",
    "FetchError",
    "Identified",
    "NORMALIZER_VERSION",
    "ParseError",
    "ParsedEntry",
    "ParsedFeed",
    "RunReport",
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
    "identify",
    "list_entries",
    "load_config",
    "lookup",
    "metadata_fingerprint",
    "parse_config",
    "parse_feed",
    "parse_files",
    "run_fetch",
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
    from .config import Config, Settings, Source, load_config, parse_config
    from .errors import (
        ConfigError,
        ContradictionError,
        FetchError,
        ParseError,
        SignalError,
        StoreError,
    )
    from .identity import (
        EntryRow,
        Identified,
        digest,
        entry_key,
        identify,
        metadata_fingerprint,
    )
    from .parse import parse_feed
    from .pipeline import parse_files, run_fetch
    from .report import RunReport, SourceReport
    from .rows import NORMALIZER_VERSION, ParsedEntry, ParsedFeed
    from .store import SourceState, Store, StoredEntry, StoredVersion
    from .store.reading import entry_history, export_entries, list_entries, lookup
