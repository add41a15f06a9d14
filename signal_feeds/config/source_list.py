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
import logging
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from signal_feeds import __version__
from signal_feeds.config.file_text import config_text
from signal_feeds.config.values import (
    NOT_A_SLUG,
    SETTING_TYPES,
    SLUG,
    SOURCE_OVERRIDES,
    as_tuple,
    as_written,
    built_problems,
    checked_setting,
    typed,
)
from signal_feeds.dsn import Database, is_database_url, not_a_location
from signal_feeds.errors import ConfigError, did_you_mean
from signal_feeds.urls import (
    UrlRejected,
    canonical_source_url,
    proxy_url_problem,
    same_feed_key,
    without_credentials,
)

__all__ = [
    "DEFAULT_BUSY_TIMEOUT",
    "DEFAULT_CONCURRENCY",
    "DEFAULT_CONFIG_PATH",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_DATABASE",
    "DEFAULT_DEADLINE",
    "DEFAULT_LEASE_SECONDS",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_MAX_INTERVAL",
    "DEFAULT_MAX_REDIRECTS",
    "DEFAULT_MIN_INTERVAL",
    "DEFAULT_PER_HOST",
    "DEFAULT_PROXY",
    "DEFAULT_READ_TIMEOUT",
    "DEFAULT_USER_AGENT",
    "SOURCE_OVERRIDES",
    "Config",
    "Settings",
    "Source",
    "is_slug",
    "load_config",
    "parse_config",
    "url_hint",
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
#: Seconds a command waits for a database another program has locked before it gives up
#: (the store's own default; at most this, so that a cron job never piles up).
DEFAULT_BUSY_TIMEOUT = 60.0
#: Seconds a worker's claim on a source lasts (see signal_feeds/store/leases.py). It
#: covers the wait for a fetch slot, one request (``deadline``) and its write many times
#: over; a run renews its leases every third of it. Only a dead worker's leases run out:
#: its sources wait this long before another worker's run takes them.
DEFAULT_LEASE_SECONDS = 600.0

#: Entries read from one document; the rest are dropped with a warning. feedparser needs
#: about half a millisecond per entry, so a document of 100,000 tiny entries (a few MB,
#: well under the body cap) would hold a parser for a minute.
DEFAULT_MAX_ENTRIES = 10_000

log = logging.getLogger("signal_feeds.config")

#: No proxy setting: HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY decide.
DEFAULT_PROXY = ""


def is_slug(text: str) -> bool:
    """Whether ``text`` can be a source id: lowercase letters, digits and ``-``."""
    return bool(SLUG.match(text))


@dataclass(frozen=True)
class Settings:
    """Run-wide settings from the ``[settings]`` table (all optional)."""

    #: A SQLite file (relative paths are taken from the config file's folder) or a
    #: ``postgresql://`` URL, kept as the string given.
    database: Database = Path(DEFAULT_DATABASE)
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
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT
    #: Refuse plain-http entry links (http and https are kept by default: a link is
    #: stored, never fetched). Replaces ``allow_http_links``, still read with a warning.
    require_https_links: bool = False
    #: Let a redirect from a public source lead to a loopback or private address.
    allow_private_redirects: bool = False
    #: Entries read from one response; the rest are dropped with a warning.
    max_entries: int = DEFAULT_MAX_ENTRIES
    #: A proxy URL (``http://host:port``) for every request, replacing HTTP(S)_PROXY and
    #: ALL_PROXY (NO_PROXY still applies); ``"direct"`` for none; empty: the environment.
    proxy: str = DEFAULT_PROXY
    #: How long a worker's claim on a due source lasts (several workers on one
    #: database); must be at least 1.
    lease_seconds: float = DEFAULT_LEASE_SECONDS


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
    require_https_links: bool | None = None
    max_body_bytes: int | None = None

    def is_expired(self, today: dt.date) -> bool:
        """True once the source's review date has passed: its approval has ended."""
        return self.review_by is not None and today > self.review_by


@dataclass(frozen=True)
class Config:
    """A validated source list and its settings.

    One made in code is checked as :func:`parse_config` checks a file's (each
    setting's type and range, each source id once, the sources' overrides): a
    :class:`ConfigError` lists what cannot work."""

    sources: tuple[Source, ...]
    settings: Settings = field(default_factory=Settings)
    path: Path | None = None

    def __post_init__(self) -> None:
        # Held as a tuple: a generator was used up by the checks below, and every run
        # then fetched no source; a list left the frozen Config unhashable.
        object.__setattr__(self, "sources", as_tuple(self.sources, Source, "Config sources"))
        # Made in code, it skipped parse_config: a duplicate id or concurrency = 0 hung
        # run_fetch for ever.
        problems = _Problems(str(self.path) if self.path else "")
        problems.found.extend(built_problems(self.settings, self.sources))
        problems.raise_if_any()

    def source(self, source_id: str) -> Source:
        """The source with this id; ``ConfigError`` if there is none."""
        for src in self.sources:
            if src.id == source_id:
                return src
        hint = did_you_mean(source_id, (s.id for s in self.sources))
        raise ConfigError(f"no source with id {source_id!r}{hint}",
                          path=str(self.path) if self.path else None)

    def effective(self, source: Source) -> Settings:
        """The settings that apply to ``source``, with its own overrides applied."""
        overrides: dict[str, Any] = {}
        for name in SOURCE_OVERRIDES:
            value = getattr(source, name)
            if value is not None:
                overrides[name] = value
        return replace(self.settings, **overrides) if overrides else self.settings


#: The old name of ``require_https_links``, with the opposite meaning.
_OLD_HTTP_KEY = "allow_http_links"
_SOURCE_KEYS = frozenset({"id", "url", "title", "owner", "review_by", *SOURCE_OVERRIDES})
_TOP_LEVEL_KEYS = frozenset({"settings", "sources"})


class _Problems:
    """Every problem found in one file, each with where it is, so that one run of
    ``signal fetch`` shows them all."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.found: list[tuple[str, str | None]] = []  # (located text, source id)

    def add(self, location: str, text: str, source_id: str | None = None) -> None:
        self.found.append((f"{location}: {text}", source_id))

    def unknown(self, location: str, key: str, known: frozenset[str] | set[str],
                what: str, source_id: str | None = None) -> None:
        listed = f"(known: {', '.join(sorted(known))})"
        home = _home_of(key, what)
        if home:
            self.add(location, f"{key}: {home} {listed}", source_id)
            return
        hint = did_you_mean(key, known)
        self.add(location, f"{key}: unknown {what}{hint} {listed}", source_id)

    def raise_if_any(self) -> None:
        if not self.found:
            return
        problems = tuple(text for text, _ in self.found)
        ids = {sid for _, sid in self.found}
        source_id = ids.pop() if len(ids) == 1 else None
        if len(problems) == 1:
            message = problems[0]
        else:
            message = f"{len(problems)} problems:\n" + "\n".join(f"  {p}" for p in problems)
        raise ConfigError(message, path=self.where or None, source_id=source_id,
                          problems=problems)


def _home_of(key: str, what: str) -> str:
    """Where a known key misplaced as an unknown ``what`` belongs, said to the user; ''
    for a key Signal does not know anywhere."""
    if what != "setting" and key in SETTING_TYPES:
        # TOML puts every key below a [[sources]] header into that source, so a setting
        # appended at the end of the file lands in the last source.
        below = ("; a key below a [[sources]] header belongs to that source"
                 if what == "key" else "")
        return f"a setting of the whole run, so it goes under [settings]{below}"
    if what != "key" and key in _SOURCE_KEYS:
        return "a source's key, so it goes in a [[sources]] table"
    return ""


def _old_http_key(table: Mapping[str, Any], location: str, where: str,
                  problems: _Problems, source_id: str | None = None) -> dict[str, Any]:
    """Read ``allow_http_links`` (the old, inverted name) as ``require_https_links``."""
    if _OLD_HTTP_KEY not in table:
        return {}
    if "require_https_links" in table:
        problems.add(location, f"{_OLD_HTTP_KEY}: give only require_https_links "
                     "(allow_http_links is its old, inverted name)", source_id)
        return {}
    value, reason = typed(table[_OLD_HTTP_KEY], bool)
    if reason:
        problems.add(location, f"{_OLD_HTTP_KEY}: {reason}", source_id)
        return {}
    log.warning("%s%s: allow_http_links is deprecated; http links are kept by default "
                "(write require_https_links = %s instead)", f"{where}: " if where else "",
                location, "false" if value else "true")
    return {"require_https_links": not value}


def _settings(table: object, problems: _Problems, base_dir: Path | None) -> Settings:
    where = "[settings]"
    if table is None:
        table = {}
    if not isinstance(table, Mapping):
        problems.add(where, "must be a table")
        table = {}
    values: dict[str, Any] = _old_http_key(table, where, problems.where, problems)
    for key, raw in table.items():
        if key == _OLD_HTTP_KEY:
            continue
        if key not in SETTING_TYPES:
            problems.unknown(where, key, set(SETTING_TYPES), "setting")
            continue
        value, reason = checked_setting(key, raw, SETTING_TYPES[key])
        if reason:
            problems.add(where, f"{key}: {reason}")
            continue
        values[key] = value
    proxy = values.get("proxy", "")
    if proxy and proxy != "direct" and (not re.match(r"^https?://[^/?#\s]+/?$", proxy)
                                        or proxy_url_problem(proxy)):
        problems.add(where, f"proxy: must be an http:// or https:// URL (host and port) "
                            f"or 'direct', not {without_credentials(proxy)!r}")
        del values["proxy"]
    given = [key for key in ("min_interval", "max_interval") if key in values]
    low = values.get("min_interval", DEFAULT_MIN_INTERVAL)
    high = values.get("max_interval", DEFAULT_MAX_INTERVAL)
    lo, hi = as_written(low), as_written(high)
    if len(given) == 2 and high < low:
        problems.add(where, f"max_interval: {hi} is less than min_interval ({lo}); "
                            "polls could not be both")
        del values["max_interval"]
    elif given and high < low:
        # One of them alone against the other's default: min_interval wins, as it
        # always has (a weekly min_interval alone means weekly polls), but a max_interval
        # of 60 under the default hour is not what it says, so the user is told.
        if given == ["max_interval"]:
            said = f"max_interval ({hi}) is less than the default min_interval ({lo})"
            other = "min_interval"
        else:
            said = f"min_interval ({lo}) is more than the default max_interval ({hi})"
            other = "max_interval"
        log.warning("%s%s: %s; min_interval wins (set %s too to silence this)",
                    f"{problems.where}: " if problems.where else "", where, said, other)
    if "database" in values and (refused := not_a_location(values["database"])):
        del values["database"]
        problems.add(where, f"database: {refused}")
    if "database" in values and is_database_url(values["database"]):
        pass  # a server's URL, not a file: no folder to resolve it against
    elif "database" in values:
        db = Path(values["database"]).expanduser()
        values["database"] = db if db.is_absolute() or base_dir is None else base_dir / db
    elif base_dir is not None:
        values["database"] = base_dir / DEFAULT_DATABASE
    return Settings(**values)


def _source(entry: object, index: int, problems: _Problems) -> Source | None:
    label = f"sources[{index}]"
    if not isinstance(entry, Mapping):
        problems.add(label, "must be a table ([[sources]])")
        return None
    found = len(problems.found)
    sid = entry.get("id")
    if sid is None:
        # Python's "None is not a slug" named no key the user had written.
        problems.add(label, "id: missing (each source needs one: a slug of lowercase "
                     "letters, digits and '-')")
    elif not isinstance(sid, str) or not SLUG.match(sid):
        problems.add(label, f"id: {sid!r} {NOT_A_SLUG}")
    if not isinstance(sid, str) or not SLUG.match(sid):
        sid = None
    else:
        label = f"{label} (id {sid!r})"
    for key in sorted(set(entry) - _SOURCE_KEYS - {_OLD_HTTP_KEY}):
        problems.unknown(label, key, set(_SOURCE_KEYS), "key", sid)
    url = entry.get("url")
    if not isinstance(url, str):
        problems.add(label, "url: missing or not a string", sid)
    else:
        try:
            canonical_source_url(url)
        except UrlRejected as exc:
            problems.add(label, f"url: {without_credentials(url)!r} refused: {exc}"
                         f"{url_hint(url)}", sid)
    review_by = entry.get("review_by")
    if isinstance(review_by, str):
        try:
            review_by = dt.date.fromisoformat(review_by)
        except ValueError:
            problems.add(label, f"review_by: {review_by!r} is not a date (YYYY-MM-DD)", sid)
            review_by = None
    if isinstance(review_by, dt.datetime):
        review_by = review_by.date()
    if review_by is not None and not isinstance(review_by, dt.date):
        problems.add(label, f"review_by: {review_by!r} is not a date", sid)
    opt: dict[str, Any] = _old_http_key(entry, label, problems.where, problems, sid)
    for key in ("title", "owner", *SOURCE_OVERRIDES):
        if key in entry:
            value, reason = checked_setting(key, entry[key], SETTING_TYPES.get(key, str))
            if reason:
                problems.add(label, f"{key}: {reason}", sid)
            opt[key] = value
    if len(problems.found) > found or sid is None or not isinstance(url, str):
        return None
    return Source(id=sid, url=url, review_by=review_by, **opt)


def parse_config(text: str, *, path: str | Path | None = None) -> Config:
    """Validate a TOML source list given as text; ``path`` is used in messages.

    Every problem in the file is reported at once, in one :class:`ConfigError` whose
    ``problems`` lists them, each with its place (``[settings]``, ``sources[3] (id
    'x')``) and key. Relative database paths are taken relative to the config file's
    folder.
    """
    if not isinstance(text, str):  # a dict of settings was "no attribute 'removeprefix'"
        raise TypeError(f"parse_config takes a source list's TOML text, not "
                        f"{type(text).__name__} (load_config reads a file)")
    where = str(path) if path is not None else ""
    base_dir = Path(path).resolve().parent if path is not None else None
    try:
        # A byte-order mark (Notepad saves one) is no TOML statement: "Invalid
        # statement (at line 1, column 1)" pointed at nothing the user could see.
        data = tomllib.loads(text.removeprefix("\ufeff"))
    except tomllib.TOMLDecodeError as exc:  # its message gives the line and column
        # tomllib names a table given twice as a Python tuple: "('settings',)".
        said = re.sub(r"\(((?:'[\w-]+',? ?)+)\)",
                      lambda m: "[" + ".".join(re.findall(r"'([\w-]+)'", m[1])) + "]", str(exc))
        raise ConfigError(f"not valid TOML: {said}", path=where or None) from exc
    problems = _Problems(where)
    for key in sorted(set(data) - _TOP_LEVEL_KEYS):
        problems.unknown("top level", key, set(_TOP_LEVEL_KEYS), "table or key")
    settings = _settings(data.get("settings"), problems, base_dir)
    raw_sources = data.get("sources", [])
    if not isinstance(raw_sources, list):
        problems.add("sources", "must be an array of tables ([[sources]])")
        raw_sources = []
    sources: list[Source] = []
    seen_ids: dict[str, int] = {}
    seen_urls: dict[str, str] = {}
    for index, entry in enumerate(raw_sources):
        src = _source(entry, index, problems)
        # An id is checked for duplicates even when its entry has other problems: the
        # duplicate would otherwise surface only after those were fixed, one run later.
        sid = entry.get("id") if isinstance(entry, dict) else None
        if isinstance(sid, str) and sid:
            if sid in seen_ids:
                problems.add(f"sources[{index}] (id {sid!r})",
                             f"id: duplicate (first at sources[{seen_ids[sid]}])", sid)
                continue
            seen_ids[sid] = index
        if src is None:
            continue
        label = f"sources[{index}] (id {src.id!r})"
        canonical = canonical_source_url(src.url)
        if (key := same_feed_key(canonical)) in seen_urls:
            problems.add(label, f"url: {src.url!r} is the same feed as source "
                         f"{seen_urls[key]!r} ({canonical})", src.id)
            continue
        seen_urls[key] = src.id
        sources.append(src)
    problems.raise_if_any()
    return Config(sources=tuple(sources), settings=settings,
                  path=Path(path) if path is not None else None)


def load_config(path: str | Path = DEFAULT_CONFIG_PATH) -> Config:
    """Read and validate the source list at ``path``."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError as exc:
        # A new user's first run after the demo: say what to write, or how to get one.
        raise ConfigError("config file not found (a source list has a [[sources]] table "
                          "with id and url per feed, see the README's \"Using it\"; "
                          "`signal sources import-opml FILE` writes one from a feed "
                          "reader's OPML export)", path=str(p)) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read config file: {exc.strerror or exc}",
                          path=str(p)) from exc
    return parse_config(config_text(raw, p), path=p)


def url_hint(url: str) -> str:
    """A suggestion for the two source URLs new users write most, a browser's ``feed:``
    link and an address without its scheme (`` (did you mean 'https://…'?)``), or ``""``."""
    text = url.strip()
    lower = text.lower()
    if lower.startswith("feed:"):
        rest = text[len("feed:"):]
        guess = rest if rest.lower().startswith(("http://", "https://")) else (
            "https:" + rest if rest.startswith("//") else "")
    elif "://" not in text and "." in text.split("/", 1)[0] and " " not in text:
        guess = "https://" + text
    else:
        guess = ""
    try:
        canonical_source_url(guess)
    except UrlRejected:
        return ""
    return f" (did you mean {guess!r}?)"
