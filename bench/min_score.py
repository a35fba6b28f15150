"""What ``min_score`` keeps (issue 51, part 1): each mode's calibrated relevance (P(relevant), the isotonic fit the
evaluation report writes) applied to the evaluation's own runs, leave-one-eval-set-out, so every figure is on an eval
set the calibration never saw.

    .venv/bin/python -m bench.min_score --data-dir /tmp/rag_demo          # a folder `rag-pipeline demo` evaluated
    .venv/bin/python -m bench.min_score --data-dir /tmp/rag_demo --write  # also (re)write its calibration.json

For each mode, eval set and threshold (0.3, 0.5, 0.7): results kept per query (of the top 10), the share of the
judged-relevant top-10 results kept (recall kept), the share of kept results that are judged relevant (precision),
and the share of queries left with no result at all. Results: bench/results/min_score.json.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.common import RESULTS, parser, run_record, write_json
from rag_pipeline.evaluation.eval_set import load_eval_set
from rag_pipeline.evaluation.run_files import load_arm_outcome, run_path
from rag_pipeline.retrieval.calibration import CALIBRATION_FILE, DEPTH, calibration_pairs, fit_calibration
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.results import MODES
from rag_pipeline.settings import Settings

THRESHOLDS = (0.3, 0.5, 0.7)


def _judged(eval_dir: Path, name: str) -> dict[str, dict[str, int]]:
    path = eval_dir / f"{name}.jsonl"
    # Person principals need the directory; only the judgments are used here, so any principal stands in.
    return {q.id: q.relevant for q in load_eval_set(path, lambda person: Principal(user_id=person))}


def main() -> None:
    args = _parser().parse_args()
    settings = Settings.from_env().with_data_dir(args.data_dir)
    runs = settings.paths.eval_runs
    eval_dir = settings.eval_dir
    sets = sorted(p.stem for p in eval_dir.glob("*.jsonl") if any(run_path(runs, m, p.stem).exists() for m in MODES))
    if not sets:
        raise SystemExit(f"no evaluation runs under {runs}: run `rag-pipeline demo` (with its evaluation) first")
    rankings: dict[str, dict[str, Any]] = {}  # mode -> eval set -> {qid: [(doc, score)]}
    judged = {name: _judged(eval_dir, name) for name in sets}
    for mode in MODES:
        for name in sets:
            if run_path(runs, mode, name).exists():
                rankings.setdefault(mode, {})[name] = load_arm_outcome(runs, mode, name).run.rankings
    table: list[dict[str, Any]] = []
    for mode, by_set in rankings.items():
        for held_out, ranking in by_set.items():
            training = {m: [p for s, r in by_set.items() if s != held_out for p in calibration_pairs(r, judged[s])]
                        for m in (mode,)}  # fmt: skip
            fitted = fit_calibration(training, [s for s in by_set if s != held_out]).modes.get(mode)
            if fitted is None:
                continue
            queries = [q for q in ranking if any(g > 0 for g in (judged[held_out].get(q) or {}).values())]
            for threshold in THRESHOLDS:
                kept = relevant_total = relevant_kept = empty = 0
                for qid in queries:
                    top = ranking[qid][:DEPTH]
                    good = judged[held_out][qid]
                    survivors = [d for d, s in top if fitted.relevance(s) >= threshold]
                    kept += len(survivors)
                    relevant_total += sum(good.get(d, 0) > 0 for d, _ in top)
                    relevant_kept += sum(good.get(d, 0) > 0 for d in survivors)
                    empty += not survivors
                table.append({
                    "mode": mode, "eval_set": held_out, "threshold": threshold, "queries": len(queries),
                    "kept_per_query": round(kept / max(1, len(queries)), 2),
                    "recall_kept": round(relevant_kept / relevant_total, 3) if relevant_total else None,
                    "precision_kept": round(relevant_kept / kept, 3) if kept else None,
                    "no_result_share": round(empty / max(1, len(queries)), 3),
                })  # fmt: skip
    if args.write:
        every = {m: [p for s, r in by.items() for p in calibration_pairs(r, judged[s])] for m, by in rankings.items()}
        fit_calibration(every, sets).save(settings.paths.reports / CALIBRATION_FILE)
    for row in table:
        if row["threshold"] == 0.5:
            print(json.dumps(row))
    write_json(args.output, {**run_record(), "data_dir": str(settings.data_dir), "eval_sets": sets, "rows": table})


def _parser() -> Any:
    p = parser(__doc__)
    p.add_argument("--data-dir", type=Path, required=True, help="a data folder whose evaluation has run")
    p.add_argument("--write", action="store_true", help="also write the folder's calibration.json from every set")
    p.add_argument("--output", type=Path, default=RESULTS / "min_score.json")
    return p


if __name__ == "__main__":
    main()
