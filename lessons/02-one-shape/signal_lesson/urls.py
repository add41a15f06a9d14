"""URL policy for source URLs (lesson 01) and for entry links (lesson 02).

An entry link is data that a publisher wrote. Signal stores it and never visits it.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

DEFAULT_PORTS = {"http": 80, "https": 443}


class UrlRejected(ValueError):
    """The URL breaks the policy; the message says which rule."""


def canonical_url(url: str, *, schemes: frozenset[str]) -> str:
    """Lower-case scheme and host, drop a default port and the fragment.

    The path and the query string are kept exactly as written: they may
    distinguish real resources, and only the server knows which ones.
    """
    text = url.strip()
    if not text:
        raise UrlRejected("empty URL")
    if any(ord(ch) <= 0x20 or ord(ch) == 0x7F for ch in text):
        raise UrlRejected("whitespace or control characters in the URL")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:  # its message quotes the text, which may be a password
        raise UrlRejected("malformed URL (unreadable host or port)") from exc
    scheme = parts.scheme.lower()
    if scheme not in schemes:
        allowed = " or ".join(sorted(schemes))
        raise UrlRejected(f"scheme {scheme or '(none)'!r} is not {allowed}")
    if "@" in parts.netloc:
        raise UrlRejected("credentials in the URL")
    host = (parts.hostname or "").lower()
    if not host:
        raise UrlRejected("no host")
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    netloc = host if port in (None, DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


def redact(url: str) -> str:
    """The URL with any user name and password replaced, safe to print or log."""
    scheme, sep, rest = url.partition("://")
    netloc, slash, path = rest.partition("/")
    if not sep or "@" not in netloc:
        return url
    return f"{scheme}://***@{netloc.rpartition('@')[2]}{slash}{path}"


def canonical_source_url(url: str) -> str:
    """The form used to compare source URLs; http and https are both allowed."""
    return canonical_url(url, schemes=frozenset({"http", "https"}))


def normalize_link(url: str, *, allow_http: bool = False) -> str | None:
    """The entry-link policy: the normalized link, or None when it is refused.

    https is allowed, http only when ``allow_http`` is set; userinfo and every other
    scheme (javascript:, data:, file:, urn:, ...) are refused.
    """
    schemes = frozenset({"https", "http"}) if allow_http else frozenset({"https"})
    try:
        return canonical_url(url, schemes=schemes)
    except UrlRejected:
        return None
