"""A data folder's first index chooses its language when it runs from Dagster too (the UI, a sensor): the
resources' models are ``auto`` while nothing is recorded, the first ``child_chunks`` step chooses from the
documents it is about to chunk, and every later step (embedding, BM25, the points' recorded models) and every
later code-location load follow the recorded choice."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.index_info import indexed_dense_model, indexed_sparse_terms
from rag_pipeline.index.store import CollectionNames
from rag_pipeline_tests.dagster.test_multilingual_bm25 import _multilingual_export
from rag_pipeline_tests.kit.pipeline import cell, chain, resources, settings_for


def test_the_first_dagster_run_chooses_the_language_and_the_code_location_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("RAG_DENSE_MODEL", "RAG_BM25_TOKENIZER", "RAG_LANGUAGE", "DAGSTER_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAG_SLACK_EXPORT", str(_multilingual_export(tmp_path / "export")))
    data = tmp_path / "data"
    res = resources(data, live=False)
    assert res["dense_embedder"].model == "auto" and res["bm25"].tokenizer == "auto"  # type: ignore[attr-defined]
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("slack_channels", ["C0PUB"])
        result = dg.materialize(
            chain("slack", settings_for(data)),
            instance=instance,
            resources=res,
            **cell("slack_threads", "C0PUB", "2024-03-01"),
        )
    assert result.success
    recorded = json.loads((data / "language.json").read_text())
    assert (recorded["language"], recorded["decided_by"], recorded["cjk_documents"]) == ("cjk", "sample", 3)
    with EdgeVectorStore(data / "qdrant", CollectionNames.with_prefix("rag")) as store:
        assert indexed_dense_model(store) == "multilingual-e5-small"
        assert indexed_sparse_terms(store) == "cjk-bigram/english"
    # The code location loaded again builds its resources from the recorded choice, not "auto".
    again = resources(data, live=False)
    assert again["dense_embedder"].model == "multilingual-e5-small"  # type: ignore[attr-defined]
    assert again["bm25"].tokenizer == "cjk-bigram"  # type: ignore[attr-defined]
