"""Command line of the lesson: ``python -m signal_lesson COMMAND``."""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
from contextlib import ExitStack
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from tempfile import TemporaryDirectory

from .config import Config, Source, is_slug, load_config
from .defuse import DefuseStats, defuse
from .demo import REPO, local_copy
from .errors import FetchError, SignalError
from .fetch import Limits, Validators, fetch, new_client
from .hostile import TIME_LIMIT, amplifier, long_author, measure
from .identity import digest, entry_key, identify
from .parse import NORMALIZER_VERSION, parse_feed
from .runner import Concurrency, run_async
from .server import InFlight, TeachingServer
from .store import Store
from .story import run_story

#: Feeds of this lesson, served at /lesson/NAME by --teaching-server.
LESSON_FEEDS = Path(__file__).resolve().parents[1] / "feeds"
#: Source URLs under this address are served by the teaching server (--teaching-server).
TEACHING = "http://teaching.invalid"
SHOWN = ("remote_id", "url", "title", "published", "updated", "key", "fingerprint")


def show_sources(config_path: str) -> int:
    config = load_config(config_path)
    for source in config.sources:
        copy = local_copy(source.id)
        if copy.exists():
            where = f"{copy.relative_to(REPO)}, {len(copy.read_bytes())} bytes"
        else:
            where = "no local copy"
        print(f"{source.id:<10} {source.url}")
        print(f"{'':<10} {source.title or '(no title)'}; {where}")
    print(f"{len(config.sources)} sources in {config.path}")
    return 0


def show_rows(files: list[str], source_id: str, allow_http: bool) -> int:
    failed = 0
    for name in files:
        try:
            entries = parse_feed(Path(name).read_bytes(), allow_http=allow_http)
            result = identify(source_id, entries)
        except (OSError, SignalError) as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(
            f"{name}: source {source_id}, normalizer {NORMALIZER_VERSION}, "
            f"rows {len(result.rows)}, skipped {result.skipped}"
        )
        for row in result.rows:
            print()
            for field in SHOWN:
                value = json.dumps(getattr(row, field), ensure_ascii=False)
                print(f"  {field:<11} {value}")
    return 1 if failed else 0


def show_key(source_id: str, name: str) -> int:
    key = entry_key(source_id, name, "")
    if key is None:
        print("no id and no link: no key", file=sys.stderr)
        return 1
    parts = json.dumps([source_id, name], ensure_ascii=False, separators=(",", ":"))
    print(parts, key)
    assert key == digest([source_id, name])
    return 0


def show_gets(paths: list[str], limits: Limits) -> int:
    """GET each path from a fresh teaching server; a repeated path asks conditionally."""
    remembered: dict[str, Validators] = {}
    failed = 0
    with TeachingServer() as server, new_client(limits) as client:
        for path in paths:
            print(f"GET {path}")
            seen = len(server.log)
            ok = False
            try:
                response = fetch(client, server.url(path), remembered.get(path, Validators()),
                                 limits)
            except FetchError as exc:
                outcome = f"{type(exc).__name__}: {exc}"
                failed += 1
            else:
                outcome = f"{response.status}, {len(response.body)} bytes"
                remembered[path], ok = response.validators, True
            received = server.log[seen:]
            asked = [f"{name}: {received[0].headers[name]}" for name in
                     ("If-None-Match", "If-Modified-Since") if name in received[0].headers]
            for line in asked or ["no validators"]:
                print(f"  server got  {line}")
            for request in received:
                print(f"  server sent {request.status} for {request.path}")
            print(f"  we got      {outcome}")
            if ok:
                etag, modified = remembered[path].etag, remembered[path].last_modified
                print(f"  validators  ETag {etag or '-'}; Last-Modified {modified or '-'}")
    return 1 if failed else 0


def moment(text: str) -> datetime:
    """A --now value: UTC, to the second, with a trailing Z."""
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not YYYY-MM-DDTHH:MM:SSZ: {text!r}") from exc


def on_teaching_server(config: Config, server: TeachingServer) -> Config:
    """The same list, with TEACHING replaced by the running server's real address."""
    sources = tuple(replace(source, url=source.url.replace(TEACHING, server.url(""), 1))
                    for source in config.sources)
    return replace(config, sources=sources)


