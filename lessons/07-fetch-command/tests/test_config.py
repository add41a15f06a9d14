from __future__ import annotations

import re
from pathlib import Path

import pytest
from signal_lesson.config import Source, is_slug, load_config, parse_config
from signal_lesson.demo import FIXTURES, read_local_copy
from signal_lesson.errors import ConfigError, SignalError

LESSON_DIR = Path(__file__).resolve().parents[1]


def test_the_lesson_config_is_valid() -> None:
    config = load_config(LESSON_DIR / "signal.toml")
    assert config.sources == (
        Source("demo-rss", "https://example.org/rss.xml", "Signal demo (RSS)"),
        Source("demo-atom", "https://example.org/atom.xml", "Signal demo (Atom)"),
    )
    assert config.source("demo-atom").title == "Signal demo (Atom)"
    with pytest.raises(ConfigError, match="no source with id 'nope'"):
        config.source("nope")


def test_demo_feeds_are_read_as_bytes_from_fixtures() -> None:
    assert FIXTURES.is_dir()
    for source in load_config(LESSON_DIR / "signal.toml").sources:
        data = read_local_copy(source.id)
        assert isinstance(data, bytes)
        assert data.startswith(b"<?xml")


def test_broken_example_reports_every_problem_with_file_and_entry() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(LESSON_DIR / "examples" / "broken.toml")
    problems = caught.value.problems
    assert len(problems) == 5
    assert "sources[1]: id 'Demo_RSS' is not a slug" in problems[0]
    assert "sources[2] (id 'local-file')" in problems[1] and "'file'" in problems[1]
    assert "credentials" in problems[2] and "secret" not in str(caught.value)
    assert "sources[4] (id 'demo-rss'): duplicate id" in problems[3]
    assert "sources[5] (id 'demo-rss-again'): duplicate url" in problems[4]
    assert all(line.endswith(problem) for line, problem in
               zip(str(caught.value).splitlines(), problems, strict=True))
    assert str(caught.value).splitlines()[0].startswith(str(caught.value.path) + ": ")


def test_config_error_is_a_signal_error() -> None:
    assert issubclass(ConfigError, SignalError)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[sources]]\nid = 'a'\n", "url is missing"),
        ("[[sources]]\nid = 'a'\nurl = 'https://x.org/'\ntitel = 'typo'\n", "unknown key"),
        ("[[sources]]\nid = 'a'\nurl = 'https://x.org/'\ntitle = 3\n", "title must be"),
        ("sources = 'x'\n", "array of tables"),
        ("[settings]\n", "unknown top-level key 'settings'"),
        ("[[sources]\n", "not valid TOML"),
        ("sources = [1]\n", "sources[0]: must be a table"),
        ("[[sources]]\nurl = 'https://x.org/'\n", "id None is not a slug"),
    ],
)
def test_problems_name_the_file(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=r"^my\.toml: .*" + re.escape(message)):
        parse_config(text, path="my.toml")


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="^missing.toml: cannot read the file"):
        load_config("missing.toml")


def test_an_empty_list_is_valid() -> None:
    assert parse_config("").sources == ()


@pytest.mark.parametrize("text", ["a", "demo-rss", "x1", "a" * 64, "2026-notes"])
def test_slugs(text: str) -> None:
    assert is_slug(text)


@pytest.mark.parametrize("text", ["", "-a", "a-", "A", "a_b", "a.b", "a b", "a" * 65, "é", 5])
def test_not_slugs(text: object) -> None:
    assert not is_slug(text)
