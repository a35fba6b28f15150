"""Do mined eval sets rank the arms as human judgements do? On the bundled Jira dump: the ``jira_links`` miner's set
against the bundled human-qrel set (``jira_appcelerator_dev``: issues resolved as duplicates), every arm of both on
the same index, in one process.

Reports each arm's nDCG@10 on both (with 95 % bootstrap CIs), the difference mined − human with a CI (bootstrap of
the two independent query samples), and Kendall's tau between the two arm orders. The mined set is measured twice:
all mined queries, and without the human set's own query issues (an independent sample of the same construction).

    .venv/bin/python -m bench.mined_agreement --data-dir .rag_data      # a folder `make demo` indexed

The bundled dump names people but no memberships, so the mined queries run as everyone (``--run-as everyone``), as
the human set does. Results: ``bench/results/mined_agreement.json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from bench.common import EVAL_SETS, RESULTS, parser, run_record, write_json
from rag_pipeline.composition import dense_encoder_of, open_index, retriever, search_models
from rag_pipeline.defs.evaluation.mining import workspace_corpus
from rag_pipeline.defs.parts import evaluation_resource, source_specs
from rag_pipeline.directory.lookup import DirectoryLookup
from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta, load_eval_set, load_eval_set_meta
from rag_pipeline.evaluation.evaluate import EvalResult, evaluate_queries
from rag_pipeline.evaluation.mining.mine import mine_workspace
from rag_pipeline.pipeline.sources import document_sources as mined_sources
from rag_pipeline.retrieval.results import MODES
from rag_pipeline.settings import Settings

HUMAN = "jira_appcelerator_dev"
METRIC = "ndcg@10"


def ndcg_by_arm(result: EvalResult) -> dict[str, np.ndarray]:
    frame = result.per_query
    return {arm: frame[frame["arm"] == arm][METRIC].to_numpy(dtype=float) for arm in MODES}


def difference_ci(a: np.ndarray, b: np.ndarray, resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """mean(a) − mean(b) and its 95 % percentile bootstrap interval (each sample resampled on its own)."""
    rng = np.random.default_rng(seed)
    diffs = [rng.choice(a, a.size).mean() - rng.choice(b, b.size).mean() for _ in range(resamples)]
    return float(a.mean() - b.mean()), float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))


def compare(human: dict[str, np.ndarray], mined: dict[str, np.ndarray]) -> dict[str, Any]:
    tau = stats.kendalltau([human[a].mean() for a in MODES], [mined[a].mean() for a in MODES])
    arms = {}
    for arm in MODES:
        diff, low, high = difference_ci(mined[arm], human[arm])
        arms[arm] = {
            "human": round(float(human[arm].mean()), 4),
            "mined": round(float(mined[arm].mean()), 4),
            "difference": round(diff, 4),
            "difference_ci95": [round(low, 4), round(high, 4)],
        }
    order = {
        "human": sorted(MODES, key=lambda a: -human[a].mean()),
        "mined": sorted(MODES, key=lambda a: -mined[a].mean()),
    }
    return {"kendall_tau": round(float(tau.statistic), 3), "tau_p": round(float(tau.pvalue), 4), "order": order,
            "arms": arms}  # fmt: skip


def main() -> None:
    args = parser(__doc__)
    args.add_argument("--data-dir", type=Path, default=Path(".rag_data"), help="an indexed bundled data folder")
    args.add_argument("--max-queries", type=int, default=1000, help="mined queries kept (default: %(default)s)")
    options = args.parse_args()
    settings = Settings.from_env().with_data_dir(options.data_dir)
    specs = source_specs(settings)
    started = time.perf_counter()
    corpus = workspace_corpus(settings.paths.parquet, specs, mined_sources(specs))
    with open_index(settings) as store:
        present = set(store.indexed_documents())
    report = mine_workspace(
        corpus, DirectoryLookup(settings.paths.directory), miners=["jira_links"], max_queries=options.max_queries,
        run_as="everyone", indexed=lambda wanted: wanted & present,
    )  # fmt: skip
    mining_seconds = time.perf_counter() - started
    meta, mined = report.eval_sets["mined_jira_links"]
    human_path = EVAL_SETS / f"{HUMAN}.jsonl"
    human_meta, human = load_eval_set_meta(human_path), load_eval_set(human_path)
    human_issues = {q.exclude[0] for q in human if q.exclude}
    independent = [q for q in mined if q.exclude[0] not in human_issues]
    results: dict[str, EvalResult] = {}
    dense = dense_encoder_of(settings)
    with open_index(settings) as store:
        models = search_models(settings, dense)
        search = retriever(store, models, evaluation_resource(settings).retriever_config(models))
        sets: list[tuple[EvalSetMeta, list[EvalQuery]]] = [
            (human_meta, human), (meta, mined), (meta.model_copy(update={"name": "mined_independent"}), independent)
        ]  # fmt: skip
        for set_meta, queries in sets:
            t0 = time.perf_counter()
            results[set_meta.name] = evaluate_queries(search, queries, set_meta, arms=MODES)
            print(f"{set_meta.name}: {len(queries)} queries, {time.perf_counter() - t0:.0f} s", flush=True)
    human_ndcg = ndcg_by_arm(results[HUMAN])
    out = {
        **run_record(dense),
        **{
            "data_dir": str(options.data_dir),
            "mining_seconds": round(mining_seconds, 2),
            "documents": report.documents,
            "queries": {"human": len(human), "mined": len(mined), "mined_independent": len(independent)},
            "mined_vs_human": compare(human_ndcg, ndcg_by_arm(results[meta.name])),
            "independent_vs_human": compare(human_ndcg, ndcg_by_arm(results["mined_independent"])),
            "ci95": {
                name: {arm: [round(v, 4) for v in r.summary.arms[arm].ci95[METRIC]] for arm in MODES}
                for name, r in results.items()
            },
        },
    }
    write_json(RESULTS / "mined_agreement.json", out)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
