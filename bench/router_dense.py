"""Does a dense route pay here? (issue 67 item 5): the design routes some questions to the dense (vector) search
alone (few keywords, long natural questions). This compares the ``vector`` and ``hybrid`` arms query by query on
the bundled English eval sets, bucketed by the question's length in words, from the per-query reports an
evaluation already wrote (no new search is run):

    .venv/bin/python -m bench.router_dense --reports /tmp/rag_demo/reports/latest

(``rag-pipeline demo`` writes ``reports/latest/<eval set>/per_query.parquet`` with every arm.) For each bucket:
queries, mean nDCG@10 of both arms, how many queries each wins, and a paired randomization test (10,000 sign
flips, seeded) of the difference. Results: bench/results/router_dense.json; the reading in
docs/notes/search_router.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.common import RESULTS, ROOT, parser, run_record, write_json

SETS = ("slack_ubuntu_dev", "jira_appcelerator_dev", "acl_bundled_dev", "acl_restricted_comments")
# (name, fewest words, most words): a few keywords, a question, a long natural question, a pasted text (the
# router's REFERENCE_WORDS = 24 already treats past 24 words as a text searched as it is).
BUCKETS = (("1-4 words (keywords)", 1, 4), ("5-11 words", 5, 11), ("12-24 words (long question)", 12, 24),
           ("25+ words (pasted text)", 25, 10**9))  # fmt: skip
PERMUTATIONS = 10_000


def _words(text: str) -> int:
    return len(re.findall(r"\w+", text))


def paired_p(differences: np.ndarray, seed: int = 67) -> float:
    """Two-sided paired randomization test: how often random sign flips give a mean as far from 0."""
    if len(differences) == 0 or not differences.any():
        return 1.0
    rng = np.random.default_rng(seed)
    signs = rng.choice((-1.0, 1.0), size=(PERMUTATIONS, len(differences)))
    observed = abs(differences.mean())
    return float(((np.abs((signs * differences).mean(axis=1)) >= observed - 1e-12).sum() + 1) / (PERMUTATIONS + 1))


def compare(frame: pd.DataFrame) -> dict[str, Any]:
    """vector against hybrid on the queries of ``frame`` (columns: vector, hybrid: nDCG@10 per query)."""
    difference = (frame["vector"] - frame["hybrid"]).to_numpy()
    return {
        "queries": len(frame),
        "vector": round(float(frame["vector"].mean()), 4) if len(frame) else None,
        "hybrid": round(float(frame["hybrid"].mean()), 4) if len(frame) else None,
        "vector_better": int((difference > 1e-9).sum()),
        "hybrid_better": int((difference < -1e-9).sum()),
        "p": round(paired_p(difference), 4),
    }


def per_query(reports: Path, name: str) -> pd.DataFrame:
    """nDCG@10 of the vector and hybrid arms per query of one eval set, with the query's length in words."""
    found = pd.read_parquet(reports / name / "per_query.parquet", columns=["arm", "query_id", "ndcg@10"])
    wide = found[found["arm"].isin(["vector", "hybrid"])].pivot(index="query_id", columns="arm", values="ndcg@10")
    queries = [json.loads(line) for line in (ROOT / "eval_sets" / f"{name}.jsonl").read_text().split("\n") if line]
    words = {str(q["id"]): _words(q["query"]) for q in queries}
    wide["words"] = [words[str(i)] for i in wide.index]
    return wide.reset_index()


def main() -> None:
    arguments = parser(__doc__)
    arguments.add_argument("--reports", type=Path, required=True, help="an evaluation's reports/latest folder")
    args = arguments.parse_args()
    frames = {name: per_query(args.reports, name) for name in SETS if (args.reports / name).is_dir()}
    result: dict[str, Any] = {"reports": str(args.reports), "sets": {}, "buckets_all_sets": {}}
    for name, frame in frames.items():
        result["sets"][name] = {"all": compare(frame)} | {
            label: compare(frame[(frame["words"] >= low) & (frame["words"] <= high)]) for label, low, high in BUCKETS
        }
    every = pd.concat(frames.values()) if frames else pd.DataFrame(columns=["vector", "hybrid", "words"])
    result["buckets_all_sets"] = {"all": compare(every)} | {
        label: compare(every[(every["words"] >= low) & (every["words"] <= high)]) for label, low, high in BUCKETS
    }
    write_json(RESULTS / "router_dense.json", {**run_record(), **result})
    for label, row in result["buckets_all_sets"].items():
        print(f"{label:30} n={row['queries']:4} vector={row['vector']} hybrid={row['hybrid']} "
              f"wins {row['vector_better']}/{row['hybrid_better']} p={row['p']}")  # fmt: skip


if __name__ == "__main__":
    main()
