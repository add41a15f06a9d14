"""The report is plain data: counts, statuses, an exit code and a stable JSON shape."""

from __future__ import annotations

import json

import pytest
from signal_lesson.report import STATUSES, Report, SourceResult


def sample() -> Report:
    report = Report()
    report.add(SourceResult("demo-rss", "fetched", 200, created=3))
    report.add(SourceResult("demo-atom", "not_modified", 304))
    return report


def test_totals_add_up_counts_and_statuses() -> None:
    report = sample()
    report.add(SourceResult("broken", "rejected", 200, error="not well-formed XML"))
    totals = report.totals
    assert totals["sources"] == 3 and totals["created"] == 3
    assert (totals["fetched"], totals["not_modified"], totals["rejected"]) == (1, 1, 1)
    assert sum(totals.get(status, 0) for status in STATUSES) == totals["sources"]
    assert "failed" not in totals  # a status no source ended in is left out


@pytest.mark.parametrize(
    ("status", "code"),
    [("fetched", 0), ("not_modified", 0), ("gone", 0), ("retry_later", 0),
     ("rejected", 1), ("failed", 1)],
)
def test_exit_code(status: str, code: int) -> None:
    report = sample()
    report.add(SourceResult("third", status))
    assert report.exit_code == code


def test_json_has_the_documented_keys_and_no_duration() -> None:
    report = sample()
    report.sources[0].duration = 0.25
    report.add(SourceResult("moved-one", "moved", 200, moved_to="https://example.org/new"))
    data = json.loads(report.to_json())
    assert set(data) == {"sources", "totals"}
    keys = ["source", "status", "http_status", "created", "updated", "unchanged",
            "skipped", "error"]
    assert list(data["sources"][0]) == keys
    assert list(data["sources"][2]) == [*keys, "moved_to"]
    assert "duration" not in report.to_json()


def test_an_unknown_status_is_a_bug() -> None:
    with pytest.raises(ValueError, match="unknown status"):
        SourceResult("x", "fine")
