"""``python -m signal_lesson COMMAND``: the command line lives in cli.py."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
