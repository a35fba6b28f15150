"""The search service's result cache, hit against miss (issue 51, part 4): a real ``rag-pipeline serve`` on a data
folder, the same searches asked twice over HTTP by one reader, latency measured by the client.

    .venv/bin/python -m bench.result_cache --data-dir /tmp/rag_demo   # a folder `rag-pipeline demo` indexed

The queries are the first ``--queries`` of the bundled Slack and Jira dev sets (Jira's cut to 300 characters),
asked as a member of the bundled Slack workspace and every bundled Jira project (trusted-proxy groups), in the
service's default mode; the first pass fills the cache (misses), the second is answered from it (hits), then a
third pass with the cache off (``RAG_SERVE_CACHE_ENTRIES=0``, a second service) checks that the miss figures are the
search itself. Results: bench/results/result_cache.json (p50/p95/mean per pass, and the service's own counters).

With ``--replicas`` (issue 67, the caches shared through Redis): two services (replicas A and B, each on its own
copy of the data folder's index, as two replicas behind one Qdrant server) and a ``redis-server`` started here.
The same request stream (every query asked ``--repeats`` times, each request sent to A or B at random, seeded, as
a load balancer would) runs twice: per-process caches, then both replicas with ``RAG_CACHE_REDIS_URL``. Reported:
hit rate, and latency of hits and misses, per setup. Results: bench/results/result_cache_replicas.json.

    .venv/bin/python -m bench.result_cache --data-dir .rag_data --replicas --queries 100
"""

from __future__ import annotations

import copy
import json
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.common import RESULTS, demo_reader_groups, dev_questions, parser, run_record, write_json
from rag_pipeline.retrieval.results import SearchResponse, SearchResult
from rag_pipeline.serving.result_cache import ResultCache
from rag_pipeline.serving.search import ServedSearch
from rag_pipeline.serving.shared_cache import SharedRedis, SharedResultCache, search_codec
from rag_pipeline_tests.kit import serving_fixtures as S
from rag_pipeline_tests.kit.celery_cluster import redis_server

# What a replica needs of a demo data folder (the index, its language, identities and calibration), not its parquet.
REPLICA_PARTS = ("qdrant", "language.json", "source_identities.json", "directory.sqlite", "reports")


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


def _latencies(ms: list[float]) -> dict[str, Any]:
    ordered = sorted(ms)
    if not ordered:
        return {"requests": 0}
    return {
        "requests": len(ordered),
        "p50_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 2),
        "mean_ms": round(statistics.fmean(ordered), 2),
    }


def _stream(
    replicas: list[S.ServiceProcess], requests: list[tuple[str, int]], headers: dict[str, str]
) -> dict[str, Any]:
    """``requests`` ((query, replica)) in order: hit rate, and the latency of hits and of misses."""
    hits: list[float] = []
    misses: list[float] = []
    with httpx.Client(timeout=120) as client:
        for query, which in requests:
            started = time.perf_counter()
            response = client.post(f"{replicas[which].url}/v1/search", json={"query": query, "top_k": 10},
                                   headers=headers)  # fmt: skip
            elapsed = (time.perf_counter() - started) * 1000
            response.raise_for_status()
            (hits if response.json().get("cached") else misses).append(elapsed)
    return {"requests": len(requests), "hit_rate": round(len(hits) / len(requests), 3), "hits": _latencies(hits),
            "misses": _latencies(misses)}  # fmt: skip


def _replica_copy(data_dir: Path, target: Path) -> Path:
    target.mkdir(parents=True)
    for part in REPLICA_PARTS:
        if (data_dir / part).exists():
            S.copy_index(data_dir / part, target / part)
    return target


def _lookup_costs(redis_url: str, rounds: int = 2000) -> dict[str, Any]:
    """One cached search's lookup in this process, without HTTP: the per-process cache (a dict read and the deep copy
    the service hands out) against Redis (a GET on loopback and the JSON decode). A search of 10 results, each with
    a 600-character child and a 2,000-character parent, as the demo's are."""
    results = [SearchResult(f"slack:T1:C1:{n}.0", 0.5, "slack", "C1", "a title", None, f"c{n}", "x" * 600, f"p{n}",
                            "y" * 2000, acl={"groups": ["slack:T1:members"]}) for n in range(10)]  # fmt: skip
    served = ServedSearch(SearchResponse(results, "hybrid", "hybrid"), 0.0, None, {"total": 12.0})
    local: ResultCache[ServedSearch] = ResultCache(10, 60)
    shared: SharedResultCache[ServedSearch] = SharedResultCache(SharedRedis(redis_url), "bench", 10, 60, search_codec())
    local.put("k", served)
    shared.put("k", served)
    out: dict[str, Any] = {"value_bytes": len(search_codec().dump_json(served))}
    for name, lookup in (("per_process", lambda: copy.deepcopy(local.get("k"))), ("redis", lambda: shared.get("k"))):
        seconds = []
        for _ in range(rounds):
            started = time.perf_counter()
            assert lookup() is not None
            seconds.append((time.perf_counter() - started) * 1e6)
        seconds.sort()
        out[name] = {"p50_us": round(statistics.median(seconds), 1), "p95_us": round(seconds[int(0.95 * rounds)], 1)}
    return out


def replicas_main(args: Any) -> None:
    queries = [f"{q} " for q in dev_questions(args.queries)]  # another text than a warm-up's
    headers = {"X-User-Id": "bench-reader", "X-User-Groups": demo_reader_groups(args.data_dir)}
    chance = random.Random(7)
    requests = [(q, chance.randrange(2)) for q in queries for _ in range(args.repeats)]
    chance.shuffle(requests)
    result: dict[str, Any] = {"queries": len(queries), "repeats": args.repeats, "requests": len(requests)}
    with tempfile.TemporaryDirectory(prefix="cache_replicas_") as tmp:
        folder = Path(tmp)
        copies = [_replica_copy(args.data_dir, folder / name) for name in ("a", "b")]
        with redis_server(folder / "redis") as redis:
            result["lookup"] = _lookup_costs(redis.url(1))
            for setup, extra in (("per_process", {}), ("redis", {"RAG_CACHE_REDIS_URL": redis.url(0)})):
                redis.client().flushall()
                env = {"RAG_SERVE_TRUSTED_PROXY": "1", **extra}
                running = [S.ServiceProcess(copy, folder / f"{setup}_{copy.name}.log", **env) for copy in copies]
                try:
                    health = [service.wait_ready(timeout=600) for service in running]
                    for service in running:  # warm-up: the model's first calls, the index's pages
                        _pass(service, dev_questions(5), headers)
                    result[setup] = _stream(running, requests, headers)
                    result[setup]["redis_used_memory_peak"] = redis.used_memory_peak() if extra else None
                    result["dense_model"] = health[0].get("dense_model")
                finally:
                    for service in running:
                        service.stop()
    print(json.dumps(result, indent=2))
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    write_json(args.output if args.output != RESULTS / "result_cache.json" else RESULTS / "result_cache_replicas.json",
               {**run_record(), "data_dir": str(args.data_dir), "uptime_after": load, **result})  # fmt: skip


def main() -> None:
    args = _parser().parse_args()
    if args.replicas:
        replicas_main(args)
        return
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
    p.add_argument("--replicas", action="store_true", help="two replicas, per-process caches against Redis's")
    p.add_argument("--repeats", type=int, default=3, help="--replicas: times each query is asked (default: 3)")
    return p


if __name__ == "__main__":
    main()
