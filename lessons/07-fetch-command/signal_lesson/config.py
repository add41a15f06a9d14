"""The fixed source list: a reviewed TOML file, checked before anything is read."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError
from .urls import UrlRejected, canonical_source_url, redact

SLUG = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?")
SOURCE_KEYS = frozenset({"id", "url", "title"})


def is_slug(text: object) -> bool:
    """Lowercase letters, digits and '-', starting and ending with a letter or digit."""
    return isinstance(text, str) and SLUG.fullmatch(text) is not None


@dataclass(frozen=True)
class Source:
    id: str
    url: str  # kept exactly as the reviewer wrote it
    title: str = ""


@dataclass(frozen=True)
class Config:
    path: str
    sources: tuple[Source, ...]

    def source(self, source_id: str) -> Source:
        for source in self.sources:
            if source.id == source_id:
                return source
        raise ConfigError(self.path, [f"no source with id {source_id!r}"])


def check_source(entry: object, index: int) -> tuple[Source | None, list[str]]:
    """Check one [[sources]] table; return the source (or None) and the problems."""
    where = f"sources[{index}]"
    if not isinstance(entry, dict):
        return None, [f"{where}: must be a table"]
    sid, url, title = entry.get("id"), entry.get("url"), entry.get("title", "")
    if is_slug(sid):
        where = f"{where} (id {sid!r})"
    problems = []
    unknown = sorted(set(entry) - SOURCE_KEYS)
    if unknown:
        problems.append(f"{where}: unknown key(s) {', '.join(unknown)}")
    if not is_slug(sid):
        problems.append(
            f"{where}: id {sid!r} is not a slug (lowercase letters, digits and '-', "
            "at most 64 characters, no '-' at either end)"
        )
    if not isinstance(url, str):
        problems.append(f"{where}: url is missing or not a string")
    else:
        try:
            canonical_source_url(url)
        except UrlRejected as exc:
            problems.append(f"{where}: url {redact(url)!r} refused: {exc}")
    if not isinstance(title, str):
        problems.append(f"{where}: title must be a string")
    if problems:
        return None, problems
    return Source(id=str(sid), url=str(url), title=str(title)), []


def parse_config(text: str, *, path: str = "<config>") -> Config:
    """Validate a source list given as TOML text; ``path`` is only used in messages."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(path, [f"not valid TOML: {exc}"]) from exc
    problems = [f"unknown top-level key {key!r}" for key in sorted(set(data) - {"sources"})]
    entries = data.get("sources", [])
    if not isinstance(entries, list):
        raise ConfigError(path, [*problems, "sources must be an array of tables"])
    sources: list[Source] = []
    first_id: dict[str, str] = {}
    first_url: dict[str, str] = {}
    for index, entry in enumerate(entries):
        source, found = check_source(entry, index)
        problems.extend(found)
        if source is None:
            continue
        where = f"sources[{index}] (id {source.id!r})"
        canonical = canonical_source_url(source.url)
        if source.id in first_id:
            problems.append(f"{where}: duplicate id, first used by {first_id[source.id]}")
        elif canonical in first_url:
            problems.append(
                f"{where}: duplicate url, {first_url[canonical]} already reads {canonical}"
            )
        else:
            first_id[source.id] = where
            first_url[canonical] = where
            sources.append(source)
    if problems:
        raise ConfigError(path, problems)
    return Config(path=path, sources=tuple(sources))


def load_config(path: str | Path) -> Config:
    """Read and validate the source list at ``path``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), [f"cannot read the file ({exc.__class__.__name__})"]) from exc
    return parse_config(text, path=str(path))
