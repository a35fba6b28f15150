"""Each hybrid lever as an ablation row, through the product: the real Retriever on the real demo index.

For every bundled dev set the hybrid arm runs with the shipped retriever config, then with one lever taken
away at a time, and with plain RRF (k=60, equal weights, the plain query). Each row has nDCG@10 with a bootstrap
95 % CI, and a paired permutation test against plain RRF and against the shipped config. Unlike
``bench.experiments.hybrid_levers`` (a replay of fetched lists that can score hundreds of settings), every figure
here is the engine's own fusion over the index's own vectors, title vectors included. Needs the demo index:

    .venv/bin/python -m bench.experiments.hybrid_ablation [--data-dir /tmp/rag_bench]   # ≈3 min on 2 cores

Results: bench/experiments/results/hybrid_ablation.json and .md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench import common
from rag_pipeline.composition import dense_encoder_of, open_index
from rag_pipeline.evaluation.eval_set import load_eval_set, load_eval_set_meta
from rag_pipeline.evaluation.metrics import per_query_metrics
from rag_pipeline.evaluation.runner import run_arm
from rag_pipeline.evaluation.statistics import bootstrap_ci, paired_permutation_p
from rag_pipeline.index.store import TITLE_VECTOR
from rag_pipeline.retrieval.fusion import SourceFusion, learned_fusion
from rag_pipeline.retrieval.retriever import Retriever, RetrieverConfig
from rag_pipeline.settings import Settings
from rag_pipeline.vectors.cache import EmbeddingCache
from rag_pipeline.vectors.sparse import Bm25Encoder


def _without(field: str) -> Callable[[SourceFusion], SourceFusion]:
    return lambda fusion: fusion.model_copy(update={field: None})


def configs() -> dict[str, RetrieverConfig]:
    """The shipped config, each lever taken away, and plain RRF."""
    shipped = RetrieverConfig.chosen()

    def learned(change: Callable[[SourceFusion], SourceFusion]) -> RetrieverConfig:
        return shipped.model_copy(update={"fusion_by_source": {s: change(f) for s, f in learned_fusion().items()}})

    return {
        "shipped": shipped,
        "− document title vectors": learned(_without("document_title_weight")),
        "− title-line dense prefetch": learned(_without("title_dense_weight")),
        "− both title prefetches": learned(
            lambda f: _without("title_dense_weight")(_without("document_title_weight")(f))
        ),
        "− learned k and weights (k=60, equal, title prefetches kept)": learned(
            lambda f: f.model_copy(update={"k": 60, "dense_weight": 1.0, "sparse_weight": 1.0})
        ),
        "− fielded query (plain)": RetrieverConfig.chosen("plain"),
        "plain RRF (k=60, plain query)": RetrieverConfig.chosen("plain", learned_fusion=False),
    }


def main() -> None:
    parser = common.parser(__doc__)
    common.add_index_arguments(parser)
    parser.add_argument("--out", type=Path, default=common.EXPERIMENT_RESULTS / "hybrid_ablation.json")
    args = parser.parse_args()
    settings = Settings.from_env().with_data_dir(args.data_dir)
    dense = dense_encoder_of(settings)
    cache = EmbeddingCache(settings.paths.embedding_cache)
    results: dict[str, object] = {"run": common.run_record(dense)}
    lines = [
        "| set | row | nDCG@10 | 95% CI | Δ vs plain RRF | p | Δ vs shipped | p |",
        "|---|---|---:|---|---:|---:|---:|---:|",
    ]
    with open_index(settings) as store:
        results["title_vectors_in_index"] = TITLE_VECTOR in store.dense_vector_names()
        for name in common.DEV_SETS:
            path = args.eval_dir / f"{name}.jsonl"
            meta = load_eval_set_meta(path)
            queries = [q for q in load_eval_set(path) if q.judged]
            qrels = {q.id: q.relevant for q in queries}
            scores: dict[str, np.ndarray] = {}
            for row, config in configs().items():
                retriever = Retriever(store, Bm25Encoder(), dense=dense, config=config, persistent_cache=cache)
                started = time.perf_counter()
                outcome = run_arm(retriever, "hybrid", queries, sources=meta.sources)  # depth 100, as the bench
                run = {qid: dict(ranking) for qid, ranking in outcome.run.rankings.items()}
                scores[row] = per_query_metrics(qrels, run, ["ndcg@10"])["ndcg@10"].to_numpy()
                print(f"{name} {row}: {scores[row].mean():.4f} ({time.perf_counter() - started:.0f} s)", flush=True)
            plain, shipped = scores["plain RRF (k=60, plain query)"], scores["shipped"]
            rows = {}
            for row, values in scores.items():
                low, high = bootstrap_ci(values)
                rows[row] = {
                    "ndcg@10": round(float(values.mean()), 4),
                    "ci95": [round(low, 4), round(high, 4)],
                    "delta_vs_plain_rrf": round(float(values.mean() - plain.mean()), 4),
                    "p_vs_plain_rrf": round(paired_permutation_p(values, plain), 4),
                    "delta_vs_shipped": round(float(values.mean() - shipped.mean()), 4),
                    "p_vs_shipped": round(paired_permutation_p(values, shipped), 4),
                }
                r = rows[row]
                lines.append(
                    f"| {name} | {row} | {r['ndcg@10']:.3f} | {low:.3f}–{high:.3f} | {r['delta_vs_plain_rrf']:+.3f} "
                    f"| {r['p_vs_plain_rrf']:.3f} | {r['delta_vs_shipped']:+.3f} | {r['p_vs_shipped']:.3f} |"
                )
            results[name] = {"queries": len(queries), "rows": rows}
    common.write_json(args.out, results, indent=1, ensure_ascii=False)
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
