"""The demo's closing evaluation, timed as a first run: every arm of ``retrieval_eval`` and the report, through the
real Dagster jobs (``runs.evaluation.run_evaluation``), on a copy of an indexed data folder with no reranker fits
cached. With ``--ref REV`` the same is run with that revision's code (a ``git worktree``), alternating, so the two
are compared on one machine back to back: seconds, peak RSS, and every (eval set, arm) figure.

    .venv/bin/python -m bench.closing_evaluation --data-dir /tmp/rag_bench [--ref 4cda672] [--repeat 2]

The data folder is one ``rag-pipeline index`` (or ``demo``) wrote; it is copied, never changed. Results:
``bench/results/closing_evaluation.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import BENCH_DATA_DIR, RESULTS, ROOT, add_index_arguments, parser, run_record

METRICS = ("ndcg@10", "recall@10", "mrr@10", "recall@100", "map@100")
# What one child run prints as its last line: the figures and its own seconds.
CHILD = """
import json, sys, time
from rag_pipeline.runs.evaluation import run_evaluation
from rag_pipeline.settings import Settings
started = time.perf_counter()
summary = run_evaluation(Settings.from_env(), force=True)
print(json.dumps({"seconds": time.perf_counter() - started, "failures": summary.failures,
                  "checks": summary.checks, "figures": summary.figures}))
"""


def fresh_copy(data_dir: Path, into: Path) -> Path:
    """The index and directory of ``data_dir`` without its reports, Dagster runs and embedding cache (which holds the
    query embeddings of earlier evaluations): a first evaluation, as the demo's."""
    target = into / "data"
    shutil.copytree(
        data_dir, target, ignore=shutil.ignore_patterns("reports", "dagster_home", "embedding_cache.sqlite")
    )
    return target


def checkout(ref: str, into: Path) -> Path:
    folder = into / "ref"
    subprocess.run(["git", "worktree", "add", "--detach", str(folder), ref], cwd=ROOT, check=True, capture_output=True)
    return folder


class TreeMemory(threading.Thread):
    """Samples the summed RSS of a process and its descendants (``/proc``) every 0.2 s; ``peak_mb`` the largest."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_mb, self._done = pid, 0, threading.Event()

    def run(self) -> None:
        while not self._done.wait(0.2):
            self.peak_mb = max(self.peak_mb, round(sum(_rss_kb(p) for p in _tree(self.pid)) / 1024))

    def stop(self) -> None:
        self._done.set()
        self.join()


def _tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:  # gone meanwhile
            continue
    return pids


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_once(code: Path, data_dir: Path, eval_dir: Path, workers: int | None = None) -> dict[str, Any]:
    """One closing evaluation in a child process with ``code`` first on the path; wall seconds and peak RSS."""
    with tempfile.TemporaryDirectory(prefix="closing_eval_") as scratch:
        data = fresh_copy(data_dir, Path(scratch))
        env = {**os.environ, "PYTHONPATH": str(code), "RAG_DATA_DIR": str(data), "RAG_EVAL_DIR": str(eval_dir)}
        if workers is not None:
            env["RAG_EVAL_WORKERS"] = str(workers)
        command = ["/usr/bin/time", "-f", "%e %M", sys.executable, "-c", CHILD]
        started = time.perf_counter()
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=code
        ) as process:
            sampler = TreeMemory(process.pid)
            sampler.start()
            out, err = process.communicate()
            sampler.stop()
        wall = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"the evaluation failed with {code}:\n{err[-3000:]}")
    result = json.loads(out.strip().splitlines()[-1])
    elapsed, max_kb = err.strip().splitlines()[-1].split()
    figures = {
        name: {arm: {m: round(values["arms"][arm][m], 4) for m in METRICS if m in values["arms"][arm]}
               | {"leaks": values["arms"][arm].get("leaks", 0)} for arm in values["arms"]}
        for name, values in result["figures"].items()
    }  # fmt: skip
    return {
        "process_seconds": float(elapsed),
        "evaluation_seconds": round(result["seconds"], 1),
        "wall_seconds": round(wall, 1),
        "max_rss_mb": round(int(max_kb) / 1024),
        # The evaluation's worker processes (RAG_EVAL_WORKERS) beside it: the peak of their sum, sampled.
        "peak_tree_rss_mb": sampler.peak_mb,
        "failures": result["failures"],
        "checks": result["checks"],
        "figures": figures,
    }


def differences(a: dict[str, Any], b: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """(eval set, arm) → metric → B − A, for the figures that differ."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, arms in b.items():
        for arm, values in arms.items():
            before = a.get(name, {}).get(arm, {})
            changed = {m: round(v - before.get(m, 0.0), 4) for m, v in values.items() if v != before.get(m)}
            if changed:
                out.setdefault(name, {})[arm] = changed
    return out


def main() -> None:
    args_parser = parser(__doc__)
    add_index_arguments(args_parser, BENCH_DATA_DIR)
    args_parser.add_argument("--ref", help="also run this revision's code, alternating (A = ref, B = this tree)")
    args_parser.add_argument("--repeat", type=int, default=1, help="runs of each side (default: %(default)s)")
    args_parser.add_argument("--output", type=Path, default=RESULTS / "closing_evaluation.json")
    args_parser.add_argument(
        "--workers", type=int, help="RAG_EVAL_WORKERS for both sides (default: the settings' own, one per core)"
    )
    args = args_parser.parse_args()
    if not (args.data_dir / "qdrant").exists():
        raise SystemExit(f"error: {args.data_dir} holds no index; run `rag-pipeline index --data-dir {args.data_dir}`")
    runs: dict[str, list[dict[str, Any]]] = {"B": []}
    with tempfile.TemporaryDirectory(prefix="closing_eval_ref_") as scratch:
        sides = {"B": ROOT}
        if args.ref:
            sides = {"A": checkout(args.ref, Path(scratch)), "B": ROOT}
            runs = {"A": [], "B": []}
        try:
            for i in range(args.repeat):
                for side, code in sides.items():
                    result = run_once(code, args.data_dir, args.eval_dir, args.workers)
                    runs[side].append(result)
                    print(
                        f"{side} run {i + 1}: evaluation {result['evaluation_seconds']} s, process "
                        f"{result['process_seconds']} s, peak RSS {result['max_rss_mb']} MB (with its workers "
                        f"{result['peak_tree_rss_mb']} MB)",
                        file=sys.stderr,
                    )
        finally:
            if args.ref:
                subprocess.run(["git", "worktree", "remove", "--force", str(sides["A"])], cwd=ROOT, check=False)
    record: dict[str, Any] = {**run_record(), "data_dir": str(args.data_dir), "ref": args.ref, "runs": runs}
    if args.ref:
        record["differences_b_minus_a"] = differences(runs["A"][0]["figures"], runs["B"][0]["figures"])
    args.output.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps({side: [r["evaluation_seconds"] for r in rs] for side, rs in runs.items()}))


if __name__ == "__main__":
    main()
