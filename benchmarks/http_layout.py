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

    python benchmarks/http_layout.py [--requests 500] [--origins 300] [--delay 0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import ssl
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from signal_feeds.http.clients import TransportPool  # noqa: E402
from signal_feeds.http.fetch import FetchLimits, fetch  # noqa: E402
from signal_feeds.http.slots import HostSlots  # noqa: E402

BODY = b"<rss version='2.0'><channel><title>t</title></channel></rss>"


# -- the server (child process) -------------------------------------------------------

async def _serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            delay: float) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/rss+xml\r\nContent-Length: "
    answer = head + str(len(BODY)).encode() + b"\r\n\r\n" + BODY
    try:
        while True:
            await reader.readuntil(b"\r\n\r\n")
            await asyncio.sleep(delay)
            writer.write(answer)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--origins", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--layouts", nargs="*", default=list(LAYOUTS))
    args = parser.parse_args()

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
