"""The ``signal`` command: thin wrappers over library functions; the only code that prints."""

from signal_feeds.cli.commands import main

__all__ = ["main"]
