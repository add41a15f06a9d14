"""OPML in and out: bring a source list from another reader, or hand ours to one.

Import appends ``[[sources]]`` tables to the TOML file as text (comments and layout the
user wrote stay as they are), re-validates the whole file with
:func:`~signal_feeds.config.parse_config` and only then replaces it atomically. Every
outline gets the same checks as a hand-written entry (a slug id, an http(s) URL without
credentials, no duplicate feed URL); what is left out is reported with the reason.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tempfile
import unicodedata
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from signal_feeds.config.file_text import config_text
from signal_feeds.config.source_list import is_slug, parse_config, url_hint
from signal_feeds.errors import ConfigError
from signal_feeds.urls import (
    UrlRejected,
    canonical_source_url,
    same_feed_key,
    without_credentials,
)

__all__ = [
    "DEFAULT_MAX_OPML_BYTES",
    "SIGNAL_NS",
    "ImportReport",
    "OpmlFeed",
    "SkippedFeed",
    "UniqueIds",
    "import_opml",
    "parse_opml",
    "slugify",
]

#: The namespace of the attributes Signal adds to an OPML outline (other readers
#: ignore them): ``id``, the source id, so that an exported list imports with its ids.
SIGNAL_NS = "urn:signal-feeds:opml"
#: OPML files are lists of links; anything this large is not one.
DEFAULT_MAX_OPML_BYTES = 10 * 1024 * 1024
_MAX_SLUG = 64
_DECLARATION = re.compile(rb"<!\s*(?:DOCTYPE|ENTITY)", re.IGNORECASE)
_ENCODING = re.compile(rb"""\s*<\?xml[^>]*?\sencoding\s*=\s*["']([A-Za-z0-9._:-]+)""")
_NOT_SLUG = re.compile(r"[^a-z0-9]+")
_COMMENT_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f]")
#: Characters XML 1.0 cannot carry at all, not even as a character reference.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# TOML basic strings must escape these (all control characters but tab, and DEL).
_TOML_ESCAPE = re.compile('["\\\\\x00-\x08\x0a-\x1f\x7f]')
_TOML_SHORT = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\b": "\\b", "\f": "\\f"}


@dataclass(frozen=True)
class OpmlFeed:
    """One feed outline: its title (``title`` or ``text``) and feed URL (``xmlUrl``)."""

    title: str
    url: str
    html_url: str = ""
    #: The source id Signal's own export gave it (:data:`SIGNAL_NS` ``id``), or ``""``.
    source_id: str = ""


@dataclass(frozen=True)
class SkippedFeed:
    """An outline that was not added, and why."""

    title: str
    url: str
    reason: str


@dataclass(frozen=True)
class AddedSource:
    """A source written to the TOML list."""

    id: str
    url: str
    title: str


@dataclass(frozen=True)
class ImportReport:
    """What an OPML import added and skipped."""

    config_path: str
    added: tuple[AddedSource, ...]
    skipped: tuple[SkippedFeed, ...]
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"config": self.config_path, "dry_run": self.dry_run,
                "added": [vars(a) for a in self.added],
                "skipped": [vars(s) for s in self.skipped]}


def _attr(element: ET.Element, name: str) -> str:
    # Exporters disagree on case (xmlUrl, xmlurl, XMLURL).
    wanted = name.lower()
    for key, value in element.attrib.items():
        if key.lower() == wanted:
            return value.strip()
    return ""


def _outlines(element: ET.Element) -> Iterator[ET.Element]:
    for child in element:
        if child.tag == "outline":
            yield child
            yield from _outlines(child)


