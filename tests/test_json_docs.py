"""The README's "JSON output" tables are the reference operators write ``jq`` scripts
from: every key a ``--json`` document holds is listed there, every listed key is held by
some document, a key said to be left out is missing somewhere (and there otherwise), and
``null`` appears only where the table says so. The documents come from the commands
themselves, run on a database filled over real HTTP on 127.0.0.1, with a failing source,
a moved one, one told to wait, an expired one, a duplicate, an edit and a skipped entry,
so the keys that appear only in some cases appear."""

from __future__ import annotations

import json
import re
import typing
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pytest_httpserver import HTTPServer
from werkzeug import Response

from signal_feeds.cli.commands import cli
from signal_feeds.decide.report import SourceStatus

README = Path(__file__).resolve().parent.parent / "README.md"

#: The table of the fields every entry object has (``entry`` as a type elsewhere).
ENTRY = "An entry"
#: ``totals`` holds a count per status that occurred: one row stands for them all.
STATUS_KEY = "totals.<status>"
TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str, "integer": int, "number": (int, float), "boolean": bool,
    "array": list, "object": dict, "entry": dict}


@dataclass(frozen=True)
class Row:
    """One row of a README table: the paths it names, their type, when none."""

    paths: tuple[str, ...]
    type: str
    absent: str


def readme_tables() -> dict[str, list[Row]]:
    """The tables of the README's "JSON output" section, by their heading (backticks
    removed: ``signal fetch --json``)."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## JSON output\n", 1)[1].split("\n## ", 1)[0]
    tables: dict[str, list[Row]] = {}
    heading = ""
    for line in section.splitlines():
        if line.startswith("### "):
            heading = line[4:].replace("`", "").strip()
            tables[heading] = []
        elif line.startswith("| `"):
            name, kind, _, absent = (c.strip() for c in line.strip("|").split(" | "))
            tables[heading].append(Row(tuple(re.findall(r"`([^`]+)`", name)), kind, absent))
    return tables


def documented(table: list[Row], entry: list[Row]) -> dict[str, Row]:
    """Every path a table lists, an entry's fields under each field typed ``entry``."""
    paths: dict[str, Row] = {}
    for row in table:
        for path in row.paths:
            paths[path] = row
            if row.type in ("entry", "array of entries"):
                inner = path + ("[]" if row.type.startswith("array") else "")
                paths.update({f"{inner}.{p}": r for r in entry for p in r.paths})
    return paths


def objects(doc: Any) -> dict[str, list[dict[str, Any]]]:
    """Every object in a document by its path (``""``: the document, ``a[]``: each
    object of the array ``a``), as ``jq`` would reach it."""
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict):
            found[path].append(value)
            for key, item in value.items():
                walk(item, f"{path}.{key}" if path else key)
        elif isinstance(value, list):
            for item in value:
                walk(item, path + "[]")

    walk(doc, "")
    return found


def field_path(parent: str, key: str) -> str:
    path = f"{parent}.{key}" if parent else key
    return STATUS_KEY if parent == "totals" and key in STATUSES else path


STATUSES = frozenset(typing.get_args(SourceStatus))


def mismatches(docs: list[Any], paths: dict[str, Row]) -> list[str]:
    """What the documents and the README's rows for them disagree on."""
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for doc in docs:
        for path, objs in objects(doc).items():
            found[path].extend(objs)
    problems = []
    produced: set[str] = set()
    for parent, objs in found.items():
        for obj in objs:
            for key, value in obj.items():
                path = field_path(parent, key)
                produced.add(path)
                row = paths.get(path)
                if row is None:
                    continue
                if value is None:
                    if "`null`" not in row.absent:
                        problems.append(f"{path}: null, and the README does not say so")
                    continue
                kind = TYPES[row.type.split()[0] if not row.type.startswith("array")
                             else "array"]
                if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                    problems.append(f"{path}: {value!r} is not a {row.type}")
    problems += [f"{p}: produced, not in the README" for p in sorted(produced - set(paths))]
    problems += [f"{p}: in the README, never produced" for p in sorted(set(paths) - produced)]
    for path, row in paths.items():
        if path == STATUS_KEY or path not in produced:
            continue
        parent, _, key = path.rpartition(".")
        holders = [key in obj for obj in found[parent]]
        if "left out" in row.absent and all(holders):
            problems.append(f"{path}: said to be left out, always there")
        if "left out" not in row.absent and not all(holders):
            problems.append(f"{path}: left out, and the README does not say so")
    return problems


# -- the documents ----------------------------------------------------------------------


def _news(title: str) -> str:
    items = (
        f"<item><guid>g1</guid><title>{title}</title>"
        "<link>https://news.example/harvest</link><author>ana@example.org (Ana)</author>"
        "<pubDate>Mon, 02 Feb 2026 10:00:00 GMT</pubDate><description>The harvest "
        "festival opens with music, bread and cider for the valley.</description></item>"
        # A date that could be May or December: a warning.
        "<item><guid>g2</guid><title>Market day</title><pubDate>12/05/2026</pubDate>"
        "<link>https://news.example/market</link></item>"
        # Neither an id nor a usable link: skipped, with its reason.
        "<item><title>Unknowable</title><link>javascript:alert(1)</link></item>")
    return f'<rss version="2.0"><channel><title>News</title>{items}</channel></rss>'


COPY = ('<rss version="2.0"><channel><title>Copy</title><item><guid>c1</guid>'
        "<title>Harvest festival opens in the valley today</title>"
        "<link>https://news.example/harvest?utm_source=rss</link>"
        "<pubDate>Mon, 02 Feb 2026 12:00:00 GMT</pubDate></item></channel></rss>")


