"""Make this lesson's folder the first place ``signal_lesson`` is imported from."""

from __future__ import annotations

import sys
from pathlib import Path

LESSON_DIR = Path(__file__).resolve().parents[1]
if str(LESSON_DIR) not in sys.path:
    sys.path.insert(0, str(LESSON_DIR))
