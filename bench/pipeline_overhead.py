"""The pipeline's own time on a first index: wall seconds minus the seconds its stages report (issue 37, part 3).

    .venv/bin/python -m bench.pipeline_overhead --cache /tmp/rag_demo/embedding_cache.sqlite
    .venv/bin/python -m bench.pipeline_overhead --cache <cache> --ref 79b84bd     # A/B against a revision
    .venv/bin/python -m bench.pipeline_overhead --fake-embeddings --ref b68f1af  # no encoder at all (minutes)

Each arm runs ``rag-pipeline demo --no-eval --json`` (the bundled Slack export and Jira dump, every partitioned
asset) into a fresh data folder that holds only a copy of ``--cache``, an embedding cache of the same data: the
embeddings then come from the cache, so both arms do the same stage work and what differs is the pipeline around
the stages (Dagster's events, the partition files, the runs). Without ``--cache`` a first run fills one (the full
embedding time, ~10 min on AVX2). ``--fake-embeddings`` instead embeds through the test kit's OpenAI-compatible
fake (``openai:text-embedding-3-small@256``): no cache to fill, the same stage work in both arms, and a search
digest per arm (the top 10 ids of a few BM25 queries) shows whether both built the same index. ``--ref`` runs
that revision's ``rag_pipeline`` package (a git worktree, same virtual environment) as arm A, the working tree
as arm B; arms alternate when ``--repeat`` > 1.

Per run: wall seconds (the process), the command's own seconds, the sum of its stage seconds (each step's
``elapsed_seconds``), overhead = command seconds - stage seconds, runs, partitions, peak RSS (GNU time). Results:
bench/results/pipeline_overhead.json.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS, ROOT, parser, run_record, write_json
from rag_pipeline_tests.kit.emulators.openai_api import API_KEY as FAKE_API_KEY

CACHE_FILE = "embedding_cache.sqlite"


QUERIES = ("crash when opening a window", "build fails on windows", "sound card not detected", "wireless network")


def run_demo(
    package_root: Path, data_dir: Path, fake_url: str | None = None, evaluate: bool = False, exact_dense: bool = False
) -> dict[str, Any]:
    """One ``demo --json`` (``--no-eval`` unless ``evaluate``) with ``package_root``'s rag_pipeline, timed from
    outside."""
    command = [
        sys.executable,
        "-c",
        "import sys; from rag_pipeline.cli import main; sys.exit(main())",
        "demo",
        *([] if evaluate else ["--no-eval"]),
        "--json",
    ]
    # The bundled data in the embedded engine whatever this shell configures (a Qdrant server, live sources).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "DAGSTER_", "QDRANT_", "SLACK_", "JIRA_"))}
    env.update(PYTHONPATH=str(package_root), RAG_DATA_DIR=str(data_dir))
    if exact_dense:  # HNSW's answers depend on the order points were inserted in; exact search's do not
        env.update(RAG_EVAL_EXACT_DENSE="1")
    if fake_url:
        env.update(
            RAG_DENSE_MODEL="openai:text-embedding-3-small@256",
            RAG_LANGUAGE="english",
            OPENAI_BASE_URL=fake_url,
            OPENAI_API_KEY=FAKE_API_KEY,
        )
    imported = subprocess.run(
        [sys.executable, "-c", "import rag_pipeline; print(rag_pipeline.__file__)"],
        cwd=package_root, env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    if not Path(imported).is_relative_to(package_root):
        raise SystemExit(f"arm {package_root} imports {imported}: the editable install shadows PYTHONPATH")
    rss_file = data_dir / "peak_rss_kb"
    started = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%M", "-o", str(rss_file), *command, "--data-dir", str(data_dir)],
        cwd=package_root,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"demo failed ({done.returncode}):\n{done.stderr[-3000:]}")
    summary = json.loads(done.stdout)
    peak_kb = int(rss_file.read_text().split()[-1])
    stages = {
        source: {stage: float(seconds) for stage, seconds in figures["stage_seconds"].items()}
        for source, figures in summary["per_source"].items()
    }
    stage_total = sum(sum(per.values()) for per in stages.values())
    digest = search_digest(package_root, data_dir, env) if fake_url else None
    # The evaluation's figures per eval set and arm, to compare arms with; ``seconds`` is the index alone, so the
    # overhead below never counts the evaluation.
    figures = _quality((summary.get("evaluation") or {}).get("eval_sets")) if evaluate else None
    return {
        "evaluation": figures,
        "evaluation_seconds": (summary.get("evaluation") or {}).get("seconds") if evaluate else None,
        "search_digest": digest,
        "documents": summary["documents"],
        "child_chunks": summary["child_chunks"],
        "wall_seconds": round(wall, 1),
        "command_seconds": summary["seconds"],
        "stage_seconds": round(stage_total, 1),
        "overhead_seconds": round(summary["seconds"] - stage_total, 1),
        "stages": stages,
        "runs": summary["runs"],
        "partitions": summary["partitions"],
        "points": summary["points"],
        "embeddings_computed": summary["embeddings_computed"],
        "peak_rss_mb": round(peak_kb / 1024),  # GNU time's %M: the process's maximum resident set, in KiB
    }


def _quality(figures: Any) -> Any:
    """The evaluation's figures without its latencies (``*_ms``), which differ run to run."""
    if isinstance(figures, dict):
        return {k: _quality(v) for k, v in figures.items() if not str(k).endswith("_ms")}
    return figures


