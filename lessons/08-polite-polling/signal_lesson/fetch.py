"""Bounded HTTP with conditional GET.

One function, ``fetch``, asks for a feed with the validators of the last response and
reads the answer within limits: connect and read timeouts, an overall deadline, a cap on
the decoded body and a cap on redirects. It says who is asking, and it never invents a
validator: what the server sent is what goes back, byte for byte.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from .errors import (
    BodyTooLarge,
    DeadlineExceeded,
    FetchError,
    FetchTimeout,
    NetworkError,
    TooManyRedirects,
)

__all__ = [
    "USER_AGENT", "BodyTooLarge", "DeadlineExceeded", "FetchError", "FetchTimeout",
    "Limits", "NetworkError", "Response", "TooManyRedirects", "Validators", "fetch",
    "new_client",
]

USER_AGENT = "signal-lesson/0.4 (+https://github.com/signal-feeds/signal)"


@dataclass(frozen=True)
class Limits:
    connect_timeout: float = 10.0  # seconds to open the connection
    read_timeout: float = 30.0  # seconds of silence allowed between two reads
    deadline: float = 60.0  # seconds for the whole request, however it trickles
    max_body_bytes: int = 16 * 1024 * 1024  # after decompression
    max_redirects: int = 5


@dataclass(frozen=True)
class Validators:
    """ETag and Last-Modified exactly as a server sent them ("" when it sent none)."""

    etag: str = ""
    last_modified: str = ""

    @classmethod
    def from_headers(cls, headers: httpx.Headers) -> Validators:
        return cls(headers.get("etag", ""), headers.get("last-modified", ""))

    def request_headers(self) -> dict[str, str]:
        headers = {}
        if self.etag:
            headers["If-None-Match"] = self.etag
        if self.last_modified:
            headers["If-Modified-Since"] = self.last_modified
        return headers


@dataclass(frozen=True)
class Response:
    url: str  # where the body came from, after redirects
    status: int
    body: bytes  # always b"" for a 304
    validators: Validators  # from this response; empty when it carried none
    content_type: str = ""
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names (lesson 08)
    moved_to: str = ""  # where a permanent redirect said the URL now lives (lesson 08)

    @property
    def not_modified(self) -> bool:
        return self.status == 304


def new_client(limits: Limits = Limits(), user_agent: str = USER_AGENT) -> httpx.Client:
    """A client that follows at most ``max_redirects`` redirects and says who it is.

    The redirect cap belongs to the client; ``fetch`` applies the timeouts of the
    ``Limits`` it is given to each request.
    """
    return httpx.Client(
        timeout=httpx.Timeout(limits.read_timeout, connect=limits.connect_timeout),
        follow_redirects=True,
        max_redirects=limits.max_redirects,
        headers={"User-Agent": user_agent},
        trust_env=False,  # no proxy from the environment between us and the source
    )


def permanent_target(response: httpx.Response) -> str:
    """Where the URL we asked for now lives, if it moved for good (301 or 308).

    Only the redirects at the start of the chain count: after a temporary one (302,
    307) the original URL is still the right one to ask next time.
    """
    target = ""
    hops = [*response.history, response]
    for hop, following in zip(hops[:-1], hops[1:], strict=True):
        if hop.status_code not in (301, 308):
            break
        target = str(following.url)
    return target


def fetch(client: httpx.Client, url: str, validators: Validators = Validators(),
          limits: Limits = Limits(), *,
          clock: Callable[[], float] = time.monotonic) -> Response:
    """GET ``url`` conditionally and read the body within ``limits``."""
    started = clock()
    try:
        timeout = httpx.Timeout(limits.read_timeout, connect=limits.connect_timeout)
        with client.stream("GET", url, headers=validators.request_headers(),
                           timeout=timeout) as response:
            declared = response.headers.get("content-length", "")
            if ("content-encoding" not in response.headers and declared.isdigit()
                    and int(declared) > limits.max_body_bytes):
                raise BodyTooLarge(f"declared body of {declared} bytes is over the cap")
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():  # decoded: gzip is counted unpacked
                size += len(chunk)
                if size > limits.max_body_bytes:
                    raise BodyTooLarge(f"body larger than {limits.max_body_bytes} bytes")
                if clock() - started > limits.deadline:
                    raise DeadlineExceeded(f"no complete body within {limits.deadline:g} s")
                chunks.append(chunk)
            return Response(
                url=str(response.url),
                status=response.status_code,
                body=b"".join(chunks),
                validators=Validators.from_headers(response.headers),
                content_type=response.headers.get("content-type", ""),
                headers={name.lower(): value for name, value in response.headers.items()},
                moved_to=permanent_target(response),
            )
    except httpx.TooManyRedirects as exc:
        raise TooManyRedirects(f"more than {limits.max_redirects} redirects") from exc
    except httpx.TimeoutException as exc:
        raise FetchTimeout(f"timed out ({type(exc).__name__})") from exc
    except httpx.HTTPError as exc:
        raise NetworkError(f"{type(exc).__name__}: {exc}") from exc
