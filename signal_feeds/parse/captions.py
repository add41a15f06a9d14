"""Media RSS descriptions, kept apart from an entry's own text.

feedparser reads ``<media:description>`` as one more description of the entry: after the
entry's own summary it becomes the entry's *content*, and before it, the summary. So a
Mastodon post's content was the alt text of its picture, a Flickr photo's content its
caption, and YouTube's plain-text video descriptions were read as HTML (Media RSS says
the default type is ``plain``), so ``1 <b> 2`` lost its ``<b>``.

:func:`set_captions_aside` renames those elements in the document before feedparser
reads it, to a name feedparser keeps as it is (``media_signal_caption``, or
``media_signal_html_caption`` for ``type="html"``), whatever prefix the document binds
to the Media RSS namespace. :func:`caption` gives an entry's caption back, used as the
summary of an entry that has neither summary nor content (YouTube's only text).

The renaming works on the markup's bytes: the same words inside a CDATA section would be
renamed too, a cost accepted for a sample of Media RSS quoted in a post.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["caption", "set_captions_aside"]

_MRSS_PREFIX = re.compile(
    rb"""xmlns:([A-Za-z_][\w.-]*)\s*=\s*["']http://search\.yahoo\.com/mrss/?["']""")
_HTML_TYPE = re.compile(rb"""\btype\s*=\s*["']html["']""", re.IGNORECASE)
_PLAIN, _HTML = b"signal_caption", b"signal_html_caption"
#: The keys feedparser gives the renamed elements (it names the Media RSS namespace
#: ``media`` whatever the document's prefix).
_KEYS = {"media_signal_caption": "text/plain", "media_signal_html_caption": "text/html"}


def set_captions_aside(data: bytes) -> bytes:
    """``data`` with every Media RSS ``description`` element renamed (see above).

    One pass over the tags, each found by a bounded pattern: hostile input (thousands of
    start tags, none closed) costs linear time.
    """
    if b"search.yahoo.com/mrss" not in data:
        return data
    for prefix in set(_MRSS_PREFIX.findall(data)):
        tag = re.compile(rb"<(/?)" + re.escape(prefix) + rb":description\b([^<>]{0,1024}?)(/?)>")
        open_names: list[bytes] = []

        def rename(match: re.Match[bytes], prefix: bytes = prefix,
                   open_names: list[bytes] = open_names) -> bytes:
            closing, attrs, empty = match.groups()
            if closing:  # closes the last one opened (they do not nest)
                name = open_names.pop() if open_names else _PLAIN
                return b"</" + prefix + b":" + name + b">"
            name = _HTML if _HTML_TYPE.search(attrs) else _PLAIN
            if not empty:
                open_names.append(name)
            # Without attributes: feedparser keeps an unknown element's attributes in
            # place of its text. The type is in the name.
            return b"<" + prefix + b":" + name + empty + b">"

        data = tag.sub(rename, data)
    return data


def caption(raw: dict[str, Any]) -> tuple[str, dict[str, str] | None]:
    """The entry's Media RSS description and a detail giving its type, or ``("", None)``.
    (The last one in the entry, when it has several.)"""
    for key, kind in _KEYS.items():
        value = dict.get(raw, key)  # past FeedParserDict's aliases, as feed.py reads
        if isinstance(value, str) and value.strip():
            return value.strip(), {"type": kind}
    return "", None
