"""Which ``ETag`` a source keeps from a 200 it asked for conditionally. Pure.

A server that honours ``If-None-Match`` never answers 200 with the very tag it was
asked about (RFC 9110 §13.1.2: a match is a 304). One that does has shown that it
ignores its own validator, and since ``If-None-Match`` takes precedence over
``If-Modified-Since``, sending the tag back again would cost the whole body on every
poll. Apache httpd's mod_deflate does exactly that by default: it appends ``-gzip`` to
the ETag of a compressed response and then compares what comes back with the file's
unsuffixed tag, which never matches (``DeflateAlterETag AddSuffix``, Apache bug 45023).

So such a tag is not kept when the response has a ``Last-Modified`` to ask by instead;
the date alone then earns the 304 (whose own ETag, Apache's unsuffixed one, is kept
as any 304's is). Without a date the tag stays: dropping it would make the next request
unconditional, not cheaper.
"""

from __future__ import annotations

from signal_feeds.errors import shown
from signal_feeds.records import SourceState

__all__ = ["ignored_etag_warning", "ignores_etag", "kept_etag", "sent_validators"]

#: Characters of an ETag that a warning quotes.
_ETAG_SHOWN = 80


def sent_validators(state: SourceState, *, refresh: bool) -> tuple[str, str]:
    """The (ETag, Last-Modified) a request for ``state``'s source sends as
    ``If-None-Match`` and ``If-Modified-Since`` (``""``: not sent). A refresh asks
    unconditionally: a 304 would keep the old rows."""
    if refresh:
        return "", ""
    return state.etag, state.last_modified


def _opaque(tag: str) -> str:
    # If-None-Match compares weakly (RFC 9110 §8.8.3.2): W/"x" matches "x".
    tag = tag.strip()
    return tag[2:] if tag.startswith("W/") else tag


def ignores_etag(sent: str, answered: str) -> bool:
    """True when a 200 to a request that sent ``If-None-Match: sent`` carries that same
    tag (``answered``): the server did not honour it."""
    return bool(sent) and bool(answered) and _opaque(sent) == _opaque(answered)


def kept_etag(sent: str, answered: str, last_modified: str) -> str:
    """The ETag to store from a 200 (``answered``) to a request that sent ``sent``
    (``""`` for none): ``answered``, unless the server ignored it and a
    ``last_modified`` can ask instead."""
    if last_modified and ignores_etag(sent, answered):
        return ""
    return answered


def ignored_etag_warning(etag: str) -> str:
    """The report's words for an ETag that was not kept."""
    return (f"the server answered If-None-Match: {shown(etag, _ETAG_SHOWN)} with the whole "
            "feed and that same ETag, so it ignores it (Apache's mod_deflate does so with "
            "its '-gzip' ETags): the next request asks by If-Modified-Since alone")
