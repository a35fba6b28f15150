"""Load on ``rag-pipeline serve``: latency and throughput per mode and concurrency, idle and during a points
write, resident memory, time from start to first answer, the CLI's wall time per search, and the API's
answers checked against the CLI's for every principal × query of ``acl_bundled_dev`` (same ids, no leaks).

Run on an index built by ``rag-pipeline demo --no-eval --data-dir DIR`` (the demo's index, ~24 min on 2 AVX2
cores)::

    .venv/bin/python -m bench.serve_load --data-dir /tmp/rag_demo --out bench/results/serve_load.json

Every query of a cell is one the service has not embedded before (drawn without replacement from the bundled
eval sets), so each latency includes embedding the query. Clients run in threads of this process over
keep-alive HTTP connections (httpx); the service runs in its own process, as deployed.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import httpx

from bench import common
from bench.common import EVAL_SETS

# A reader of everything the bundled data holds (the Slack workspace and every Jira project's group are
# named in acl_bundled_dev; the all-projects reader is the union).
SLACK_MEMBERS = "slack:T0UBUNTU:members"


def _jsonl(path: Path) -> list[dict[str, Any]]:
    # Not splitlines(): queries hold U+2028 and other characters it splits on.
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def _queries() -> list[tuple[str, str]]:
    """(kind, query): Slack questions (a sentence or two) and Jira issues (summary and description: the
    duplicate-finding queries of the Jira eval set, up to the model's 256 tokens once embedded)."""
    pool = []
    for kind, name in (("slack", "slack_ubuntu_dev"), ("jira", "jira_appcelerator_dev")):
        for line in _jsonl(EVAL_SETS / f"{name}.jsonl"):
            pool.append((kind, line["query"]))
    random.Random(7).shuffle(pool)
    return pool


def _jira_groups() -> list[str]:
    groups = set()
    for line in _jsonl(EVAL_SETS / "acl_bundled_dev.jsonl"):
        for group in (line.get("principal") or {}).get("groups") or []:
            if group.startswith("jira:"):
                groups.add(group)
    return sorted(groups)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _rss_mb(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").split("\n"):
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


@contextlib.contextmanager
def _service(data_dir: Path, log: Path) -> Iterator[tuple[str, subprocess.Popen[bytes], float]]:
    """The service on a free port; yields (url, process, seconds from spawn to the first 200 of /v1/search)."""
    port = _free_port()
    env = {**os.environ, "RAG_DATA_DIR": str(data_dir), "RAG_SERVE_TRUSTED_PROXY": "1"}
    started = time.monotonic()
    with log.open("w") as handle:
        process = subprocess.Popen(
            [sys.executable, "-m", "rag_pipeline.cli", "serve", "--port", str(port)],
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        first = None
        try:
            while first is None:
                if process.poll() is not None:
                    raise SystemExit(f"serve exited {process.returncode}; see {log}")
                with contextlib.suppress(httpx.TransportError):
                    response = httpx.post(
                        f"{url}/v1/search",
                        json={"query": "first answer"},
                        headers={"X-User-Id": "bench", "X-User-Groups": SLACK_MEMBERS},
                        timeout=60,
                    )
                    if response.status_code == 200:
                        first = time.monotonic() - started
                        break
                time.sleep(0.1)
            yield url, process, first
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _cell(url: str, headers: dict[str, str], mode: str, clients: int, queries: list[tuple[str, str]]) -> dict[str, Any]:
    """``clients`` threads sharing ``queries`` (each sent once); latency as the client sees it."""
    latencies: list[float] = []
    by_kind: dict[str, list[float]] = {}
    server_ms: list[dict[str, float]] = []
    errors: list[str] = []
    lock = threading.Lock()
    pending = list(queries)

    def client() -> None:
        with httpx.Client(timeout=120) as http:
            while True:
                with lock:
                    if not pending:
                        return
                    kind, query = pending.pop()
                started = time.perf_counter()
                try:
                    response = http.post(
                        f"{url}/v1/search", json={"query": query[:8000], "mode": mode}, headers=headers
                    )
                    ok = response.status_code == 200
                except httpx.HTTPError as exc:
                    ok, response = False, None
                    with lock:
                        errors.append(type(exc).__name__)
                elapsed = time.perf_counter() - started
                with lock:
                    if ok and response is not None:
                        latencies.append(elapsed)
                        by_kind.setdefault(kind, []).append(elapsed)
                        server_ms.append(response.json()["timing_ms"])
                    elif response is not None:
                        errors.append(f"{response.status_code}: {response.text[:120]}")

    began = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - began
    if not latencies:
        return {"mode": mode, "clients": clients, "queries": 0, "errors": len(errors), "error_examples": errors[:3]}
    stages = {
        stage: round(statistics.median(m.get(stage, 0.0) for m in server_ms), 2)
        for stage in ("wait", "embed", "retrieve", "rerank", "total")
    }
    return {
        "mode": mode,
        "clients": clients,
        "queries": len(latencies),
        "errors": len(errors),
        "error_examples": errors[:3],
        "p50_ms": round(_percentile(latencies, 0.5) * 1000, 1),
        "p95_ms": round(_percentile(latencies, 0.95) * 1000, 1),
        "max_ms": round(max(latencies) * 1000, 1),
        "queries_per_second": round(len(latencies) / wall, 2),
        "p50_ms_by_kind": {k: round(_percentile(v, 0.5) * 1000, 1) for k, v in sorted(by_kind.items())},
        "queries_by_kind": {k: len(v) for k, v in sorted(by_kind.items())},
        "server_median_ms": stages,
    }


_WRITER = """
import json, re, sys, time
from pathlib import Path
from rag_pipeline.index.opening import StoreLocation, open_vector_store
from rag_pipeline.index.store import CollectionNames
location = StoreLocation(path=Path(sys.argv[1]), wait_seconds=120)
rounds, hold = int(sys.argv[2]), float(sys.argv[3])
out = []
for _ in range(rounds):
    time.sleep(hold)
    asked = time.time()
    said = []
    store = open_vector_store(location, label="bench writer", on_wait=said.append)
    got = time.time()
    figures = [re.search(r"after ([0-9.]+) s, then loaded it in ([0-9.]+) s", m) for m in said]
    figures = [f for f in figures if f]
    # A real points write: every document's payload rewritten (what ACL reconciliation does), then held for
    # as long as a points step of a few partitions takes.
    ids = sorted(store.indexed_documents())[:2000]
    store.set_document_payload(store.names.children, ids, {"bench_written": got})
    store.set_document_payload(store.names.parents, ids, {"bench_written": got})
    time.sleep(hold)
    store.close()
    out.append({"asked": asked, "got": got, "released": time.time(), "documents": len(ids),
                "handed_over": float(figures[0].group(1)) if figures else None,
                "own_load": float(figures[0].group(2)) if figures else None})
print(json.dumps(out))
"""


def _during_write(
    url: str, data_dir: Path, headers: dict[str, str], mode: str, queries: list[tuple[str, str]]
) -> dict[str, Any]:
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(data_dir / "qdrant"), "3", "2.0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    cell = _cell(url, headers, mode, 4, queries)
    out, _ = writer.communicate(timeout=600)
    writes = json.loads(out)
    cell["writes"] = [
        {
            # asked → the service let go of the folder; the writer's own shard load; asked → store open.
            "handed_over_s": w["handed_over"],
            "writer_own_load_s": w["own_load"],
            "asked_to_open_s": round(w["got"] - w["asked"], 3),
            "held_s": round(w["released"] - w["got"], 3),
            "documents": w["documents"],
        }
        for w in writes
    ]
    cell["writer_returncode"] = writer.returncode
    return cell


def _cli_wall(data_dir: Path, runs: int) -> list[float]:
    walls = []
    env = {**os.environ, "RAG_DATA_DIR": str(data_dir)}
    for query in ("apt broken packages", "android build fails", "grub boot"):
        for _ in range(max(1, runs // 3)):
            started = time.monotonic()
            subprocess.run(
                [sys.executable, "-m", "rag_pipeline.cli", "search", query, "--groups", SLACK_MEMBERS, "--json"],
                env=env,
                capture_output=True,
                check=True,
            )
            walls.append(time.monotonic() - started)
    return walls


def _acl_check(url: str, data_dir: Path, stop_service: Any) -> dict[str, Any]:
    """Every acl_bundled_dev principal × query through the API, then (service stopped) through the CLI's own
    code in this process; the ids must match, and no returned document may be one its principal cannot read."""
    from rag_pipeline import cli
    from rag_pipeline.index.edge_store import EdgeVectorStore
    from rag_pipeline.retrieval.principal import Principal

    lines = _jsonl(EVAL_SETS / "acl_bundled_dev.jsonl")
    api: list[list[str]] = []
    for line in lines:
        principal = line.get("principal") or {}
        headers = {"X-User-Id": principal.get("user_id") or "anonymous"}
        if principal.get("groups"):
            headers["X-User-Groups"] = ",".join(principal["groups"])
        body = {"query": line["query"], "top_k": 10}
        response = httpx.post(f"{url}/v1/search", json=body, headers=headers, timeout=120)
        response.raise_for_status()
        api.append([r["document_id"] for r in response.json()["results"]])
    stop_service()
    mismatches, leaks = 0, 0
    store = EdgeVectorStore(data_dir / "qdrant", wait_seconds=60)
    try:
        for line, ids in zip(lines, api, strict=True):
            principal = line.get("principal") or {}
            args = ["search", line["query"], "--top-k", "10", "--json", "--data-dir", str(data_dir)]
            args += ["--user", principal["user_id"]] if principal.get("user_id") else []
            args += ["--groups", ",".join(principal["groups"])] if principal.get("groups") else []
            store.close()  # the CLI opens the index itself
            buffer = io.StringIO()
            with redirect_stdout(buffer):
                assert cli.main(args) == 0
            cli_ids = [r["document_id"] for r in json.loads(buffer.getvalue())["results"]]
            mismatches += cli_ids != ids
            store = EdgeVectorStore(data_dir / "qdrant", wait_seconds=60)
            reader = Principal(user_id=principal.get("user_id"), groups=tuple(principal.get("groups") or ()))
            for ref in store.document_points(store.names.parents, ids):
                payload = store.retrieve(store.names.parents, [ref.id])[0].payload
                leaks += not reader.admits(payload.get("acl") or {})
    finally:
        store.close()
    return {"queries": len(lines), "id_mismatches_vs_cli": mismatches, "leaks": leaks}


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/rag_demo"), help="an indexed data folder")
    parser.add_argument("--out", type=Path, default=common.RESULTS / "serve_load.json")
    parser.add_argument("--cli-runs", type=int, default=3, help="CLI searches timed for comparison")
    parser.add_argument("--skip-acl", action="store_true", help="skip the API-vs-CLI check of acl_bundled_dev")
    parser.add_argument(
        "--writes-only", action="store_true", help="only the cells during points writes (no CLI timing, no ACL check)"
    )
    args = parser.parse_args()
    data_dir = args.data_dir.resolve()
    pool = _queries()
    headers = {"X-User-Id": "bench", "X-User-Groups": ",".join([SLACK_MEMBERS, *_jira_groups()])}
    result: dict[str, Any] = {"run": common.run_record(), "data_dir": str(data_dir)}
    if not args.writes_only:
        print("CLI wall time per search ...", file=sys.stderr)
        result["cli_wall_seconds"] = [round(w, 2) for w in _cli_wall(data_dir, args.cli_runs)]
    log = Path("/tmp/serve_load.log")
    cells = []
    sizes = {1: 40, 4: 80, 16: 96}
    with _service(data_dir, log) as (url, process, first):
        result["start_to_first_answer_seconds"] = round(first, 2)
        result["health"] = httpx.get(f"{url}/health", timeout=30).json()
        for mode in () if args.writes_only else ("hybrid", "reranked"):
            for clients, count in sizes.items():
                queries = [pool.pop() for _ in range(count)]
                print(f"{mode} × {clients} clients ({count} queries) ...", file=sys.stderr)
                cells.append({**_cell(url, headers, mode, clients, queries), "during_write": False})
        for mode in ("hybrid", "reranked"):
            queries = [pool.pop() for _ in range(80)]
            print(f"{mode} × 4 clients during points writes ...", file=sys.stderr)
            cells.append({**_during_write(url, data_dir, headers, mode, queries), "during_write": True})
        result["cells"] = cells
        result["service_memory_mb"] = _rss_mb(process.pid)
        metrics = httpx.get(f"{url}/metrics", timeout=30).text
        result["hand_overs"] = next(
            float(line.split()[-1]) for line in metrics.splitlines() if line.startswith("rag_index_hand_overs_total ")
        )
        if not (args.skip_acl or args.writes_only):
            print("acl_bundled_dev through the API, then through the CLI ...", file=sys.stderr)
            result["acl_bundled_dev"] = _acl_check(url, data_dir, lambda: _stop(process))
    common.write_json(args.out, result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
