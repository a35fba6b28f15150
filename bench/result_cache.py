"""The search service's result cache, hit against miss (issue 51, part 4): a real ``rag-pipeline serve`` on a data
folder, the same searches asked twice over HTTP by one reader, latency measured by the client.

    .venv/bin/python -m bench.result_cache --data-dir /tmp/rag_demo   # a folder `rag-pipeline demo` indexed

The queries are the first ``--queries`` of the bundled Slack and Jira dev sets (Jira's cut to 300 characters),
asked as a member of the bundled Slack workspace and every bundled Jira project (trusted-proxy groups), in the
service's default mode; the first pass fills the cache (misses), the second is answered from it (hits), then a
third pass with the cache off (``RAG_SERVE_CACHE_ENTRIES=0``, a second service) checks that the miss figures are the
search itself. Results: bench/results/result_cache.json (p50/p95/mean per pass, and the service's own counters).
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.common import RESULTS, demo_reader_groups, dev_questions, parser, run_record, write_json
from rag_pipeline_tests.kit import serving_fixtures as S


def _pass(service: S.ServiceProcess, queries: list[str], headers: dict[str, str]) -> dict[str, Any]:
    seconds, cached = [], 0
    with httpx.Client(timeout=120) as client:
        for query in queries:
            started = time.perf_counter()
            response = client.post(f"{service.url}/v1/search", json={"query": query, "top_k": 10}, headers=headers)
            seconds.append(time.perf_counter() - started)
            response.raise_for_status()
            cached += bool(response.json().get("cached"))
    ms = sorted(s * 1000 for s in seconds)
    return {
        "requests": len(ms),
        "cached": cached,
        "p50_ms": round(statistics.median(ms), 2),
        "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 2),
        "mean_ms": round(statistics.fmean(ms), 2),
    }


def _counters(service: S.ServiceProcess) -> dict[str, float]:
    text = httpx.get(f"{service.url}/metrics", timeout=10).text
    return {
        f"{s.labels['cache']}_{s.labels['outcome']}": s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "rag_cache_requests_total"
    }


def main() -> None:
    args = _parser().parse_args()
    queries = dev_questions(args.queries)
    headers = {"X-User-Id": "bench-reader", "X-User-Groups": demo_reader_groups(args.data_dir)}
    log = args.data_dir.parent / "result_cache_bench.log"
    with S.running_service(args.data_dir, log, RAG_SERVE_TRUSTED_PROXY="1") as service:
        _pass(service, queries[:5], headers)  # warm-up: the model's first calls, the index's pages
        misses = _pass(service, [f"{q} " for q in queries], headers)  # another text: not the warm-up's entries
        hits = _pass(service, [f"{q} " for q in queries], headers)
        counters = _counters(service)
    with S.running_service(args.data_dir, log, RAG_SERVE_TRUSTED_PROXY="1", RAG_SERVE_CACHE_ENTRIES="0") as off:
        _pass(off, queries[:5], headers)
        uncached = _pass(off, [f"{q} " for q in queries], headers)
    result = {"misses": misses, "hits": hits, "cache_off": uncached, "service_counters": counters}
    print(json.dumps(result, indent=2))
    write_json(args.output, {**run_record(), "data_dir": str(args.data_dir), "queries": len(queries), **result})


def _parser() -> Any:
    p = parser(__doc__)
    p.add_argument("--data-dir", type=Path, required=True, help="a data folder the demo indexed")
    p.add_argument("--queries", type=int, default=200, help="queries per pass (default: %(default)s)")
    p.add_argument("--output", type=Path, default=RESULTS / "result_cache.json")
    return p


if __name__ == "__main__":
    main()
