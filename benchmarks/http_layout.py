"""Which layout of httpx clients carries a run best: a focused micro-benchmark.

Layouts, each given the same requests in the same process run:

- ``shared``: one ``httpx.AsyncClient`` with ``concurrency`` connections;
- ``clients``: ``concurrency`` one-connection ``AsyncClient`` s sharing one SSLContext,
  handed out from a free list;
- ``per-origin``: one ``AsyncClient`` per origin with ``per_host`` connections;
- ``signal``: Signal's own :class:`signal_feeds.http.clients.TransportPool`
  (one-connection transports kept per origin, requests through ``fetch``).

Scenarios: one origin with ``concurrency`` slots, and many origins (one listening port
each) with ``per_host`` slots. The server is an asyncio HTTP/1.1 keep-alive server in a
child process that waits ``--delay`` seconds before each answer. Wall and CPU (of this
process only) are printed side by side; the ideal is requests / concurrency × delay.

``--cpu`` measures something else: CPU per request of Signal's ``fetch`` (304s, and 200s
with a 45 KB body) on warm keep-alive connections, ``concurrency`` in flight, the server
answering at once. Each side runs in a child process of its own, so other checkouts of
the package can be compared in the same run (``--tree DIR``: a directory holding another
``signal_feeds``, e.g. ``git archive a270a8b signal_feeds | tar -x -C DIR``; the h11
client of that commit is driven through its own API). The figure is the lowest of
``--repeats`` passes, the one least disturbed by other load on the machine.

    python benchmarks/http_layout.py [--requests 500] [--origins 300] [--delay 0.5]
    python benchmarks/http_layout.py --cpu [--tree DIR ...] [--cpu-requests 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

_CHILD = "--cpu-child" in sys.argv
if not _CHILD:  # a --cpu child imports the signal_feeds of the tree it measures
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

if not _CHILD:
    from signal_feeds.http.clients import TransportPool
    from signal_feeds.http.fetch import FetchLimits, fetch
    from signal_feeds.http.slots import HostSlots

BODY = b"<rss version='2.0'><channel><title>t</title></channel></rss>"
#: The 200s of ``--cpu``: about the size of a 20-entry feed of the benchmark corpus.
BIG_BODY = b"<rss version='2.0'><channel>" + b"<item><title>x</title></item>" * 1550 + \
    b"</channel></rss>"
ETAG = b'"signal-bench"'


# -- the server (child process) -------------------------------------------------------

def _answer(body: bytes) -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/rss+xml\r\nETag: " + ETAG + \
        b"\r\nContent-Length: "
    return head + str(len(body)).encode() + b"\r\n\r\n" + body


async def _serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            delay: float) -> None:
    # /big answers with BIG_BODY; a request carrying the ETag gets a 304.
    small, big = _answer(BODY), _answer(BIG_BODY)
    not_modified = b"HTTP/1.1 304 Not Modified\r\nETag: " + ETAG + b"\r\n\r\n"
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            if delay:
                await asyncio.sleep(delay)
            if ETAG in head:
                writer.write(not_modified)
            else:
                writer.write(big if head.startswith(b"GET /big") else small)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def _server_main(ports: int, delay: float, ready: multiprocessing.Queue[list[int]]) -> None:
    async def main() -> None:
        servers = [await asyncio.start_server(
            lambda r, w: _serve_connection(r, w, delay), "127.0.0.1", 0, backlog=1024)
            for _ in range(ports)]
        ready.put([s.sockets[0].getsockname()[1] for s in servers])
        await asyncio.Event().wait()

    asyncio.run(main())


# -- the layouts -----------------------------------------------------------------------

Get = Callable[[str], Awaitable[None]]


@contextlib.asynccontextmanager
async def shared(concurrency: int, per_host: int) -> AsyncIterator[Get]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, trust_env=False) as client:
        async def get(url: str) -> None:
            (await client.get(url)).raise_for_status()
        yield get


@contextlib.asynccontextmanager
async def clients(concurrency: int, per_host: int) -> AsyncIterator[Get]:
    context = ssl.create_default_context()  # shared: built once
    one = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    free = [httpx.AsyncClient(limits=one, verify=context, trust_env=False)
            for _ in range(concurrency)]
    everyone = list(free)

    async def get(url: str) -> None:
        client = free.pop()
        try:
            (await client.get(url)).raise_for_status()
        finally:
            free.append(client)
    try:
        yield get
    finally:
        for client in everyone:
            await client.aclose()


@contextlib.asynccontextmanager
async def per_origin(concurrency: int, per_host: int) -> AsyncIterator[Get]:
    context = ssl.create_default_context()
    limits = httpx.Limits(max_connections=per_host, max_keepalive_connections=per_host)
    by_origin: dict[str, httpx.AsyncClient] = {}

    async def get(url: str) -> None:
        origin = url.split("/", 3)[2]
        client = by_origin.get(origin)
        if client is None:
            client = by_origin[origin] = httpx.AsyncClient(limits=limits, verify=context,
                                                           trust_env=False)
        (await client.get(url)).raise_for_status()
    try:
        yield get
    finally:
        for client in by_origin.values():
            await client.aclose()


@contextlib.asynccontextmanager
async def signal(concurrency: int, per_host: int) -> AsyncIterator[Get]:
    pool = TransportPool(concurrency, proxy="direct")
    limits = FetchLimits(user_agent="bench", connect_timeout=10, read_timeout=30,
                         deadline=60, max_body_bytes=1 << 20, max_redirects=5)

    async def get(url: str) -> None:
        response = await fetch(pool, url, limits=limits)
        assert response.status == 200
    try:
        yield get
    finally:
        await pool.aclose()


LAYOUTS = {"shared": shared, "clients": clients, "per-origin": per_origin, "signal": signal}


async def _run(layout: Callable[[int, int], contextlib.AbstractAsyncContextManager[Get]],
               urls: list[str], concurrency: int, per_host: int) -> tuple[float, float]:
    slots = asyncio.Semaphore(concurrency)
    hosts = HostSlots(per_host)
    async with layout(concurrency, per_host) as get:
        async def one(url: str) -> None:
            async with hosts.hold(url.split("/", 3)[2]), slots:
                await get(url)

        wall, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(one(u) for u in urls))
        return time.perf_counter() - wall, time.process_time() - cpu


# -- CPU per request (--cpu) -------------------------------------------------------------

async def _cpu_pass(url: str, etag: str, requests: int, concurrency: int) -> float:
    """CPU seconds of ``requests`` fetches, measured in a child process (see ``--cpu``)."""
    from signal_feeds.http import fetch as fetching

    limits = fetching.FetchLimits(user_agent="bench", connect_timeout=10, read_timeout=30,
                                  deadline=60, max_body_bytes=1 << 20, max_redirects=5)
    status = 304 if etag else 200
    try:  # the httpx fetcher: fetch(clients, ...) over a TransportPool
        from signal_feeds.http.clients import TransportPool as Pool
        pool = Pool(concurrency, proxy="direct")
        slot: Callable[[], contextlib.AbstractAsyncContextManager[None]] | None = None
    except ImportError:  # the h11 client of a270a8b: the caller holds a pool slot
        from signal_feeds.http.connections import ConnectionPool  # type: ignore[import-not-found]
        pool = ConnectionPool(concurrency)
        slot = pool.slot
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate, (slot() if slot else contextlib.nullcontext()):
            response = await fetching.fetch(pool, url, limits=limits, etag=etag)
        assert response.status == status, response.status

    await asyncio.gather(*(one() for _ in range(concurrency)))  # open the connections
    cpu = time.process_time()
    await asyncio.gather(*(one() for _ in range(requests)))
    cpu = time.process_time() - cpu
    await pool.aclose()
    return cpu


def _cpu_child(args: argparse.Namespace) -> None:
    tree = args.tree[0] if args.tree else str(Path(__file__).resolve().parents[1])
    sys.path.insert(0, tree)
    figures = {}
    for kind, url, etag in (("304", args.url, ETAG.decode()), ("200", args.url + "big", "")):
        passes = [asyncio.run(_cpu_pass(url, etag, args.cpu_requests, args.concurrency))
                  for _ in range(args.repeats)]
        figures[kind] = min(passes) / args.cpu_requests * 1000
    print(json.dumps(figures))


def _cpu_main(args: argparse.Namespace) -> None:
    ready: multiprocessing.Queue[list[int]] = multiprocessing.Queue()
    server = multiprocessing.Process(target=_server_main, args=(1, 0.0, ready), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{ready.get(timeout=60)[0]}/"
    here = str(Path(__file__).resolve().parents[1])
    trees = [("this checkout", here)] + [(t, t) for t in args.tree]
    print(f"CPU ms per request, {args.cpu_requests} requests, {args.concurrency} in flight, "
          f"lowest of {args.repeats} passes")
    print(f"{'tree':<40} {'304':>7} {'200 (45 KB)':>12}")
    try:
        for label, tree in trees:
            out = subprocess.run(
                [sys.executable, __file__, "--cpu-child", "--tree", tree, "--url", url,
                 "--cpu-requests", str(args.cpu_requests), "--repeats", str(args.repeats),
                 "--concurrency", str(args.concurrency)],
                check=True, capture_output=True, text=True,
                env={**os.environ, "PYTHONPATH": tree}).stdout
            figures = json.loads(out.strip().splitlines()[-1])
            print(f"{label:<40} {figures['304']:7.3f} {figures['200']:12.3f}", flush=True)
    finally:
        server.terminate()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--origins", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--layouts", nargs="*", default=list(LAYOUTS))
    parser.add_argument("--cpu", action="store_true", help="CPU per request (see above)")
    parser.add_argument("--tree", action="append", default=[],
                        help="with --cpu: another checkout's directory to compare")
    parser.add_argument("--cpu-requests", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cpu-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cpu_child:
        _cpu_child(args)
        return
    if args.cpu:
        _cpu_main(args)
        return

    ready: multiprocessing.Queue[list[int]] = multiprocessing.Queue()
    server = multiprocessing.Process(target=_server_main,
                                     args=(args.origins, args.delay, ready), daemon=True)
    server.start()
    ports = ready.get(timeout=60)
    try:
        scenarios = {
            f"1 origin x {args.concurrency} slots": (
                [f"http://127.0.0.1:{ports[0]}/feed/{i}" for i in range(args.requests)],
                args.concurrency),
            f"{args.origins} origins x 2 slots": (
                [f"http://127.0.0.1:{p}/feed/{i}" for p in ports for i in range(2)], 2),
        }
        print(f"delay {args.delay} s, concurrency {args.concurrency}")
        print(f"{'scenario':<24} {'layout':<11} {'wall s':>7} {'x ideal':>8} {'CPU s':>6}")
        for name, (urls, per_host) in scenarios.items():
            ideal = len(urls) / args.concurrency * args.delay
            for layout in args.layouts:
                wall, cpu = asyncio.run(_run(LAYOUTS[layout], urls, args.concurrency,
                                             per_host))
                print(f"{name:<24} {layout:<11} {wall:7.2f} {wall / ideal:8.2f} {cpu:6.2f}",
                      flush=True)
    finally:
        server.terminate()


if __name__ == "__main__":
    main()
