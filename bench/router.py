"""The search router as a measured arm (issue 51, part 5): ``routed`` against ``hybrid`` on every bundled eval set,
and on an eval set of exact identifiers built from the bundled data (the queries the router is for).

    .venv/bin/python -m bench.router --data-dir /tmp/rag_demo    # a folder `rag-pipeline demo` indexed (~5 min)

The identifier set (``eval_sets/identifiers/identifiers_dev.jsonl``, written here, deterministic): Jira issue keys
alone ("TIMOB-28561"), in a question ("what is the status of TIMOB-28561?"), Jira browse links and Slack thread
permalinks, each judged relevant for the one document it names. It lives in a subfolder, so the demo's closing
evaluation does not run it. Each set goes through ``rag-pipeline bench --arms hybrid routed --baseline hybrid``:
nDCG@10 with bootstrap 95 % CIs and a paired randomization test (p). Results: bench/results/router.json.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from bench.common import RESULTS, ROOT, parser, run_record, write_json
from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta, write_eval_set

DEV_SETS = ("slack_ubuntu_dev", "jira_appcelerator_dev", "acl_bundled_dev", "acl_restricted_comments")
IDENTIFIER_DIR = ROOT / "eval_sets" / "identifiers"


def _documents(data_dir: Path, asset: str) -> pd.DataFrame:
    files = sorted((data_dir / "parquet" / asset).glob("*.parquet"))
    frame = pd.concat([pd.read_parquet(f, columns=["document_id", "title", "url"]) for f in files])
    return frame.dropna(subset=["url"]).drop_duplicates("document_id").sort_values("document_id")


def build_identifier_set(data_dir: Path) -> Path:
    """Identifier queries over the bundled data's documents, each relevant for the one document it names."""
    rng = random.Random(51)
    issues = _documents(data_dir, "jira_issues")
    issues = issues[issues["url"].str.contains("/browse/")]
    threads = _documents(data_dir, "slack_threads")
    picked = issues.sample(n=60, random_state=51)
    queries: list[EvalQuery] = []
    for i, row in enumerate(picked.itertuples(index=False)):
        key = str(row.url).rsplit("/", 1)[1]
        text = key if i < 20 else f"what is the status of {key}?" if i < 40 else str(row.url)
        queries.append(EvalQuery(id=f"jira-{i}", query=text, relevant={str(row.document_id): 1}))
    for i, row in enumerate(threads.sample(n=30, random_state=51).itertuples(index=False)):
        text = str(row.url) if rng.random() < 0.5 else f"see {row.url} - what was the answer?"
        queries.append(EvalQuery(id=f"slack-{i}", query=text, relevant={str(row.document_id): 1}))
    meta = EvalSetMeta(
        name="identifiers_dev",
        description="Exact identifiers: Jira issue keys (alone and in a question), Jira browse links and Slack "
        "thread permalinks from the bundled data; the document named is relevant (built by bench/router.py).",
        source="the bundled Slack export and Jira dump (rag_pipeline/data/README.md)",
        license="CC-BY-4.0 (Slack) and Apache-2.0 (Jira), as the bundled data",
        attribution="Kummerfeld et al., ACL 2019 (Slack #ubuntu); github.com/tidev/jira-archive (Jira)",
        queries=len(queries),
    )
    return write_eval_set(IDENTIFIER_DIR, meta, queries)


def bench_set(path: Path, data_dir: Path, out: Path | None = None) -> dict[str, Any]:
    """``hybrid`` and ``routed`` on one eval set (the per-query rows kept in ``out`` when given)."""
    kept = ["--out", str(out)] if out is not None else []
    done = subprocess.run(
        [sys.executable, "-m", "rag_pipeline.cli", "bench", "--eval-set", str(path), "--arms", "hybrid", "routed",
         "--baseline", "hybrid", "--json", "--data-dir", str(data_dir), *kept],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"bench failed on {path.name}: {done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    return {
        "queries": report["queries"],
        "arms": {
            arm: {
                "ndcg@10": round(figures["ndcg@10"], 4),
                "ci95": [round(v, 4) for v in figures["ci95"]["ndcg@10"]],
                "mrr@10": round(figures["mrr@10"], 4),
                "p_vs_hybrid": figures["p_vs_baseline"],
                "p50_ms": round(figures["p50_ms"], 1),
                "leaks": figures["leaks"],
            }
            for arm, figures in report["arms"].items()
        },
        "machine": report["machine"],
    }


def main() -> None:
    args = _parser().parse_args()
    identifiers = build_identifier_set(args.data_dir)
    sets = [ROOT / "eval_sets" / f"{name}.jsonl" for name in DEV_SETS] + [identifiers]
    results = {}
    for path in sets:
        results[path.stem] = bench_set(path, args.data_dir)
        arms = results[path.stem]["arms"]
        print(f"{path.stem}: hybrid {arms['hybrid']['ndcg@10']} {arms['hybrid']['ci95']}  routed "
              f"{arms['routed']['ndcg@10']} {arms['routed']['ci95']} p={arms['routed']['p_vs_hybrid']}")  # fmt: skip
    write_json(args.output, {**run_record(), "data_dir": str(args.data_dir), "eval_sets": results})


def _parser() -> Any:
    p = parser(__doc__)
    p.add_argument("--data-dir", type=Path, required=True, help="a data folder the demo indexed")
    p.add_argument("--output", type=Path, default=RESULTS / "router.json")
    return p


if __name__ == "__main__":
    main()
