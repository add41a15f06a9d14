"""OPML import into the TOML source list, and the checks it shares with hand-written
entries."""

from __future__ import annotations

import json
from pathlib import Path
from xml.sax.saxutils import quoteattr

import pytest
from click.testing import CliRunner

from signal_feeds import ConfigError, load_config
from signal_feeds.cli.commands import cli
from signal_feeds.config.opml import UniqueIds, import_opml, parse_opml, slugify

EXISTING = """# Reviewed by ana, 2026-11.
[settings]
min_interval = 900

[[sources]]
id = "python-insider"
url = "https://pythoninsider.blogspot.com/feeds/posts/default"
title = "Python Insider"
"""


def opml(outlines: list[tuple[str, str]], *, nested: bool = True) -> bytes:
    """An OPML 2.0 file; with ``nested`` the second half sits in a folder."""
    def line(title: str, url: str) -> str:
        return f"<outline type='rss' text={quoteattr(title)} xmlUrl={quoteattr(url)}/>"

    half = len(outlines) // 2 if nested else len(outlines)
    body = "".join(line(t, u) for t, u in outlines[:half])
    if nested:
        body += ("<outline text='Folder'>"
                 + "".join(line(t, u) for t, u in outlines[half:]) + "</outline>")
    return ("<?xml version='1.0' encoding='utf-8'?><opml version='2.0'><head><title>Mine"
            f"</title></head><body>{body}</body></opml>").encode()


def fifty() -> list[tuple[str, str]]:
    """50 feeds: 45 good, 3 duplicates (one of the existing list, two repeats in other
    spellings) and 2 bad URLs."""
    feeds = [(f"Blog number {i}", f"https://blog{i}.example/feed.xml") for i in range(45)]
    feeds[10:10] = [("Python Insider again",
                     "https://PythonInsider.blogspot.com:443/feeds/posts/default")]
    feeds[20:20] = [("Blog number 3 (copy)", "https://BLOG3.example/feed.xml")]
    feeds[30:30] = [("Blog number 7 (old link)", "https://blog7.example:443/feed.xml#x")]
    feeds[40:40] = [("Gopher hole", "gopher://old.example/1/feed")]
    feeds.append(("Private", "https://user:secret@private.example/feed"))
    assert len(feeds) == 50
    return feeds


