"""The fixed source list: a reviewed TOML file, validated before anything is fetched.

```toml
[settings]
database = "signal.db"
min_interval = 3600

[[sources]]
id = "python-insider"
url = "https://pythoninsider.blogspot.com/feeds/posts/default"
title = "Python Insider"
owner = "ana@example.org"
review_by = 2027-06-30
```

Sources come only from this list: Signal never turns a URL found in a feed into a source.
"""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from signal_feeds import __version__
from signal_feeds.errors import ConfigError
from signal_feeds.urls import UrlRejected, canonical_source_url

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_CONFIG_PATH",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_DATABASE",
    "DEFAULT_DEADLINE",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_INTERVAL",
    "DEFAULT_MAX_REDIRECTS",
    "DEFAULT_MIN_INTERVAL",
    "DEFAULT_PER_HOST",
    "DEFAULT_PROXY",
    "DEFAULT_READ_TIMEOUT",
    "DEFAULT_USER_AGENT",
    "Config",
    "Settings",
    "Source",
    "load_config",
    "parse_config",
]

DEFAULT_CONFIG_PATH = "signal.toml"
DEFAULT_DATABASE = "signal.db"
DEFAULT_USER_AGENT = f"signal-feeds/{__version__} (+https://github.com/signal-feeds/signal)"
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_READ_TIMEOUT = 30.0
#: Seconds one request may take from start to the last body byte, however it trickles.
DEFAULT_DEADLINE = 60.0
#: Decoded body cap: large real feeds are a few MB; anything past this is refused.
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_REDIRECTS = 5
DEFAULT_MIN_INTERVAL = 3600.0
#: The longest Signal waits between polls of a healthy source, whatever headers say.
DEFAULT_MAX_INTERVAL = 7 * 24 * 3600.0
DEFAULT_CONCURRENCY = 20
DEFAULT_PER_HOST = 2
#: No proxy setting: HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY decide.
DEFAULT_PROXY = ""

_SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")


@dataclass(frozen=True)
class Settings:
    """Run-wide settings from the ``[settings]`` table (all optional)."""

    database: Path = Path(DEFAULT_DATABASE)
    user_agent: str = DEFAULT_USER_AGENT
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    read_timeout: float = DEFAULT_READ_TIMEOUT
    deadline: float = DEFAULT_DEADLINE
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_redirects: int = DEFAULT_MAX_REDIRECTS
    min_interval: float = DEFAULT_MIN_INTERVAL
    max_interval: float = DEFAULT_MAX_INTERVAL
    concurrency: int = DEFAULT_CONCURRENCY
    per_host: int = DEFAULT_PER_HOST
    #: Accept plain-http entry links (https only by default).
    allow_http_links: bool = False
    #: Let a redirect from a public source lead to a loopback or private address.
    allow_private_redirects: bool = False
    #: A proxy URL (``http://host:port``) for every request, replacing HTTP(S)_PROXY and
    #: ALL_PROXY (NO_PROXY still applies); ``"direct"`` for none; empty: the environment.
    proxy: str = DEFAULT_PROXY


@dataclass(frozen=True)
class Source:
    """One reviewed source. ``url`` is kept exactly as the user wrote it."""

    id: str
    url: str
    title: str = ""
    owner: str = ""
    review_by: dt.date | None = None
    #: Per-source overrides of the settings of the same name (``None``: use the setting).
    min_interval: float | None = None
    allow_http_links: bool | None = None
    max_body_bytes: int | None = None

    def is_expired(self, today: dt.date) -> bool:
        """True once the source's review date has passed: its approval has ended."""
        return self.review_by is not None and today > self.review_by


@dataclass(frozen=True)
class Config:
    """A validated source list and its settings."""

    sources: tuple[Source, ...]
    settings: Settings = field(default_factory=Settings)
    path: Path | None = None

    def source(self, source_id: str) -> Source:
        """The source with this id; ``ConfigError`` if there is none."""
        for src in self.sources:
            if src.id == source_id:
                return src
        raise ConfigError(f"no source with id {source_id!r}", path=self._where())

    def effective(self, source: Source) -> Settings:
        """The settings that apply to ``source``, with its own overrides applied."""
        overrides: dict[str, Any] = {}
        for name in ("min_interval", "allow_http_links", "max_body_bytes"):
            value = getattr(source, name)
            if value is not None:
                overrides[name] = value
        return replace(self.settings, **overrides) if overrides else self.settings

    def _where(self) -> str:
        return str(self.path) if self.path else "<config>"


_SETTING_TYPES: dict[str, type] = {
    "database": str,
    "user_agent": str,
    "connect_timeout": float,
    "read_timeout": float,
    "deadline": float,
    "max_body_bytes": int,
    "max_redirects": int,
    "min_interval": float,
    "max_interval": float,
    "concurrency": int,
    "per_host": int,
    "allow_http_links": bool,
    "allow_private_redirects": bool,
    "proxy": str,
}
_SOURCE_KEYS = {"id", "url", "title", "owner", "review_by", "min_interval",
                "allow_http_links", "max_body_bytes"}


