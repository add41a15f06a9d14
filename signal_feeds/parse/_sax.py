"""The SAX driver Signal's parser processes give feedparser: expat with text buffering.

Without buffering, expat reports character data in pieces, one per entity reference and
line, so an escaped HTML summary (``&lt;p&gt;...``) reaches feedparser as hundreds of
``characters()`` calls, each a round of Python bookkeeping. Buffered, the same text comes
in a few calls; the concatenation, and so every parsed field, is identical. Used through
``feedparser.api.PREFERRED_XML_PARSERS`` in the worker processes only (installed by
:func:`signal_feeds.parse._speedups.tune_feedparser`).
"""

from __future__ import annotations

from typing import Any
from xml.sax.expatreader import ExpatParser

#: Characters expat collects before reporting them (its default is 8 KiB).
BUFFER_SIZE = 64 * 1024


class BufferedExpatParser(ExpatParser):
    """:class:`ExpatParser` that turns on expat's ``buffer_text`` for each document."""

    def reset(self) -> None:
        super().reset()
        # ExpatParser keeps its pyexpat parser in an attribute of its own; if that ever
        # changes, expat's defaults hold (the same fields, reported in more pieces).
        parser = getattr(self, "_parser", None)
        if parser is not None and hasattr(parser, "buffer_text"):
            parser.buffer_text = True
            parser.buffer_size = BUFFER_SIZE


def create_parser(*args: Any, **kwargs: Any) -> BufferedExpatParser:
    """The entry point ``xml.sax.make_parser`` looks for in a driver module."""
    return BufferedExpatParser(*args, **kwargs)
