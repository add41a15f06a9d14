"""Until lesson 04 fetches over HTTP, a source is read from its copy in fixtures/."""

from __future__ import annotations

from pathlib import Path

# lessons/NN-slug/signal_lesson/demo.py -> the repository root is three levels up
REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "fixtures"


def local_copy(source_id: str) -> Path:
    """Where the demo copy of a source's feed lives: fixtures/<id>.xml."""
    return FIXTURES / f"{source_id}.xml"


def read_local_copy(source_id: str) -> bytes:
    """The feed as bytes. Decoding is the parser's job, not ours (lesson 02)."""
    return local_copy(source_id).read_bytes()
