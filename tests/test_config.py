"""The source list: validation messages name the file and the entry."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from signal_feeds import ConfigError, load_config, parse_config
from signal_feeds.urls import without_credentials


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


@pytest.mark.parametrize("url", ["https://ana:s3cret@a.example/feed",
                                 "https://s3cret@a.example/feed",
                                 "feed:https://ana:s3cret@a.example/feed",
                                 # A "#", "?" or "/" in the password ends the host part
                                 # as a URL parser reads it: "s3" was taken for a port.
                                 "https://ana:s3#cret@a.example/feed",
                                 "https://ana:s3?cret@a.example/feed",
                                 "https://ana:s3/cret@a.example/feed"])
def test_a_refused_url_is_shown_without_its_credentials(url: str) -> None:
    # The message goes to a terminal, a log or a cron mail: the password stays out of it.
    with pytest.raises(ConfigError) as info:
        parse_config(f'[[sources]]\nid = "private"\nurl = "{url}"\n', path="x.toml")
    text = str(info.value)
    assert "s3cret" not in text and "'s3'" not in text and "cret" not in text
    assert "***@a.example/feed" in text
    if url.startswith("https:"):
        assert "sends no user name or password" in text


@pytest.mark.parametrize("url", ["https://medium.com/@ana/feed",
                                 "https://a.example:8080/u@ana/feed",
                                 "https://a.example/search?from=ana@b.example"])
def test_an_at_sign_after_the_host_is_not_taken_for_credentials(url: str) -> None:
    assert without_credentials(url) == url


def test_duplicate_ids_and_canonical_urls(tmp_path: Path) -> None:
    dup_id = ('[[sources]]\nid = "a"\nurl = "https://a.example/1"\n'
              '[[sources]]\nid = "a"\nurl = "https://a.example/2"\n')
    with pytest.raises(ConfigError, match=r"sources\[1\] \(id 'a'\): id: duplicate"):
        parse_config(dup_id, path="x.toml")
    dup_url = ('[[sources]]\nid = "a"\nurl = "https://A.example:443/feed"\n'
               '[[sources]]\nid = "b"\nurl = "https://a.example/feed#top"\n')
    with pytest.raises(ConfigError) as info:
        parse_config(dup_url, path="x.toml")
    assert "sources[1] (id 'b')" in str(info.value)
    assert "the same feed as source 'a'" in str(info.value)
    assert info.value.source_id == "b"
    # One host in Unicode and in IDNA, one path with a letter as written and as sent:
    # the same requests on the wire, so the same feed (both were accepted and fetched).
    for first, second in (("https://bücher.example/feed", "https://xn--bcher-kva.example/feed"),
                          ("https://e.example/café.xml", "https://e.example/caf%c3%a9.xml")):
        with pytest.raises(ConfigError) as info:
            parse_config(f'[[sources]]\nid = "a"\nurl = "{first}"\n'
                         f'[[sources]]\nid = "b"\nurl = "{second}"\n', path="x.toml")
        assert "the same feed as source 'a'" in str(info.value), (first, second)
    # faß.example goes out as xn--fa-hia.example (IDNA 2008, as httpx sends it): the
    # same feed as that spelling, and another site than fass.example, which was refused
    # as "the same feed" while the xn-- spelling passed as a second source.
    with pytest.raises(ConfigError, match="the same feed as source 'a'"):
        parse_config('[[sources]]\nid = "a"\nurl = "https://faß.example/feed"\n'
                     '[[sources]]\nid = "b"\nurl = "https://xn--fa-hia.example/feed"\n')
    parse_config('[[sources]]\nid = "a"\nurl = "https://faß.example/feed"\n'
                 '[[sources]]\nid = "b"\nurl = "https://fass.example/feed"\n')
    # A duplicate of a source with another problem is reported in the same run, not
    # after that problem is fixed.
    both = ('[[sources]]\nid = "dup"\nurl = "https://e.example/rss"\nreview_by = "soon"\n'
            '[[sources]]\nid = "dup"\nurl = "https://e.example/rss"\n')
    with pytest.raises(ConfigError) as info:
        parse_config(both, path="x.toml")
    assert "sources[0] (id 'dup'): review_by: 'soon' is not a date" in str(info.value)
    assert "sources[1] (id 'dup'): id: duplicate (first at sources[0])" in str(info.value)


def test_a_source_on_port_0_is_refused() -> None:
    # It passed, and httpx then connected to port 80 ("connection refused ... port 80").
    with pytest.raises(ConfigError, match="port 0 is no port to connect to"):
        parse_config('[[sources]]\nid = "a"\nurl = "http://a.example:0/feed"\n')


def test_missing_file_and_bad_toml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(write(tmp_path, "[[sources]\n"))
    with pytest.raises(ConfigError, match=r"\[settings\]: speed: unknown setting"):
        load_config(write(tmp_path, "[settings]\nspeed = 3\n"))
    with pytest.raises(ConfigError, match="must be at least 1"):
        load_config(write(tmp_path, "[settings]\nconcurrency = 0\n"))


def test_a_config_saved_by_a_windows_editor_is_read_or_named(tmp_path: Path) -> None:
    text = '[[sources]]\r\nid = "a"\r\nurl = "https://a.example/feed"\r\ntitle = "Café"\r\n'
    path = tmp_path / "signal.toml"
    # Notepad's byte-order mark was "Invalid statement (at line 1, column 1)".
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    assert load_config(path).sources[0].title == "Café"
    assert parse_config("\ufeff" + text).sources[0].id == "a"
    # UTF-16, and a legacy encoding: said so, with the place of the first bad byte.
    path.write_bytes(text.encode("utf-16"))
    with pytest.raises(ConfigError, match="the file is UTF-16, and TOML files are UTF-8"):
        load_config(path)
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(ConfigError, match=r"not UTF-8 at line 4, column 13 \(byte 0xe9\)"):
        load_config(path)


def test_every_problem_in_the_file_is_reported_at_once(tmp_path: Path) -> None:
    path = write(tmp_path, """
