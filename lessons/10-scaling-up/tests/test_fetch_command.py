"""`python -m signal_lesson fetch`: the whole pipeline per source, a report, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from signal_lesson.cli import main
from signal_lesson.server import TeachingServer

LESSON_DIR = Path(__file__).resolve().parents[1]


@pytest.fixture
def server():
    with TeachingServer() as running:
        yield running


def write_config(tmp_path: Path, server: TeachingServer, sources: dict[str, str]) -> str:
    lines = []
    for source_id, path in sources.items():
        lines += ["[[sources]]", f'id = "{source_id}"', f'url = "{server.url(path)}"', ""]
    config = tmp_path / "signal.toml"
    config.write_text("\n".join(lines), encoding="utf-8")
    return str(config)


def fetch_json(capsys, *args: str) -> tuple[int, dict]:
    code = main(["fetch", "--json", *args])
    return code, json.loads(capsys.readouterr().out)


GOOD = {"demo-rss": "/feeds/demo-rss.xml", "demo-atom": "/feeds/demo-atom.xml"}


def test_all_good_exits_0_and_a_second_run_is_all_304(tmp_path, server, capsys) -> None:
    args = ["--config", write_config(tmp_path, server, GOOD), "--db", str(tmp_path / "s.db")]
    code, first = fetch_json(capsys, *args)
    assert code == 0
    assert [(s["source"], s["status"], s["http_status"], s["created"])
            for s in first["sources"]] == [("demo-rss", "fetched", 200, 3),
                                           ("demo-atom", "fetched", 200, 2)]
    assert first["totals"] == {"sources": 2, "created": 5, "updated": 0, "unchanged": 0,
                               "skipped": 0, "fetched": 2}
    code, second = fetch_json(capsys, *args, "--force")  # lesson 08: not due yet otherwise
    assert code == 0
    assert [s["status"] for s in second["sources"]] == ["not_modified", "not_modified"]
    assert [request.status for request in server.log] == [200, 200, 304, 304]


def test_json_keys_are_the_documented_ones(tmp_path, server, capsys) -> None:
    args = ["--config", write_config(tmp_path, server, GOOD), "--db", str(tmp_path / "s.db")]
    _, report = fetch_json(capsys, *args)
    assert set(report) == {"sources", "totals"}
    for source in report["sources"]:
        assert list(source) == ["source", "status", "http_status", "created", "updated",
                                "unchanged", "skipped", "error", "next_due"]
        assert source["error"] is None


def test_one_failure_exits_1_and_the_others_still_run(tmp_path, server, capsys) -> None:
    sources = {"missing": "/feeds/nothing-here.xml",
               "contradiction": "/feeds/variants/demo-rss-contradiction.xml",
               "loop": "/scenario/redirect/9", **GOOD}
    args = ["--config", write_config(tmp_path, server, sources), "--db", str(tmp_path / "s.db")]
    code, report = fetch_json(capsys, *args)
    assert code == 1
    by_id = {s["source"]: s for s in report["sources"]}
    assert (by_id["missing"]["status"], by_id["missing"]["http_status"]) == ("failed", 404)
    assert by_id["contradiction"]["status"] == "rejected"
    assert "release-1" in by_id["contradiction"]["error"]
    assert (by_id["loop"]["status"], by_id["loop"]["http_status"]) == ("failed", None)
    assert "redirects" in by_id["loop"]["error"]
    assert by_id["demo-rss"]["status"] == by_id["demo-atom"]["status"] == "fetched"
    assert report["totals"]["failed"] == 2 and report["totals"]["rejected"] == 1


def test_a_rejected_response_is_asked_for_in_full_again(tmp_path, server, capsys) -> None:
    sources = {"contradiction": "/feeds/variants/demo-rss-contradiction.xml"}
    args = ["--config", write_config(tmp_path, server, sources), "--db", str(tmp_path / "s.db")]
    for _ in range(2):
        code, report = fetch_json(capsys, *args, "--force")
        assert (code, report["sources"][0]["status"]) == (1, "rejected")
    assert "If-None-Match" not in server.log[-1].headers
    assert [request.status for request in server.log] == [200, 200]


def test_source_selects_in_list_order(tmp_path, server, capsys) -> None:
    args = ["--config", write_config(tmp_path, server, GOOD), "--db", str(tmp_path / "s.db")]
    _, report = fetch_json(capsys, *args, "--source", "demo-atom")
    assert [s["source"] for s in report["sources"]] == ["demo-atom"]
    assert [request.path for request in server.log] == ["/feeds/demo-atom.xml"]


@pytest.mark.parametrize(
    "args",
    [["--source", "nope"], ["--config", "missing.toml"], ["--config", "examples/broken.toml"],
     ["--db", "no/such/folder/s.db"]],  # a traceback and exit 1, though the README says 2
)
def test_config_and_usage_errors_exit_2_and_fetch_nothing(tmp_path, server, capsys,
                                                          monkeypatch, args) -> None:
    monkeypatch.chdir(LESSON_DIR)
    config = ["--config", write_config(tmp_path, server, GOOD)]
    code = main(["fetch", *config, "--db", str(tmp_path / "s.db"), *args])
    assert code == 2
    assert capsys.readouterr().err.strip()
    assert server.log == []


def test_an_unknown_option_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["fetch", "--no-such-option"])
    assert stopped.value.code == 2


def test_text_report_names_every_source_and_the_totals(tmp_path, server, capsys) -> None:
    args = ["--config", write_config(tmp_path, server, GOOD), "--db", str(tmp_path / "s.db")]
    assert main(["fetch", *args]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["demo-rss", "fetched", "200"]
    assert lines[-1] == "2 sources (2 fetched); 5 created, 0 updated, 0 unchanged, 0 skipped"
