"""Joining a range's per-partition frames into one and splitting it back (``defs/chain/frames.py``)."""

from __future__ import annotations

import pandas as pd

from rag_pipeline.defs.chain.frames import PARTITION_COLUMN, concat_partitions, split_partitions

COLUMNS = ("chunk_id", "tokens")


def _frame(*ids: str) -> pd.DataFrame:
    return pd.DataFrame({"chunk_id": list(ids), "tokens": [len(i) for i in ids]}, columns=list(COLUMNS))


def test_concat_labels_every_row_with_its_partition_and_split_gives_every_key_back() -> None:
    frames = {"d1|C1": _frame("a", "bb"), "d2|C1": _frame(), "d3|C1": _frame("ccc")}
    whole = concat_partitions(frames, COLUMNS)
    assert whole["chunk_id"].tolist() == ["a", "bb", "ccc"]
    assert whole[PARTITION_COLUMN].tolist() == ["d1|C1", "d1|C1", "d3|C1"]
    assert whole[PARTITION_COLUMN].dtype == _frame("x").assign(p="k")["p"].dtype  # what assign() gave before

    back = split_partitions(whole, ["d3|C1", "d2|C1", "d1|C1", "d4|C1"], COLUMNS)
    assert list(back) == ["d3|C1", "d2|C1", "d1|C1", "d4|C1"]
    assert back["d1|C1"].equals(_frame("a", "bb")) and back["d3|C1"].equals(_frame("ccc"))
    assert list(back["d3|C1"].index) == [0]
    # Keys without rows share one empty frame with the columns asked for.
    assert back["d2|C1"] is back["d4|C1"] and back["d2|C1"].empty
    assert list(back["d2|C1"].columns) == list(COLUMNS)


def test_a_range_without_rows_concatenates_to_an_empty_frame_with_the_columns() -> None:
    whole = concat_partitions({"d1|C1": _frame(), "d2|C1": _frame()}, COLUMNS)
    assert whole.empty and list(whole.columns) == [*COLUMNS, PARTITION_COLUMN]
    assert all(frame.empty for frame in split_partitions(whole, ["d1|C1", "d2|C1"], COLUMNS).values())
