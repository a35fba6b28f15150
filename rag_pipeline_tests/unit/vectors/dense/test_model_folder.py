"""Converted model folders are published whole: written aside, renamed into place, a complete one kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_pipeline.vectors.dense.model_folder import written_aside


def test_a_failed_write_leaves_neither_the_model_nor_its_temporary_folder(tmp_path: Path) -> None:
    target = tmp_path / "cache" / "model"
    with pytest.raises(RuntimeError), written_aside(target, "model.xml") as folder:
        (folder / "model.xml").write_text("half")
        raise RuntimeError("converter crashed")
    assert list((tmp_path / "cache").iterdir()) == []


def test_the_first_complete_folder_is_kept_and_a_marker_less_one_replaced(tmp_path: Path) -> None:
    target = tmp_path / "model"
    with written_aside(target, "model.xml") as folder:
        (folder / "model.xml").write_text("first")
    with written_aside(target, "model.xml") as folder:  # a second process finishing later
        (folder / "model.xml").write_text("second")
    assert (target / "model.xml").read_text() == "first"
    leftover = tmp_path / "left"
    (leftover / "weights.bin").parent.mkdir()
    (leftover / "weights.bin").write_text("no marker: never completed")
    with written_aside(leftover, "model.xml") as folder:
        (folder / "model.xml").write_text("whole")
    assert sorted(p.name for p in leftover.iterdir()) == ["model.xml"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["left", "model"]
