"""When may we poll next? Pure functions over plain data; time is a parameter.

Inputs are the response (status and headers, or ``None`` for a network error), the
source's consecutive error count and its settings. The result never lies before a
``Retry-After`` the server sent, and never before the minimum interval of a healthy source.
"""

from __future__ import annotations

import datetime as dt
import email.utils
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "DEFAULT_BACKOFF_CAP",
    "DEFAULT_DUE_SLACK",
    "DUE_SLACK_FRACTION",
    "LONGEST_RETRY_AFTER",
    "Due",
    "PollDecision",
    "check_due",
    "due_slack",
    "freshness_lifetime",
    "next_poll",
    "parse_http_date",
    "parse_retry_after",
    "scheduled_due",
]

#: The longest wait between two tries of a failing source.
DEFAULT_BACKOFF_CAP = 24 * 3600.0
#: Backoff delays are stretched by up to this fraction, spreading retries of many sources.
JITTER_FRACTION = 0.25


@dataclass(frozen=True)
class PollDecision:
    """The earliest next poll, and a server-imposed floor that ``--force`` cannot move."""

    next_due_at: dt.datetime | None
    retry_after: dt.datetime | None = None
    #: ``"ok"``, ``"retry_later"``, ``"backoff"`` or ``"gone"``.
    reason: str = "ok"


def parse_http_date(value: str | None) -> dt.datetime | None:
    """An IMF-fixdate (or the obsolete forms) as an aware UTC datetime, else ``None``."""
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(value.strip())
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=dt.UTC)
        # Inside the try: an offset can take a date past the calendar's ends in UTC
        # ("31 Dec 9999 23:59:59 -2359"), and such a date is as unreadable as any other.
        return parsed.astimezone(dt.UTC)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


#: The longest ``Retry-After`` obeyed, in seconds (30 days), as a delay or as a date: a
#: server's "9999-12-31" or 10**20 seconds would otherwise silence a source for good.
LONGEST_RETRY_AFTER = 30 * 86400


def parse_retry_after(value: str | None, now: dt.datetime,
                      date: str | None = None) -> dt.datetime | None:
    """``Retry-After`` as a moment: delay-seconds or an HTTP date (RFC 9110 §10.2.3).
    A header sent more than once arrives as its values joined by commas; the first
    counts.

    ``date`` is the response's ``Date``: an HTTP date is read on the server's clock, as
    its distance from that ``Date``, counted from ``now`` (as ``Expires`` is read against
    ``Date``, RFC 9111 §4.2.1). A server whose clock is five minutes slow asks for two
    minutes of quiet with a date three minutes in our past; read on our clock, the pause
    was over before it began, and the host's other feeds were all asked at once."""
    if not value:
        return None
    sent = parse_http_date(date)
    moment = _retry_moment(value.strip(), now, sent)
    if moment is None and "," in value:
        # "120, 120", or two dates, each holding a comma of its own ("Wed, 02 Dec ...").
        parts = value.split(",")
        for first in (parts[0], ",".join(parts[:2])):
            moment = _retry_moment(first.strip(), now, sent)
            if moment is not None:
                break
    return moment


def _retry_moment(text: str, now: dt.datetime,
                  sent: dt.datetime | None = None) -> dt.datetime | None:
    # isdecimal, not isdigit: a header decoded as Latin-1 may hold "²", a digit to
    # isdigit that int() refuses.
    longest = now + dt.timedelta(seconds=LONGEST_RETRY_AFTER)
    if text.isdecimal():
        # Absurd values must not overflow (nor reach int()'s 4,300-digit limit).
        if len(text) >= 12:
            return longest
        return min(now + dt.timedelta(seconds=int(text)), longest)
    moment = parse_http_date(text)
    if moment is None:
        return None
    if sent is not None:
        # The server's own clock: how far its date lies past its Date, from now.
        delay = (moment - sent).total_seconds()
        return now + dt.timedelta(seconds=min(max(delay, 0.0), LONGEST_RETRY_AFTER))
    return min(max(moment, now), longest)


def _cache_control(value: str) -> dict[str, str]:
    directives: dict[str, str] = {}
    for part in value.split(","):
        name, _, arg = part.strip().partition("=")
        if name:
            directives[name.strip().lower()] = arg.strip().strip('"')
    return directives


def freshness_lifetime(headers: Mapping[str, str], now: dt.datetime) -> float | None:
    """Seconds the response stays fresh per RFC 9111 §4.2.1: ``max-age`` minus ``Age``,
    else ``Expires`` minus ``Date``; ``0`` for ``no-cache``/``no-store``; ``None`` when
    the response says nothing. ``headers`` keys must be lower-case."""
    cc = _cache_control(headers.get("cache-control", ""))
    # no-cache="Set-Cookie" names the fields it is about (RFC 9111 §5.2.2.4): the
    # response itself may still be reused for its max-age.
    if "no-store" in cc or ("no-cache" in cc and not cc["no-cache"]):
        return 0.0
    age = headers.get("age", "").strip()
    age_seconds = float(age) if age.isdecimal() else 0.0
    max_age = cc.get("max-age", "")
    if max_age.isdecimal():
        return max(0.0, float(max_age) - age_seconds)
    if "expires" in headers:
        expires = parse_http_date(headers["expires"])
        if expires is None:  # an invalid Expires means "already expired"
            return 0.0
        date = parse_http_date(headers.get("date")) or now
        return max(0.0, (expires - date).total_seconds() - age_seconds)
    return None


