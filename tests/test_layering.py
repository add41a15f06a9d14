"""Rules of the layout that import-linter cannot see: who prints, and how long a module is.

The import contracts themselves are in pyproject.toml ([tool.importlinter]) and run as
``lint-imports`` in .ci/run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import signal_feeds

PACKAGE = Path(signal_feeds.__file__).resolve().parent
MAX_LINES = 500

#: The command-line interface is the one place that writes to the terminal.
PRINTING_PACKAGES = ("cli",)

#: (module, function) pairs that are commands of their own and may print.
#: ``python -m signal_feeds.demo.teaching_server`` has to tell its user the address it
#: chose (a free port), and a test reads that line from its stdout.
PRINTING_FUNCTIONS = {("demo/teaching_server.py", "main")}

_STREAMS = {"stdout", "stderr", "__stdout__", "__stderr__"}
_CLICK_OUTPUT = {"echo", "secho", "echo_via_pager"}


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), path


def _stream_attribute(node: ast.expr) -> bool:
    """``sys.stdout`` / ``sys.stderr`` (also ``sys.stdout.buffer``)."""
    if isinstance(node, ast.Attribute) and node.attr == "buffer":
        node = node.value
    return (isinstance(node, ast.Attribute) and node.attr in _STREAMS
            and isinstance(node.value, ast.Name) and node.value.id == "sys")


class _OutputFinder(ast.NodeVisitor):
    """Collects ``print`` (called or passed on), writes to sys.stdout/stderr, click output."""

    def __init__(self, rel: str) -> None:
        self.rel = rel
        self.found: list[str] = []
        self._function: list[str] = []
        self._click_names: set[str] = set()

    def _allowed(self) -> bool:
        return any((self.rel, name) in PRINTING_FUNCTIONS for name in self._function)

    def _report(self, node: ast.AST, what: str) -> None:
        if not self._allowed():
            self.found.append(f"{self.rel}:{getattr(node, 'lineno', '?')}: {what}")

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._function.append(node.name)
        self.generic_visit(node)
        self._function.pop()

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._function.append(node.name)
        self.generic_visit(node)
        self._function.pop()

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module == "click":
            for alias in node.names:
                if alias.name in _CLICK_OUTPUT:
                    self._click_names.add(alias.asname or alias.name)
        if node.module == "sys" and any(a.name in _STREAMS for a in node.names):
            self._report(node, "imports sys.stdout/sys.stderr")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        # A bare reference counts too: ``echo=print`` as a default prints by proxy.
        if node.id == "print" and isinstance(node.ctx, ast.Load):
            self._report(node, "print")
        elif node.id in self._click_names and isinstance(node.ctx, ast.Load):
            self._report(node, f"click {node.id}")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        writes = node.attr in ("write", "writelines") and _stream_attribute(node.value)
        echoes = (node.attr in _CLICK_OUTPUT and isinstance(node.value, ast.Name)
                  and node.value.id == "click")
        if writes or echoes:
            self._report(node, ast.unparse(node))
        self.generic_visit(node)


def find_output(rel: str, source: str) -> list[str]:
    """Every place in ``source`` that writes to the terminal, as ``file:line: what``."""
    finder = _OutputFinder(rel)
    finder.visit(ast.parse(source, filename=rel))
    return finder.found


def test_only_the_cli_prints() -> None:
    found: list[str] = []
    for rel, path in _modules():
        if rel.split("/", 1)[0] in PRINTING_PACKAGES:
            continue
        found += find_output(rel, path.read_text(encoding="utf-8"))
    assert found == [], "the library logs through `logging`; only signal_feeds/cli prints"


def test_the_printing_check_sees_each_way_of_printing() -> None:
    source = '''
import sys
import click
from click import echo as say

def f(out=print):
    print("a")
    sys.stdout.write("b")
    sys.stderr.write("c")
    sys.stdout.buffer.write(b"d")
    click.echo("e")
    say("f")

def main():
    print("a command may")
'''
    found = find_output("demo/teaching_server.py", source)
    assert [line.split(": ", 1)[1] for line in found] == [
        "print", "print", "sys.stdout.write", "sys.stderr.write", "sys.stdout.buffer.write",
        "click.echo", "click say",
    ]
    # Outside its own module the same ``main`` is not exempt.
    assert len(find_output("run/pipeline.py", source)) == 8
    # Writing to a file or a logger is not printing.
    assert find_output("x.py", "log.info('a')\nfile.write('b')\nout.stdout.write('c')\n") == []


def test_no_module_is_over_the_line_limit() -> None:
    sizes = {rel: len(path.read_text(encoding="utf-8").splitlines())
             for rel, path in _modules()}
    over = {rel: n for rel, n in sizes.items() if n > MAX_LINES}
    assert over == {}, f"modules over {MAX_LINES} lines: split them by job"


def test_no_module_imports_another_modules_private_names() -> None:
    # A name with a leading underscore is its module's own business: when a sibling
    # needs it (as jsonfeed needed feed's HTML cleaning), it becomes public API.
    found: list[str] = []
    for rel, path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=rel)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "signal_feeds"):
                found += [f"{rel}:{node.lineno}: {node.module}.{alias.name}"
                          for alias in node.names
                          if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert found == []


def test_no_two_parts_of_the_package_import_each_other() -> None:
    # The layers contract in pyproject.toml already forbids upward imports; this says the
    # same without any ignored import, pair by pair, in the words of the issue: no cycles
    # between the subpackages (and top-level modules) a newcomer finds by name.
    import grimp

    graph = grimp.build_graph("signal_feeds", exclude_type_checking_imports=True)
    parts = sorted(m for m in graph.find_children("signal_feeds")
                   if not m.rsplit(".", 1)[1].startswith("_"))
    both_ways = [
        (a, b) for i, a in enumerate(parts) for b in parts[i + 1:]
        if graph.direct_import_exists(importer=a, imported=b, as_packages=True)
        and graph.direct_import_exists(importer=b, imported=a, as_packages=True)
    ]
    assert both_ways == []


#: Standard-library clients import-linter cannot forbid apart from their package (it
#: forbids urllib or http only whole, and urllib.parse and http.HTTPStatus are fine):
#: httpx is the one HTTP client, so no module opens connections another way.
_OTHER_CLIENTS = ("urllib.request", "http.client", "ftplib", "smtplib", "telnetlib")
#: The proxy variables are read as httpx reads them, with urllib's function for it.
_CLIENT_IMPORTS_ALLOWED = {("http/proxies.py", "urllib.request")}


def _imported(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def test_no_module_uses_another_network_client() -> None:
    found = [f"{rel}: {name}" for rel, path in _modules()
             for name in _imported(ast.parse(path.read_text(encoding="utf-8")))
             if name in _OTHER_CLIENTS and (rel, name) not in _CLIENT_IMPORTS_ALLOWED]
    assert found == []


def test_the_client_check_sees_each_way_of_importing() -> None:
    for text in ("import urllib.request", "from urllib import request",
                 "from http.client import HTTPConnection", "import http.client as c"):
        assert set(_imported(ast.parse(text))) & set(_OTHER_CLIENTS), text
    assert not set(_imported(ast.parse("from urllib.parse import urlsplit"))) & set(
        _OTHER_CLIENTS)


def _contracts() -> dict[str, dict[str, Any]]:
    import tomllib

    pyproject = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    return {c["id"]: c for c in pyproject["tool"]["importlinter"]["contracts"]}


def _parts() -> set[str]:
    """The subpackages and top-level modules a newcomer finds by name."""
    return {p.stem for p in PACKAGE.iterdir()
            if not p.name.startswith("_") and (p.suffix == ".py" or (p / "__init__.py").exists())}


def test_every_part_of_the_package_is_in_the_layers_and_the_printing_rule() -> None:
    # A part missing from a contract is bound by none of its rules: `graphemes` and
    # `limits` were in no layer, and `offload`, `limits` and `graphemes` were not among
    # the modules that may not import click (docs/architecture.md says every rule
    # covers the whole package).
    contracts = _contracts()
    layered = {name.strip() for layer in contracts["pipeline-layers"]["layers"]
               for name in layer.split("|")}
    assert _parts() - layered == set()
    quiet = {m.removeprefix("signal_feeds.")
             for m in contracts["only-cli-prints"]["source_modules"]}
    assert _parts() - quiet == {"cli"}


#: The loggers the README's "Logging" names, one per stage: a program quiets one of
#: them (``logging.getLogger("signal_feeds.store").setLevel(...)``) and keeps the rest.
STAGE_LOGGERS = {"signal_feeds.config", "signal_feeds.run", "signal_feeds.parse",
                 "signal_feeds.store", "signal_feeds.cli"}


def test_every_logger_is_a_stage_of_the_package() -> None:
    # Most of the store and the run logged as "signal_feeds" itself: quieting the
    # store's lost-connection lines quieted the parser's crash reports as well.
    found: list[str] = []
    for rel, path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=rel)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "getLogger"):
                name = ast.unparse(node.args[0]) if node.args else "(root)"
                if name == "__name__":
                    continue  # under its package's stage (signal_feeds.demo.…)
                if not (isinstance(node.args[0], ast.Constant)
                        and node.args[0].value in STAGE_LOGGERS):
                    found.append(f"{rel}:{node.lineno}: getLogger({name})")
    assert found == []
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in readme for name in STAGE_LOGGERS)
