"""Every link from one of the repository's Markdown pages to another file of it, or to a
heading, leads somewhere (a renamed heading broke the README's link to the
benchmarks' CPU breakdown); the names and commands the pages give exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = sorted(p for p in REPO.rglob("*.md")
               if not any(part.startswith(".") or part in {"node_modules", "build"}
                          for part in p.relative_to(REPO).parts))
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings (lowercased, punctuation dropped,
    spaces as hyphens; a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else _HEADING.match(line)
        if m is None:
            continue
        text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", m.group(2)).lower()
        slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def test_the_pages_are_found() -> None:
    assert REPO / "README.md" in PAGES and len(PAGES) > 10


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_links_inside_the_repository_lead_somewhere(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    broken = []
    for target in _LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no such heading")
    assert broken == []


# -- the names docs/architecture.md gives ----------------------------------------------------

ARCHITECTURE = REPO / "docs" / "architecture.md"
PACKAGE = REPO / "signal_feeds"
_TICKED = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(r"^[\w.<>-]+(?:/[\w.<>-]*)*$")
_NAME = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*(?:\(\))?$")


#: Names of Python's own the page gives (the process pool's thread).
_PYTHONS_OWN = {"QueueFeederThread"}


def _source_words() -> set[str]:
    words: set[str] = set()
    for folder in (PACKAGE, REPO / "tests"):
        for path in folder.rglob("*.py"):
            words.update(re.findall(r"[A-Za-z_]\w*", path.read_text(encoding="utf-8")))
    return words


def _resolves(dotted: str) -> bool:
    """``dotted`` is an importable module, or a module's attribute, of the package
    (written from ``signal_feeds``, or from one of its parts: ``store.leases.X``) or of
    the standard library."""
    import importlib

    parts = dotted.split(".")
    tries = [parts] if parts[0] == "signal_feeds" else [
        ["signal_feeds", *parts], ["signal_feeds", "store", *parts],
        parts]  # the standard library's (`http.client`)
    for names in tries:
        for cut in range(len(names), 0, -1):
            try:
                value: object = importlib.import_module(".".join(names[:cut]))
            except ImportError:
                continue
            try:
                for attribute in names[cut:]:
                    value = getattr(value, attribute)
            except AttributeError:
                break
            return True
    return False


def _thread_names() -> set[str]:
    from signal_feeds.offload import MAX_THREADS

    text = "\n".join(p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py"))
    named = set(re.findall(r"""name(?:_prefix)?=["'](signal-[\w-]+)["']""", text))
    return named | {f"signal-{lane}" for lane in MAX_THREADS}


def test_every_name_the_architecture_page_gives_exists() -> None:
    # The page names modules, files, classes, constants, settings and threads; a rename
    # left it pointing at nothing (a backend's steps named no registration point).
    words = _source_words()
    threads = _thread_names()
    missing = []
    for ticked in sorted(set(_TICKED.findall(ARCHITECTURE.read_text(encoding="utf-8")))):
        name = ticked.strip()
        if name in _PYTHONS_OWN:
            continue
        if name.startswith("signal-") and " " not in name:
            if re.sub(r"_\d+$", "", name) not in threads:
                missing.append(f"thread {name}")
        elif "/" in name or name.endswith((".py", ".md")):
            if not _PATH.match(name):
                continue  # a command line or a pattern
            path = name.replace("<db>-hosts", "")
            where = (REPO / path, PACKAGE / path, PACKAGE / "store" / path)
            if path and not any(p.exists() for p in where) and not any(
                    PACKAGE.rglob(path)):
                missing.append(f"file {name}")
        elif _NAME.match(name):
            bare = name.removesuffix("()")
            if "." in bare and bare.split(".")[0] in ("signal_feeds", *(
                    p.stem for p in PACKAGE.iterdir())):
                if not _resolves(bare):
                    missing.append(f"name {name}")
            elif not set(bare.split(".")) <= words:
                missing.append(f"word {name}")
    assert missing == [], missing


# -- the commands the pages give ----------------------------------------------------------

#: Commands the README shows being refused, with what is refused.
_REFUSED_AS_SHOWN = {"signal search harvest -market": "-market"}


def _command_lines(page: Path) -> list[str]:
    """Each ``signal ...`` command of the page: a line of a console block (after a cron
    schedule, say), or a code span of the prose."""
    text = page.read_text(encoding="utf-8")
    found = []
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.DOTALL):
        for line in block.splitlines():
            m = re.search(r"(?:^|\s)(signal [a-z].*)", line.split("  #")[0])
            if m:
                found.append(m.group(1).strip())
    prose = " ".join(re.sub(r"```.*?```", "", text, flags=re.DOTALL).split())
    found += re.findall(r"`(signal [a-z][^`]*)`", prose)
    return found


@pytest.mark.parametrize("page", [REPO / "README.md", ARCHITECTURE],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_every_command_the_page_gives_exists_with_its_options(page: Path) -> None:
    # A renamed option left a page telling users to type what the command refuses.
    import shlex

    import click

    from signal_feeds.cli.commands import cli

    lines = _command_lines(page)
    assert lines, "no command found: the page's layout changed under this test"
    wrong = []
    for line in lines:
        try:
            words = shlex.split(line)
        except ValueError:
            words = line.split()
        command: click.Command = cli
        i = 1
        while (i < len(words) and isinstance(command, click.Group)
               and words[i] in command.commands):
            command, i = command.commands[words[i]], i + 1
        if command is cli:
            wrong.append(f"{line}: no such command")
            continue
        known = {"--help", "-h"} | {o for p in command.params
                                    for o in [*p.opts, *p.secondary_opts]}
        for word in words[i:]:
            option = word.strip("[]").split("=")[0]
            if (option.startswith("-") and option != "--" and option not in known
                    and _REFUSED_AS_SHOWN.get(line) != option):
                wrong.append(f"{line}: {command.name} has no option {option}")
    assert wrong == [], wrong