def parse_opml(data: bytes, *, max_bytes: int = DEFAULT_MAX_OPML_BYTES,
               path: str | None = None) -> list[OpmlFeed]:
    """Every outline with an ``xmlUrl``, a feed ``type`` or (childless) a web address
    (folders are walked, not returned), in document order. A DOCTYPE or ENTITY
    declaration is refused outright: an OPML file never needs one, and entity expansion
    is how XML files attack their readers."""
    where = path or "<opml>"
    if len(data) > max_bytes:
        raise ConfigError(f"OPML file is larger than {max_bytes} bytes", path=where)
    if _DECLARATION.search(data):
        raise ConfigError("OPML file has a DOCTYPE or ENTITY declaration; refused", path=where)
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise ConfigError(f"not well-formed XML: {exc}", path=where) from exc
    except (ValueError, LookupError):  # an encoding expat cannot read, or unknown
        root = _parse_declared_encoding(data, where)
    body = root.find("body") if root.tag == "opml" else None
    if body is None:
        raise ConfigError("not an OPML document (no <opml><body>)", path=where)
    feeds: list[OpmlFeed] = []
    for outline in _outlines(body):
        url = _attr(outline, "xmlUrl")
        kind = _attr(outline, "type").lower()
        # A leaf with only a web address (a site without its feed, an OPML 1.0 link) is
        # returned too, so that the import says it was left out and why.
        leaf_link = not any(c.tag == "outline" for c in outline) and bool(
            _attr(outline, "htmlUrl") or _attr(outline, "url"))
        if url or kind in ("rss", "atom", "json") or leaf_link:
            title = _attr(outline, "title") or _attr(outline, "text")
            # (An OPML 1.0 link outline gives its page as "url".)
            page = _attr(outline, "htmlUrl") or _attr(outline, "url")
            feeds.append(OpmlFeed(title=title, url=url, html_url=page,
                                  source_id=outline.get(f"{{{SIGNAL_NS}}}id", "").strip()))
    return feeds


def _parse_declared_encoding(data: bytes, where: str) -> ET.Element:
    """A document in a multi-byte legacy encoding (Shift_JIS, GBK, Big5), which expat
    does not read: decoded by Python first, then parsed as text."""
    found = _ENCODING.match(data)
    name = found.group(1).decode("ascii") if found else "?"
    try:
        text = data.decode(name)
    except LookupError as exc:
        raise ConfigError(f"declares the encoding {name!r}, which is not known",
                          path=where) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not {name} at byte {exc.start} as it declares", path=where) from exc
    try:
        return ET.fromstring(text)
    except ET.ParseError as exc:
        raise ConfigError(f"not well-formed XML: {exc}", path=where) from exc


