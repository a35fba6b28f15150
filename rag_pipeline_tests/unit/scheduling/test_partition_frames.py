"""Joining a range's per-partition frames into one and splitting it back (``defs/chain/frames.py``), and the
coverage that decides which rows of a week a run owns (``scheduling/coverage.py``)."""

from __future__ import annotations

import pandas as pd

from rag_pipeline.defs.chain.frames import (
    BOOKKEEPING,
    PARTITION_COLUMN,
    concat_partitions,
    covered_rows,
    split_partitions,
)
from rag_pipeline.scheduling.coverage import Coverage, days_of_week, weeks_between

COLUMNS = ("chunk_id", "tokens")


def _frame(*cells: tuple[str, str, str]) -> pd.DataFrame:
    """Rows (chunk id, day, container)."""
    return pd.DataFrame(
        {
            "chunk_id": [c for c, _, _ in cells],
            "tokens": [len(c) for c, _, _ in cells],
            "_day": [d for _, d, _ in cells],
            "_container": [k for _, _, k in cells],
        },
        columns=[*COLUMNS, *BOOKKEEPING],
    )


def test_concat_labels_every_row_with_its_partition_and_split_gives_every_key_back() -> None:
    a, bb, ccc = ("a", "2024-01-01", "C1"), ("bb", "2024-01-02", "C2"), ("ccc", "2024-01-15", "C1")
    frames = {"2024-01-01": _frame(a, bb), "2024-01-08": _frame(), "2024-01-15": _frame(ccc)}
    whole = concat_partitions(frames, COLUMNS)
    assert whole["chunk_id"].tolist() == ["a", "bb", "ccc"]
    assert whole[PARTITION_COLUMN].tolist() == ["2024-01-01", "2024-01-01", "2024-01-15"]

    back = split_partitions(whole, ["2024-01-15", "2024-01-08", "2024-01-01", "2024-01-22"], COLUMNS)
    assert list(back) == ["2024-01-15", "2024-01-08", "2024-01-01", "2024-01-22"]
    assert back["2024-01-01"].equals(_frame(a, bb)) and back["2024-01-15"].equals(_frame(ccc))
    # Keys without rows share one empty frame with the columns asked for and the bookkeeping ones.
    assert back["2024-01-08"] is back["2024-01-22"] and back["2024-01-08"].empty
    assert list(back["2024-01-08"].columns) == [*COLUMNS, *BOOKKEEPING]


def test_a_range_without_rows_concatenates_to_an_empty_frame_with_the_columns() -> None:
    whole = concat_partitions({"2024-01-01": _frame(), "2024-01-08": _frame()}, COLUMNS)
    assert whole.empty and list(whole.columns) == [*COLUMNS, *BOOKKEEPING, PARTITION_COLUMN]
    assert all(f.empty for f in split_partitions(whole, ["2024-01-01", "2024-01-08"], COLUMNS).values())


def test_a_coverage_owns_its_containers_days_only() -> None:
    rows = _frame(("a", "2024-01-01", "C1"), ("b", "2024-01-03", "C1"), ("c", "2024-01-03", "C2"))
    coverage = Coverage({"C1": ("2024-01-02", "2024-01-07"), "C3": ("2024-01-01", "2024-01-07")})
    assert coverage.mask(rows).tolist() == [False, True, False]
    assert covered_rows(rows, coverage)["chunk_id"].tolist() == ["b"]
    assert covered_rows(rows, Coverage.everything()) is rows
    assert coverage.days_by_container(days_of_week("2024-01-01"), ["C1", "C2"]) == {
        "C1": [f"2024-01-0{d}" for d in range(2, 8)],
        "C3": [f"2024-01-0{d}" for d in range(1, 8)],
    }
    assert Coverage.everything().days_by_container(["2024-01-01"], ["C2", "C1"]) == {
        "C1": ["2024-01-01"],
        "C2": ["2024-01-01"],
    }
    assert weeks_between(pd.Timestamp("2024-01-03").date(), pd.Timestamp("2024-01-15").date()) == [
        "2024-01-01",
        "2024-01-08",
        "2024-01-15",
    ]
