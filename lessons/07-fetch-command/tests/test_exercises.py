"""Answers to the exercises at the end of README.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from signal_lesson.cli import main
from signal_lesson.report import Report, SourceResult

LESSON_DIR = Path(__file__).resolve().parents[1]
DEMO = str(LESSON_DIR / "demo.toml")


# Exercise 1: gone is not a failure of the run; rejected is; an empty run did nothing wrong.
@pytest.mark.parametrize(
    ("statuses", "code"),
    [(["fetched", "gone"], 0), (["not_modified", "rejected"], 1), ([], 0)],
)
def test_exercise_1_exit_codes(statuses: list[str], code: int) -> None:
    report = Report([SourceResult(f"s{n}", status) for n, status in enumerate(statuses)])
    assert report.exit_code == code


# Exercise 2: a filter for the JSON report.
def problems(report_json: str) -> list[str]:
    report = json.loads(report_json)
    return [f"{s['source']}: {s['error']}" for s in report["sources"]
            if s["status"] in ("failed", "rejected")]


def test_exercise_2_problems_of_the_demo_list(tmp_path: Path, capsys) -> None:
    code = main(["fetch", "--config", DEMO, "--db", str(tmp_path / "d.db"),
                 "--teaching-server", "--json"])
    found = problems(capsys.readouterr().out)
    assert code == 1
    assert [line.split(":")[0] for line in found] == ["two-versions", "no-such-feed"]
    assert found[1] == "no-such-feed: HTTP 404"


# Exercise 3: only the source fetched before has validators to send, so only it gets 304.
def test_exercise_3_selected_then_all(tmp_path: Path, capsys) -> None:
    args = ["fetch", "--config", DEMO, "--db", str(tmp_path / "d.db"), "--teaching-server",
            "--json"]
    main([*args, "--source", "demo-atom"])
    capsys.readouterr()
    main(args)
    statuses = {s["source"]: s["status"] for s in json.loads(capsys.readouterr().out)["sources"]}
    assert statuses == {"demo-rss": "fetched", "demo-atom": "not_modified",
                        "no-identity": "fetched", "two-versions": "rejected",
                        "no-such-feed": "failed"}
