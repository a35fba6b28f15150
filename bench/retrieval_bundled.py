"""The four arms on the bundled dev eval sets, from the Dagster report and from the CLI — they must agree.

Runs after ``bench.ingest`` on the index it built (``--data-dir``, default /tmp/rag_bench):

1. materializes ``retrieval_eval`` (every arm) and ``retrieval_eval_report`` on that instance
   (what the Dagster UI shows), timing each eval set's four arms;
2. runs ``rag-pipeline bench --eval-set … --json`` on the same index;
3. compares every arm's nDCG@10, Recall@10/100, MRR@10 and MAP@100 between the two, and measures
   hybrid search latency at top-10 (query embedding excluded) on the embedded engine.

    .venv/bin/python -m bench.retrieval_bundled [--data-dir /tmp/rag_bench] [--out bench/results/retrieval_bundled.json]
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench import common
from rag_pipeline.composition import dense_encoder_of, open_index, search_models, served_config
from rag_pipeline.evaluation.eval_set import load_eval_set, load_eval_set_meta
from rag_pipeline.retrieval.entry import build_retriever
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.runs.evaluation import run_evaluation
from rag_pipeline.settings import Settings
from rag_pipeline.vectors.cache import EmbeddingCache
from rag_pipeline.vectors.dense.load import load_dense_encoder

METRICS = ("ndcg@10", "recall@10", "recall@100", "mrr@10", "map@100")


def hybrid_latency(settings: Settings, eval_dir: Path) -> dict[str, float]:
    with open_index(settings) as store:
        # The reader's path: the configured BM25 terms and the service's search settings (learned fusions).
        models = search_models(
            settings,
            dense=lambda: load_dense_encoder(settings.dense_model),
            cache=EmbeddingCache(settings.paths.embedding_cache),
        )
        retriever = build_retriever(store, models, served_config(settings))
        timings: dict[str, list[float]] = {}
        for name in common.DEV_SETS:
            queries = load_eval_set(eval_dir / f"{name}.jsonl")
            # Limited to the set's sources as the evaluation is: each source's own fusion (Jira: five lists).
            sources = load_eval_set_meta(eval_dir / f"{name}.jsonl").sources
            retriever.embed_queries([q.query for q in queries])
            for q in queries:
                principal = q.principal or Principal.all_documents_for_evaluation()
                response = retriever.search(q.query, "hybrid", principal, top_k=10, sources=sources)
                timings.setdefault(name, []).append((response.seconds["total"] - response.seconds["embed"]) * 1000)
        everything = np.concatenate([np.asarray(v) for v in timings.values()])
        return {
            "queries": int(everything.size),
            "p50_ms": round(float(np.percentile(everything, 50)), 2),
            "p95_ms": round(float(np.percentile(everything, 95)), 2),
            **{f"{k}_p50_ms": round(float(np.percentile(v, 50)), 2) for k, v in timings.items()},
        }


def main() -> None:
    parser = common.parser(__doc__)
    common.add_index_arguments(parser)
    parser.add_argument("--out", type=Path, default=common.RESULTS / "retrieval_bundled.json")
    args = parser.parse_args()
    settings = Settings.from_env().with_data_dir(args.data_dir)
    started = time.perf_counter()
    dagster = run_evaluation(settings, force=True)
    dagster_seconds = time.perf_counter() - started
    eval_sets = sorted(args.eval_dir.glob("*.jsonl"))
    started = time.perf_counter()
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "rag_pipeline.cli",
            "bench",
            "--data-dir",
            str(args.data_dir),
            "--json",
            "--extra-reranker",
            "fixed",
            *[a for p in eval_sets for a in ("--eval-set", str(p))],
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    cli_seconds = time.perf_counter() - started
    cli_figures = json.loads(cli.stdout)
    agreement = {}
    for name, figures in dagster.figures.items():
        diffs = [
            abs(figures["arms"][arm][m] - cli_figures[name]["arms"][arm][m]) for arm in figures["arms"] for m in METRICS
        ]
        agreement[name] = {"max_abs_difference": max(diffs), "compared_values": len(diffs)}
    report = {
        "run": common.run_record(dense_encoder_of(settings)),
        "dagster": {
            "seconds_all_sets": round(dagster_seconds, 1),
            "checks": dagster.checks,
            "eval_sets": dagster.figures,
        },
        "cli": {"seconds_all_sets": round(cli_seconds, 1), "eval_sets": cli_figures},
        "agreement": agreement,
        "hybrid_top10_latency_excluding_embedding": hybrid_latency(settings, args.eval_dir),
    }
    common.write_json(args.out, report)
    for name, table in dagster.tables.items():
        print(f"\n### {name}\n\n{table}")
    print(json.dumps({k: report[k] for k in ("agreement", "hybrid_top10_latency_excluding_embedding")}, indent=2))


if __name__ == "__main__":
    main()
