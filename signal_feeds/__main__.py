"""``python -m signal_feeds`` is the ``signal`` command."""

from signal_feeds.cli import main

main()
