"""URL policy: entry links and source URLs.

Entry links are data, never something Signal visits. The policy keeps them comparable
(lower-case scheme and host, no default port, no fragment) without guessing at what the
query string means, and refuses anything that is not a plain web address. Because a link
is stored and never fetched, http is as acceptable as https unless the user asks for
https only.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import quote, unquote, urljoin, urlsplit, urlunsplit

from signal_feeds.graphemes import shown

__all__ = ["MAX_URL_BYTES", "TRACKING_PARAMETERS", "UrlRejected", "ascii_host",
           "proxy_url_problem", "same_feed_key", "shown_url",
           "canonical_source_url", "escaped_whitespace",
           "check_link", "is_tracking_parameter", "link_form", "link_spellings",
           "normalize_link", "other_scheme", "request_host", "unicode_host",
           "without_credentials", "without_tracking"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
#: The longest URL kept, in UTF-8 bytes (the sitemap protocol's limit, in characters):
#: a link is indexed for lookups and duplicate matching, and PostgreSQL refuses an index
#: entry past about 2,700 bytes, with the whole response it came in.
MAX_URL_BYTES = 2048
_WEB_SCHEMES = frozenset({"http", "https"})
#: White space (Unicode's too: U+00A0, U+2028) and C0 and C1 controls (U+0085). Inside a
#: URL they are refused; at its ends they are stripped, so a link must not keep one that
#: only removing its fragment brings to the end (``/a\x85#top``).
_CONTROL = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")
#: The spaces of Unicode (not tabs, line breaks or U+0085, a control character).
_SPACE = re.compile("[ \xa0\u1680\u2000-\u200a\u202f\u205f\u3000]")


def _percent_encoded(match: re.Match[str]) -> str:
    return quote(match.group())


def escaped_whitespace(url: str) -> str:
    """``url`` with its white space and control characters percent-encoded, as a request
    for it sends them (a server's ``Location: /flux été.xml``): the form a source list
    accepts, where a space is refused."""
    return _CONTROL.sub(_percent_encoded, url)


def without_credentials(url: str) -> str:
    """``url`` as a message may show it: a user name and password in it (a token, often)
    are replaced by ``***``, so a refused source URL does not put them in a cron mail."""
    text = url.strip()
    # The authority: after the first "//" (or from the start, for an address written
    # without its scheme) to the path, query or fragment; credentials end at its last "@".
    start = text.find("//")
    start = 0 if start < 0 else start + 2
    end = min((i for i in (text.find(c, start) for c in "/?#") if i >= 0), default=len(text))
    at = text.rfind("@", start, end)
    if at < 0 and (at := _password_cut_short(text, start, end)) < 0:
        return text
    return f"{text[:start]}***{text[at:]}"


def shown_url(url: str, limit: int) -> str:
    """A URL a server sent (a ``Location``) as a message shows it: on one line, cut to
    ``limit`` characters, and without its credentials, which are someone's secret even
    when the URL is refused (the message is stored and mailed by cron)."""
    return shown(without_credentials(url), limit)


def _password_cut_short(text: str, start: int, end: int) -> int:
    """Where credentials end when a "/", "?" or "#" in the password ended the authority
    early (``https://ana:s3#cret@host/``): the first "@" past ``end``, if a user name
    and a ``:`` come before the cut and what follows the ``:`` is no port; else -1. An
    "@" in a path or query (``https://medium.com/@ana``) is left alone."""
    bracket = text.find("]", start, end) if text.startswith("[", start) else -1
    colon = text.find(":", max(start, bracket), end)  # after an IPv6 literal's brackets
    at = text.find("@", end)
    if colon < 0 or at < 0 or colon == start:
        return -1
    return -1 if text[colon + 1:end].isdigit() else at


_CREDENTIALS = "credentials in the URL"
#: Schemes whose "@" names a person or an account, with no host to log in to.
_ADDRESS_SCHEME = re.compile(r"(?:mailto|xmpp|sips?|im|pres|acct):(?!//)", re.IGNORECASE)
#: The same, said of a source's URL: Signal never sends them.
_SOURCE_CREDENTIALS = (f"{_CREDENTIALS} (Signal sends no user name or password; a feed "
                       "that needs them cannot be a source)")


def _unquoted(exc: ValueError) -> str:
    """``urlsplit``'s reason without the text it quotes ("Port could not be cast to
    integer value as 's3'": that text may be part of a password)."""
    words = re.sub(r"\s*(?:as\s+)?'[^']*'", "", str(exc)).strip()
    return words or "unreadable host or port"


#: Why a URL with port 0 is refused: no server listens there, and a client connects to
#: the scheme's default port instead.
_PORT_ZERO = "port 0 is no port to connect to"


class UrlRejected(ValueError):
    """A URL that the policy refuses; the message says why."""


def _canonical(url: str, *, allowed_schemes: frozenset[str],
               credentials: str = _CREDENTIALS) -> str:
    """The URL under the policy; ``credentials`` is the reason a user name or password
    in it is refused with."""
    text = url.strip()
    if not text:
        raise UrlRejected("empty URL")
    if _CONTROL.search(text):
        raise UrlRejected("URL contains whitespace or control characters")
    # The "@" of a mailto: link is its address, not a user name: say what is refused.
    if without_credentials(text) != text and not _ADDRESS_SCHEME.match(text):
        raise UrlRejected(credentials)
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        # Not the error's own words: they quote the text it could not read.
        raise UrlRejected(f"malformed URL ({_unquoted(exc)})") from exc
    if port == 0:  # no server listens there; a client connects to the default instead
        raise UrlRejected(_PORT_ZERO)
    scheme = parts.scheme.lower()
    if scheme not in allowed_schemes:
        allowed = " or ".join(sorted(allowed_schemes))
        raise UrlRejected(f"scheme {scheme + ':' if scheme else '(none)'} is not {allowed}")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise UrlRejected(credentials)
    host = (parts.hostname or "").lower()
    if not host:
        raise UrlRejected("no host")
    _check_host(host, parts.netloc)
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    netloc = host if port is None or port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"
    path = parts.path or "/"
    result = urlunsplit((scheme, netloc, path, parts.query, ""))
    if len(result) > MAX_URL_BYTES // 4 and len(result.encode("utf-8", "replace")) > MAX_URL_BYTES:
        raise UrlRejected(f"longer than {MAX_URL_BYTES} bytes")
    return result


# What no host name holds, even percent-decoded (the URL Standard's forbidden domain code
# points): a link "corrected" past one would name another host.
_NOT_IN_HOST = re.compile(r"[\x00-\x20#%/:<>?@\[\\\]^|\x7f]")


def _check_host(host: str, netloc: str) -> None:
    """Refuse a host that is not one: brackets around anything but an IPv6 address
    (``[v1.fe]`` was kept as the host ``v1.fe``), text after the brackets other than a
    port (``[::1]x`` was ``[::1]``), or a name holding a space or a sign."""
    if "[" in netloc or "]" in netloc:
        after = netloc.rpartition("]")[2]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise UrlRejected(f"host [{host}] is not an IPv6 address") from None
        if (after and not after.startswith(":")) or netloc.count("]") > 1 or (
                netloc.count("[") > 1):
            raise UrlRejected(f"{netloc!r} is not an IPv6 address and a port")
    elif _NOT_IN_HOST.search(unquote(host)):
        raise UrlRejected(f"host {host!r} is not a host name")


def check_link(
    url: str | None, *, base: str | None = None, require_https: bool = False
) -> tuple[str | None, str]:
    """Apply the entry-link policy; return ``(link, "")`` or ``(None, reason)``.

    http and https are kept (https only with ``require_https``); the fragment is removed,
    scheme and host are lower-cased, a default port is dropped, a space becomes ``%20``
    (a no-break space ``%C2%A0``, as a browser sends them) and the query string is
    otherwise kept exactly as given. Userinfo and any other
    scheme (``javascript:``, ``data:``, ``file:``, ``urn:``) are refused. A relative link
    is resolved against ``base`` first. The reason is ``""`` for a missing link, else
    what the policy refused.
    """
    if not url or not url.strip():
        return None, ""
    # A space inside a link ("/uploads/Annual report.pdf") is what a browser sends as
    # %20, a no-break space (from an HTML &nbsp;) as %C2%A0; line breaks, tabs and
    # control characters are still refused.
    text = _SPACE.sub(_percent_encoded, url.strip())
    try:  # urlsplit raises on some malformed links ("https://127.0.0.1["): refuse them
        if not urlsplit(text).scheme:
            if not base:  # a file parsed without its feed's address
                return None, "relative link, and no feed address to resolve it against"
            text = urljoin(base, text)
    except ValueError as exc:
        return None, f"malformed URL ({exc})"
    schemes = frozenset({"https"}) if require_https else _WEB_SCHEMES
    try:
        return _canonical(text, allowed_schemes=schemes), ""
    except UrlRejected as exc:
        return None, str(exc)


def normalize_link(
    url: str | None, *, base: str | None = None, require_https: bool = False,
    allow_http: bool | None = None,
) -> str | None:
    """The link after :func:`check_link`'s policy, or ``None`` if it is missing or refused.

    ``allow_http`` is the older spelling of ``not require_https`` (http links were once
    refused by default); when given it wins.
    """
    if allow_http is not None:
        require_https = not allow_http
    return check_link(url, base=base, require_https=require_https)[0]


def canonical_source_url(url: str) -> str:
    """Return the canonical form of a source URL, or raise :class:`UrlRejected`.

    Used to validate the source list and to find two entries that name the same feed in
    different spellings. Both http and https are accepted for sources.
    """
    canonical = _canonical(url, allowed_schemes=_WEB_SCHEMES, credentials=_SOURCE_CREDENTIALS)
    host = urlsplit(canonical).hostname or ""
    if not host.startswith("[") and ":" not in host:
        _check_host_name(host)
    return canonical


def _check_host_name(host: str) -> None:
    """Refuse a name DNS cannot carry (a label over 63 bytes as sent, an empty one):
    found here, it is a config problem, not a failure on every run."""
    labels = host[:-1].split(".") if host.endswith(".") else host.split(".")
    for label in labels:
        if not label:
            raise UrlRejected(f"host {host!r} has an empty label")
        sent = label if label.isascii() else "xn--" + label.encode("punycode").decode()
        if len(sent) > _MAX_LABEL:
            raise UrlRejected(f"host name label {label[:20]!r}... is {len(sent)} bytes as "
                              f"sent; DNS allows {_MAX_LABEL}")
    if not host.isascii():
        import idna

        try:
            idna.encode(host)
        except UnicodeError as exc:
            # What every run would fail with ("Invalid IDNA hostname"): a symbol (☃), a
            # ligature (ﬁ) or another character IDNA 2008 leaves out of host names.
            raise UrlRejected(f"host {host!r} is no international domain name a request "
                              f"can send ({exc}); a registered one can be written in its "
                              "xn-- form") from None


_MAX_LABEL = 63


#: Query parameters that say how a reader arrived, not which page it is.
TRACKING_PARAMETERS = frozenset({
    "fbclid", "gclid", "dclid", "gbraid", "wbraid", "msclkid", "yclid", "igshid",
    "mc_cid", "mc_eid", "_ga", "_gl",
})
_TRACKING_PREFIXES = ("utm_",)


def is_tracking_parameter(name: str) -> bool:
    """A query parameter that says how a reader arrived, not which page it is."""
    name = name.lower()
    return name in TRACKING_PARAMETERS or name.startswith(_TRACKING_PREFIXES)


def without_tracking(url: str) -> str:
    """``url`` without its tracking parameters (``utm_*``, ``fbclid``, ...), otherwise
    exactly as written: the same string when it has none. Two links equal in this form
    name the same page (see :func:`signal_feeds.identity.keys.classify_change`)."""
    head, hash_mark, fragment = url.partition("#")
    path, question, query = head.partition("?")
    if not question:
        return url
    pieces = query.split("&")
    kept = [piece for piece in pieces
            if not is_tracking_parameter(unquote(piece.partition("=")[0].replace("+", " ")))]
    if len(kept) == len(pieces):
        return url
    rest = "&".join(kept)
    return path + ("?" + rest if rest else "") + hash_mark + fragment


def ascii_host(host: str) -> str:
    """A host name in its ASCII form (``bücher.example`` is ``xn--bcher-kva.example``),
    so that one host compares equal however it is written. IDNA 2003, as duplicate
    detection has always compared links (``faß`` and ``fass`` alike); a host Signal
    connects to is :func:`request_host`."""
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:  # a name IDNA 2003 refuses: compared as written
        return host


def request_host(host: str) -> str:
    """A host name as a request sends it, in DNS, ``Host`` and TLS (SNI): IDNA 2008, as
    httpx encodes it. ``faß.example`` goes out as ``xn--fa-hia.example``, not as IDNA
    2003's ``fass.example``, which is another site. A name it cannot encode (``☃``) is
    returned as written: a request for it fails, and a source list refuses it."""
    if host.isascii():
        return host
    import idna  # only for a name past ASCII: its tables take a while to load

    try:
        return idna.encode(host.lower()).decode("ascii")
    except UnicodeError:
        return host


def unicode_host(host: str) -> str:
    """``host`` with its IDNA labels (``xn--...``) in Unicode, or as written when they
    do not decode."""
    if "xn--" not in host.lower():
        return host
    import idna

    try:
        return idna.decode(host)
    except UnicodeError:
        return host


def proxy_url_problem(url: str) -> str:
    """Why ``url`` cannot name a proxy to connect to (no host, a port out of range or
    0, brackets around something that is not an IPv6 address), or ``""``. The scheme
    is not judged here: an unsupported one is refused by name when it is used."""
    text = url.strip()
    try:
        parts = urlsplit(text if "://" in text else f"http://{text}")
        port = parts.port
        host = parts.hostname
    except ValueError as exc:
        return f"malformed ({_unquoted(exc)})"
    if not host:
        return "no host"
    if port == 0:
        return _PORT_ZERO
    if _NOT_IN_HOST.search(unquote(host)) and ":" not in host:
        return f"host {host!r} is not a host name"
    return ""


_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
_ESCAPE = re.compile(r"%[0-9a-fA-F]{2}")


def same_feed_key(canonical: str) -> str:
    """What two canonical source URLs (:func:`canonical_source_url`) share when they ask
    for the same feed: the host as DNS and ``Host`` carry it (``bücher.example`` is
    ``xn--bcher-kva.example``), and the path and query as sent (``/café`` is
    ``/caf%C3%A9``, escapes in upper case)."""
    parts = urlsplit(canonical)
    host = parts.hostname or ""
    netloc = request_host(host) + parts.netloc[len(host):] if parts.netloc.startswith(host) \
        else parts.netloc
    rest = urlunsplit(("", "", parts.path, parts.query, ""))
    rest = _ESCAPE.sub(lambda m: m.group().upper(), _NON_ASCII.sub(_percent_encoded, rest))
    return f"{parts.scheme}://{netloc}{rest}"


#: Characters RFC 3986 calls unreserved: escaped or not, they are the same URL.
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
#: A run of escapes of bytes past ASCII: UTF-8 text, percent-encoded, when it decodes.
_HIGH_ESCAPES = re.compile(r"(?:%[89a-fA-F][0-9a-fA-F])+")


def _unescaped_unreserved(match: re.Match[str]) -> str:
    char = chr(int(match.group()[1:], 16))
    return char if char in _UNRESERVED else match.group()


def _as_text(match: re.Match[str]) -> str:
    """A run of escapes as the characters it encodes, when it is UTF-8; else as it is."""
    try:
        text = unquote(match.group(), errors="strict")
    except UnicodeDecodeError:
        return match.group()
    # A decoded space or control would be refused in a link: it stays escaped.
    return match.group() if _CONTROL.search(text) or _SPACE.search(text) else text


def _link_parts(url: str) -> tuple[str, str, str, str]:
    """``url`` (as :func:`check_link` returns it) as its scheme and ``://``, its host,
    its ``:port`` (or ``""``) and the rest, in the form a request sends: unreserved
    characters unescaped, others past ASCII percent-encoded, every escape in upper case."""
    scheme, sep, after = url.partition("://")
    cut, host, port = _authority(after)
    rest = _ESCAPE.sub(_unescaped_unreserved, after[cut:])
    rest = _ESCAPE.sub(lambda m: m.group().upper(), _NON_ASCII.sub(_percent_encoded, rest))
    return scheme + sep, host, port, rest


def _authority(after: str) -> tuple[int, str, str]:
    """Where the host part of ``after`` (a URL past its ``://``) ends, the host, and its
    ``:port`` (or ``""``)."""
    cut = min((i for i in (after.find(c) for c in "/?") if i >= 0), default=len(after))
    netloc = after[:cut]
    if netloc.rfind(":") > netloc.rfind("]"):
        host, colon, port = netloc.rpartition(":")
        return cut, host, colon + port
    return cut, netloc, ""


def link_form(url: str) -> str:
    """The one form of every spelling of the link ``url`` (as :func:`check_link`
    returns it): the host as DNS carries it and the rest as a request sends it. Two
    links of one form name the same page (``/caf%c3%a9`` and ``/café``, ``/%7Euser``
    and ``/~user``); an escaped reserved character (``a%2Fb``) stays apart from it."""
    head, host, port, rest = _link_parts(url)
    return head + request_host(host) + port + rest


def link_spellings(url: str) -> frozenset[str]:
    """The spellings of the link ``url`` that a feed commonly switches between, as
    :func:`check_link` keeps them: its host in Unicode or as IDNA, the rest with
    non-ASCII text as characters or percent-encoded (escapes in upper or lower case),
    ``~`` as itself or escaped. ``url`` itself included."""
    if url.isascii() and "%" not in url and "~" not in url and "xn--" not in url.lower():
        return frozenset({url})  # the usual link has no other spelling: spare the work
    head, host, port, rest = _link_parts(url)
    hosts = {name + port for name in (host, request_host(host), unicode_host(host))}
    lower = _ESCAPE.sub(lambda m: m.group().lower(), rest)
    rests = {rest, lower}
    rests |= {_HIGH_ESCAPES.sub(_as_text, r) for r in rests}
    rests |= {r.replace("~", "%7E") for r in rests} | {r.replace("~", "%7e") for r in rests}
    return frozenset({url} | {head + host + r for host in hosts for r in rests})


def other_scheme(url: str) -> str | None:
    """The link ``url`` (as :func:`check_link` returns it) under the other of http and
    https, or ``None`` when it names a port: a site that moved to https (or back) still
    links the same pages, while ``:8443`` names a server of its own."""
    scheme, _, after = url.partition("://")
    if scheme not in _WEB_SCHEMES or _authority(after)[2]:
        return None  # no web link, or a port of its own
    return ("https" if scheme == "http" else "http") + url[len(scheme):]
