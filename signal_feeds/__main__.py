"""``python -m signal_feeds`` is the ``signal`` command."""

from .cli import main

main()
