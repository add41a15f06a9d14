"""HTML as stored: what the sanitizer (nh3) is given, and the markup it needs help with.

nh3 removes what is unsafe; the help here is about what a reader of the stored copy
should see. Values without any of the markup below go to nh3 as they came.
"""

from __future__ import annotations

import re
from typing import Any

import nh3

__all__ = ["sanitize"]


# The sanitizer parses HTML as a browser with scripting on does: the content of these
# elements is text to it, so their markup was stored as visible, escaped text
# (``&lt;img src="..."&gt;``, WordPress's lazy-loading fallback). Signal's HTML never runs
# a script and keeps no embed or frame, so their content is what a reader of it should
# see: the tags are taken out and the content read as HTML. (An ``<iframe ... />``
# written as XML would otherwise turn the rest of an article into text, or into nothing.)
# The sanitizer still sees all of it.
_FALLBACK_TAG = re.compile(r"</?(?:noscript|noembed|noframes|iframe)\b[^>]*>", re.IGNORECASE)
# A video or a sound in a post (WordPress's video and audio blocks) is kept, playable:
# the sanitizer checks and absolutizes ``src`` and ``poster`` as it does an image's, and
# gives every player its controls (no script will). Not autoplay, not ``srcset`` (whose
# addresses it does not check); a ``picture`` keeps its ``source`` elements inside it.
_MEDIA_TAG = re.compile(r"<(?:video|audio|picture)\b", re.IGNORECASE)
_MEDIA_OPTIONS: dict[str, Any] = {
    "tags": set(nh3.ALLOWED_TAGS) | {"video", "audio", "source", "picture"},
    "attributes": {**{tag: set(names) for tag, names in nh3.ALLOWED_ATTRIBUTES.items()},
                   "video": {"src", "poster", "width", "height"}, "audio": {"src"},
                   "source": {"src", "type"}},
    "set_tag_attribute_values": {"video": {"controls": ""}, "audio": {"controls": ""}},
}
# One scan finds whether a value needs either: most need neither, and passing the media
# options costs the sanitizer about 50 µs a call, twice what it spends on a summary.
_SPECIAL_TAG = re.compile(
    r"<(?:/?(?:noscript|noembed|noframes|iframe)|video|audio|picture)\b", re.IGNORECASE)


# A lazy-loading script moves an image's address from ``data-src`` (or ``data-lazy-src``,
# ``data-original``) into ``src`` when the image scrolls into view, and the ``src``
# written meanwhile is a placeholder: a blank ``data:`` image (which nh3 removes, leaving
# an image without an address) or a spinner. No script runs on the stored copy, so the
# address is moved here, as written, and nh3 checks it as any image's.
_LAZY_ATTRIBUTES = ("data-src", "data-lazy-src", "data-original")
# An image tag; quoted values may hold ">". Each alternative starts with its own
# character, so a tag without its end costs one pass.
_IMAGE_TAG = re.compile(r"""<img\b(?:[^>"']|"[^"]*"|'[^']*')*>""", re.IGNORECASE)
_ATTRIBUTE = re.compile(r"""([^\s"'=<>/]+)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s"'>]+))?""")


def _lazy_images_loaded(value: str) -> tuple[str, bool]:
    """``value`` with each lazily loaded image's address in its ``src``; True if any."""
    moved = False

    def with_its_address(match: re.Match[str]) -> str:
        nonlocal moved
        tag = match.group()
        found = _ATTRIBUTE.findall(tag, 4, len(tag) - 1)
        values = {name.lower(): value for name, value in found}
        address = next((values[name] for name in _LAZY_ATTRIBUTES
                        if values.get(name, "").strip("\"' \t\n")), None)
        if address is None:
            return tag
        moved = True
        kept = " ".join(f"{name}={value}" if value else name for name, value in found
                        if name.lower() != "src")
        return f"<img src={address} {kept}>"

    return _IMAGE_TAG.sub(with_its_address, value), moved


# The lazy-loading plugins that write a <noscript> copy of each image (a3 Lazy Load,
# WP Rocket) would show every image twice: once loaded here, once from the copy.
_FRAME_TAG = re.compile(r"</?(?:noembed|noframes|iframe)\b[^>]*>", re.IGNORECASE)
_WITHOUT_NOSCRIPT = frozenset({"script", "style", "noscript"})


def sanitize(value: str, *, body: bool = False, **options: Any) -> str:
    """``value`` through nh3 with ``options``, after the help above. ``body``: a summary
    or content, whose videos, sounds, pictures and lazily loaded images are kept."""
    lazy = False
    if body and "data-" in value:
        value, lazy = _lazy_images_loaded(value)
    if _SPECIAL_TAG.search(value) is not None:
        if lazy:
            value = _FRAME_TAG.sub("", value)
            options["clean_content_tags"] = set(_WITHOUT_NOSCRIPT)
        else:
            value = _FALLBACK_TAG.sub("", value)
        if body and _MEDIA_TAG.search(value):
            options.update(_MEDIA_OPTIONS)
    return nh3.clean(value, **options)
