"""When to ask a source again: one pure function over plain data.

Nothing here reads a clock, sleeps or talks to the network. The caller passes the time of
the response, the status and headers it got, how many failures came before, and a source
of randomness for the jitter; it gets back the earliest moment it may ask again. Tests
drive it with a fixed clock and a fixed random number, so they never wait.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

__all__ = ["Decision", "Policy", "due", "parse_http_date", "schedule"]

#: Ten years: a Retry-After beyond this is a typo or an attack, not a request.
LONGEST_WAIT = timedelta(days=3650)


@dataclass(frozen=True)
class Policy:
    """The knobs; the defaults suit a feed that changes a few times a day."""

    min_interval: timedelta = timedelta(minutes=30)
    max_interval: timedelta = timedelta(days=1)
    backoff_base: timedelta = timedelta(minutes=5)
    backoff_cap: timedelta = timedelta(hours=12)


@dataclass(frozen=True)
class Decision:
    """What the scheduler decided about one response."""

    status: str  # ok, retry_later, backoff, moved, gone
    next_due: datetime | None  # None: do not poll again until the user acts
    errors: int  # consecutive failures, 0 after a success
    retry_after: datetime | None = None
    moved_to: str | None = None


def parse_http_date(value: str) -> datetime | None:
    """An HTTP-date (``Sun, 01 Mar 2026 12:00:00 GMT``) as an aware UTC datetime."""
    try:
        when = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000" means UTC with unknown origin
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC)


def _retry_after(value: str | None, now: datetime) -> datetime | None:
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return now + min(timedelta(seconds=int(text[:12])), LONGEST_WAIT)
    when = parse_http_date(text)
    return None if when is None else max(now, min(when, now + LONGEST_WAIT))


def _freshness(headers: Mapping[str, str], now: datetime) -> timedelta | None:
    """How long the response stays fresh: max-age minus Age, else Expires minus Date."""
    cache_control = headers.get("cache-control", "")
    directives = {}
    for part in cache_control.split(","):
        name, _, arg = part.strip().partition("=")
        directives[name.strip().lower()] = arg.strip().strip('"')
    if "no-store" in directives or "no-cache" in directives:
        return timedelta(0)
    if directives.get("max-age", "").isdigit():
        age = headers.get("age", "0").strip()
        age_seconds = int(age) if age.isdigit() else 0
        return timedelta(seconds=max(0, int(directives["max-age"]) - age_seconds))
    if "expires" in headers:
        expires = parse_http_date(headers["expires"])
        if expires is None:  # "Expires: 0" and other junk mean "already stale"
            return timedelta(0)
        date = parse_http_date(headers.get("date", "")) or now
        return max(timedelta(0), expires - date)
    return None


def _backoff(errors: int, policy: Policy, rand: Callable[[], float]) -> timedelta:
    """Exponential backoff, capped, with "equal jitter": between half and all of it."""
    exponent = min(errors - 1, 30)  # 2**30 base intervals is far beyond any cap
    delay = min(policy.backoff_cap, policy.backoff_base * (2**exponent))
    return delay / 2 + delay / 2 * rand()


def schedule(
    now: datetime,
    status: int | None,
    headers: Mapping[str, str] | None = None,
    *,
    errors: int = 0,
    moved_to: str | None = None,
    policy: Policy | None = None,
    rand: Callable[[], float] = random.random,
) -> Decision:
    """Decide the earliest next poll after a response (``status=None``: network error).

    ``headers`` uses lower-case names. ``errors`` is the count of consecutive failures
    before this response; ``moved_to`` is the target of a permanent redirect (301/308)
    that led to this response. ``rand`` returns a float in [0, 1) for the jitter.
    """
    policy = policy or Policy()
    headers = {k.lower(): v for k, v in (headers or {}).items()}
    earliest = now + policy.min_interval

    if status == 410:
        return Decision("gone", None, errors + 1)

    if status in (429, 503):
        retry_at = _retry_after(headers.get("retry-after"), now)
        if retry_at is not None:
            return Decision("retry_later", max(earliest, retry_at), errors + 1, retry_at)

    if status is None or status >= 400:
        failures = errors + 1
        wait = max(policy.min_interval, _backoff(failures, policy, rand))
        return Decision("backoff", now + wait, failures)

    fresh = _freshness(headers, now)
    wait = policy.min_interval
    if fresh is not None:
        wait = max(wait, min(fresh, policy.max_interval))
    if moved_to:
        return Decision("moved", now + wait, 0, moved_to=moved_to)
    return Decision("ok", now + wait, 0)


def due(now: datetime, *, next_due: datetime | None, retry_after: datetime | None = None,
        gone: bool = False, force: bool = False) -> str:
    """May a source be asked now? ``"due"``, or why not: ``"gone"``, ``"retry_later"``
    or ``"not_due"``. ``force`` overrides our own schedule, never the server's
    Retry-After and never a 410."""
    if gone:
        return "gone"
    if retry_after is not None and retry_after > now:
        return "retry_later"
    if not force and next_due is not None and next_due > now:
        return "not_due"
    return "due"
