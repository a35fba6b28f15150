"""``rag-pipeline bench --beir`` end to end on a tiny BEIR dataset: temporary index, learned reranker, report."""

from __future__ import annotations

import json
from pathlib import Path

from rag_pipeline.cli import main
from rag_pipeline_tests.kit.beir import write_tiny_beir


def test_bench_beir_json_shape_and_report(tmp_path: Path, capsys) -> None:
    beir = write_tiny_beir(tmp_path / "beir_tiny")
    out = tmp_path / "report"
    argv = ["bench", "--beir", str(beir), "--json", "--out", str(out), "--data-dir", str(tmp_path / "data")]
    assert main([*argv, "--extra-reranker", "fixed"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["queries"] == 2 and figures["documents"] == 6
    assert figures["dense_search"] == "hnsw (m=16, ef_construct=100, ef=128)"
    # Where the latencies were measured: the CPU, its instruction sets and the encoder's backend and precision.
    machine = figures["machine"]
    assert machine["cpu"] and machine["cores"] >= 1 and isinstance(machine["instruction_sets"], list)
    assert "all-MiniLM-L6-v2, " in machine["dense_encoder"]  # model id, backend (precision)
    assert set(figures["arms"]) == {"vector", "bm25", "hybrid", "reranked", "prf", "reranked[fixed-weights]"}
    for name, arm in figures["arms"].items():
        assert set(arm) >= {"ndcg@10", "recall@10", "recall@100", "mrr@10", "map@100", "p50_ms", "p95_ms", "ci95"}
        assert arm["recall@100"] == 1.0, name  # six documents: everything is retrieved
        assert (arm["p_vs_baseline"] is None) == (name == "bm25")
    assert figures["arms"]["bm25"]["ndcg@10"] == 1.0  # the queries share their documents' words
    for file in ("report.md", "summary.json", "per_query.parquet", "ndcg_at_10.png", "recall_at_k.png"):
        assert (out / file).stat().st_size > 0
    assert "reranked" in (out / "report.md").read_text()
    # Second run: the embedding cache in --data-dir serves every chunk.
    assert main(["bench", "--beir", str(beir), "--arms", "bm25", "hybrid", "--data-dir", str(tmp_path / "data")]) == 0
    table = capsys.readouterr().out
    assert "| hybrid" in table and "\nmachine: " in table and "all-MiniLM-L6-v2, " in table
    # Exact dense search on request, said in the output; six documents rank the same either way.
    assert main([*argv, "--arms", "vector", "--exact-dense"]) == 0
    exact = json.loads(capsys.readouterr().out)
    assert exact["dense_search"] == "exact"
    assert exact["arms"]["vector"]["ndcg@10"] == figures["arms"]["vector"]["ndcg@10"]
