"""Mining and evaluating a company-sized workspace (issue 64): the company-scale synthetic workspace
(:mod:`bench.company_scale` sizes, fake embeddings from the test kit's OpenAI-compatible fake), with the signals a
company's data has added: a tenth of the thread roots name a Jira issue ("see P001-17"), a fifth of the issues link
a duplicate. Indexed by ``rag-pipeline index``, then ``rag-pipeline evaluate`` twice as whole processes:

- ``--no-eval``: mining alone (wall seconds, seconds per 10,000 documents, peak RSS through GNU time);
- the whole command: mining and every arm on the mined sets (the evaluation's own seconds from its JSON).

    .venv/bin/python -m bench.mining_scale                 # sizes s and m
    .venv/bin/python -m bench.mining_scale --size l        # 55,000 documents (its first index takes ~15 min)

Queries run as everyone (the synthetic directory grants no memberships). Results: bench/results/mining_scale.json.
"""

from __future__ import annotations

import gzip
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS, ROOT, parser, read_json, run_record, write_json
from bench.company_scale import SIZES, Size, _env, build_workspace, first_index, write_jira


def add_signals(work: Path, size: Size, seed: int = 64) -> dict[str, int]:
    """Jira keys in a tenth of the thread roots, duplicate links on a fifth of the issues."""
    rng = random.Random(seed)
    with gzip.open(work / "jira.jsonl.gz", "rt", encoding="utf-8") as dump:
        issues = [json.loads(line) for line in dump]
    keys = [i["key"] for i in issues]
    linked = 0
    for issue in issues:
        if rng.random() < 0.2:
            other = rng.choice(issues)
            if other["key"] != issue["key"]:
                issue["fields"]["issuelinks"] = [{
                    "type": {"name": "Duplicate", "inward": "is duplicated by", "outward": "duplicates"},
                    "outwardIssue": {"id": other["id"], "key": other["key"]},
                }]  # fmt: skip
                linked += 1
    with gzip.open(work / "jira.jsonl.gz", "wt", encoding="utf-8") as out:
        for issue in issues:
            out.write(json.dumps(issue) + "\n")
    named = 0
    for day in sorted((work / "export").glob("*/*.json")):
        messages = json.loads(day.read_text())
        for message in messages:
            is_root = message.get("thread_ts") in (None, message.get("ts"))
            if is_root and rng.random() < 0.1:
                message["text"] += f" see {rng.choice(keys)} for the same problem"
                named += 1
        day.write_text(json.dumps(messages))
    return {"issues_linked": linked, "roots_naming_an_issue": named}


def evaluate(work: Path, openai_url: str, *extra: str) -> tuple[dict[str, Any], float, int]:
    """``rag-pipeline evaluate`` as a whole process: its JSON, wall seconds and peak RSS (KB)."""
    env = _env(work / "data", openai_url, ROOT)
    rss = work / "evaluate_rss_kb"
    command = ["/usr/bin/time", "-f", "%M", "-o", str(rss), sys.executable, "-c",
               "import sys; from rag_pipeline.cli import main; sys.exit(main(sys.argv[1:]))",
               "evaluate", "--data-dir", str(work / "data"), "--run-as", "everyone", "--json", *extra]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"evaluate failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout), wall, int(rss.read_text().split()[-1])


def main() -> None:
    args = parser(__doc__)
    args.add_argument("--size", action="append", choices=list(SIZES), help="sizes to run (default: s and m)")
    options = args.parse_args()
    from rag_pipeline_tests.kit.emulators.openai_api import OpenAIFake

    out_file = RESULTS / "mining_scale.json"
    results: dict[str, Any] = read_json(out_file) if out_file.exists() else {}
    results.update(run_record())
    work_root = Path(tempfile.mkdtemp(prefix="rag-mining-"))
    try:
        with OpenAIFake() as fake:
            for name in options.size or ["s", "m"]:
                size = SIZES[name]
                work = work_root / name
                work.mkdir()
                build_workspace(size).write_export(work / "export")
                write_jira(size, work / "jira.jsonl.gz")
                signals = add_signals(work, size)
                print(f"{name}: first index", file=sys.stderr, flush=True)
                indexed = first_index(size, work, fake.base_url, ROOT)
                print(f"{name}: mining", file=sys.stderr, flush=True)
                mined, mine_wall, mine_rss = evaluate(work, fake.base_url, "--no-eval")
                print(f"{name}: mining and evaluation", file=sys.stderr, flush=True)
                whole, whole_wall, whole_rss = evaluate(work, fake.base_url)
                documents = indexed["documents"]
                results.setdefault("sizes", {})[name] = {
                    "documents": documents,
                    "signals": signals,
                    "first_index_seconds": indexed["wall_seconds"],
                    "mining": {
                        "wall_seconds": round(mine_wall, 1),
                        "seconds_per_10k_documents": round(mine_wall / documents * 10_000, 1),
                        "peak_rss_mb": round(mine_rss / 1024),
                        "queries": mined["mining"]["queries"],
                        "skipped": mined["mining"]["skipped"],
                    },
                    "evaluate": {
                        "wall_seconds": round(whole_wall, 1),
                        "evaluation_seconds": whole["evaluation"]["seconds"],
                        "peak_rss_mb": round(whole_rss / 1024),
                        "ndcg@10": {
                            s: {a: f["ndcg@10"] for a, f in v["arms"].items()}
                            for s, v in whole["evaluation"]["eval_sets"].items()
                        },
                    },
                }
                print(json.dumps({name: results["sizes"][name]}, indent=1), file=sys.stderr, flush=True)
                write_json(out_file, results)
    finally:
        shutil.rmtree(work_root, ignore_errors=True)


if __name__ == "__main__":
    main()