def open_store(path: str, now: datetime | None = None) -> Store:
    """The store at ``path`` (its clock stopped at ``now``, if given). A file SQLite
    cannot open is the user's mistake, like a broken source list: a SignalError
    (exit 2), not a traceback."""
    try:
        return Store(path, clock=lambda: now) if now else Store(path)
    except sqlite3.Error as exc:
        raise SignalError(f"{path}: cannot open the database: {exc}") from exc


def fetch_all(args: argparse.Namespace) -> int:
    """Run the pipeline for the sources, print the report, return the exit code."""
    config = load_config(args.config)
    with ExitStack() as stack:
        local = ""
        if args.teaching_server:
            server = stack.enter_context(TeachingServer())
            for file in sorted(LESSON_FEEDS.glob("*.xml")):  # this lesson's own feeds
                server.publish(f"/lesson/{file.name}", file.read_bytes())
            config, local = on_teaching_server(config, server), server.url("")
        store = stack.enter_context(open_store(args.db, args.now))
        limits = Limits(read_timeout=args.read_timeout, deadline=args.deadline,
                        max_body_bytes=args.max_bytes)
        concurrency = Concurrency(args.concurrency, args.per_host, args.workers)
        report = asyncio.run(run_async(config, store, only=args.source, force=args.force,
                                       limits=limits, concurrency=concurrency))
    text = report.to_json() if args.json else report.to_text()
    print(text.replace(local, TEACHING) if local else text)  # no port numbers in output
    return report.exit_code


def describe(name: str, data: bytes) -> None:
    """Print what feedparser makes of ``data`` alone, and after defuse."""
    print(f"{name} ({len(data):,} bytes)")
    stats = DefuseStats()
    for label, document in (("feedparser alone", data), ("after defuse", defuse(data, stats))):
        result = measure(document)
        if result is None:
            print(f"  {label + ':':<17} not finished after {TIME_LIMIT:g} s (stopped)")
            continue
        title = result.title if len(result.title) <= 30 else result.title[:29] + "…"
        print(f"  {label + ':':<17} {result.chars:,} characters; first title {title!r}")
    changes = []
    if stats.doctypes or stats.entities:
        changes.append(f"dropped {stats.doctypes} DOCTYPE, {stats.entities} ENTITY")
    if stats.references:
        changes.append(f"made {stats.references} references numeric")
    if stats.authors_cut:
        changes.append(f"cut {stats.authors_cut} author")
    print(f"  defuse:           {'; '.join(changes) or 'changed nothing'}")


def show_hostile(files: list[str], generated: bool) -> int:
    for name in files:
        describe(name, Path(name).read_bytes())
    if generated:
        describe("amplifier(3000, 3000)", amplifier(3000, 3000))
        describe("long_author(100000)", long_author(100_000))
    return 0


CROWD_FEEDS = ("demo-rss.xml", "demo-atom.xml", "variants/no-dates.xml", "variants/zones.xml")


