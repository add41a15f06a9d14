"""The scenario server: the library's teaching server plus what only the tests need.

On top of the fixture feeds (``/feeds/``, strong ETags, Last-Modified, 304s) it answers
scripted responses (:meth:`ScenarioServer.script`), keeps a log of every request with its
headers and timing, counts requests in flight (and the peak) and body bytes sent, and
serves the hostile scenarios under ``/scenario/`` (see scenario_handler). Not a test
module: tests import it as ``from scenario_server import ScenarioServer``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from scenario_handler import FALLBACK_DEMO, FALLBACK_MALFORMED, ScenarioHandler

from signal_feeds.demo.teaching_server import Resource, TeachingServer

__all__ = ["RequestRecord", "ScenarioServer", "ScriptedResponse"]


@dataclass(frozen=True)
class RequestRecord:
    """One request as the server saw it.

    ``finished`` is ``math.inf`` while the request is still being handled.
    """

    method: str
    path: str
    headers: dict[str, str]
    started: float
    finished: float

    def header(self, name: str) -> str | None:
        """The value of a request header, looked up case-insensitively (None if absent)."""
        wanted = name.lower()
        for key, value in self.headers.items():
            if key.lower() == wanted:
                return value
        return None


@dataclass(frozen=True)
class ScriptedResponse:
    """One canned response for :meth:`ScenarioServer.script`.

    ``Content-Length`` is added unless ``headers`` already has one (sent verbatim then).
    """

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    delay: float = 0.0


@dataclass
class Slot:
    """A request being handled (or handled): the mutable side of a RequestRecord."""

    method: str
    path: str
    headers: dict[str, str]
    started: float
    finished: float | None = None
    closing: bool = False  # the last bytes of the answer are being written

    def record(self) -> RequestRecord:
        finished = math.inf if self.finished is None else self.finished
        return RequestRecord(self.method, self.path, dict(self.headers), self.started, finished)


@dataclass
class PutOptions:
    """What :meth:`ScenarioServer.put` adds to a resource: headers and a rotating ETag."""

    headers: tuple[tuple[str, str], ...] = ()
    rotate_etag: bool = False
    rotations: int = 0


@dataclass
class _Script:
    responses: tuple[ScriptedResponse, ...]
    index: int = 0


@dataclass
class State:
    """Everything the handler threads share, guarded by ``cond``'s lock."""

    cond: threading.Condition = field(default_factory=threading.Condition)
    log: list[Slot] = field(default_factory=list)
    active: list[Slot] = field(default_factory=list)
    in_flight: int = 0
    peak: int = 0
    sent: dict[str, int] = field(default_factory=dict)
    flaky: dict[str, int] = field(default_factory=dict)
    scripts: dict[str, _Script] = field(default_factory=dict)
    options: dict[str, PutOptions] = field(default_factory=dict)
    gzip_bombs: dict[int, bytes] = field(default_factory=dict)


