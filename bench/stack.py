"""The container stack's figures (issue 50): the image built uncached and cached by podman, its size by layer,
seconds from `compose up` to every service healthy, the bundled Slack export indexed through the stack, a search
over HTTP, and each service's peak memory.

Needs root and podman (`sudo deploy/container/host_setup.sh` first, as `make stack-test` does); the harness is the
stack test's (rag_pipeline_tests/kit/container_stack.py).

    sudo deploy/container/host_setup.sh && .venv/bin/python -m bench.stack      # ~10 min on 2 cores

Results: bench/results/stack.json.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from bench import common
from rag_pipeline_tests.kit import container_stack as C


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--work", type=Path, default=Path("/tmp/rag-stack-bench"))
    parser.add_argument("--out", type=Path, default=common.RESULTS / "stack.json")
    parser.add_argument("--skip-uncached", action="store_true", help="time a cached build only")
    args = parser.parse_args(argv)
    results: dict[str, object] = {"run": common.run_record(argv=argv)}
    results["bases_seconds"] = round(C.build_bases(), 1)
    if not args.skip_uncached:
        C.run(["podman", "rmi", "-f", C.IMAGE], timeout=300, check=False)
        C.run(["podman", "builder", "prune", "-f"], timeout=300, check=False)
        print("building the image, uncached …", file=sys.stderr, flush=True)
        results["build_uncached"] = C.build_image(no_cache=True)
        # podman keeps no layer cache from a --no-cache build: this one builds everything again and fills it.
        results["build_filling_cache_seconds"] = C.build_image()["seconds"]
    print("building the image, cached …", file=sys.stderr, flush=True)
    cached = C.build_image()
    results["build_cached_seconds"] = cached["seconds"]
    # A code change: only the project's layers (pip install ., the model warm-up) are built again.
    marker = C.REPO / "rag_pipeline" / "_bench_stack_marker.py"
    marker.write_text(f"# written by bench/stack.py at {time.time()}: a code change for the cached build\n")
    try:
        results["build_after_code_change_seconds"] = C.build_image()["seconds"]
    finally:
        marker.unlink()
    C.build_image()  # the image as the repository is (cached)
    results["image"] = {k: v for k, v in cached.items() if k != "seconds"}
    with C.running_stack(args.work) as stack:
        results["up_to_healthy_seconds"] = stack.figures["up_to_healthy_seconds"]
        started = time.monotonic()
        indexed = stack.compose("exec", "-T", "code-server", "rag-pipeline", "index", "--source", "slack", timeout=1200)
        results["index_seconds"] = round(time.monotonic() - started, 1)
        results["index_summary"] = [line for line in indexed.stdout.splitlines() if line.startswith("  ")]
        stack.wait_healthy(timeout=300)
        headers = {"Authorization": f"Bearer {stack.secrets['RAG_SERVE_TOKEN']}", "X-User-Id": "UA0752CDB64"}
        timings = []
        for query in ("wireless driver not working after upgrade", "grub rescue after install", "apt lock error"):
            started = time.monotonic()
            response = httpx.post("http://127.0.0.1:8000/v1/search", json={"query": query}, headers=headers,
                                  timeout=120)  # fmt: skip
            timings.append(round((time.monotonic() - started) * 1000, 1))
            response.raise_for_status()
        results["search_ms_first_three"] = timings
        results["peak_memory_mb"] = stack.peak_memory_mb()
    common.write_json(args.out, results)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