def _check_type(value: object, kind: type, what: str, where: str, sid: str | None) -> Any:
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if kind is not bool and isinstance(value, bool) or not isinstance(value, kind):
        raise ConfigError(f"{what} must be {kind.__name__}, not {value!r}", path=where,
                          source_id=sid)
    if kind in (int, float) and value < 0:  # type: ignore[operator]
        raise ConfigError(f"{what} must not be negative", path=where, source_id=sid)
    return value


def _settings(table: object, where: str, base_dir: Path | None) -> Settings:
    if table is None:
        table = {}
    if not isinstance(table, Mapping):
        raise ConfigError("[settings] must be a table", path=where)
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in _SETTING_TYPES:
            known = ", ".join(sorted(_SETTING_TYPES))
            raise ConfigError(f"unknown setting {key!r} (known: {known})", path=where)
        values[key] = _check_type(value, _SETTING_TYPES[key], f"setting {key!r}", where, None)
    for key in ("concurrency", "per_host"):
        if key in values and values[key] < 1:
            raise ConfigError(f"setting {key!r} must be at least 1", path=where)
    if values.get("proxy") and values["proxy"] != "direct":
        proxy = values["proxy"]
        if not re.match(r"^https?://[^/?#\s]+/?$", proxy):
            raise ConfigError(f"setting 'proxy' must be an http:// or https:// URL "
                              f"(host and port) or 'direct', not {proxy!r}", path=where)
    if "database" in values:
        db = Path(values["database"]).expanduser()
        values["database"] = db if db.is_absolute() or base_dir is None else base_dir / db
    elif base_dir is not None:
        values["database"] = base_dir / DEFAULT_DATABASE
    return Settings(**values)


def _source(entry: object, index: int, where: str) -> Source:
    label = f"sources[{index}]"
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{label} must be a table", path=where)
    sid = entry.get("id")
    if not isinstance(sid, str) or not _SLUG.match(sid):
        raise ConfigError(
            f"{label}: id {sid!r} is not a slug (lowercase letters, digits and '-', "
            "starting and ending with a letter or digit, at most 64 characters)",
            path=where,
        )
    unknown = set(entry) - _SOURCE_KEYS
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(sorted(unknown))}", path=where,
                          source_id=sid)
    url = entry.get("url")
    if not isinstance(url, str):
        raise ConfigError("url is missing or not a string", path=where, source_id=sid)
    try:
        canonical_source_url(url)
    except UrlRejected as exc:
        raise ConfigError(f"url {url!r} refused: {exc}", path=where, source_id=sid) from exc
    review_by = entry.get("review_by")
    if isinstance(review_by, str):
        try:
            review_by = dt.date.fromisoformat(review_by)
        except ValueError as exc:
            raise ConfigError(f"review_by {review_by!r} is not a date (YYYY-MM-DD)",
                              path=where, source_id=sid) from exc
    if isinstance(review_by, dt.datetime):
        review_by = review_by.date()
    if review_by is not None and not isinstance(review_by, dt.date):
        raise ConfigError(f"review_by {review_by!r} is not a date", path=where, source_id=sid)
    opt: dict[str, Any] = {}
    for key in ("title", "owner"):
        if key in entry:
            opt[key] = _check_type(entry[key], str, key, where, sid)
    for key in ("min_interval", "allow_http_links", "max_body_bytes"):
        if key in entry:
            opt[key] = _check_type(entry[key], _SETTING_TYPES[key], key, where, sid)
    return Source(id=sid, url=url, review_by=review_by, **opt)


def parse_config(text: str, *, path: str | Path | None = None) -> Config:
    """Validate a TOML source list given as text; ``path`` is used in messages.

    Relative database paths are taken relative to the config file's folder.
    """
    where = str(path) if path is not None else "<config>"
    base_dir = Path(path).resolve().parent if path is not None else None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", path=where) from exc
    unknown = set(data) - {"settings", "sources"}
    if unknown:
        raise ConfigError(f"unknown top-level key(s) {', '.join(sorted(unknown))}", path=where)
    settings = _settings(data.get("settings"), where, base_dir)
    raw_sources = data.get("sources", [])
    if not isinstance(raw_sources, list):
        raise ConfigError("sources must be an array of tables ([[sources]])", path=where)
    sources: list[Source] = []
    seen_ids: dict[str, int] = {}
    seen_urls: dict[str, str] = {}
    for index, entry in enumerate(raw_sources):
        src = _source(entry, index, where)
        if src.id in seen_ids:
            raise ConfigError(f"duplicate id (first at sources[{seen_ids[src.id]}])",
                              path=where, source_id=src.id)
        seen_ids[src.id] = index
        canonical = canonical_source_url(src.url)
        if canonical in seen_urls:
            raise ConfigError(
                f"duplicate url {src.url!r}: source {seen_urls[canonical]!r} has the same "
                f"feed ({canonical})", path=where, source_id=src.id)
        seen_urls[canonical] = src.id
        sources.append(src)
    return Config(sources=tuple(sources), settings=settings,
                  path=Path(path) if path is not None else None)


def load_config(path: str | Path = DEFAULT_CONFIG_PATH) -> Config:
    """Read and validate the source list at ``path``."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError("config file not found", path=str(p)) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file: {exc}", path=str(p)) from exc
    return parse_config(text, path=p)
