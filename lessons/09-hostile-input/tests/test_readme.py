"""Every command in README.md's ```console blocks is run and its output compared.

The same small file is copied into every lesson. A block such as

    ```console
    $ python -m signal_lesson sources
    ...the exact output...
    ```

runs each ``$ `` line with the lesson folder as working directory (``python`` means
the interpreter running the tests) and compares stdout exactly. A fence whose info
string holds ``file=PATH`` must equal that file on disk, so the text cannot drift
from the code.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

LESSON_DIR = Path(__file__).resolve().parents[1]
README = LESSON_DIR / "README.md"
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def fences() -> list[tuple[str, str]]:
    return [(m.group(1).strip(), m.group(2)) for m in FENCE.finditer(README.read_text("utf-8"))]


def commands() -> list[tuple[str, str]]:
    found = []
    for info, body in fences():
        if info != "console":
            continue
        command: str | None = None
        output: list[str] = []
        for line in body.splitlines():
            if line.startswith("$ "):
                if command is not None:
                    found.append((command, "".join(output)))
                command, output = line[2:], []
            else:
                output.append(line + "\n")
        if command is not None:
            found.append((command, "".join(output)))
    return found


def files() -> list[tuple[str, str]]:
    found = []
    for info, body in fences():
        match = re.search(r"\bfile=(\S+)", info)
        if match:
            found.append((match.group(1), body))
    return found


def test_lesson_text_length() -> None:
    prose = FENCE.sub("", README.read_text("utf-8"))
    assert 800 <= len(prose.split()) <= 2500


def test_readme_shows_commands_and_code() -> None:
    assert commands(), "README.md has no ```console block"
    assert files(), "README.md shows no file in full"


@pytest.mark.parametrize(("command", "expected"), commands())
def test_command_output_matches_readme(command: str, expected: str) -> None:
    if command.startswith("python "):
        command = shlex.quote(sys.executable) + command[len("python") :]
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "PYTHONUTF8": "1"}
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        command, shell=True, cwd=LESSON_DIR, env=env, capture_output=True,
        text=True, encoding="utf-8", timeout=60, check=False,
    )
    assert result.stdout == expected, result.stderr


@pytest.mark.parametrize(("name", "body"), files())
def test_code_in_readme_equals_file(name: str, body: str) -> None:
    assert (LESSON_DIR / name).read_text("utf-8") == body