@pytest.fixture
def documents(httpserver: HTTPServer, tmp_path: Path) -> dict[str, list[Any]]:
    """Each table's heading, and the documents its command printed."""
    state = {"title": "Harvest festival opens in the valley today"}
    httpserver.expect_request("/news").respond_with_handler(
        lambda request: Response(_news(state["title"]), content_type="application/rss+xml"))
    httpserver.expect_request("/old").respond_with_data(
        "", status=301, headers={"Location": httpserver.url_for("/copy")})
    httpserver.expect_request("/copy").respond_with_data(
        COPY, content_type="application/rss+xml")
    httpserver.expect_request("/broken").respond_with_data("oops", status=500)
    httpserver.expect_request("/busy").respond_with_data(
        "", status=429, headers={"Retry-After": "3600"})
    urls = {name: httpserver.url_for("/" + name) for name in ("news", "old", "broken")}
    # Another host name for the same server: its pause holds up none of the others.
    urls["busy"] = httpserver.url_for("/busy").replace("localhost", "127.0.0.1")
    urls["stale"] = "https://stale.example/feed"
    config = tmp_path / "signal.toml"
    config.write_text('[settings]\ndatabase = "s.db"\n\n' + "".join(
        f'[[sources]]\nid = "{sid}"\nurl = "{url}"\n'
        + ("review_by = 2020-01-01\n" if sid == "stale" else "") + "\n"
        for sid, url in urls.items()), encoding="utf-8")
    db = str(tmp_path / "s.db")
    runner = CliRunner()

    def run(code: int, *args: str) -> str:
        result = runner.invoke(cli, list(args))
        assert result.exit_code == code, (args, result.output)
        return result.stdout

    docs: dict[str, list[Any]] = defaultdict(list)
    fetch = ["fetch", "--config", str(config), "--json"]
    docs["signal fetch --json"].append(json.loads(run(1, *fetch)))
    state["title"] = "Harvest festival opens in the valley, at last"
    docs["signal fetch --json"].append(json.loads(run(1, *fetch, "--force")))
    docs["signal fetch --json"].append(json.loads(run(0, *fetch)))
    for args in (["--config", str(config)], ["--db", db]):
        docs["signal sources --json"].append(json.loads(run(0, "sources", *args, "--json")))
    entries = json.loads(run(0, "entries", "--db", db, "--json"))
    docs["signal entries --json"] += [entries, json.loads(
        run(0, "entries", "--db", db, "--json", "--all"))]
    for args in (["harvest"], ["--rebuild"], ["--rebuild", "harvest", "--all"]):
        docs["signal search --json"].append(
            json.loads(run(0, "search", "--db", db, *args, "--json")))
    harvest = next(e["id"] for e in entries["entries"] if e["remote_id"] == "g1")
    docs["signal history --json"].append(json.loads(run(0, "history", harvest, "--db", db,
                                                        "--json")))
    for code, url in ((0, "https://news.example/harvest"), (1, "https://none.example/")):
        docs["signal lookup --json"].append(json.loads(run(code, "lookup", url, "--db", db,
                                                           "--json")))
    docs["signal changes --json"] += [
        json.loads(line) for line in run(0, "changes", "--db", db, "--json").splitlines()]
    docs["signal dedupe --json"].append(json.loads(run(0, "dedupe", "--config", str(config),
                                                       "--json")))
    docs["signal copy --json"].append(json.loads(run(
        0, "copy", "--db", db, "--to", str(tmp_path / "copy.db"), "--json")))
    opml = tmp_path / "list.opml"
    opml.write_text(
        '<opml version="2.0"><body><outline text="Fresh" xmlUrl="https://fresh.example/feed"/>'
        f'<outline text="Again" xmlUrl="{urls["news"]}"/></body></opml>', encoding="utf-8")
    docs["signal sources import-opml --json"].append(json.loads(run(
        0, "sources", "import-opml", str(opml), "--config", str(config), "--dry-run",
        "--json")))
    feed = tmp_path / "feed.xml"
    feed.write_text(_news(state["title"]), encoding="utf-8")
    docs["signal parse"] += [json.loads(line) for line in run(
        1, "parse", str(feed), str(tmp_path / "missing.xml")).splitlines()]
    docs["signal export --format json"].append(json.loads(run(
        0, "export", "--db", db, "--format", "json")))
    return docs


def test_the_readme_has_a_table_for_each_json_output(documents: dict[str, list[Any]]) -> None:
    assert set(readme_tables()) == {ENTRY, *documents}


def test_every_json_key_is_documented_and_every_documented_key_produced(
        documents: dict[str, list[Any]]) -> None:
    tables = readme_tables()
    problems = {heading: found for heading, docs in documents.items()
                if (found := mismatches(docs, documented(tables[heading], tables[ENTRY])))}
    assert problems == {}


def test_the_checks_see_a_key_left_undocumented() -> None:
    # The comparison itself: a key the README lacks, a documented key never produced,
    # a null the table does not allow, a key left out that it says is always there.
    rows = {"a": Row(("a",), "string", "—"), "b": Row(("b",), "integer", "`null`")}
    assert mismatches([{"a": None, "c": 1}], rows) == [
        "a: null, and the README does not say so", "c: produced, not in the README",
        "b: in the README, never produced"]
    assert mismatches([{"a": "x", "b": 1}, {"b": None}], rows) == [
        "a: left out, and the README does not say so"]