[settings]
concurrency = 0
min_intervall = 60

[[sources]]
id = "a"
ulr = "https://a.example/feed"

[[sources]]
id = "Bad_Slug"
url = "https://b.example/feed"

[[sources]]
id = "c"
url = "ftp://c.example/feed"
review_by = "soon"
""")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    err = info.value
    assert err.problems == (
        "[settings]: concurrency: must be at least 1",
        err.problems[1],
        err.problems[2],
        "sources[0] (id 'a'): url: missing or not a string",
        err.problems[4],
        "sources[2] (id 'c'): url: 'ftp://c.example/feed' refused: scheme ftp: is not "
        "http or https",
        "sources[2] (id 'c'): review_by: 'soon' is not a date (YYYY-MM-DD)",
    )
    assert err.problems[1].startswith(
        "[settings]: min_intervall: unknown setting; did you mean min_interval? (known: ")
    assert err.problems[2].startswith(
        "sources[0] (id 'a'): ulr: unknown key; did you mean url? (known: id, ")
    assert err.problems[4].startswith("sources[1]: id: 'Bad_Slug' is not a slug")
    text = str(err)
    assert text.startswith(f"{path}: 7 problems:\n")
    assert all(problem in text for problem in err.problems)
    assert err.source_id is None  # the problems concern several sources


def test_a_toml_syntax_error_keeps_its_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, '[[sources]]\nid = "a"\nurl = https://a.example/\n')
    with pytest.raises(ConfigError, match=r"not valid TOML: .*line 3, column 7"):
        load_config(path)


def test_an_unknown_key_without_a_near_match_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config("[settings]\nzzz = 1\n", path="x.toml")
    assert "did you mean" not in str(info.value)
    assert ("zzz: unknown setting (known: allow_private_redirects, busy_timeout, concurrency"
            in str(info.value))


def test_a_known_key_in_the_wrong_table_says_where_it_goes() -> None:
    # The commonest misplacements: a setting at the top or appended after the last
    # source (TOML puts it in that source), a source's key under [settings].
    text = ('database = "x.db"\n[settings]\nurl = "https://a.example/f"\n'
            '[[sources]]\nid = "a"\nurl = "https://a.example/f"\nconcurrency = 3\n')
    with pytest.raises(ConfigError) as info:
        parse_config(text, path="x.toml")
    top, settings, source = info.value.problems
    assert top.startswith("top level: database: a setting of the whole run, so it goes "
                          "under [settings] (known: settings, sources)"), top
    assert settings.startswith("[settings]: url: a source's key, so it goes in a "
                               "[[sources]] table (known: allow_private_redirects"), settings
    assert source.startswith(
        "sources[0] (id 'a'): concurrency: a setting of the whole run, so it goes under "
        "[settings]; a key below a [[sources]] header belongs to that source (known: id, "
        ), source
    # A setting a source may override is no misplacement there.
    assert parse_config('[[sources]]\nid = "a"\nurl = "https://a.example/f"\n'
                        'min_interval = 60\n').sources[0].min_interval == 60


def test_https_only_links_are_a_setting_and_the_old_key_still_reads(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    base = '[[sources]]\nid = "a"\nurl = "https://a.example/f"\n'
    assert parse_config(base).settings.require_https_links is False
    strict = parse_config("[settings]\nrequire_https_links = true\n" + base)
    assert strict.effective(strict.source("a")).require_https_links is True
    per_source = parse_config(base + "require_https_links = true\n")
    assert per_source.effective(per_source.source("a")).require_https_links is True
    # allow_http_links was the old, inverted name: still read, with a warning in the log.
    with caplog.at_level("WARNING", logger="signal_feeds"):
        old = parse_config("[settings]\nallow_http_links = false\n" + base, path="x.toml")
    assert old.settings.require_https_links is True
    assert "allow_http_links is deprecated" in caplog.text
    assert "require_https_links = true" in caplog.text
    assert parse_config(base + "allow_http_links = true\n").sources[0].require_https_links \
        is False
    with pytest.raises(ConfigError, match="give only require_https_links"):
        parse_config("[settings]\nallow_http_links = true\nrequire_https_links = true\n")


def test_max_entries_is_a_setting_of_at_least_one() -> None:
    from signal_feeds.parse.feed import DEFAULT_MAX_ENTRIES

    assert parse_config("").settings.max_entries == DEFAULT_MAX_ENTRIES == 10_000
    assert parse_config("[settings]\nmax_entries = 50\n").settings.max_entries == 50
    with pytest.raises(ConfigError, match="max_entries: must be at least 1"):
        parse_config("[settings]\nmax_entries = 0\n")


def test_durations_must_be_finite() -> None:
    # TOML reads inf and nan as floats: busy_timeout = inf ended in a traceback
    # (OverflowError) when the database opened, and nan slipped through every check.
    with pytest.raises(ConfigError) as info:
        parse_config("[settings]\nbusy_timeout = inf\ndeadline = nan\n"
                     "min_interval = -inf\n\n[[sources]]\nid = 'a'\n"
                     "url = 'https://a.example/feed'\nmin_interval = nan\n")
    assert info.value.problems == (
        "[settings]: busy_timeout: must be a finite number, not inf",
        "[settings]: deadline: must be a finite number, not nan",
        "[settings]: min_interval: must be a finite number, not -inf",
        "sources[0] (id 'a'): min_interval: must be a finite number, not nan")


def test_a_message_without_a_file_shows_no_placeholder() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config("[settings]\nspeed = 1\n")
    assert "<" not in str(info.value)
    assert str(ConfigError("no database at x.db")) == "no database at x.db"


@pytest.mark.parametrize(("value", "said"), [
    ('""', "user_agent: must name the client"),
    ('"   "', "user_agent: must name the client"),
    # A line break would end the header: every source failed with "network error:
    # LocalProtocolError" and was backed off, for a typo in the settings.
    ('"feeds-bot\\r\\nX-Extra: 1"', "user_agent: must be one line without control"),
    ('"feeds-bot\\t"', "user_agent: must be one line without control"),
    ('" feeds-bot/1.0"', "user_agent: must not begin or end with white space"),
])
def test_a_user_agent_that_cannot_go_out_is_a_config_error(value: str, said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        parse_config(f"[settings]\nuser_agent = {value}\n")



def test_a_database_path_with_a_nul_character_is_a_configuration_error(
        tmp_path: Path) -> None:
    # TOML can write "\u0000"; no file name holds it, and every command ended in a
    # traceback ("ValueError: embedded null byte") instead of naming the setting.
    from click.testing import CliRunner

    from signal_feeds.cli.commands import cli

    path = write(tmp_path, '[settings]\ndatabase = "feeds\\u0000.db"\n[[sources]]\n'
                           'id = "a"\nurl = "https://a.example/feed"\n')
    with pytest.raises(ConfigError, match=r"database: must not contain a NUL character"):
        load_config(path)
    result = CliRunner().invoke(cli, ["sources", "--config", str(path)])
    assert result.exit_code == 2, result.output
    assert "database: must not contain a NUL character" in result.output


def test_a_key_typed_with_capitals_gets_its_did_you_mean() -> None:
    # "URL" and "Id" are the commonest spellings of url and id by hand; difflib finds
    # nothing near them, so the hint the README promises for an unknown key was missing.
    text = '[[sources]]\nId = "a"\nURL = "https://a.example/feed"\n[Settings]\n'
    with pytest.raises(ConfigError) as info:
        parse_config(text, path="x.toml")
    problems = info.value.problems
    assert problems[0].startswith(
        "top level: Settings: unknown table or key; did you mean settings?")
    assert problems[2].startswith("sources[0]: Id: unknown key; did you mean id? (known:")
    assert problems[3].startswith("sources[0]: URL: unknown key; did you mean url? (known:")


def test_a_source_without_an_id_is_told_it_is_missing() -> None:
    # It was "id: None is not a slug": Python's None, which no TOML file can write.
    with pytest.raises(ConfigError) as info:
        parse_config('[[sources]]\nurl = "https://a.example/feed"\n', path="x.toml")
    assert info.value.problems == (
        "sources[0]: id: missing (each source needs one: a slug of lowercase letters, "
        "digits and '-')",)


@pytest.mark.parametrize("value", ["signal.db ", " signal.db", "  ", "signal.db\\t"])
def test_a_database_path_with_white_space_at_an_end_is_refused(
        tmp_path: Path, value: str) -> None:
    # A space left inside the quotes made a database file "signal.db " beside the
    # config, which ls does not show apart and no later --db signal.db opened.
    path = write(tmp_path, f'[settings]\ndatabase = "{value}"\n')
    with pytest.raises(ConfigError, match=r"\[settings\]: database: must not begin or end "
                                          r"with white space, not "):
        load_config(path)
    assert load_config(write(tmp_path, '[settings]\ndatabase = "my feeds/a b.db"\n')
                       ).settings.database == tmp_path / "my feeds" / "a b.db"


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf_16_without_a_byte_order_mark_is_named(tmp_path: Path, encoding: str) -> None:
    # Its NULs are valid UTF-8, so it was "not valid TOML: Invalid statement (at line 1,
    # column 1)", which pointed at a '[' the user could see.
    path = tmp_path / "signal.toml"
    path.write_bytes('[[sources]]\nid = "a"\nurl = "https://a.example/f"\n'.encode(encoding))
    with pytest.raises(ConfigError, match="the file is UTF-16, and TOML files are UTF-8"):
        load_config(path)


def test_a_table_given_twice_is_named_as_the_file_writes_it(tmp_path: Path) -> None:
    # A second [settings] at the end of a long list was "Cannot declare ('settings',)
    # twice", a Python tuple.
    path = write(tmp_path, '[settings]\nper_host = 1\n[[sources]]\nid = "a"\n'
                           'url = "https://a.example/f"\n[settings]\nconcurrency = 4\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == (f"{path}: not valid TOML: Cannot declare [settings] twice "
                               "(at line 6, column 10)")