Status = int | Literal["error"]


def next_poll(
    *,
    now: dt.datetime,
    status: Status,
    headers: Mapping[str, str],
    error_count: int,
    min_interval: float,
    max_interval: float,
    ttl_seconds: int | None = None,
    jitter: float = 0.0,
    backoff_cap: float = DEFAULT_BACKOFF_CAP,
    sent: dt.datetime | None = None,
) -> PollDecision:
    """The earliest next poll after a response.

    ``status`` is the final HTTP status, or ``"error"`` for a network error or a
    rejected body; ``headers`` the response's headers with lower-case names;
    ``error_count`` the consecutive failures *including* this response (0 after a
    success); ``jitter`` a number in [0, 1) that stretches backoff delays (pass a
    random one; tests pass a fixed one). The waits count from ``sent``, when the request
    went out (``now`` if not given), as a response's age does (RFC 9111 §4.2.3): counted
    from its end, an hour's interval polled by an hourly cron job slipped to every
    other run. A ``Retry-After`` counts from ``now``, when the answer came. A failing
    source waits at most ``backoff_cap``, or ``min_interval`` when that is longer.
    """
    anchor = sent or now
    if status == 410:
        return PollDecision(next_due_at=None, reason="gone")
    if status == "error" or not (200 <= status < 400):
        steps = max(error_count, 1) - 1
        cap = max(backoff_cap, min_interval)
        delay = min(cap, max(min_interval, 60.0) * 2.0 ** min(steps, 32))
        delay = min(cap, delay * (1.0 + JITTER_FRACTION * jitter))
        backoff = anchor + dt.timedelta(seconds=delay)
        retry_after = (parse_retry_after(headers.get("retry-after"), now, headers.get("date"))
                       if status in (429, 503) else None)
        if retry_after is not None:
            # A floor on top of the backoff, never in its place: "Retry-After: 0" on
            # every run of a site in maintenance must not make it polled every run.
            return PollDecision(next_due_at=max(retry_after, backoff),
                                retry_after=retry_after, reason="retry_later")
        return PollDecision(next_due_at=backoff, reason="backoff")
    wait = min_interval
    fresh = freshness_lifetime(headers, now)
    if fresh is not None:
        wait = max(wait, fresh)
    if ttl_seconds is not None:
        wait = max(wait, float(ttl_seconds))
    wait = min(wait, max(max_interval, min_interval))
    return PollDecision(next_due_at=anchor + dt.timedelta(seconds=wait))


def scheduled_due(*, next_due_at: dt.datetime | None, last_fetch_at: dt.datetime | None,
                  min_interval: float) -> dt.datetime | None:
    """When a source is next due under today's ``min_interval``: the stored next poll,
    but never sooner than ``min_interval`` after the last request went out. The stored
    time was worked out under the settings of its day; a ``min_interval`` raised since
    (a host asked for fewer requests) held only from the poll after next. A source with
    no stored time (never polled, or reset) stays due at once."""
    if next_due_at is None or last_fetch_at is None:
        return next_due_at
    return max(next_due_at, last_fetch_at + dt.timedelta(seconds=min_interval))


DueStatus = Literal["due", "gone", "retry_later", "not_due"]


@dataclass(frozen=True)
class Due:
    """Whether a source may be requested now, and if not, why and until when."""

    status: DueStatus
    until: dt.datetime | None = None


#: How early a source may be polled, at most: a minute...
DEFAULT_DUE_SLACK = 60.0
#: ... and at most this share of its ``min_interval``.
DUE_SLACK_FRACTION = 0.05


def due_slack(min_interval: float) -> float:
    """Seconds before its due time that a source counts as due: a cron job started a
    moment earlier than the last one (they never start to the millisecond) would
    otherwise skip it and poll it one whole cron period late."""
    return min(DEFAULT_DUE_SLACK, DUE_SLACK_FRACTION * min_interval)


def check_due(
    *,
    now: dt.datetime,
    gone: bool,
    next_due_at: dt.datetime | None,
    retry_after: dt.datetime | None,
    force: bool,
    slack: float = 0.0,
) -> Due:
    """A gone source is never due (``--force`` included) until reset; a ``Retry-After``
    that has not passed holds even against ``--force``; otherwise the schedule holds
    unless forced, counting a source due ``slack`` seconds early (:func:`due_slack`;
    never for a ``Retry-After``, which the host asked for)."""
    if gone:
        return Due("gone")
    if retry_after is not None and retry_after > now:
        return Due("retry_later", retry_after)
    if (not force and next_due_at is not None
            and next_due_at > now + dt.timedelta(seconds=slack)):
        return Due("not_due", next_due_at)
    return Due("due")
