"""The data folder's layout version (issue 70, upgrades): read from its record, else from its files; recorded with
the history of the migrations that ran; a folder written by a newer version refused, a damaged record named."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from rag_pipeline.pipeline.layout import LAYOUT_RECORD, LAYOUT_VERSION, read_layout, record_layout
from rag_pipeline.runs.migration import upgrade_data_folder


def _daily_layout(data_dir: Path) -> None:
    """Two assets in the first layout: one file per (day, channel)."""
    for asset in ("slack_threads", "slack_child_chunks"):
        folder = data_dir / "parquet" / asset / "C0PUB"
        folder.mkdir(parents=True)
        pd.DataFrame({"document_id": ["d1"], "text": ["hello"]}).to_parquet(folder / "2024-03-01.parquet")


def test_a_folders_layout_is_read_from_its_files_until_recorded(tmp_path: Path) -> None:
    assert (read_layout(tmp_path).version, read_layout(tmp_path).pending) == (None, [])  # nothing written yet
    _daily_layout(tmp_path)
    state = read_layout(tmp_path)
    assert (state.version, state.known_from) == (1, "files")
    assert [(m.source, m.target) for m in state.pending] == [(1, LAYOUT_VERSION)]
    assert "migration pending to 2" in state.describe() and "nothing is re-embedded" in state.describe()


def test_the_upgrade_records_the_layout_and_what_it_did(tmp_path: Path) -> None:
    _daily_layout(tmp_path)
    report = upgrade_data_folder(tmp_path / "parquet", None)
    assert report is not None and report.files_converted == 2
    state = read_layout(tmp_path)
    assert (state.version, state.known_from, state.pending) == (LAYOUT_VERSION, "record", [])
    (step,) = state.history
    assert (step["from"], step["to"]) == (1, 2) and step["report"]["files_converted"] == 2 and step["by"]
    assert state.describe() == "data folder layout: 2 (current)"
    # Running again changes nothing: the record keeps one step.
    assert upgrade_data_folder(tmp_path / "parquet", None) is None
    assert read_layout(tmp_path).history == state.history


def test_a_new_folder_is_recorded_at_the_current_layout_with_no_history(tmp_path: Path) -> None:
    assert upgrade_data_folder(tmp_path / "parquet", None) is None
    written = json.loads((tmp_path / LAYOUT_RECORD).read_text())
    assert written["version"] == LAYOUT_VERSION and written["history"] == []


def test_a_folder_of_a_newer_version_is_refused_and_a_damaged_record_named(tmp_path: Path) -> None:
    (tmp_path / LAYOUT_RECORD).write_text(json.dumps({"version": LAYOUT_VERSION + 1, "history": []}))
    state = read_layout(tmp_path)
    assert state.newer_than_this_version and "written by a newer rag-pipeline" in state.describe()
    with pytest.raises(ValueError, match="newer rag-pipeline"):
        upgrade_data_folder(tmp_path / "parquet", None)
    with pytest.raises(ValueError, match="newer rag-pipeline"):
        record_layout(tmp_path)
    (tmp_path / LAYOUT_RECORD).write_text("{not json")
    with pytest.raises(ValueError, match=rf"{LAYOUT_RECORD} is not a layout record"):
        read_layout(tmp_path)