def show_crowd(hosts: int, concurrency: Concurrency, delay: float) -> int:
    """Many sources on several teaching servers: how many were in flight at once?"""
    everywhere = InFlight()
    with ExitStack() as stack:
        servers = [stack.enter_context(TeachingServer(delay=delay, shared=everywhere))
                   for _ in range(hosts)]
        sources = tuple(Source(f"host{n}-{i}", server.url(f"/feeds/{feed}"))
                        for n, server in enumerate(servers, 1)
                        for i, feed in enumerate(CROWD_FEEDS, 1))
        folder = stack.enter_context(TemporaryDirectory())
        store = stack.enter_context(Store(Path(folder) / "crowd.db"))
        report = asyncio.run(run_async(Config("crowd", sources), store,
                                       concurrency=concurrency))
    where = "1 host" if hosts == 1 else f"{hosts} hosts"
    print(f"{len(sources)} sources on {where}; every answer waits {delay:g} s")
    print(f"limits: {concurrency.total} in flight in all, {concurrency.per_host} per host")
    print(f"peak in flight at the busiest host: {max(s.in_flight.peak for s in servers)}")
    print(f"peak in flight at all hosts together: {everywhere.peak}")
    totals = report.totals
    print(f"{totals.get('fetched', 0)} fetched, {totals['created']} entries created")
    return report.exit_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m signal_lesson")
    commands = parser.add_subparsers(dest="command", required=True)
    sources = commands.add_parser("sources", help="validate and list the sources")
    sources.add_argument("--config", default="signal.toml")
    parse = commands.add_parser("parse", help="show the rows of local feed files")
    parse.add_argument("files", nargs="+", metavar="FILE")
    parse.add_argument("--source-id", default="local", help="the source the files are from")
    parse.add_argument("--allow-http", action="store_true", help="accept http links")
    key = commands.add_parser("key", help="show the key of one entry")
    key.add_argument("source_id")
    key.add_argument("name", help="the entry's remote id (or its link when it has none)")
    get = commands.add_parser("get", help="GET paths from the teaching server")
    get.add_argument("paths", nargs="+", metavar="PATH", help="e.g. /feeds/demo-rss.xml")
    get.add_argument("--max-bytes", type=int, default=Limits.max_body_bytes)
    get.add_argument("--read-timeout", type=float, default=Limits.read_timeout)
    get.add_argument("--deadline", type=float, default=Limits.deadline)
    get.add_argument("--max-redirects", type=int, default=Limits.max_redirects)
    commands.add_parser("story", help="a publisher edits, Signal stores (temporary db)")
    fetch_ = commands.add_parser("fetch", help="fetch the sources into the database")
    fetch_.add_argument("--config", default="signal.toml", help="the source list")
    fetch_.add_argument("--db", default="signal.db", help="the SQLite file")
    fetch_.add_argument("--source", action="append", default=[], metavar="ID",
                        help="fetch only this source (repeat for more)")
    fetch_.add_argument("--json", action="store_true", help="print the report as JSON")
    fetch_.add_argument("--teaching-server", action="store_true",
                        help=f"serve {TEACHING}/ from fixtures/ for this run")
    fetch_.add_argument("--force", action="store_true",
                        help="ask sources that are not due yet (never before Retry-After)")
    fetch_.add_argument("--concurrency", type=int, default=Concurrency.total,
                        help="requests in flight at once, in all")
    fetch_.add_argument("--per-host", type=int, default=Concurrency.per_host,
                        help="requests in flight at once to one host")
    fetch_.add_argument("--workers", type=int, default=Concurrency.workers,
                        help="processes that parse (0: parse in this process)")
    fetch_.add_argument("--now", type=moment, metavar="YYYY-MM-DDTHH:MM:SSZ",
                        help="pretend the clock says this (for lessons and tests)")
    fetch_.add_argument("--max-bytes", type=int, default=Limits.max_body_bytes)
    fetch_.add_argument("--read-timeout", type=float, default=Limits.read_timeout)
    fetch_.add_argument("--deadline", type=float, default=Limits.deadline)
    hostile = commands.add_parser("hostile", help="feedparser on hostile files, defused or not")
    hostile.add_argument("files", nargs="*", metavar="FILE")
    hostile.add_argument("--generated", action="store_true",
                         help="also the generated amplifier and long author")
    crowd = commands.add_parser("crowd", help="concurrency limits, seen from the servers")
    crowd.add_argument("--hosts", type=int, default=3)
    crowd.add_argument("--concurrency", type=int, default=4)
    crowd.add_argument("--per-host", type=int, default=2)
    crowd.add_argument("--workers", type=int, default=0)
    crowd.add_argument("--delay", type=float, default=0.5)
    args = parser.parse_args(argv)
    if args.command in ("parse", "key") and not is_slug(args.source_id):
        parser.error(f"source id {args.source_id!r} is not a slug")
    try:
        if args.command == "crowd":
            concurrency = Concurrency(args.concurrency, args.per_host, args.workers)
            return show_crowd(args.hosts, concurrency, args.delay)
        if args.command == "hostile":
            return show_hostile(args.files, args.generated)
        if args.command == "fetch":
            return fetch_all(args)
        if args.command == "parse":
            return show_rows(args.files, args.source_id, args.allow_http)
        if args.command == "story":
            run_story()
            return 0
        if args.command == "get":
            limits = Limits(read_timeout=args.read_timeout, deadline=args.deadline,
                            max_body_bytes=args.max_bytes, max_redirects=args.max_redirects)
            return show_gets(args.paths, limits)
        if args.command == "key":
            return show_key(args.source_id, args.name)
        return show_sources(args.config)
    except SignalError as exc:
        print(exc, file=sys.stderr)
        return 2