def search_digest(package_root: Path, data_dir: Path, env: dict[str, str]) -> str:
    """A digest of the top 10 document ids of a few BM25 searches over every document: equal digests, same index."""
    import hashlib

    digest = hashlib.sha256()
    for query in QUERIES:
        done = subprocess.run(
            [sys.executable, "-c", "import sys; from rag_pipeline.cli import main; sys.exit(main())", "search",
             query, "--mode", "bm25", "--all-documents", "--json", "--top-k", "10", "--data-dir", str(data_dir)],
            cwd=package_root, env=env, capture_output=True, text=True,
        )  # fmt: skip
        ids = [r.get("document_id") for r in json.loads(done.stdout or "{}").get("results", [])]
        digest.update(json.dumps(ids).encode())
    return digest.hexdigest()[:16]


def worktree(ref: str, into: Path) -> Path:
    """A checkout of ``ref`` (its rag_pipeline package is what arm A imports)."""
    subprocess.run(
        ["git", "worktree", "add", "--detach", "-f", str(into), ref], cwd=ROOT, check=True, capture_output=True
    )
    return into


def main() -> None:
    args = _parser().parse_args()
    work = Path(tempfile.mkdtemp(prefix="rag-overhead-"))
    cache = args.cache
    fake = None
    if args.fake_embeddings:
        from rag_pipeline_tests.kit.emulators.openai_api import OpenAIFake

        fake = OpenAIFake().__enter__()
    elif cache is None:
        print("no --cache: filling one with a first index (full embedding time)", file=sys.stderr)
        first = work / "fill"
        run_demo(ROOT, first)
        cache = first / CACHE_FILE
    arm_b = worktree(args.ref_b, work / "ref_b") if args.ref_b else ROOT
    arms = {"B": arm_b}
    if args.ref:
        arms = {"A": worktree(args.ref, work / "ref"), "B": arm_b}
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
    try:
        for attempt in range(args.repeat):
            for arm, root in arms.items():
                data_dir = work / f"{arm}{attempt}"
                data_dir.mkdir()
                if cache is not None:
                    shutil.copy(cache, data_dir / CACHE_FILE)
                result = run_demo(
                    root, data_dir, fake.base_url if fake else None, evaluate=args.eval, exact_dense=args.exact_dense
                )
                runs[arm].append(result)
                print(
                    f"{arm}: wall {result['wall_seconds']} s, stages {result['stage_seconds']} s, "
                    f"overhead {result['overhead_seconds']} s, peak {result['peak_rss_mb']} MB",
                    file=sys.stderr,
                )
                shutil.rmtree(data_dir)
    finally:
        if fake is not None:
            fake.__exit__(None, None, None)
        for name in ("ref", "ref_b"):
            if (work / name).exists():
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(work / name)], cwd=ROOT, capture_output=True
                )
        shutil.rmtree(work, ignore_errors=True)
    out: dict[str, Any] = {**run_record(), "ref": args.ref, "ref_b": args.ref_b, "runs": runs}
    if args.eval and "A" in runs:
        out["evaluation_identical"] = all(
            a["evaluation"] == b["evaluation"] for a, b in zip(runs["A"], runs["B"], strict=True)
        )
        print(f"evaluation figures identical across arms: {out['evaluation_identical']}", file=sys.stderr)
    print(json.dumps({arm: [r["overhead_seconds"] for r in rs] for arm, rs in runs.items()}))
    write_json(args.output, out)


def _parser() -> Any:
    p = parser(__doc__)
    p.add_argument("--cache", type=Path, help="embedding cache of the bundled data to seed each folder with")
    p.add_argument("--ref", help="git revision to run as arm A (default: the working tree only)")
    p.add_argument("--ref-b", help="git revision to run as arm B (default: the working tree)")
    p.add_argument(
        "--eval",
        action="store_true",
        help="also run the closing evaluation (demo without --no-eval) and compare its figures across arms",
    )
    p.add_argument(
        "--exact-dense",
        action="store_true",
        help="evaluate dense and hybrid on exact dense search (RAG_EVAL_EXACT_DENSE=1): figures that do not depend "
        "on the HNSW graph, which differs with the order points were written in",
    )
    p.add_argument("--repeat", type=int, default=1, help="runs per arm (default: %(default)s)")
    p.add_argument("--fake-embeddings", action="store_true", help="embed through the OpenAI fake, no cache needed")
    p.add_argument("--output", type=Path, default=RESULTS / "pipeline_overhead.json")
    return p


if __name__ == "__main__":
    main()
