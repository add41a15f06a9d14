"""Every lesson folder passes its own test suite, run as a reader would run it."""

from __future__ import annotations

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
