"""Where the closing evaluation's time goes, and the floor its learned reranker sets (issue 37, part 2).

    .venv/bin/python -m bench.experiments.evaluation_cost --demo-dir /tmp/rag_demo          # both parts
    .venv/bin/python -m bench.experiments.evaluation_cost --fits-only                        # the floor alone

1. **The floor**: one LightGBM LambdaRank fit with the shipped parameters (``LAMBDARANK_PARAMS``) on rows of the
   reranker's real width (candidates × features), timed with 2 threads and with 1, and the predictions of the
   two compared bit for bit; then as the evaluation runs them, one-thread fits side by side, one per core.
   The reranked arm's nested cross-fitting needs ``5 × (4 × 4 + 5) = 105`` fits per
   eval set whose folds hold ≥ 50 labelled queries (the L2 value is chosen by an inner cross-validation) and
   ``5 × 5 = 25`` for a smaller one: 235 for the bundled dev sets (Slack and Jira tune, the ACL set's 46 judged
   queries do not), so ``--fits 235 ×`` one fit is what they cost in fits alone.
2. **The whole evaluation** (with ``--demo-dir``): ``run_evaluation(force=True)`` on a demo index (every arm of
   every eval set, then the report) under cProfile, with the seconds of each arm and the cumulative seconds of
   the functions that matter (LightGBM fits, L2 choice, searches, candidate collection).

Results are merged into bench/experiments/results/evaluation_cost.json. Nothing else may hold the demo index
meanwhile (the embedded engine admits one opener).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import lightgbm as lgb
import numpy as np

from bench import common
from rag_pipeline.retrieval.rerank.features import FEATURE_NAMES
from rag_pipeline.retrieval.rerank.learned import (
    BAG,
    LAMBDARANK_PARAMS,
    REG_LAMBDA_GRID,
    TUNING_FOLDS,
    fit_workers,
    run_fits,
)

OUT = common.ROOT / "bench" / "experiments" / "results" / "evaluation_cost.json"
OUTER_FOLDS = 5
FITS_TUNED = OUTER_FOLDS * (len(REG_LAMBDA_GRID) * TUNING_FOLDS + BAG)  # 105: an eval set that chooses L2
FITS_UNTUNED = OUTER_FOLDS * BAG  # 25: too few labelled queries to choose L2
BUNDLED_DEV_FITS = 2 * FITS_TUNED + FITS_UNTUNED  # Slack and Jira tune, the ACL set does not: 235
# (pstats function-name fragment, label) for the profile's summary
WATCHED = (
    ("lightgbm/engine.py:", "LightGBM fits"),
    ("choose_reg_lambda", "choosing L2 (inner cross-validation)"),
    ("retriever.py:", "Retriever.search"),
    ("rerank_candidates", "reranker training candidates"),
    ("summarize_outcomes", "scoring and statistics"),
)


def fit_seconds(queries: int, candidates: int, repeats: int, fits: int) -> dict[str, Any]:
    """Seconds per fit with 2 threads and 1, and whether their predictions are identical."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((queries * candidates, len(FEATURE_NAMES)))
    y = (rng.random(len(x)) < 0.03).astype(int) + (x[:, 0] > 1.5)
    groups = [candidates] * queries
    out: dict[str, Any] = {"rows": len(x), "features": len(FEATURE_NAMES)}
    predictions: dict[int, np.ndarray] = {}
    for threads in (2, 1):
        started = time.perf_counter()
        for seed in range(repeats):
            model = lgb.LGBMRanker(**{**LAMBDARANK_PARAMS, "num_threads": threads, "seed": seed})
            model.fit(x, y, group=groups)
        out[f"seconds_per_fit_{threads}_threads"] = round((time.perf_counter() - started) / repeats, 3)
        predictions[threads] = np.asarray(model.predict(x))
    out["identical_predictions_across_threads"] = bool(np.array_equal(predictions[1], predictions[2]))

    # What the evaluation does now: as many one-thread fits at a time as there are cores (run_fits).
    def fit(seed: int, threads: int) -> None:
        lgb.LGBMRanker(**{**LAMBDARANK_PARAMS, "num_threads": threads or 2, "seed": seed}).fit(x, y, group=groups)

    workers = fit_workers()
    started = time.perf_counter()
    run_fits([partial(fit, seed) for seed in range(repeats * workers)], LAMBDARANK_PARAMS)
    out["fits_side_by_side"] = workers
    out["seconds_per_fit_side_by_side"] = round((time.perf_counter() - started) / (repeats * workers), 3)
    out["fits"] = fits
    out["fit_floor_seconds"] = round(fits * out["seconds_per_fit_2_threads"], 1)
    out["fit_floor_seconds_side_by_side"] = round(fits * out["seconds_per_fit_side_by_side"], 1)
    return out


def profile_evaluation(demo_dir: Path) -> dict[str, Any]:
    from rag_pipeline.runs.evaluation import run_evaluation
    from rag_pipeline.settings import Settings

    settings = Settings.from_env().with_data_dir(demo_dir)
    arm_seconds: dict[str, float] = {}
    last = [time.perf_counter()]

    def on_progress(name: str, done: int, total: int) -> None:
        now = time.perf_counter()
        if done:
            arm_seconds[f"arm {done}/{total}"] = round(now - last[0], 1)
        last[0] = now

    profile = cProfile.Profile()
    started = time.perf_counter()
    profile.enable()
    summary = run_evaluation(settings, force=True, on_progress=on_progress)
    profile.disable()
    stats = pstats.Stats(profile)
    cumulative: dict[str, float] = {}
    for (file, line, name), (_, _, _, cum, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{file}:{line}({name})"
        for fragment, label in WATCHED:
            if fragment in where or fragment == name:
                cumulative[label] = max(cumulative.get(label, 0.0), round(cum, 1))
    return {
        "wall_seconds_under_cprofile": round(time.perf_counter() - started, 1),
        "arm_seconds_in_order": arm_seconds,
        "cumulative_seconds": cumulative,
        "failures": summary.failures,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--demo-dir", type=Path, help="a demo data folder (rag-pipeline demo --no-eval --data-dir)")
    parser.add_argument("--fits-only", action="store_true", help="time the LightGBM fits only")
    parser.add_argument("--queries", type=int, default=160, help="training queries per fit (default: 160)")
    parser.add_argument("--candidates", type=int, default=100, help="candidates per query (default: 100)")
    parser.add_argument("--repeats", type=int, default=3, help="fits timed per thread count (default: 3)")
    parser.add_argument(
        "--fits", type=int, default=BUNDLED_DEV_FITS, help="fits the evaluation needs (default: the bundled dev sets')"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    if not args.fits_only and args.demo_dir is None:
        parser.error("give --demo-dir, or --fits-only")
    results: dict[str, Any] = {**common.run_record(argv=argv), "fits": fit_seconds(args.queries, args.candidates,
                                                                                 args.repeats, args.fits)}  # fmt: skip
    print(results["fits"], file=sys.stderr)
    if not args.fits_only:
        results["evaluation"] = profile_evaluation(args.demo_dir)
    common.write_json(args.out, results)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
