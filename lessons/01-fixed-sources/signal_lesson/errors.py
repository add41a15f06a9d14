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
