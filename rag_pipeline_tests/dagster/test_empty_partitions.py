"""Empty partitions (most days of a first backfill) are stored as hard links to one empty file per asset and
schema: nothing read back differs from a written empty frame, and a later write of one partition leaves the
others as they were."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

import rag_pipeline.defs.chain.io_manager as io_manager
from rag_pipeline.defs.chain.io_manager import PartitionedParquetIOManager

DAYS = dg.StaticPartitionsDefinition(["d1", "d2", "d3", "d4"])


def _frame(rows: int) -> pd.DataFrame:
    return pd.DataFrame(
        {"chunk_id": [f"c{i}" for i in range(rows)], "tokens": pd.array(range(rows), dtype="Int64")},
        columns=["chunk_id", "tokens"],
    )


def _write(io: PartitionedParquetIOManager, frames: dict[str, pd.DataFrame]) -> None:
    keys = sorted(frames)
    context = dg.build_output_context(
        asset_key="chunks", asset_partitions_def=DAYS, asset_partition_key_range=dg.PartitionKeyRange(keys[0], keys[-1])
    )
    io.handle_output(context, frames)


def _read(base: Path, *keys: str) -> dict[str, pd.DataFrame]:
    context = dg.build_input_context(
        asset_key="chunks", asset_partitions_def=DAYS, asset_partition_key_range=dg.PartitionKeyRange(keys[0], keys[-1])
    )
    return PartitionedParquetIOManager(base_dir=str(base)).load_input(context)  # a fresh one reads the disk


def _written_empty(tmp_path: Path, frame: pd.DataFrame) -> pd.DataFrame:
    """What an empty frame reads back as when written the ordinary way."""
    path = tmp_path / "ordinary.parquet"
    frame.to_parquet(path, index=False)
    return pd.read_parquet(path)


def test_empty_partitions_are_links_to_one_file_and_read_back_as_written(tmp_path: Path) -> None:
    base = tmp_path / "parquet"
    io = PartitionedParquetIOManager(base_dir=str(base))
    _write(io, {"d1": _frame(2), "d2": _frame(0), "d3": _frame(0), "d4": _frame(1)})
    folder = base / "chunks"
    templates = list(folder.glob(".empty-*.parquet"))
    assert len(templates) == 1
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == [
        f"d{i}.parquet" for i in (1, 2, 3, 4)
    ]
    assert not list(folder.glob("*.tmp")) and not list(folder.glob(".*.tmp"))
    inode = templates[0].stat().st_ino
    assert (folder / "d2.parquet").stat().st_ino == (folder / "d3.parquet").stat().st_ino == inode
    assert (folder / "d1.parquet").stat().st_ino != inode and (folder / "d4.parquet").stat().st_ino != inode

    frames = _read(base, "d1", "d4")
    expected_empty = _written_empty(tmp_path, _frame(0))
    for key in ("d2", "d3"):
        assert frames[key].empty and list(frames[key].columns) == ["chunk_id", "tokens"]
        assert frames[key].dtypes.equals(expected_empty.dtypes)
    assert frames["d1"]["chunk_id"].tolist() == ["c0", "c1"] and frames["d4"]["tokens"].tolist() == [0]

    # A later run finds data on d2: its file is replaced, d3 and the shared empty file stay empty.
    _write(io, {"d2": _frame(3)})
    again = _read(base, "d2", "d3")
    assert len(again["d2"]) == 3 and again["d3"].empty
    assert pd.read_parquet(templates[0]).empty and (folder / "d3.parquet").stat().st_ino == inode

    # Written empty again (every --full-refresh): the same file, and no temp file left by the no-op rename.
    links = templates[0].stat().st_nlink
    _write(io, {"d3": _frame(0)})
    assert (folder / "d3.parquet").stat().st_ino == inode and templates[0].stat().st_nlink == links
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]

    # The same column names with other types get their own empty file.
    plain_ints = pd.DataFrame({"chunk_id": pd.Series([], dtype=object), "tokens": pd.Series([], dtype="int64")})
    _write(io, {"d1": plain_ints})
    assert len(list(folder.glob(".empty-*.parquet"))) == 2
    assert _read(base, "d1")["d1"].dtypes.equals(_written_empty(tmp_path, plain_ints).dtypes)
    assert str(_read(base, "d3")["d3"].dtypes["tokens"]) == "Int64"

    # Another schema gets its own empty file: an empty partition never reads back with another's columns.
    other = pd.DataFrame({"document_id": pd.Series([], dtype=object)})
    _write(io, {"d4": other})
    assert len(list(folder.glob(".empty-*.parquet"))) == 3
    assert list(_read(base, "d4")["d4"].columns) == ["document_id"]
    assert list(_read(base, "d3")["d3"].columns) == ["chunk_id", "tokens"]


def test_without_hard_links_an_empty_partition_is_written_as_a_file_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(source: object, target: object) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(io_manager.os, "link", no_links)
    base = tmp_path / "parquet"
    _write(PartitionedParquetIOManager(base_dir=str(base)), {"d1": _frame(0), "d2": _frame(1)})
    d1 = base / "chunks" / "d1.parquet"
    assert d1.stat().st_nlink == 1
    frames = _read(base, "d1", "d2")
    assert frames["d1"].empty and frames["d1"].dtypes.equals(_written_empty(tmp_path, _frame(0)).dtypes)
    assert len(frames["d2"]) == 1


def test_a_file_at_its_link_limit_is_succeeded_by_a_new_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ext4 allows 65,000 links to a file; an asset with more empty partitions starts a new empty file."""
    real_link, calls = os.link, []

    def full_after_one(source: object, target: object) -> None:
        calls.append(target)
        if len(calls) == 2:
            raise OSError(errno.EMLINK, "Too many links")
        real_link(source, target)  # type: ignore[arg-type]

    monkeypatch.setattr(io_manager.os, "link", full_after_one)
    base = tmp_path / "parquet"
    _write(PartitionedParquetIOManager(base_dir=str(base)), {"d1": _frame(0), "d2": _frame(0), "d3": _frame(0)})
    folder = base / "chunks"
    inodes = {key: (folder / f"{key}.parquet").stat().st_ino for key in ("d1", "d2", "d3")}
    # Dagster hands the range's keys over in no set order; a link goes to "d1.parquet" or a temp ".d1.<id>.tmp"
    first = Path(str(calls[0])).name.lstrip(".").split(".")[0]
    (template,) = folder.glob(".empty-*.parquet")
    # The first partition keeps the full file; the one that hit the limit and the next share a new one.
    assert {key for key, inode in inodes.items() if inode == template.stat().st_ino} == {"d1", "d2", "d3"} - {first}
    assert (folder / f"{first}.parquet").stat().st_nlink == 1 and template.stat().st_nlink == 3
    assert all(frame.empty for frame in _read(base, "d1", "d3").values())
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]
