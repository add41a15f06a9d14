"""Hostile documents, and what feedparser makes of them with and without defuse.

feedparser always runs in a child process with a time limit, so a document that would
take minutes (or gigabytes) costs this process nothing but the wait. Sizes are kept small
enough that even the undefended runs fit comfortably in memory.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

#: The child: parse stdin, report the characters of entry text and the first title.
CHILD = """\
import io, json, sys, feedparser
parsed = feedparser.parse(io.BytesIO(sys.stdin.buffer.read()))
entries = parsed.entries
size = sum(len(e.get("title", "")) + len(e.get("author", "")) for e in entries)
print(json.dumps({"chars": size, "title": entries[0].get("title", "") if entries else ""}))
"""
TIME_LIMIT = 5.0


@dataclass(frozen=True)
class Measured:
    chars: int  # characters of entry text (titles and authors) feedparser produced
    title: str  # the first entry's title


def amplifier(size: int, references: int) -> bytes:
    """One plain entity of ``size`` characters, referenced ``references`` times."""
    return (
        '<?xml version="1.0"?>\n<!DOCTYPE rss [\n'
        f'<!ENTITY a "{"a" * size}">\n]>\n'
        '<rss version="2.0"><channel><title>amplifier</title>'
        f'<item><guid>amplifier-1</guid><title>{"&a;" * references}</title></item>'
        "</channel></rss>\n"
    ).encode()


def long_author(length: int) -> bytes:
    """An item whose author is ``length`` letters and no e-mail address."""
    return (
        '<?xml version="1.0"?>\n<rss version="2.0"><channel><title>long author</title>'
        f'<item><guid>author-1</guid><title>ok</title><author>{"a" * length}</author>'
        "</item></channel></rss>\n"
    ).encode()


def measure(data: bytes, time_limit: float = TIME_LIMIT) -> Measured | None:
    """Parse ``data`` with feedparser alone in a child; None if it ran out of time."""
    try:
        done = subprocess.run([sys.executable, "-c", CHILD], input=data, capture_output=True,
                              timeout=time_limit, check=True)
    except subprocess.TimeoutExpired:  # the child is killed before this returns
        return None
    return Measured(**json.loads(done.stdout))