class ScenarioServer(TeachingServer):
    """A :class:`TeachingServer` with scripts, a request log, counters and scenarios.

    Use it as a context manager::

        with ScenarioServer() as server:
            httpx.get(server.url("/scenario/slow?delay=0.5"))
            server.requests_for("/scenario/slow")
    """

    handler_class = ScenarioHandler

    def __init__(self, directory: Path | None = None, *, port: int = 0) -> None:
        # The base class put()s the fixtures while it starts: our state must exist first.
        self.state = State()
        self.stopping = threading.Event()
        super().__init__(directory, port=port)
        demo = self.fixtures / "demo-rss.xml"
        malformed = self.fixtures / "variants" / "malformed.xml"
        self.demo_body = demo.read_bytes() if demo.is_file() else FALLBACK_DEMO
        self.malformed_body = malformed.read_bytes() if malformed.is_file() else (
            FALLBACK_MALFORMED)
        #: The demo feed with both validators, for the scenarios that wrap it.
        self.demo: Resource = self.make_resource(self.demo_body)
        for name, options in {"rotating-etag": {"rotate_etag": True},
                              "etag-only": {"last_modified": False},
                              "last-modified-only": {"etag": False},
                              "no-validators": {"etag": False, "last_modified": False}}.items():
            self.put(f"/scenario/{name}", self.demo_body, **options)  # type: ignore[arg-type]

    def stop(self) -> None:
        """Wake sleeping and trickling scenarios, then stop as the teaching server does."""
        self.stopping.set()
        super().stop()

    # -- content --------------------------------------------------------------------------

    def put(self, path: str, body: bytes, *, content_type: str | None = None,
            etag: bool = True, last_modified: bool = True, rotate_etag: bool = False,
            headers: Mapping[str, str] | None = None) -> None:
        """Serve ``body`` at ``path`` as the teaching server does, plus ``headers`` on every
        answer (304s included) and, with ``rotate_etag``, a new ETag on every 200."""
        extra = tuple((headers or {}).items())
        for name, value in extra:
            if any(c in name + value for c in "\r\n"):
                raise ValueError(f"header {name!r} contains CR or LF")
        super().put(path, body, content_type=content_type, etag=etag,
                    last_modified=last_modified)
        with self.state.cond:
            self.state.options[path] = PutOptions(extra, rotate_etag and etag)

    def script(self, path: str, responses: Sequence[ScriptedResponse]) -> None:
        """Answer requests to ``path`` with ``responses`` in turn; the last one repeats.

        ``path`` may include a query string (matched exactly first), otherwise it matches
        any query. Scripts take precedence over :meth:`put` resources and scenarios.
        """
        if not path.startswith("/"):
            raise ValueError(f"path must start with '/': {path!r}")
        if not responses:
            raise ValueError("script() needs at least one response")
        with self.state.cond:
            self.state.scripts[path] = _Script(tuple(responses))

    # -- observation ----------------------------------------------------------------------

    @property
    def requests(self) -> list[RequestRecord]:
        """A copy of the request log in arrival order.

        Requests whose response is being written are waited for (briefly) so that a
        request the client has already seen answered shows its ``finished`` time;
        requests still in progress (sleeping, trickling) have ``finished == math.inf``.
        """
        with self.state.cond:
            self._settle()
            return [slot.record() for slot in self.state.log]

    def requests_for(self, path: str) -> list[RequestRecord]:
        """Logged requests for ``path``: exact target if it has a query, else by path."""
        if "?" in path:
            return [r for r in self.requests if r.path == path]
        return [r for r in self.requests if urlsplit(r.path).path == path]

    def clear_log(self) -> None:
        """Forget logged requests and reset :attr:`peak_in_flight`."""
        with self.state.cond:
            self._settle()
            self.state.log.clear()
            self.state.peak = self.state.in_flight

    @property
    def peak_in_flight(self) -> int:
        """Most requests handled at the same moment since start / clear_log / reset_peak."""
        with self.state.cond:
            return self.state.peak

    @property
    def in_flight(self) -> int:
        """Requests being handled right now (not counting ones whose answer is written)."""
        with self.state.cond:
            self._settle()
            return self.state.in_flight

    def reset_peak(self) -> None:
        """Start counting :attr:`peak_in_flight` again from the requests in progress now."""
        with self.state.cond:
            self._settle()
            self.state.peak = self.state.in_flight

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until no request is being handled; False if ``timeout`` passed first."""
        with self.state.cond:
            return self.state.cond.wait_for(lambda: self.state.in_flight == 0, timeout)

    def bytes_sent(self, path_prefix: str = "/") -> int:
        """Body bytes written so far for requests whose target starts with ``path_prefix``."""
        with self.state.cond:
            return sum(n for p, n in self.state.sent.items() if p.startswith(path_prefix))

    def _settle(self) -> None:
        """Wait (with the lock held) for requests whose response is being written.

        A client can read the last byte before the handler thread returns from the write;
        without this, a request the client has seen answered could still look in flight.
        """
        state = self.state
        state.cond.wait_for(lambda: not any(s.closing for s in state.active), timeout=5.0)

    # -- used by the handler ----------------------------------------------------------------

    def next_scripted(self, target: str) -> ScriptedResponse | None:
        """The next scripted answer for a request target, if it has a script."""
        with self.state.cond:
            script = (self.state.scripts.get(target)
                      or self.state.scripts.get(urlsplit(target).path))
            if script is None:
                return None
            response = script.responses[min(script.index, len(script.responses) - 1)]
            script.index += 1
            return response

    def options_for(self, target: str) -> PutOptions:
        """What put() added for a request target (nothing for a fixture file)."""
        with self.state.cond:
            return (self.state.options.get(target)
                    or self.state.options.get(urlsplit(target).path) or PutOptions())

    def sleep(self, seconds: float) -> bool:
        """Sleep unless the server stops first; True when it is stopping."""
        return self.stopping.wait(seconds)

    def begin(self, method: str, target: str, headers: dict[str, str], started: float) -> Slot:
        """Log a request and count it in flight until :meth:`end`."""
        slot = Slot(method, target, headers, started)
        with self.state.cond:
            self.state.log.append(slot)
            self.state.active.append(slot)
            self.state.in_flight += 1
            # Requests whose answer is being written are not counted: their client may
            # have read it all and let the next request go (a worker's host slot given
            # back) before the handler thread returns from the write.
            answering = sum(1 for s in self.state.active if not s.closing)
            self.state.peak = max(self.state.peak, answering)
        return slot

    def mark_closing(self, slot: Slot) -> None:
        with self.state.cond:
            slot.closing = True

    def end(self, slot: Slot, finished: float) -> None:
        with self.state.cond:
            slot.finished = finished
            slot.closing = True
            self.state.active.remove(slot)
            self.state.in_flight -= 1
            self.state.cond.notify_all()

    def count_sent(self, target: str, n: int) -> None:
        with self.state.cond:
            self.state.sent[target] = self.state.sent.get(target, 0) + n

    def count_flaky(self, target: str) -> int:
        """How many times ``target`` has been asked for by the flaky scenario (this one too)."""
        with self.state.cond:
            count = self.state.flaky.get(target, 0) + 1
            self.state.flaky[target] = count
            return count
