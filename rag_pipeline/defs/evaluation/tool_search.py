"""``tool_search_eval``: tool search scored like document search (thin wiring over
:func:`rag_pipeline.evaluation.tool_search_eval.evaluate_tool_search`): every mode on the tool-retrieval eval set
(RAG_TOOL_EVAL_DIR, MetaTool by default) against the tools indexed in this folder, with nDCG@5 / Recall@5 per arm,
each arm against vector, the prompt tokens saved, and a bar chart. Index the set's catalog first
(``rag-pipeline index --tools-catalog eval_sets/tools_metatool/catalog.json --source tools``); without it the asset
says so and scores nothing."""

import json
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from rag_pipeline.defs.chain.resources import Bm25Resource, DenseEmbedderResource, QdrantResource
from rag_pipeline.defs.executors import QDRANT_QUEUE, step_tags
from rag_pipeline.evaluation.eval_set import load_eval_set
from rag_pipeline.evaluation.tool_search_eval import (
    TEST_SET,
    TRAIN_FILE,
    evaluate_tool_search,
    missing_tools,
    read_train,
    table,
)
from rag_pipeline.retrieval.entry import SearchModels, build_retriever
from rag_pipeline.retrieval.tool_search import read_catalog
from rag_pipeline.vectors.dense.load import load_or_defer


class ToolSearchEvalConfig(dg.Config):
    """Which eval set, and how many training queries the simulated success is measured on."""

    eval_dir: str | None = Field(default=None, description="folder of the tool eval set (default: RAG_TOOL_EVAL_DIR)")
    train_sample: int = Field(default=2000, description="training queries the vector arm's top-1 is checked on")


def _plot(results: dict[str, Any], path: Path) -> Path:
    import matplotlib  # imported here: plotting costs a second of import time

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results["arms"])
    means = [results["arms"][n]["ndcg@5"]["mean"] for n in names]
    lows = [m - results["arms"][n]["ndcg@5"]["ci95"][0] for n, m in zip(names, means, strict=True)]
    highs = [results["arms"][n]["ndcg@5"]["ci95"][1] - m for n, m in zip(names, means, strict=True)]
    figure, axis = plt.subplots(figsize=(8, 3.5))
    axis.barh(names, means, xerr=[lows, highs], color="#4c72b0")
    axis.invert_yaxis()
    axis.set_xlabel("nDCG@5 (95 % CI)")
    axis.set_title(f"Tool search, {results['queries']} queries, {results['catalog_tools']} tools")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def build_tool_search_eval(points: dg.AssetKey, eval_dir: Path, reports_dir: Path) -> dg.AssetsDefinition:
    @dg.asset(
        deps=[points],
        group_name="evaluation",
        kinds={"python"},
        op_tags=step_tags(QDRANT_QUEUE),
        owners=["team:rag-platform"],
        description="Tool search scored on the tool-retrieval eval set: vector, BM25, hybrid and the multi-signal "
        "score (0.5 semantic + 0.3 usage + 0.2 success, usage and success simulated from the training split "
        "only), nDCG@5 / Recall@5 with CIs, each against vector, and the prompt tokens the top 5 cost against "
        "loading every tool.",
    )
    def tool_search_eval(
        context: dg.AssetExecutionContext,
        config: ToolSearchEvalConfig,
        qdrant: QdrantResource,
        dense_embedder: DenseEmbedderResource,
        bm25: Bm25Resource,
    ) -> dg.MaterializeResult:
        folder = Path(config.eval_dir) if config.eval_dir else eval_dir
        if not (folder / TEST_SET).exists():
            raise dg.Failure(f"no tool eval set at {folder}: {TEST_SET} is missing (RAG_TOOL_EVAL_DIR)",
                             allow_retries=False)  # fmt: skip
        queries = load_eval_set(folder / TEST_SET)
        train = read_train(folder / TRAIN_FILE) if (folder / TRAIN_FILE).exists() else []
        with qdrant.open() as store:
            missing = missing_tools(queries, set(read_catalog(store)))
            if missing:
                context.log.warning(f"{len(missing)} tools of the eval set are not indexed: nothing scored")
                return dg.MaterializeResult(
                    metadata={
                        "status": f"not scored: {len(missing)} of the eval set's tools are not indexed; run "
                        f"rag-pipeline index --tools-catalog {folder / 'catalog.json'} --source tools",
                    }
                )
            models = SearchModels(
                dense_embedder.model_name(), bm25.encoder(), dense=load_or_defer(dense_embedder.encoder)
            )
            results = evaluate_tool_search(
                lambda: build_retriever(store, models), queries, train, train_sample=config.train_sample,
                on_progress=context.log.info,
            )  # fmt: skip
        out = reports_dir / "tool_search"
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        plot = _plot(results, out / "ndcg_at_5.png")
        metadata: dict[str, Any] = {
            "queries": results["queries"],
            "catalog_tools": results["catalog_tools"],
            "report": dg.MetadataValue.path(str(out / "summary.json")),
            "plot": dg.MetadataValue.path(str(plot)),
            "table": dg.MetadataValue.md(table(results)),
            "prompt_tokens_all_tools": next(iter(results["arms"].values()))["tokens"]["all_tools"],
        }
        for name, arm in results["arms"].items():
            key = name.replace(" ", "_").replace("(", "").replace(")", "")
            metadata[f"ndcg@5/{key}"] = arm["ndcg@5"]["mean"]
            metadata[f"recall@5/{key}"] = arm["recall@5"]["mean"]
            metadata[f"tokens_saved_share/{key}"] = arm["tokens"]["saved_share"]
        return dg.MaterializeResult(metadata=metadata)

    return tool_search_eval
