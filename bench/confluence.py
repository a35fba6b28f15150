"""Confluence as a source, measured: a first index of the bundled Titanium API space, and every arm on its eval sets.

The real CLI indexes ``rag_pipeline/data/confluence_titanium/pages.jsonl.gz`` (475 pages of the Titanium SDK API
reference as Confluence REST content objects, with a synthetic view-restriction overlay; built by
``tools/build_confluence_corpus.py`` + ``tools/confluence_titanium_sets.py``) into a fresh data folder, reporting each
stage's seconds; then ``rag-pipeline bench`` scores vector / bm25 / hybrid / reranked / prf on

- ``confluence_titanium``: 130 Appcelerator Jira issues that link an API page (summary + description, links
  removed) -> that page (nDCG@10 with 95 % bootstrap CIs, Recall@10, MRR@10, p50 latency);
- ``acl_confluence_titanium``: the same questions as five principals (space viewer, media team, media lead,
  android team, outsider): relevance limited to what each may read, and every returned page a principal may not
  read counted as a leak, judged or not.

    .venv/bin/python -m bench.confluence [--work /tmp/rag_confluence]

Results: bench/results/confluence.json and a markdown table on stdout (~3.5 min on 2 cores).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from bench import common

DUMP = common.ROOT / "rag_pipeline" / "data" / "confluence_titanium" / "pages.jsonl.gz"
SETS = common.EVAL_SETS / "confluence_titanium"
EVAL_SETS = ("confluence_titanium", "acl_confluence_titanium")
ARMS = ("vector", "bm25", "hybrid", "reranked", "prf")


def first_index(folder: Path) -> dict[str, Any]:
    shutil.rmtree(folder, ignore_errors=True)
    started = time.perf_counter()
    done = common.rag_pipeline("index", "--data-dir", str(folder), "--confluence-dump", str(DUMP), "--json")
    report = json.loads(done.stdout)
    source = report["per_source"]["confluence"]
    return {
        "wall_seconds": round(time.perf_counter() - started, 1),
        "documents": source["documents"],
        "parent_chunks": source["parent_chunks"],
        "child_chunks": source["child_chunks"],
        "stage_seconds": source["stage_seconds"],
        "skipped": report["skipped"]["count"],
        "machine": report.get("machine"),
    }


def score(folder: Path) -> dict[str, Any]:
    args = [a for name in EVAL_SETS for a in ("--eval-set", str(SETS / f"{name}.jsonl"))]
    started = time.perf_counter()
    figures = json.loads(
        common.rag_pipeline("bench", "--data-dir", str(folder), *args, "--arms", *ARMS, "--json").stdout
    )
    out: dict[str, Any] = {"bench_seconds": round(time.perf_counter() - started, 1)}
    for name in EVAL_SETS:
        found = figures[name]
        out[name] = {
            "queries": found["queries"],
            "arms": {
                arm: {
                    "ndcg@10": round(v["ndcg@10"], 4),
                    "ci95": [round(x, 4) for x in v["ci95"]["ndcg@10"]],
                    "recall@10": round(v["recall@10"], 4),
                    "mrr@10": round(v["mrr@10"], 4),
                    "p50_ms": round(v["p50_ms"], 1),
                    "leaks": v["leaks"],
                }
                for arm, v in found["arms"].items()
            },
        }
    return out


def table(result: dict[str, Any]) -> str:
    lines = ["| set | arm | nDCG@10 [95 % CI] | R@10 | MRR@10 | p50 ms | leaks |", "|---|---|---:|---:|---:|---:|---:|"]
    for name in EVAL_SETS:
        for arm, v in result[name]["arms"].items():
            ci = v["ci95"]
            lines.append(
                f"| {name} | {arm} | {v['ndcg@10']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] | {v['recall@10']:.3f} | "
                f"{v['mrr@10']:.3f} | {v['p50_ms']:.1f} | {v['leaks']} |"
            )
    return "\n".join(lines)


def main() -> int:
    parser = common.parser(__doc__)
    parser.add_argument(
        "--work", type=Path, default=Path("/tmp/rag_confluence"), help="data folder (default: %(default)s)"
    )
    args = parser.parse_args()
    result: dict[str, Any] = {"index": first_index(args.work)}
    result.update(score(args.work))
    common.RESULTS.mkdir(parents=True, exist_ok=True)
    (common.RESULTS / "confluence.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result["index"], indent=1))
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
