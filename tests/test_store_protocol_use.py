"""What Signal really takes from a store is the FeedStore protocol, and nothing else but
the one documented hook (``_bulk``, for ``signal copy``).

A contributor writing a third backend implements the protocol and follows
docs/architecture.md, "Adding a store backend". Type checking keeps the run's own calls
inside the protocol; this test also catches a name taken with ``getattr`` or through a
cast: every store Signal opens is the real backend wrapped in a recorder, and a fetch,
every reading function, the change feed, the commands that write outside a run and a
copy then go through it, on each backend.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import make_config
from scenario_server import ScenarioServer

import signal_feeds.demo.walkthrough
import signal_feeds.run.pipeline
import signal_feeds.run.source_status
import signal_feeds.store
from signal_feeds import (
    FeedStore,
    entry_history,
    export_entries,
    list_entries,
    lookup,
    read_changes,
    run_fetch,
    search_entries,
)
from signal_feeds.cli.commands import cli
from signal_feeds.errors import StoreError
from signal_feeds.run.source_status import reset_source, source_table
from signal_feeds.store.copy import copy_store

ARCHITECTURE = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"
#: Names a backend provides beyond the protocol, each in the architecture guide.
HOOKS = {"_bulk"}


class Recording:
    """A real store that notes the name of every attribute taken from it (``hooks``:
    whether it offers the documented hooks, as a backend may not)."""

    def __init__(self, store: FeedStore, used: set[str], *, hooks: bool = True) -> None:
        self._store, self._used, self._hooks = store, used, hooks

    def __getattr__(self, name: str) -> Any:
        self._used.add(name)
        if name in HOOKS and not self._hooks:
            raise AttributeError(name)
        return getattr(self._store, name)

    # A with-statement looks these up on the type, never through __getattr__.
    def __enter__(self) -> Recording:
        self._used.add("__enter__")
        self._store.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._used.add("__exit__")
        self._store.__exit__(exc_type, exc, tb)


def _public(thing: object) -> set[str]:
    return {name for name in dir(thing) if not name.startswith("_")}


def _record(monkeypatch: pytest.MonkeyPatch, *, hooks: bool = True) -> set[str]:
    """Every store opened from here on is recorded; the names taken go in the set."""
    names: set[str] = set()
    real: Callable[..., FeedStore] = signal_feeds.store.open_store

    def recorded(*args: Any, **kwargs: Any) -> FeedStore:
        store: Any = Recording(real(*args, **kwargs), names, hooks=hooks)
        return store  # type: ignore[no-any-return]

    # Every module that holds the name (the CLI and copy import it when they run).
    for module in (signal_feeds.store, signal_feeds.run.pipeline,
                   signal_feeds.run.source_status, signal_feeds.demo.walkthrough):
        monkeypatch.setattr(module, "open_store", recorded)
    return names


@pytest.fixture
def used(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    return _record(monkeypatch)


def test_signal_takes_only_the_protocol_and_the_documented_hooks_from_a_store(
        server: ScenarioServer, database: Path | str, tmp_path: Path,
        used: set[str]) -> None:
    config = make_config(database, {"demo-rss": server.url("/feeds/demo-rss.xml"),
                                    "demo-atom": server.url("/feeds/demo-atom.xml")})
    assert run_fetch(config).ok
    assert run_fetch(config, force=True).ok  # 304s: save_attempt
    with signal_feeds.store.open_store(database) as store:
        (first, *_) = list_entries(store, limit=5)
        search_entries(store, "notes")
        entry_history(store, first.key[:8])
        lookup(store, first.url)
        export_entries(store, format="atom")
        read_changes(store, after=read_changes(store, limit=1)[0].cursor)
    source_table(config)
    reset_source(config, "demo-rss")
    runner = CliRunner()
    for args in (["dedupe"], ["search", "--rebuild"], ["sources"], ["changes"]):
        result = runner.invoke(cli, [*args, "--db", str(database)])
        assert result.exit_code == 0, (args, result.output)
    copy_store(database, tmp_path / "copy.db")

    protocol = _public(FeedStore) | {"__enter__", "__exit__"}
    assert used - protocol == HOOKS, "a store call outside FeedStore: add it to the " \
        "protocol, or document the hook in docs/architecture.md and in HOOKS"
    guide = ARCHITECTURE.read_text(encoding="utf-8")
    for hook in HOOKS:
        assert re.search(rf"`{hook}\(\)`", guide), hook
    # The run, the reading functions and the commands use most of the protocol: a
    # recorder that saw little would prove little.
    assert len(used & protocol) >= 20, sorted(used)


def test_a_copy_with_a_backend_that_cannot_be_copied_names_the_database(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A backend without _bulk() (a new one, not finished yet) was named by its object's
    # repr: "signal: error: <...MemoryStore object at 0x7f...> cannot be copied".
    source = tmp_path / "signal.db"
    signal_feeds.store.open_store(source).close()
    _record(monkeypatch, hooks=False)
    with pytest.raises(StoreError) as raised:
        copy_store(source, tmp_path / "copy.db")
    assert raised.value.message.startswith(f"{source} cannot take part in a copy: ")
    assert "object at 0x" not in str(raised.value)
