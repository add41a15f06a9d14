"""Answers to the exercises at the end of README.md."""

from __future__ import annotations

import asyncio
from contextlib import ExitStack
from pathlib import Path

from signal_lesson.cli import main
from signal_lesson.config import Config, Source
from signal_lesson.runner import Concurrency, run_async
from signal_lesson.server import InFlight, TeachingServer
from signal_lesson.store import Store
from test_runner import INTERFACE


# Exercise 1: one host, so the per-host limit decides: 2, however large the total.
def test_exercise_1_one_host(capsys) -> None:
    assert main(["crowd", "--hosts", "1", "--concurrency", "8", "--per-host", "2",
                 "--delay", "0.3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "4 sources on 1 host; every answer waits 0.3 s"
    assert "peak in flight at the busiest host: 2" in lines
    assert "peak in flight at all hosts together: 2" in lines


# Exercise 2: the eight names the recorder sees (tests/test_runner.py checks them live).
def test_exercise_2_a_store_for_somewhere_else() -> None:
    assert INTERFACE == {"add_source", "clock", "source_state", "validators",
                         "save_schedule", "not_modified", "apply", "failed"}


# Exercise 3: host slot first, so the lone source on host B runs alongside host A's first
# and is answered with it. Global first, A's second task would sit on the other global
# slot waiting for host A, and B would wait for a global slot until host A's queue had
# nearly drained: answered fourth or last. The peak in all is 2 either way (B overlaps
# A's last request instead of its first); when B is answered tells the orders apart.
def test_exercise_3_host_first(tmp_path: Path) -> None:
    everywhere = InFlight()
    answered: list[str] = []
    with ExitStack() as stack:
        a, b = (stack.enter_context(TeachingServer(delay=0.3, shared=everywhere))
                for _ in range(2))
        for name, server in (("a", a), ("b", b)):
            record = server.record
            server.record = (lambda entry, name=name, record=record:  # type: ignore[method-assign]
                             (answered.append(name), record(entry))[1])
        sources = tuple(Source(f"a{n}", a.url("/feeds/demo-rss.xml")) for n in range(4))
        config = Config("t", (*sources, Source("b", b.url("/feeds/demo-atom.xml"))))
        store = stack.enter_context(Store(tmp_path / "x.db"))
        asyncio.run(run_async(config, store, concurrency=Concurrency(total=2, per_host=1)))
    assert (a.in_flight.peak, b.in_flight.peak, everywhere.peak) == (1, 1, 2)
    assert sorted(answered) == ["a", "a", "a", "a", "b"]
    assert answered.index("b") <= 1, answered  # with A's first answer, not after three
