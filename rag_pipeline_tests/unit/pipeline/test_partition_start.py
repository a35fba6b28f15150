"""Each source's partitions start at its first data week: recorded from the week files, moved earlier only, kept
when old week files go, made for a folder indexed before the record existed, and overridden by RAG_PARTITION_START."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from rag_pipeline.pipeline.partition_start import (
    PARTITION_START_RECORD,
    first_data_week,
    partition_start_of,
    read_partition_starts,
    record_planned_start,
    update_partition_starts,
)

NOW = datetime(2026, 3, 11, tzinfo=UTC)


def _weeks(parquet: Path, source: str, *weeks: str) -> None:
    folder = parquet / f"{source}_child_chunks"
    folder.mkdir(parents=True, exist_ok=True)
    for week in weeks:
        (folder / f"{week}.parquet").write_bytes(b"")


def test_a_new_folder_has_no_start_and_writes_no_record(tmp_path: Path) -> None:
    starts = update_partition_starts(tmp_path, tmp_path / "parquet", ["jira", "slack"], NOW)
    assert starts.weeks == {} and not (tmp_path / PARTITION_START_RECORD).exists()
    assert partition_start_of("jira", starts.weeks, "2004-01-01", explicit=False) == "2004-01-01"


def test_the_first_index_records_each_source_s_first_week(tmp_path: Path) -> None:
    parquet = tmp_path / "parquet"
    _weeks(parquet, "jira", "2024-03-04", "2024-02-26")
    _weeks(parquet, "slack", "2025-01-06")
    (parquet / "jira_child_chunks" / "notes.parquet").write_bytes(b"")  # not a week: ignored
    (parquet / "jira_child_chunks" / "2024-02-27.parquet").write_bytes(b"")  # not a Monday: ignored
    assert first_data_week(parquet, "jira") == "2024-02-26"
    starts = update_partition_starts(tmp_path, parquet, ["jira", "slack", "confluence"], NOW)
    assert starts.weeks == {"jira": "2024-02-26", "slack": "2025-01-06"}
    written = json.loads((tmp_path / PARTITION_START_RECORD).read_text())
    assert written["first_weeks"] == starts.weeks
    assert [h["why"] for h in written["history"]] == ["first data week", "first data week"]
    assert partition_start_of("jira", starts.weeks, "2004-01-01", explicit=False) == "2024-02-26"
    assert partition_start_of("confluence", starts.weeks, "2004-01-01", explicit=False) == "2004-01-01"


def test_older_data_moves_the_start_earlier_and_nothing_moves_it_later(tmp_path: Path) -> None:
    parquet = tmp_path / "parquet"
    _weeks(parquet, "jira", "2024-02-26", "2024-03-04")
    update_partition_starts(tmp_path, parquet, ["jira"], NOW)
    _weeks(parquet, "jira", "2023-06-05")  # an older export indexed
    moved = update_partition_starts(tmp_path, parquet, ["jira"], NOW)
    assert moved.weeks == {"jira": "2023-06-05"}
    assert moved.history[-1] == {
        "source": "jira",
        "from": "2024-02-26",
        "to": "2023-06-05",
        "at": NOW.isoformat(timespec="seconds"),
        "why": "older data arrived",
    }
    # Retention drops the oldest week files: the partitions (and what the UI showed of them) stay.
    (parquet / "jira_child_chunks" / "2023-06-05.parquet").unlink()
    (parquet / "jira_child_chunks" / "2024-02-26.parquet").unlink()
    kept = update_partition_starts(tmp_path, parquet, ["jira"], NOW)
    assert kept.weeks == {"jira": "2023-06-05"} and len(kept.history) == 2
    assert read_partition_starts(tmp_path).weeks == {"jira": "2023-06-05"}


def test_an_explicit_partition_start_wins(tmp_path: Path) -> None:
    assert partition_start_of("jira", {"jira": "2024-02-26"}, "2020-01-01", explicit=True) == "2020-01-01"
    assert partition_start_of("jira", {"jira": "2024-02-26"}, "2020-01-01", explicit=False) == "2024-02-26"


def test_a_damaged_record_says_what_to_do(tmp_path: Path) -> None:
    (tmp_path / PARTITION_START_RECORD).write_text('{"first_weeks": {"jira": "2024-02-27"}}')
    with pytest.raises(ValueError, match="delete it to have it made again"):
        read_partition_starts(tmp_path)


def test_a_read_only_folder_still_gets_the_starts_for_this_load(tmp_path: Path) -> None:
    parquet = tmp_path / "parquet"
    _weeks(parquet, "jira", "2024-02-26")
    folder = tmp_path / "absent" / "data"  # cannot be written: its parent does not exist
    assert update_partition_starts(folder, parquet, ["jira"], NOW).weeks == {"jira": "2024-02-26"}


def test_a_planned_run_moves_the_start_to_its_week_before_any_data_and_never_later(tmp_path: Path) -> None:
    data = tmp_path / "data"  # a sensor may plan before anything was written: the folder is made
    record_planned_start(data, "slack", date(2026, 1, 7), now=NOW)  # a Wednesday: its week's Monday is recorded
    assert read_partition_starts(data).weeks == {"slack": "2026-01-05"}
    # The run's first step writes a later week; the next load keeps the planned start (nothing moves later).
    _weeks(data / "parquet", "slack", "2026-03-09")
    assert update_partition_starts(data, data / "parquet", ["slack"], now=NOW).weeks == {"slack": "2026-01-05"}
    record_planned_start(data, "slack", date(2026, 2, 2), now=NOW)  # later: unchanged
    record_planned_start(data, "slack", date(2025, 12, 31), now=NOW)  # earlier: moves, with its reason
    starts = read_partition_starts(data)
    assert starts.weeks == {"slack": "2025-12-29"}
    assert [(m["from"], m["to"], m["why"]) for m in starts.history] == [
        (None, "2026-01-05", "a run was planned from this week"),
        ("2026-01-05", "2025-12-29", "a run was planned from this week"),
    ]
