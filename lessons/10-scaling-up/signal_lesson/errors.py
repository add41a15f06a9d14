"""Every error the project raises on purpose derives from SignalError."""

from __future__ import annotations


class SignalError(Exception):
    """Base class of the project's own errors."""


class ConfigError(SignalError):
    """The source list is invalid. Each problem names the file and the entry."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = tuple(problems)
        super().__init__("\n".join(f"{path}: {problem}" for problem in problems))


class ParseError(SignalError):
    """The bytes are not a feed Signal can read; nothing from them is used."""


class ContradictionError(SignalError):
    """One response holds two different versions of one entry: all of it is rejected."""

    def __init__(self, source_id: str, key: str, remote_id: str) -> None:
        self.source_id = source_id
        self.key = key
        self.remote_id = remote_id
        super().__init__(
            f"source {source_id!r}: response rejected: two different versions of "
            f"remote id {remote_id!r} (key {key})"
        )


class FetchError(SignalError):
    """A request produced no usable response (lesson 04)."""


class BodyTooLarge(FetchError):
    """The decoded body grew past the cap; reading stopped there."""


class DeadlineExceeded(FetchError):
    """The whole request took longer than its deadline."""


class TooManyRedirects(FetchError):
    """More redirects than the cap allows."""


class FetchTimeout(FetchError):
    """Connecting, or waiting for the next bytes, took too long."""


class NetworkError(FetchError):
    """Any other transport failure: refused, reset, bad encoding."""