def test_fifty_feeds_with_three_duplicates_and_two_bad_urls_add_45(tmp_path: Path) -> None:
    config = tmp_path / "signal.toml"
    config.write_text(EXISTING, encoding="utf-8")
    file = tmp_path / "subscriptions.opml"
    file.write_bytes(opml(fifty()))

    result = CliRunner().invoke(cli, ["sources", "import-opml", str(file), "--config",
                                      str(config), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert len(report["added"]) == 45
    skipped = {s["title"]: s["reason"] for s in report["skipped"]}
    assert sorted(skipped) == sorted(["Python Insider again", "Blog number 3 (copy)",
                                      "Blog number 7 (old link)", "Gopher hole", "Private"])
    assert skipped["Python Insider again"] == "duplicate url: already source 'python-insider'"
    assert skipped["Blog number 3 (copy)"] == "duplicate url: already source 'blog-number-3'"
    assert skipped["Gopher hole"].startswith("bad url:") and "gopher" in skipped["Gopher hole"]
    assert "credentials" in skipped["Private"]
    assert "secret" not in result.output

    loaded = load_config(config)  # the file as written validates, settings intact
    assert len(loaded.sources) == 46 and loaded.settings.min_interval == 900
    assert loaded.sources[1].id == "blog-number-0"
    assert loaded.sources[1].title == "Blog number 0"
    assert config.read_text(encoding="utf-8").startswith(EXISTING)  # comments kept

    text = CliRunner().invoke(cli, ["sources", "import-opml", str(file), "--config",
                                    str(config)])
    assert text.exit_code == 0
    assert "added 0 source(s)" in text.output and "skipped 50:" in text.output


def test_a_doctype_is_refused_and_the_list_is_untouched(tmp_path: Path) -> None:
    config = tmp_path / "signal.toml"
    config.write_text(EXISTING, encoding="utf-8")
    bomb = (b"<?xml version='1.0'?><!DOCTYPE opml [<!ENTITY a 'aaaaaaaaaa'>"
            b"<!ENTITY b '&a;&a;&a;&a;&a;&a;&a;&a;'>]><opml version='2.0'><body>"
            b"<outline text='&b;' xmlUrl='https://x.example/feed'/></body></opml>")
    file = tmp_path / "bomb.opml"
    file.write_bytes(bomb)
    result = CliRunner().invoke(cli, ["sources", "import-opml", str(file), "--config",
                                      str(config)])
    assert result.exit_code == 2 and "DOCTYPE" in result.output
    assert config.read_text(encoding="utf-8") == EXISTING


def test_slugs_titles_and_quoting(tmp_path: Path) -> None:
    assert slugify("Python Insider: News & Notes!") == "python-insider-news-notes"
    assert slugify("Заметки") == ""
    assert len(slugify("x" * 200)) == 64
    feeds = [("Same Title", "https://a.example/feed"), ("Same title", "https://b.example/feed"),
             ("Заметки о выпуске", "https://www.notes.example/rss.xml"),
             ('Quote " and \\ backslash', "https://q.example/feed"),
             ("", "https://untitled.example/atom")]
    config = tmp_path / "new" / "signal.toml"  # created, with its folder
    report = import_opml(config, opml(feeds, nested=False))
    assert [a.id for a in report.added] == ["same-title", "same-title-2",
                                            "notes-example-rss-xml", "quote-and-backslash",
                                            "untitled-example-atom"]
    loaded = load_config(config)
    assert [s.title for s in loaded.sources] == [t for t, _ in feeds]
    assert [s.url for s in loaded.sources] == [u for _, u in feeds]


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    config = tmp_path / "signal.toml"
    config.write_text(EXISTING, encoding="utf-8")
    report = import_opml(config, opml([("A feed", "https://a.example/f")]), dry_run=True)
    assert [a.id for a in report.added] == ["a-feed"] and report.dry_run
    assert config.read_text(encoding="utf-8") == EXISTING


def test_an_invalid_list_is_never_appended_to(tmp_path: Path) -> None:
    config = tmp_path / "signal.toml"
    config.write_text('[[sources]]\nid = "Bad Slug"\nurl = "https://a.example/f"\n',
                      encoding="utf-8")
    with pytest.raises(ConfigError, match="not a slug"):
        import_opml(config, opml([("A feed", "https://b.example/f")]))


def test_parse_opml_reads_nested_outlines_and_refuses_non_opml() -> None:
    feeds = parse_opml(b"<opml version='1.0'><body><outline text='f'><outline text='x' "
                       b"xmlurl='https://x.example/rss' htmlUrl='https://x.example/'/>"
                       b"</outline><outline text='no feed'/></body></opml>")
    assert [(f.title, f.url, f.html_url) for f in feeds] == [
        ("x", "https://x.example/rss", "https://x.example/")]
    with pytest.raises(ConfigError, match="not an OPML"):
        parse_opml(b"<rss><channel/></rss>")
    with pytest.raises(ConfigError, match="well-formed"):
        parse_opml(b"<opml><body>")


def test_a_browsers_feed_link_in_opml_is_skipped_with_the_address_to_use(
        tmp_path: Path) -> None:
    config = tmp_path / "signal.toml"
    config.write_text(EXISTING, encoding="utf-8")
    file = tmp_path / "subscriptions.opml"
    file.write_bytes(opml([("Feed scheme", "feed://news.example/rss"),
                           ("Gopher hole", "gopher://old.example/1/feed")], nested=False))
    result = CliRunner().invoke(cli, ["sources", "import-opml", str(file), "--config",
                                      str(config), "--json"])
    skipped = {s["title"]: s["reason"] for s in json.loads(result.output)["skipped"]}
    assert skipped == {
        "Feed scheme": "bad url: scheme feed: is not http or https (did you mean "
                       "'https://news.example/rss'?)",
        "Gopher hole": "bad url: scheme gopher: is not http or https"}


def test_a_symlinked_list_is_written_through_the_link(tmp_path: Path) -> None:
    # A dotfiles checkout links signal.toml to the file it keeps under version control.
    kept = tmp_path / "dotfiles" / "signal.toml"
    kept.parent.mkdir()
    kept.write_text(EXISTING, encoding="utf-8")
    link = tmp_path / "signal.toml"
    link.symlink_to(kept)
    import_opml(link, opml([("A feed", "https://a.example/f")]))
    assert link.is_symlink()
    assert [s.id for s in load_config(kept).sources] == ["python-insider", "a-feed"]


def test_a_multi_byte_legacy_encoding_is_read_and_an_unknown_one_is_named() -> None:
    # Expat reads no multi-byte legacy encoding: a Shift_JIS export was a traceback.
    for encoding in ("shift_jis", "gbk", "big5"):
        data = (f"<?xml version='1.0' encoding='{encoding}'?><opml version='1.0'><body>"
                "<outline type='rss' text='日本' xmlUrl='https://jp.example/rss'/>"
                "</body></opml>").encode(encoding)
        assert [(f.title, f.url) for f in parse_opml(data)] == [
            ("日本", "https://jp.example/rss")]
    with pytest.raises(ConfigError, match="encoding 'nonsense'"):
        parse_opml(b"<?xml version='1.0' encoding='nonsense'?><opml><body/></opml>")
    with pytest.raises(ConfigError, match="shift_jis"):
        parse_opml(b"<?xml version='1.0' encoding='shift_jis'?><opml><body>\x81</body></opml>")


def test_any_file_name_makes_a_valid_comment(tmp_path: Path) -> None:
    # A Latin-1 name on a UTF-8 system was a UnicodeEncodeError traceback on writing; a
    # line break in the name ended the comment and the import with "not valid TOML".
    config = tmp_path / "signal.toml"
    for n, name in enumerate(["caf\udce9.opml", "a\nb.opml", "tab\there\r.opml"]):
        report = import_opml(config, opml([("F", f"https://f{n}.example/rss")]),
                             opml_name=name)
        assert len(report.added) == 1
    assert len(load_config(config).sources) == 3
    assert "# Imported from caf\\udce9.opml on" in config.read_text(encoding="utf-8")


def test_an_outline_with_a_web_address_but_no_feed_is_reported(tmp_path: Path) -> None:
    # A site kept without its feed (htmlUrl only) and an OPML 1.0 link outline were left
    # out without a word: "added 0 source(s)" and nothing skipped.
    file = tmp_path / "sites.opml"
    file.write_bytes(b"<opml version='1.0'><body><outline text='Site only' "
                     b"htmlUrl='https://site.example/'/><outline text='Link' type='link' "
                     b"url='https://link.example/feed.xml'/><outline text='Empty folder'/>"
                     b"</body></opml>")
    result = CliRunner().invoke(cli, ["sources", "import-opml", str(file), "--config",
                                      str(tmp_path / "signal.toml"), "--json"])
    skipped = {s["title"]: (s["url"], s["reason"])
               for s in json.loads(result.output)["skipped"]}
    page_only = "no xmlUrl (only a web page's address: add its feed's as a source by hand)"
    assert skipped == {"Site only": ("https://site.example/", page_only),
                       "Link": ("https://link.example/feed.xml", page_only)}


def test_a_host_in_unicode_and_in_idna_is_one_feed(tmp_path: Path) -> None:
    # Both spellings were added, and the source list then held one feed twice.
    config = tmp_path / "signal.toml"
    config.write_text('[[sources]]\nid = "books"\nurl = "https://bücher.example/feed"\n',
                      encoding="utf-8")
    file = tmp_path / "subscriptions.opml"
    file.write_bytes(opml([("Books again", "https://xn--bcher-kva.example/feed"),
                           ("Café", "https://cafe.example/café.xml"),
                           ("Café encoded", "https://cafe.example/caf%C3%A9.xml")],
                          nested=False))
    result = CliRunner().invoke(cli, ["sources", "import-opml", str(file), "--config",
                                      str(config), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    skipped = {s["title"]: s["reason"] for s in report["skipped"]}
    assert skipped == {"Books again": "duplicate url: already source 'books'",
                       "Café encoded": "duplicate url: already source 'cafe'"}, report
    assert len(load_config(config).sources) == 2


def test_an_exported_source_list_imported_again_keeps_its_ids(tmp_path: Path) -> None:
    # The export carried no ids, so importing it (into another machine's list, or back
    # after a loss) named every source after its title: "python-insider" came back as
    # "python-insider-blog", and a database, a cron line or a cursor that named the
    # old id no longer matched. The ids travel in Signal's own attribute, which other
    # readers ignore; an id the list already has still gets a slug of its own.
    original = tmp_path / "signal.toml"
    original.write_text(EXISTING + '\n[[sources]]\nid = "n2"\nurl = "https://b.example/feed"\n'
                        '\n[[sources]]\nid = "a-b"\nurl = "https://c.example/feed"\n'
                        'title = "Tom & Jerry\'s \\"Blog\\" ☕"\n', encoding="utf-8")
    result = CliRunner().invoke(cli, ["export", "--config", str(original), "--format", "opml"])
    assert result.exit_code == 0, result.output
    exported = tmp_path / "sources.opml"
    exported.write_text(result.stdout, encoding="utf-8")
    copy = tmp_path / "copy" / "signal.toml"
    report = import_opml(copy, exported.read_bytes())
    assert [(a.id, a.url) for a in report.added] == [
        (s.id, s.url) for s in load_config(original).sources]
    assert [(s.id, s.url) for s in load_config(copy).sources] == [
        (s.id, s.url) for s in load_config(original).sources]
    # Into a list that has one of the ids for another feed: that one is renamed.
    other = tmp_path / "other.toml"
    other.write_text('[[sources]]\nid = "n2"\nurl = "https://elsewhere.example/rss"\n',
                     encoding="utf-8")
    ids = [a.id for a in import_opml(other, exported.read_bytes()).added]
    assert ids[0] == "python-insider" and ids[2] == "a-b"
    assert ids[1] != "n2" and ids[1].startswith("n2")


def test_a_title_with_a_control_character_exports_an_opml_file_that_imports(
        tmp_path: Path) -> None:
    # A config title holding "\u0008" was written into the OPML as it was: XML 1.0
    # cannot carry it, and no reader (Signal's own import included) opened the file.
    config = tmp_path / "signal.toml"
    config.write_text('[[sources]]\nid = "a"\nurl = "https://a.example/feed"\n'
                      'title = "Back\\u0008space \\u0000Blog"\n', encoding="utf-8")
    result = CliRunner().invoke(cli, ["export", "--config", str(config), "--format", "opml"])
    assert result.exit_code == 0, result.output
    (feed,) = parse_opml(result.stdout.encode("utf-8"))
    assert (feed.title, feed.url, feed.source_id) == ("Backspace Blog",
                                                      "https://a.example/feed", "a")


def test_many_feeds_of_one_title_get_ids_without_counting_from_two_each_time() -> None:
    # 5,000 feeds all titled "Medium" (a platform's authors): each id counted up from
    # "-2" past every one given before, 12.5 million looks in all.
    ids = UniqueIds(["medium", "medium-3"])
    given = [ids.take("medium") for _ in range(2000)]
    assert given[:3] == ["medium-2", "medium-4", "medium-5"]
    assert len(set(given)) == 2000 and ids.taken >= set(given)
    assert ids.looks < 2 * 2000 + 10  # counted from "-2" each time: about 2,000,000
    assert ids.take("other") == "other" and ids.take("other") == "other-2"


def test_importing_many_feeds_of_one_title(tmp_path: Path) -> None:
    outlines = "".join(f'<outline text="Medium" xmlUrl="https://medium.com/feed/@u{i}"/>'
                       for i in range(300))
    opml = f'<opml version="2.0"><body>{outlines}</body></opml>'.encode()
    report = import_opml(tmp_path / "signal.toml", opml)
    assert [a.id for a in report.added][:3] == ["medium", "medium-2", "medium-3"]
    assert report.added[-1].id == "medium-300"
    assert len(load_config(tmp_path / "signal.toml").sources) == 300


def test_a_windows_list_keeps_its_line_endings_and_bom(tmp_path: Path) -> None:
    # Reading it as text turned every CRLF into LF: the diff a reviewer reads showed
    # every line of the list changed, not the sources added.
    config = tmp_path / "signal.toml"
    original = b"\xef\xbb\xbf" + EXISTING.replace("\n", "\r\n").encode("utf-8")
    config.write_bytes(original.removesuffix(b"\r\n"))  # Notepad ends no last line
    import_opml(config, opml([("A feed", "https://a.example/f")]))
    written = config.read_bytes()
    assert written.startswith(original)
    assert written.count(b"\n") == written.count(b"\r\n") > EXISTING.count("\n")
    assert [s.id for s in load_config(config).sources] == ["python-insider", "a-feed"]


def test_a_list_not_in_utf_8_is_named_as_load_config_names_it(tmp_path: Path) -> None:
    # It was Python's "'utf-8' codec can't decode byte 0xe9 in position N".
    config = tmp_path / "signal.toml"
    config.write_bytes(EXISTING.replace("Insider", "Café").encode("latin-1"))
    with pytest.raises(ConfigError, match=r"not UTF-8 at line 8, column 20 \(byte 0xe9\)"):
        import_opml(config, opml([("A feed", "https://a.example/f")]))
    config.write_bytes(EXISTING.encode("utf-16"))
    with pytest.raises(ConfigError, match="the file is UTF-16"):
        import_opml(config, opml([("A feed", "https://a.example/f")]))
