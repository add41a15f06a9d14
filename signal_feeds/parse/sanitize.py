"""HTML as stored: what the sanitizer (nh3) is given, and the markup it needs help with.

nh3 removes what is unsafe; the help here is about what a reader of the stored copy
should see. Values without any of the markup below go to nh3 as they came.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import nh3

__all__ = ["sanitize"]


# The sanitizer parses HTML as a browser with scripting on does: the content of these
# elements is text to it, so their markup was stored as visible, escaped text
# (``&lt;img src="..."&gt;``, a lazy-loading fallback). Signal's HTML never runs a script
# and keeps no embed or frame, so their content is what a reader of it should see: the
# tags are taken out and the content read as HTML. (An ``<iframe ... />`` written as XML
# would otherwise turn the rest of an article into text, or into nothing.) The sanitizer
# still sees all of it.
_FRAMES = ("noembed", "noframes", "iframe")
_UNWRAPPED = ("noscript", *_FRAMES)
# nh3 removes MathML and SVG whole, text and all ("Einstein's E=mc2 holds" was stored as
# "Einstein's  holds"), and the text of their elements' names elsewhere too: a formula
# is kept as the text of its symbols, a drawing as the text of its title and labels.
# A formula's source annotation (TeX) would repeat it; a drawing's style and scripts
# are no text. (The block's end is the first end tag of its kind: a nested drawing's
# rest is left to nh3, which removes it.)
_FOREIGN = ("math", "svg")
# (Each scan stops at the next start or end of its kind, so many unclosed ones are not
# read to the end of the value again from every start.)
_FOREIGN_BLOCK = re.compile(r"<(math|svg)\b[^<>]*>((?:[^<]++|<(?!/?(?:math|svg)\b))*+)"
                            r"</(?:math|svg)\s*>", re.IGNORECASE)
_NOT_TEXT = re.compile(r"<(annotation(?:-xml)?|style|script)\b[^<>]*>"
                       r"(?:[^<]++|<(?!/?(?:annotation|style|script)\b))*+"
                       r"</(?:annotation(?:-xml)?|style|script)\s*>", re.IGNORECASE)


def _text_of_foreign(block: re.Match[str]) -> str:
    inner = _NOT_TEXT.sub(" ", block.group(2))
    # A formula's symbols run together (E, =, m, c, 2); a drawing's labels do not.
    gap = "" if block.group(1).lower() == "math" else " "
    return _apart(block, " ".join(_TAG_ANYWHERE.sub(gap, inner).split()))


def _apart(found: re.Match[str], text: str) -> str:
    """``text`` in place of ``found``, with a space where it would touch a word beside
    it: a browser shows a drawing or a formula as a box of its own, which kept the words
    on either side apart ("Hello<svg>…</svg>world" was stored as "Helloiconworld")."""
    whole = found.string
    before = found.start() > 0 and whole[found.start() - 1].isalnum()
    after = found.end() < len(whole) and whole[found.end()].isalnum()
    return f"{' ' if before else ''}{text}{' ' if after else ''}"


# Form controls: nh3 removes their tags and keeps their text, which then ran into the
# words beside it ("Press<button>OK</button>now" was "PressOKnow"). A space goes outside
# a control where a word touches it, and between two controls side by side (a list's
# options).
_BOXED = ("button", "textarea", "select", "option")
_BOXED_TAG = re.compile(rf"<(/?)(?:{'|'.join(_BOXED)})\b[^<>]*>", re.IGNORECASE)
_BOXED_END = re.compile(rf"</(?:{'|'.join(_BOXED)})\s*>$", re.IGNORECASE)


def _control_apart(tag: re.Match[str]) -> str:
    whole, start, end = tag.string, tag.start(), tag.end()
    if tag.group(1):  # an end tag: a space after it, before a word
        return tag.group() + (" " if end < len(whole) and whole[end].isalnum() else "")
    after_word = start > 0 and whole[start - 1].isalnum()
    after_control = _BOXED_END.search(whole, max(0, start - 12), start) is not None
    return (" " if after_word or after_control else "") + tag.group()


_TAG_ANYWHERE = re.compile(r"<[^<>]*>")
# A video or a sound in a post (WordPress's video and audio blocks) is kept, playable:
# the sanitizer checks and absolutizes ``src`` and ``poster`` as it does an image's, and
# gives every player its controls (no script will). Not autoplay, not ``srcset`` (whose
# addresses it does not check); a ``picture`` keeps its ``source`` elements inside it.
_MEDIA = ("video", "audio", "picture")
# nh3 keeps ``lang`` and ``title`` on any element but drops ``dir``: a Hebrew or Arabic
# paragraph then reads left to right, its punctuation at the wrong end. It is kept.
# (Giving nh3 attributes of its own costs a call about 50 µs, so only values with a
# ``dir`` get them.)
_ANY_ELEMENT = {"*": {"dir", "lang", "title"}}
_ATTRIBUTES = {**{tag: set(names) for tag, names in nh3.ALLOWED_ATTRIBUTES.items()},
               **_ANY_ELEMENT}
_MEDIA_OPTIONS: dict[str, Any] = {
    "tags": set(nh3.ALLOWED_TAGS) | {*_MEDIA, "source"},
    "attributes": {**_ATTRIBUTES, "video": {"src", "poster", "width", "height"},
                   "audio": {"src"}, "source": {"src", "type"}},
    "set_tag_attribute_values": {"video": {"controls": ""}, "audio": {"controls": ""}},
}
_DIRECTION = re.compile(r"\sdir\s*=")


def _tags(names: tuple[str, ...]) -> re.Pattern[str]:
    """Start and end tags of these elements. A tag ends before the next "<" here (rarely
    so in HTML, where a quoted value may hold one: such a tag is left as it was), so no
    stretch of the value is read twice and many unclosed tags cost one pass."""
    return re.compile(rf"</?(?:{'|'.join(names)})\b[^<>]*>", re.IGNORECASE)


_UNWRAPPED_TAG = _tags(_UNWRAPPED)
# One scan of the value in lower case finds whether it needs either: most need neither,
# and passing the media options costs the sanitizer about 50 µs a call, twice what it
# spends on a summary. (A case-insensitive expression took 29 µs for 3 KB against 12;
# nh3 takes 160.)
_SPECIAL_TAG = re.compile(rf"<(?:/?(?:{'|'.join(_UNWRAPPED)})|{'|'.join(_MEDIA)}"
                          rf"|{'|'.join(_FOREIGN)}|{'|'.join(_BOXED)})\b")
_MEDIA_TAG = re.compile(rf"<(?:{'|'.join(_MEDIA)})\b")


# A lazy-loading script moves an image's address from ``data-src`` (or ``data-lazy-src``,
# ``data-original``) into ``src`` when the image scrolls into view, and the ``src``
# written meanwhile is a placeholder: a blank ``data:`` image (which nh3 removes, leaving
# an image without an address) or a spinner. No script runs on the stored copy, so the
# address is moved here, as written, and nh3 checks it as any image's.
_LAZY_ATTRIBUTES = ("data-src", "data-lazy-src", "data-original")
# An image tag's start, and the rest of it up to its ">" (quoted values may hold one).
# Read from one tag's end to the next start, as HTML's tokenizer reads them: a tag
# without its end takes the rest of the value, and nothing is read twice (a regular
# expression searched for whole tags would read the rest again from every "<img").
_IMAGE_START = re.compile(r"<img\b", re.IGNORECASE)
_TAG_REST = re.compile(r"""(?:[^>"']|"[^"]*+"|'[^']*+')*+>""")
_ATTRIBUTE = re.compile(r"""([^\s"'=<>/]+)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s"'>]+))?""")


def _with_its_address(tag: str) -> str | None:
    """An image tag with its lazily loaded address as ``src``; None if it has none."""
    found = _ATTRIBUTE.findall(tag, 4, len(tag) - 1)
    values = {name.lower(): value for name, value in found}
    address = next((values[name] for name in _LAZY_ATTRIBUTES
                    if values.get(name, "").strip("\"' \t\n")), None)
    if address is None:
        return None
    kept = " ".join(f"{name}={value}" if value else name for name, value in found
                    if name.lower() != "src")
    return f"<img src={address} {kept}>"


def _images_rewritten(value: str, rewrite: Callable[[str], str | None]) -> tuple[str, bool]:
    """``value`` with each image tag that ``rewrite`` gives a replacement for (``""``
    removes it, ``None`` keeps it) replaced; True if any was. Each stretch of the value
    is read once, however many image tags it holds."""
    pieces: list[str] = []
    done = searched = 0
    while (start := _IMAGE_START.search(value, searched)) is not None:
        end = _TAG_REST.match(value, start.end())
        if end is None:  # the rest of the value is inside this tag
            break
        searched = end.end()
        replacement = rewrite(value[start.start():searched])
        if replacement is not None:
            pieces += (value[done:start.start()], replacement)
            done = searched
    if not pieces:
        return value, False
    pieces.append(value[done:])
    return "".join(pieces), True


def _lazy_images_loaded(value: str) -> tuple[str, bool]:
    """``value`` with each lazily loaded image's address in its ``src``; True if any."""
    return _images_rewritten(value, _with_its_address)


# A web bug: an image one pixel square (or none), which shows nothing and is there to
# tell a counter that the post was opened (FeedBurner's ``~4/`` image, Medium's
# ``_/stat``, Jetpack's ``pixel.wp.com``). The stored copy is read elsewhere and later,
# where it would still report each reading, and FeedBurner names a new one for the same
# post now and then: every such rename was stored as an edit of the post. Such an image
# is left out; an image with a size of its own (or none written) is kept.
_PIXEL_HINT = re.compile(r"""(?:width|height)\s*=\s*["']?\s*[01](?:px)?\s*(?:["'\s/>]|$)""")
_PIXEL_SIZES = frozenset({"0", "1", "0px", "1px"})


def _is_pixel(tag: str) -> bool:
    values = {name.lower(): value.strip("\"' \t\n").lower()
              for name, value in _ATTRIBUTE.findall(tag, 4, len(tag) - 1)}
    return (values.get("width") in _PIXEL_SIZES) and (values.get("height") in _PIXEL_SIZES)


def _pixels_removed(value: str) -> str:
    """``value`` without its one-pixel images."""
    return _images_rewritten(value, lambda tag: "" if _is_pixel(tag) else None)[0]


# A lazy-loading script that also writes a <noscript> copy of each image would show
# every image twice: once loaded here, once from the copy, which then goes. Only such a
# copy: a <noscript> with anything besides images in it (a link to the episode's MP3)
# is unwrapped, as without lazy images.
# (Its content stops at the next noscript tag, so an unclosed one is not read to the end
# of the value again from every start.)
_NOSCRIPT = re.compile(r"<noscript\b[^<>]*>((?:[^<]++|<(?!/?noscript\b))*+)</noscript\s*>",
                       re.IGNORECASE)
_IMAGES_ONLY = re.compile(r"(?:\s|<img\b[^<>]*>|</?(?:picture|source)\b[^<>]*>)*",
                          re.IGNORECASE)


def _image_copy_removed(block: re.Match[str]) -> str:
    inner = block.group(1)
    return "" if _IMAGES_ONLY.fullmatch(inner) else inner


# A frame (a video player embedded from YouTube or Vimeo, a map) is not kept, but where
# it pointed is: a link to its address, named by its title, stands in its place when it
# has no fallback of its own to show (empty, or written as XML's ``<iframe ... />``).
_FRAME_START = re.compile(r"<iframe\b[^<>]*?(?:/>|>(?=\s*</iframe\s*>))", re.IGNORECASE)


_TAG_START = re.compile(r"<[A-Za-z]")


def _tag_starts(value: str) -> set[int]:
    """Where the tags of ``value`` start, as HTML reads them, in one pass: a ">"
    inside quotes ends no tag, a "<" not followed by a letter starts none, and what
    lies inside a tag (an attribute's value) holds no tag of its own."""
    starts: set[int] = set()
    pos = 0
    while (found := _TAG_START.search(value, pos)) is not None:
        starts.add(found.start())
        rest = _TAG_REST.match(value, found.start() + 2)
        pos = rest.end() if rest is not None else len(value)
    return starts


def _frame_link(tag: re.Match[str], starts: set[int]) -> str:
    text = tag.group()
    if tag.start() not in starts:
        return text  # inside another tag (an alt="<iframe ...>"): text, not a frame
    values = {name.lower(): value.strip("\"'") for name, value
              in _ATTRIBUTE.findall(text, 7, len(text) - (2 if text.endswith("/>") else 1))}
    address = values.get("src", "").strip()
    if not address.lower().startswith(("https://", "http://", "//")):
        return text
    # The values are HTML already (``&amp;`` stays as written); only what would end the
    # attribute or start a tag is escaped, and nh3 sees the result as any link.
    if address.startswith("//"):  # as the page would load it: over https
        address = "https:" + address
    title = values.get("title", "").strip() or address
    return (f'<a href="{address.replace(chr(34), "&quot;")}">'
            f'{title.replace("<", "&lt;").replace(">", "&gt;")}</a>{text}')


def sanitize(value: str, *, body: bool = False, **options: Any) -> str:
    """``value`` through nh3 with ``options``, after the help above. ``body``: a summary
    or content, whose videos, sounds, pictures and lazily loaded images are kept."""
    lazy = False
    lowered = value.lower()  # attribute and tag names are case-insensitive
    # (WordPress writes other data- attributes, data-id on gallery images, everywhere.)
    if body and any(name in lowered for name in _LAZY_ATTRIBUTES):
        value, lazy = _lazy_images_loaded(value)
        lowered = value.lower()
    if body and "<img" in lowered and _PIXEL_HINT.search(lowered) is not None:
        value = _pixels_removed(value)
        lowered = value.lower()
    if _SPECIAL_TAG.search(lowered) is not None:
        if lazy:
            value = _NOSCRIPT.sub(_image_copy_removed, value)
        if "<math" in lowered or "<svg" in lowered:
            value = _FOREIGN_BLOCK.sub(_text_of_foreign, value)
        if any(f"<{name}" in lowered for name in _BOXED):
            value = _BOXED_TAG.sub(_control_apart, value)
        if body and "<iframe" in lowered:
            starts = _tag_starts(value)
            value = _FRAME_START.sub(lambda tag: _frame_link(tag, starts), value)
        value = _UNWRAPPED_TAG.sub("", value)
        if body and _MEDIA_TAG.search(lowered):
            options.update(_MEDIA_OPTIONS)
    if body and "attributes" not in options and "dir" in lowered and _DIRECTION.search(lowered):
        options["attributes"] = _ATTRIBUTES
    cleaned = nh3.clean(value, **options)
    # Raw C0 controls never reach here (the XML repairs and the JSON Feed reader remove
    # them): a character reference (&#27;), DEL, or non-ASCII text (a C1 control that
    # feedparser's Windows-1252 table leaves, a JSON Feed's \u009d) can hold one. The
    # scan costs 6 µs on 1.5 KB, so plain ASCII text without a reference skips it.
    if "&#" in value or "\x7f" in value or not value.isascii():
        cleaned = _CONTROL.sub("", cleaned)
    return cleaned


#: C0 and C1 control characters but tab and line breaks. A feed that escapes its HTML
#: once too often (``&amp;#27;``) hands nh3 a reference to ESC, which nh3 writes as
#: the character itself: printed by ``jq -r .summary``, it would clear the terminal.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
