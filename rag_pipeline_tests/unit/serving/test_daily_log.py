"""``rag_pipeline.serving.daily_log``: the day files the request audit and readers' feedback keep — one JSON line
per event in the UTC day's file, older files deleted when the day changes (never more than the retention), a
retention below a day refused naming its setting, and a torn line skipped on reading."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_pipeline.serving.daily_log import DailyJsonLines, iso_z, read_daily_lines, utc_day

DAY = 86_400.0
# 2026-03-01 00:00:00 UTC
MARCH_1 = 1_772_323_200.0


def test_days_and_instants_are_utc() -> None:
    assert utc_day(MARCH_1) == "2026-03-01" and utc_day(MARCH_1 - 1) == "2026-02-28"
    assert iso_z(MARCH_1 + 1.5) == "2026-03-01T00:00:01Z"
    assert iso_z(MARCH_1 + 1.5, "milliseconds") == "2026-03-01T00:00:01.500Z"


def test_each_event_goes_to_its_days_file_and_reads_back_oldest_day_first(tmp_path: Path) -> None:
    log = DailyJsonLines(tmp_path / "audit", "requests-", 30, "RAG_AUDIT_DAYS")
    log.append({"n": 2, "text": "한국어 질문"}, MARCH_1 + DAY + 5)
    log.append({"n": 1}, MARCH_1 + 5)
    log.append({"n": 3}, MARCH_1 + DAY + 6)
    assert sorted(p.name for p in (tmp_path / "audit").iterdir()) == [
        "requests-2026-03-01.jsonl",
        "requests-2026-03-02.jsonl",
    ]
    assert "한국어 질문" in log.path_for("2026-03-02").read_text(encoding="utf-8")  # kept as text, not \\u escapes
    assert [e["n"] for e in read_daily_lines(tmp_path / "audit", "requests-")] == [1, 2, 3]


def test_files_past_the_retention_are_deleted_when_the_day_changes(tmp_path: Path) -> None:
    log = DailyJsonLines(tmp_path, "feedback-", 2, "RAG_FEEDBACK_DAYS")
    for day in range(4):
        log.append({"day": day}, MARCH_1 + day * DAY)
    other = tmp_path / "requests-2026-03-01.jsonl"  # another log's file in the same folder is not this one's
    other.write_text("{}\n", encoding="utf-8")
    log.append({"day": 4}, MARCH_1 + 4 * DAY)
    kept = sorted(p.name for p in tmp_path.glob("feedback-*.jsonl"))
    assert kept == ["feedback-2026-03-04.jsonl", "feedback-2026-03-05.jsonl"] and other.exists()


def test_a_retention_under_a_day_is_refused_naming_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="RAG_FEEDBACK_DAYS at least 1 day"):
        DailyJsonLines(tmp_path, "feedback-", 0, "RAG_FEEDBACK_DAYS")


def test_a_torn_or_foreign_line_is_skipped_on_reading(tmp_path: Path) -> None:
    (tmp_path / "x-2026-03-01.jsonl").write_text('{"ok": 1}\n{"torn": \n[1, 2]\n\n{"ok": 2}\n', encoding="utf-8")
    assert list(read_daily_lines(tmp_path, "x-")) == [{"ok": 1}, {"ok": 2}]
