"""``rag-pipeline bench --beir`` end to end on a tiny BEIR dataset: temporary index, learned reranker, report."""

from __future__ import annotations

import json
from pathlib import Path

from rag_pipeline.cli import main

DOCS = {
    "d1": ("Aspirin and heart attacks", "Daily aspirin lowers the risk of a second heart attack in adults."),
    "d2": ("Vitamin D and bones", "Vitamin D supplements increase bone density in older women."),
    "d3": ("Sleep and memory", "Deep sleep consolidates memory of facts learned during the day."),
    "d4": ("Coffee and the liver", "Coffee drinkers show lower rates of liver cirrhosis."),
    "d5": ("Exercise and mood", "Aerobic exercise reduces symptoms of depression."),
    "d6": ("Salt and blood pressure", "Cutting salt intake lowers blood pressure in hypertension."),
}
TEST = {"t1": ("does aspirin prevent heart attacks", "d1"), "t2": ("salt raises blood pressure", "d6")}
TRAIN = {
    "r1": ("vitamin d for bone density", "d2"),
    "r2": ("sleep helps memory", "d3"),
    "r3": ("coffee protects the liver", "d4"),
    "r4": ("exercise against depression", "d5"),
}


def _beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "\n".join(json.dumps({"_id": k, "title": t, "text": x}) for k, (t, x) in DOCS.items()) + "\n"
    )
    queries = {**TEST, **TRAIN}
    (folder / "queries.jsonl").write_text("\n".join(json.dumps({"_id": k, "text": q}) for k, (q, _) in queries.items()))
    for split, qs in (("test", TEST), ("train", TRAIN)):
        rows = "".join(f"{q}\t{doc}\t1\n" for q, (_, doc) in qs.items())
        (folder / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows)
    return folder


def test_bench_beir_json_shape_and_report(tmp_path: Path, capsys) -> None:
    beir = _beir(tmp_path / "beir_tiny")
    out = tmp_path / "report"
    argv = ["bench", "--beir", str(beir), "--json", "--out", str(out), "--data-dir", str(tmp_path / "data")]
    assert main([*argv, "--extra-reranker", "fixed"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["queries"] == 2 and figures["documents"] == 6
    assert figures["dense_search"] == "hnsw (m=16, ef_construct=100, ef=128)"
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
    assert "| hybrid" in capsys.readouterr().out
    # Exact dense search on request, said in the output; six documents rank the same either way.
    assert main([*argv, "--arms", "vector", "--exact-dense"]) == 0
    exact = json.loads(capsys.readouterr().out)
    assert exact["dense_search"] == "exact"
    assert exact["arms"]["vector"]["ndcg@10"] == figures["arms"]["vector"]["ndcg@10"]
