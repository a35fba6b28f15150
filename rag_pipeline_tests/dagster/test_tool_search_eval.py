"""The ``tool_search_eval`` asset through Dagster: a small catalog indexed by ``rag-pipeline index`` (the real
chain), a synthetic eval set with a training split, every arm scored, the report and plot written; and an index
without the set's tools is told so, not scored."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from rag_pipeline.defs.chain.resources import Bm25Resource, DenseEmbedderResource, QdrantResource
from rag_pipeline.defs.evaluation.tool_search import ToolSearchEvalConfig, build_tool_search_eval
from rag_pipeline.settings import Settings

TOOLS = {
    "WeatherTool": "Current weather, forecasts and rain alerts for any city.",
    "CurrencyTool": "Convert money between currencies with today's exchange rates.",
    "RecipeTool": "Find cooking recipes by ingredient, cuisine or diet.",
    "FlightTool": "Search and compare flights between airports.",
    "TranslateTool": "Translate text between languages.",
    "StockTool": "Stock prices, charts and company earnings.",
}
TEST = [
    ("will it rain in Busan tomorrow", "WeatherTool"),
    ("how many won is 50 dollars", "CurrencyTool"),
    ("a vegetarian lasagna recipe", "RecipeTool"),
    ("cheapest flight from Seoul to Tokyo", "FlightTool"),
    ("say thank you in Japanese", "TranslateTool"),
    ("what did Samsung shares close at", "StockTool"),
]
TRAIN = [("forecast for the weekend", "WeatherTool")] * 6 + [("dinner ideas with tofu", "RecipeTool")] * 3


def _eval_set(folder: Path) -> Path:
    folder.mkdir(parents=True)
    catalog = {"tools": [{"name": n, "description": d} for n, d in TOOLS.items()]}
    (folder / "catalog.json").write_text(json.dumps(catalog))
    lines = [{"id": f"q{i}", "query": q, "relevant": {f"tools:catalog:{t}": 1}} for i, (q, t) in enumerate(TEST)]
    (folder / "tools_metatool_test.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    (folder / "train.ndjson").write_text("".join(json.dumps({"query": q, "tool": t}) + "\n" for q, t in TRAIN))
    return folder


def _materialize(data: Path, eval_dir: Path) -> dg.ExecuteInProcessResult:
    settings = Settings.from_env({"RAG_DATA_DIR": str(data)})
    asset = build_tool_search_eval(dg.AssetKey("tools_qdrant_points"), eval_dir, settings.paths.reports)
    return dg.materialize(
        [asset],
        resources={
            "qdrant": QdrantResource(path=str(settings.paths.qdrant)),
            "dense_embedder": DenseEmbedderResource(model=settings.dense_model, cache_path=str(data / "c.sqlite")),
            "bm25": Bm25Resource(),
        },
        run_config=dg.RunConfig({"tool_search_eval": ToolSearchEvalConfig(train_sample=10)}),
    )


def _metadata(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    materialization = result.asset_materializations_for_node("tool_search_eval")[0]
    return {k: v.value for k, v in materialization.metadata.items()}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("tool_eval")
    eval_dir = _eval_set(root / "set")
    folder = root / "data"
    done = subprocess.run(
        [sys.executable, "-m", "rag_pipeline.cli", "index", "--tools-catalog", str(eval_dir / "catalog.json"),
         "--source", "tools", "--data-dir", str(folder), "--language", "english"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return folder, eval_dir


def test_the_asset_scores_every_arm_and_writes_the_report(data: tuple[Path, Path]) -> None:
    folder, eval_dir = data
    result = _materialize(folder, eval_dir)
    assert result.success
    metadata = _metadata(result)
    assert metadata["queries"] == 6 and metadata["catalog_tools"] == 6
    assert metadata["ndcg@5/vector"] > 0.5  # each request names its tool's topic
    assert 0 < metadata["tokens_saved_share/multi-signal"] < 1
    summary = json.loads((folder / "reports" / "tool_search" / "summary.json").read_text())
    assert set(summary["arms"]) >= {"vector", "bm25", "hybrid", "multi-signal"}
    # Usage comes from the training split alone: the weather tool was labelled six times, the stock tool never.
    per_tool = summary["simulated_outcomes"]["per_tool"]
    assert per_tool["WeatherTool"]["calls"] == 6 and "StockTool" not in per_tool
    assert (folder / "reports" / "tool_search" / "ndcg_at_5.png").stat().st_size > 1000
    assert "| multi-signal |" in metadata["table"]


def test_an_index_without_the_sets_tools_is_not_scored(data: tuple[Path, Path], tmp_path: Path) -> None:
    _, eval_dir = data
    other = tmp_path / "other"
    (other / "qdrant").mkdir(parents=True)
    from rag_pipeline.index.edge_store import EdgeVectorStore

    store = EdgeVectorStore(other / "qdrant")
    store.create_collections(384)
    store.close()
    result = _materialize(other, eval_dir)
    assert result.success
    assert _metadata(result)["status"].startswith("not scored: 6 of the eval set's tools are not indexed")
