"""The source list: validation messages name the file and the entry."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from signal_feeds import ConfigError, load_config, parse_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "signal.toml"
    path.write_text(text, encoding="utf-8")
    return path


GOOD = """
[settings]
database = "data/signal.db"
min_interval = 900
per_host = 4

[[sources]]
id = "python-insider"
url = "https://blog.python.org/feeds/posts/default"
title = "Python Insider"
owner = "ana@example.org"
review_by = 2027-06-30

[[sources]]
id = "lwn"
url = "https://lwn.net/headlines/rss"
min_interval = 7200
"""


def test_a_valid_config(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD))
    assert [s.id for s in config.sources] == ["python-insider", "lwn"]
    assert config.settings.database == tmp_path / "data" / "signal.db"
    assert config.settings.per_host == 4
    assert config.effective(config.source("lwn")).min_interval == 7200
    assert config.effective(config.source("python-insider")).min_interval == 900
    src = config.source("python-insider")
    assert src.review_by == dt.date(2027, 6, 30)
    assert not src.is_expired(dt.date(2027, 6, 30))
    assert src.is_expired(dt.date(2027, 7, 1))


@pytest.mark.parametrize(("entry", "message"), [
    ('id = "Bad_Slug"\nurl = "https://a.example/feed"', "is not a slug"),
    ('id = "-x"\nurl = "https://a.example/feed"', "is not a slug"),
    ('id = "ftp"\nurl = "ftp://a.example/feed"', "scheme ftp: is not http or https"),
    ('id = "creds"\nurl = "https://user:secret@a.example/feed"', "credentials"),
    ('id = "nohost"\nurl = "https:///feed"', "no host"),
    ('id = "typo"\nurl = "https://a.example/feed"\nmin_intreval = 5', "unknown key"),
    ('id = "date"\nurl = "https://a.example/feed"\nreview_by = "soon"', "not a date"),
])
def test_bad_entries_are_named(tmp_path: Path, entry: str, message: str) -> None:
    path = write(tmp_path, f"[[sources]]\n{entry}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    text = str(info.value)
    assert str(path) in text and message in text


def test_duplicate_ids_and_canonical_urls(tmp_path: Path) -> None:
    dup_id = ('[[sources]]\nid = "a"\nurl = "https://a.example/1"\n'
              '[[sources]]\nid = "a"\nurl = "https://a.example/2"\n')
    with pytest.raises(ConfigError, match=r"source 'a': duplicate id"):
        parse_config(dup_id, path="x.toml")
    dup_url = ('[[sources]]\nid = "a"\nurl = "https://A.example:443/feed"\n'
               '[[sources]]\nid = "b"\nurl = "https://a.example/feed#top"\n')
    with pytest.raises(ConfigError) as info:
        parse_config(dup_url, path="x.toml")
    assert "source 'b'" in str(info.value) and "source 'a' has the same feed" in str(info.value)


def test_missing_file_and_bad_toml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(write(tmp_path, "[[sources]\n"))
    with pytest.raises(ConfigError, match="unknown setting 'speed'"):
        load_config(write(tmp_path, "[settings]\nspeed = 3\n"))
    with pytest.raises(ConfigError, match="must be at least 1"):
        load_config(write(tmp_path, "[settings]\nconcurrency = 0\n"))
