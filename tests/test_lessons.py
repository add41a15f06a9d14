"""Every lesson folder passes its own test suite, run as a reader would run it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

LESSONS = Path(__file__).resolve().parent.parent / "lessons"
FOLDERS = sorted(p for p in LESSONS.glob("[0-9][0-9]-*") if p.is_dir())


def test_there_are_ten_lessons() -> None:
    assert [p.name[:2] for p in FOLDERS] == [f"{n:02d}" for n in range(1, 11)]


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_lesson_suite_passes(folder: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          cwd=folder, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def _console_blocks(text: str) -> list[list[str]]:
    blocks, current, inside = [], [], False
    for line in text.splitlines():
        if line.startswith("```console"):
            inside, current = True, []
        elif inside and line.startswith("```"):
            inside = False
            blocks.append(current)
        elif inside:
            current.append(line)
    return blocks


def _commands(lines: list[str]) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out:
            out[-1][1].append(line)
    return out


def test_digests_shown_in_lessons_are_the_librarys() -> None:
    """Every key and fingerprint a lesson prints equals what the library computes for
    the same source id and input."""
    import json
    import re
    import shlex

    from signal_feeds import digest, parse_files

    checked = 0
    for folder in FOLDERS:
        if not (folder / "README.md").exists():
            continue
        readme = (folder / "README.md").read_text(encoding="utf-8")
        for block in _console_blocks(readme):
            for command, output in _commands(block):
                words = shlex.split(command.split("|")[0])
                if words[:4] == ["python", "-m", "signal_lesson", "key"] and len(words) == 6:
                    shown = output[0].split()[-1]
                    assert shown == digest(words[4:6]), (folder.name, command)
                    checked += 1
                if words[:4] == ["python", "-m", "signal_lesson", "parse"] and (
                        "--source-id" in words):
                    source_id = words[words.index("--source-id") + 1]
                    path = (folder / words[4]).resolve()
                    (result,) = parse_files([path], source_id=source_id)
                    library = {e["remote_id"]: e for e in result.get("entries", [])}
                    fields: dict[str, str] = {}
                    for line in output:
                        match = re.match(r"\s+(remote_id|key|fingerprint)\s+(\".*\")$", line)
                        if match:
                            fields[match[1]] = json.loads(match[2])
                        if {"remote_id", "key", "fingerprint"} <= set(fields):
                            lib = library[fields["remote_id"]]
                            assert (fields["key"], fields["fingerprint"]) == (
                                lib["id"], lib["fingerprint"]), (folder.name, command)
                            checked += 1
                            fields = {}
    assert checked >= 5


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
@pytest.mark.parametrize("url", ["https://reader:hunter#2@example.org/feed.xml",
                                 "https://reader:hunter?2@example.org/feed.xml"])
def test_refused_source_url_never_shows_its_password(folder: Path, url: str,
                                                     tmp_path: Path) -> None:
    """Lesson 01: credentials do not belong in the list, "and error messages must not
    repeat them either". A password holding '#' or '?' makes the port unreadable, and
    Python's ValueError quotes the text it could not read."""
    config = tmp_path / "signal.toml"
    config.write_text(f'[[sources]]\nid = "private"\nurl = "{url}"\n', encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "signal_lesson", "sources", "--config",
                           str(config)], cwd=folder, capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "refused" in proc.stderr
    assert "hunter" not in proc.stderr, proc.stderr


def test_statuses_lesson_07_says_lesson_08_uses_are_produced_there() -> None:
    """Lesson 07 lists the report's statuses that later lessons start using; every one
    of them must be a word lesson 08's code can produce."""
    import re

    text = " ".join((LESSONS / "07-fetch-command" / "README.md").read_text("utf-8").split())
    clause = re.search(r"[^;.]*lesson 08 starts using[^;.]*", text, re.IGNORECASE)
    assert clause is not None
    promised = re.findall(r"`(\w+)`", clause[0])
    assert promised
    code = "".join((LESSONS / "08-polite-polling" / "signal_lesson" / name).read_text("utf-8")
                   for name in ("pipeline.py", "schedule.py"))
    assert [word for word in promised if f'"{word}"' not in code] == []


IDENTIFYING = [p for p in FOLDERS if (p / "signal_lesson" / "identity.py").exists()]
_ROWS = r"""
import json, pathlib, sys
from signal_lesson.errors import SignalError
from signal_lesson.identity import identify
from signal_lesson.parse import parse_feed
out = {}
for name in sys.argv[1:]:
    try:
        rows = identify("src", parse_feed(pathlib.Path(name).read_bytes(), allow_http=True)).rows
        out[name] = sorted([row.key, row.fingerprint] for row in rows)
    except SignalError:
        out[name] = None
print(json.dumps(out))
"""


@pytest.mark.parametrize("folder", IDENTIFYING, ids=[p.name for p in IDENTIFYING])
def test_lesson_rows_are_the_librarys_under_the_same_link_policy(folder: Path) -> None:
    """CONVENTIONS.md: a lesson's keys and fingerprints are the library's. They can only
    be when both keep the same links: the library keeps http entry links unless
    require_https_links is set, a lesson keeps them only with allow_http, and lesson 02
    must say so."""
    from signal_feeds import parse_files

    files = [*sorted((LESSONS.parent / "fixtures").rglob("*.xml")),
             folder / "examples" / "links.xml"]
    proc = subprocess.run([sys.executable, "-c", _ROWS, *map(str, files)], cwd=folder,
                          capture_output=True, text=True, timeout=120, check=True)
    lesson = json.loads(proc.stdout)
    for path in files:
        (result,) = parse_files([path], source_id="src")
        library = (sorted([e["id"], e["fingerprint"]] for e in result["entries"])
                   if result.get("ok") else None)
        assert lesson[str(path)] == library, (folder.name, path.name)
    (links,) = parse_files([folder / "examples" / "links.xml"], source_id="src")
    if any(e["url"].startswith("http:") for e in links["entries"]):
        text = (LESSONS / "02-one-shape" / "README.md").read_text("utf-8")
        assert "require_https_links" in text, "lesson 02 does not say the library keeps http"