def slugify(text: str) -> str:
    """A source id from a title: ASCII letters and digits joined by ``-``, at most 64
    characters (``""`` when nothing ASCII is left, e.g. a title in Cyrillic)."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return _NOT_SLUG.sub("-", ascii_text.lower()).strip("-")[:_MAX_SLUG].rstrip("-")


class UniqueIds:
    """The source ids of a list and those given out since: :meth:`take` gives a base
    when it is free, else the base with the first free ``-N``. Each base remembers
    where its count stands, so that 5,000 feeds of one title ("Medium", a list of a
    platform's authors) cost 5,000 looks, not the 12.5 million of counting from ``-2``
    again for each."""

    def __init__(self, taken: Iterable[str]) -> None:
        self.taken = set(taken)
        self._next: dict[str, int] = {}
        self.looks = 0  # ids looked up in taken, for tests

    def take(self, base: str) -> str:
        """A free id made of ``base`` (a slug), now taken."""
        slug, n = base, self._next.get(base, 2)
        self.looks += 1
        while slug in self.taken:
            suffix = f"-{n}"
            slug = base[:_MAX_SLUG - len(suffix)].rstrip("-") + suffix
            n += 1
            self.looks += 1
        self._next[base] = n
        self.taken.add(slug)
        return slug


def _slug_for(feed: OpmlFeed, canonical: str, ids: UniqueIds) -> str:
    if feed.source_id and feed.source_id not in ids.taken and is_slug(feed.source_id):
        return ids.take(feed.source_id)  # the id Signal exported it with
    base = slugify(feed.title)
    if not base:  # fall back to host and path: "example-org-feed-xml"
        parts = urlsplit(canonical)
        base = slugify(f"{(parts.hostname or '').removeprefix('www.')} {parts.path}") or "feed"
    return ids.take(base)


def _toml_string(value: str) -> str:
    def escape(m: re.Match[str]) -> str:
        ch = m.group()
        return _TOML_SHORT.get(ch, f"\\u{ord(ch):04x}")

    return '"' + _TOML_ESCAPE.sub(escape, value) + '"'


def _write_atomically(path: Path, text: str) -> None:
    try:
        # Through a symlink (a dotfiles checkout), so the link stays and its file changes.
        _replace_file(path.resolve(), text)
    except OSError as exc:
        raise ConfigError(f"cannot write it: {exc.strerror or exc}; it is unchanged",
                          path=str(path)) from exc


def _replace_file(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def import_opml(
    config_path: str | Path,
    opml: bytes,
    *,
    opml_name: str = "OPML",
    dry_run: bool = False,
    today: dt.date | None = None,
) -> ImportReport:
    """Add the OPML's feeds to the TOML source list at ``config_path`` (created if
    missing) and report what was added and what was skipped, with the reason.

    Skipped: outlines without a URL, URLs the source policy refuses, and feeds already
    in the list or earlier in the OPML (compared after URL canonicalization). Ids are
    slugs of the titles, made unique. Nothing is written when ``dry_run`` is set, when
    nothing is added, or when the resulting file would not validate.
    """
    path = Path(config_path)
    try:
        # Bytes, not read_text: its universal newlines turned a Windows file's every
        # CRLF into LF, so the review diff of an import showed every line changed.
        original = config_text(path.read_bytes(), path) if path.exists() else ""
    except OSError as exc:
        raise ConfigError(f"cannot read config file: {exc.strerror or exc}",
                          path=str(path)) from exc
    current = parse_config(original, path=path)
    ids = UniqueIds(s.id for s in current.sources)
    known: dict[str, str] = {same_feed_key(canonical_source_url(s.url)): s.id
                             for s in current.sources}
    added: list[AddedSource] = []
    skipped: list[SkippedFeed] = []
    for feed in parse_opml(opml, path=opml_name):
        if not feed.url:
            skipped.append(SkippedFeed(
                feed.title, feed.html_url, "no xmlUrl" + (
                    " (only a web page's address: add its feed's as a source by hand)"
                    if feed.html_url else "")))
            continue
        try:
            canonical = canonical_source_url(feed.url)
        except UrlRejected as exc:
            skipped.append(SkippedFeed(feed.title, without_credentials(feed.url),
                                       f"bad url: {exc}{url_hint(feed.url)}"))
            continue
        if (key := same_feed_key(canonical)) in known:
            skipped.append(SkippedFeed(feed.title, feed.url,
                                       f"duplicate url: already source {known[key]!r}"))
            continue
        slug = _slug_for(feed, canonical, ids)
        known[key] = slug
        added.append(AddedSource(id=slug, url=feed.url, title=feed.title))
    report = ImportReport(config_path=str(path), added=tuple(added), skipped=tuple(skipped),
                          dry_run=dry_run)
    if not added:
        return report
    stamp = (today or dt.date.today()).isoformat()
    # A TOML comment is UTF-8 on one line: a name's undecodable bytes (a Latin-1 name on a
    # UTF-8 system) are written as escapes, its control characters as spaces.
    name = _COMMENT_CONTROL.sub(" ", opml_name.encode("utf-8", "backslashreplace").decode())
    blocks = [f"\n# Imported from {name} on {stamp}.\n"]
    for source in added:
        lines = ["[[sources]]", f"id = {_toml_string(source.id)}",
                 f"url = {_toml_string(source.url)}"]
        if source.title:
            lines.append(f"title = {_toml_string(source.title)}")
        blocks.append("\n".join(lines) + "\n\n")
    prefix = original if not original or original.endswith("\n") else original + "\n"
    text = prefix + "".join(blocks).rstrip("\n") + "\n"
    if "\r\n" in original:
        # The lines added end as the file's own do (a Windows editor's CRLF).
        text = original + text[len(original):].replace("\n", "\r\n")
    parse_config(text, path=path)  # the whole file, exactly as it would be written
    if not dry_run:
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomically(path, text)
    return report


def opml_document(feeds: Iterable[tuple[str, str] | tuple[str, str, str]], *,
                  title: str = "Signal sources") -> str:
    """An OPML 2.0 document with one ``type="rss"`` outline per ``(title, url)`` or
    ``(title, url, source_id)``; the id is written as Signal's own ``id`` attribute
    (:data:`SIGNAL_NS`), which :func:`import_opml` gives the source back."""
    root = ET.Element("opml", {"version": "2.0", "xmlns:signal": SIGNAL_NS})
    head = ET.SubElement(root, "head")
    ET.SubElement(head, "title").text = title
    body = ET.SubElement(root, "body")
    for written, url, *source_id in feeds:
        # A title with a control character (a config's "\u0008") made a document no
        # reader opens, this one's import included: XML 1.0 has no way to write one.
        name = _NOT_XML.sub("", written)
        attrs: Mapping[str, str] = {"type": "rss", "text": name, "title": name, "xmlUrl": url}
        if source_id and source_id[0]:
            attrs = {**attrs, "signal:id": source_id[0]}
        ET.SubElement(body, "outline", dict(attrs))
    ET.indent(root)
    return ('<?xml version="1.0" encoding="utf-8"?>\n'
            + ET.tostring(root, encoding="unicode") + "\n")
