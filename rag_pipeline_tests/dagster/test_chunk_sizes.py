"""Chunk sizes as settings (issue 51, part 7): PARENT_/CHILD_CHUNK_SIZE and _OVERLAP validated like every setting,
recorded with the index, and a write with other sizes refused before anything mixes: through the real
``rag-pipeline index`` (the Dagster chain) in this process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rag_pipeline.cli import main
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.index_info import (
    LEGACY_CHUNKING,
    IndexModelMismatch,
    claim_chunking,
    indexed_chunking,
)
from rag_pipeline.index.store import CollectionNames
from rag_pipeline.settings import Settings, SettingsError
from rag_pipeline_tests.kit.data import basic_days, write_slack_export


def test_chunk_size_settings_are_validated_together() -> None:
    assert Settings.from_env({"CHILD_CHUNK_SIZE": "300"}).chunking.signature() == "parent 2000/200, child 300/50"
    cases = {
        "CHILD_CHUNK_SIZE": ("3000", "CHILD_CHUNK_SIZE (3000) must be <= PARENT_CHUNK_SIZE (2000)"),
        "PARENT_CHUNK_OVERLAP": ("2000", "PARENT_CHUNK_OVERLAP (2000) must be < PARENT_CHUNK_SIZE (2000)"),
        "CHILD_CHUNK_OVERLAP": ("-1", "CHILD_CHUNK_OVERLAP must be at least 0"),
        "PARENT_CHUNK_SIZE": ("lots", "PARENT_CHUNK_SIZE must be a whole number"),
    }
    for name, (value, message) in cases.items():
        with pytest.raises(SettingsError, match=message.replace("(", r"\(").replace(")", r"\)")):
            Settings.from_env({name: value})


def test_the_index_records_its_chunk_sizes_and_refuses_others(tmp_path: Path) -> None:
    with EdgeVectorStore(tmp_path / "new", CollectionNames.with_prefix("t")) as store:
        store.create_collections(4)
        assert indexed_chunking(store) is None
        claim_chunking(store, "parent 1000/100, child 200/20")
        claim_chunking(store, "parent 1000/100, child 200/20")  # the same again: fine
        with pytest.raises(IndexModelMismatch, match="CHILD_CHUNK_SIZE"):
            claim_chunking(store, "parent 2000/200, child 400/50")
    # An index written before the sizes were recorded was written with the only sizes there were.
    with EdgeVectorStore(tmp_path / "old", CollectionNames.with_prefix("t")) as store:
        store.create_collections(4)
        store.record_index_info({"dense_model": "all-MiniLM-L6-v2"})
        assert indexed_chunking(store) == LEGACY_CHUNKING
        claim_chunking(store, LEGACY_CHUNKING)


def test_an_index_run_with_other_chunk_sizes_is_refused_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    export = write_slack_export(tmp_path / "export", basic_days())
    data = tmp_path / "data"
    argv = ["index", "--slack-export", str(export), "--slack-team", "T0CHUNK", "--source", "slack", "--data-dir"]
    assert main([*argv, str(data), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    chunk_files = {p: p.read_bytes() for p in (data / "parquet").rglob("*.parquet")}
    monkeypatch.setenv("CHILD_CHUNK_SIZE", "120")
    monkeypatch.setenv("CHILD_CHUNK_OVERLAP", "10")
    assert main([*argv, str(data), "--full-refresh"]) == 2
    error = capsys.readouterr().err
    assert "chunks of parent 2000/200, child 400/50" in error and "CHILD_CHUNK_SIZE" in error, error
    # Refused before any run: no partition file was rechunked with the new sizes.
    assert {p: p.read_bytes() for p in (data / "parquet").rglob("*.parquet")} == chunk_files
    # Nothing was lost: the first index still answers.
    assert main(["search", "thread", "--all-documents", "--json", "--data-dir", str(data)]) == 0
    assert json.loads(capsys.readouterr().out)["results"]
    # In a new folder (its own process, as a command runs) the new sizes are used: smaller children, more of them.
    other = tmp_path / "other"
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    done = subprocess.run([sys.executable, "-m", "rag_pipeline.cli", *argv, str(other), "--json"], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    smaller = json.loads(done.stdout)
    assert smaller["documents"] == first["documents"] and smaller["child_chunks"] >= first["child_chunks"], smaller
    with EdgeVectorStore(other / "qdrant", CollectionNames.with_prefix("rag")) as store:
        assert indexed_chunking(store) == "parent 2000/200, child 120/10"
