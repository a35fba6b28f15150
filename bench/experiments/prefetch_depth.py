"""Candidates per hybrid list (``prefetch_limit``) at the served depth: quality on the bundled eval sets.

A served search asks for 10 documents, so each list of a hybrid search fetches ``max(prefetch_limit, child depth)``
= 100 candidates by default; the evaluation asks for 100 documents (Recall@100), whose child depth (400) hides the
setting. At a million children fewer candidates a list answer a broad reader's search a little faster
(docs/notes/search_at_scale.md: served hybrid p50 83 -> 76 ms with 50), so this measures what 50 costs where it
acts: the hybrid arm at top 10 over the bundled index, both settings on the same queries, nDCG@10 per query paired
(the evaluation's randomization test and bootstrap CI of the difference).

    .venv/bin/rag-pipeline index --data-dir /tmp/rag_pf          # the bundled index (once)
    .venv/bin/python -m bench.experiments.prefetch_depth --data-dir /tmp/rag_pf

Results: bench/experiments/results/prefetch_depth.json.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from rag_pipeline.composition import dense_encoder_of, open_index, search_models, served_config
from rag_pipeline.evaluation.eval_set import load_eval_set, load_eval_set_meta
from rag_pipeline.evaluation.evaluate import qrels_of
from rag_pipeline.evaluation.metrics import per_query_metrics
from rag_pipeline.evaluation.runner import run_arm
from rag_pipeline.evaluation.statistics import bootstrap_ci, paired_permutation_p
from rag_pipeline.retrieval.entry import build_retriever
from rag_pipeline.settings import Settings

HERE = Path(__file__).parent
EVAL_SETS = HERE.parent.parent / "eval_sets"
SETS = ("jira_appcelerator_dev", "slack_ubuntu_dev", "acl_bundled_dev")
SERVED_TOP_K = 10


def _paired(a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
    """b - a: mean, the evaluation's 95 % bootstrap CI and its two-sided paired randomization p."""
    low, high = bootstrap_ci(b - a)
    return {
        "diff": round(float((b - a).mean()), 4),
        "ci95": [round(low, 4), round(high, 4)],
        "p": round(paired_permutation_p(b, a), 4),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", type=Path, required=True, help="data folder of the bundled index")
    p.add_argument("--limits", default="100,50", help="prefetch limits to compare, the first the reference")
    p.add_argument("--output", type=Path, default=HERE / "results" / "prefetch_depth.json")
    args = p.parse_args()
    limits = [int(x) for x in args.limits.split(",")]
    settings = Settings.from_env({**os.environ, "RAG_DATA_DIR": str(args.data_dir)})
    encoder = dense_encoder_of(settings)
    base = served_config(settings)
    out: dict[str, Any] = {"what": __doc__.splitlines()[0], "top_k": SERVED_TOP_K, "limits": limits, "sets": {}}
    with open_index(settings) as store:
        models = search_models(settings, dense=encoder)
        for name in SETS:
            path = EVAL_SETS / f"{name}.jsonl"
            meta, queries = load_eval_set_meta(path), load_eval_set(path)
            qrels = qrels_of(queries)
            ndcg = {}
            for limit in limits:
                retriever = build_retriever(store, models, base.model_copy(update={"prefetch_limit": limit}))
                outcome = run_arm(retriever, "hybrid", queries, depth=SERVED_TOP_K, sources=meta.sources)
                run = {q: dict(r) for q, r in outcome.run.rankings.items()}
                ndcg[limit] = per_query_metrics(qrels, run, ["ndcg@10"])["ndcg@10"]
            reference = ndcg[limits[0]]
            row: dict[str, Any] = {"queries": len(reference)}
            for limit in limits:
                row[f"ndcg@10_prefetch_{limit}"] = round(float(ndcg[limit].mean()), 4)
            for limit in limits[1:]:
                other = ndcg[limit].reindex(reference.index)
                row[f"prefetch_{limit}_vs_{limits[0]}"] = {
                    **_paired(reference.to_numpy(), other.to_numpy()),
                    "queries_changed": int((other != reference).sum()),
                }
            out["sets"][name] = row
            print(name, json.dumps(row), flush=True)
    out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
