"""Ingest benchmark on the full bundled data.

Measures, each in a fresh process: (1) the demo's first run on an empty data folder (wall time per
stage, peak RSS), (2) a second run on unchanged data (skips stretches already indexed), (3) a
--full-refresh run (every partition re-materialized; embeddings from the cache), and (4) the
dense model alone on a sample of the child chunks the pipeline embedded (chunks/s). Reports pipeline
overhead = (first-run time - model-alone time for the chunks it embedded) / model-alone time.

    .venv/bin/python -m bench.ingest [--data-dir /tmp/rag_bench] [--out bench/results/ingest.json]
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench import common


def run_demo(data_dir: Path, *extra: str) -> dict:
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", BODY, str(data_dir), *extra], capture_output=True, text=True, check=True
    )
    result = json.loads(proc.stdout)
    result["wall_seconds"] = round(time.perf_counter() - started, 2)
    return result


# Runs the demo in a child process and reports its peak RSS alongside the demo's JSON.
BODY = """
import json, resource, sys, io, contextlib
from rag_pipeline.cli import main
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    main(["demo", "--json", "--data-dir", sys.argv[1], *sys.argv[2:]])
out = json.loads(buf.getvalue())
out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
print(json.dumps(out))
"""


def model_alone(data_dir: Path, sample: int) -> tuple[dict, object]:
    """The model alone (no pipeline, no cache) on a random sample of the child chunks the pipeline
    embedded, in the pipeline's batch size; its rate prices the full set of chunks. Returns the figures and the
    encoder (whose backend the results record)."""
    import random

    import pandas as pd

    from rag_pipeline.settings import Settings
    from rag_pipeline.vectors.dense.load import load_dense_encoder

    files = sorted((data_dir / "parquet").glob("*_child_chunks/**/*.parquet"))
    texts = [t for f in files for t in pd.read_parquet(f)["text"]]
    picked = random.Random(0).sample(texts, min(sample, len(texts)))
    encoder = load_dense_encoder(Settings.from_env().dense_model)
    encoder.encode_documents(picked[:32])  # warm-up
    started = time.perf_counter()
    for i in range(0, len(picked), 256):
        encoder.encode_documents(picked[i : i + 256])
    seconds = time.perf_counter() - started
    rate = len(picked) / seconds
    return {
        "sampled_chunks": len(picked),
        "sample_seconds": round(seconds, 2),
        "chunks_per_second": round(rate, 2),
        "all_chunks": len(texts),
        "seconds_for_all_chunks": round(len(texts) / rate, 2),
    }, encoder


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--data-dir", type=Path, default=common.BENCH_DATA_DIR)
    parser.add_argument("--out", type=Path, default=common.RESULTS / "ingest.json")
    parser.add_argument("--sample", type=int, default=2000, help="chunks embedded by the model-alone measurement")
    args = parser.parse_args()
    shutil.rmtree(args.data_dir, ignore_errors=True)
    first = run_demo(args.data_dir)
    second = run_demo(args.data_dir)
    refresh = run_demo(args.data_dir, "--full-refresh")
    alone, encoder = model_alone(args.data_dir, args.sample)
    embed_seconds = first["embeddings_computed"] / alone["chunks_per_second"]
    overhead = (first["seconds"] - embed_seconds) / embed_seconds
    report = {
        "run": common.run_record(encoder),
        "first_run": first,
        "second_run": second,
        "full_refresh_run": refresh,
        "model_alone": alone,
        "model_alone_seconds_for_first_run_embeddings": round(embed_seconds, 2),
        "pipeline_chunks_per_second": round(first["embeddings_computed"] / first["seconds"], 2),
        "pipeline_overhead_ratio": round(overhead, 3),
        "second_run_vs_first": round(second["seconds"] / first["seconds"], 3),
        "full_refresh_vs_first": round(refresh["seconds"] / first["seconds"], 3),
        "bench_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    common.write_json(args.out, report)
    print(json.dumps({k: v for k, v in report.items() if not isinstance(v, dict)}, indent=2))
    print(f"full report: {args.out}")


if __name__ == "__main__":
    main()
