"""The lesson runs its own code: not the installed library, not another lesson."""

from __future__ import annotations

import sys
from pathlib import Path

import signal_lesson

LESSON_DIR = Path(__file__).resolve().parents[1]


def test_signal_lesson_is_this_lessons_package() -> None:
    assert Path(signal_lesson.__file__).resolve().is_relative_to(LESSON_DIR)


def test_the_installed_library_is_not_imported() -> None:
    assert "signal_feeds" not in sys.modules
