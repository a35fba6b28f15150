"""The bundled Slack backfill in-process against two Celery workers on this machine (RAG_EXECUTOR=celery).

    .venv/bin/python -m bench.scale_out                      # ~10 min on 2 cores
    .venv/bin/python -m bench.scale_out --concurrent-runs 2

Every arm indexes the same range runs (one per day of #ubuntu that holds messages, 21 runs), each run in a process
of its own as Dagster's run launcher starts one, into a fresh data folder:

- ``in_process``: the runs one after another, each executing its steps in its own process (the code location's
  executor without a Qdrant server);
- ``celery``: Debian's redis-server as the broker, two ``rag-pipeline worker`` processes (one step at a time each),
  the runs launched ``--concurrent-runs`` at a time (the deployment instance's run queue allows 4); its steps
  are routed to the queues and the ``qdrant`` pool still admits one index write at a time;
- ``cli``: ``rag-pipeline index --source slack`` (one process, the CLI's own ranges), for reference.

Per arm: wall seconds, the sum of step seconds per asset, the index it built (the arms must build the same one).
For Celery also: queue latency per step (handed to the broker -> begun by a worker), which worker ran how many
steps, Redis's peak memory and each worker's peak resident memory (sampled every 0.5 s). From the in-process arm:
seconds per embedded chunk and per written point, which docs/guides/scaling.md turns into a cluster estimate.
Results: bench/results/scale_out.json.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import dagster as dg

from bench.common import RESULTS, parser, run_record, write_json
from rag_pipeline_tests.kit.celery_cluster import (
    Cluster,
    bundled_slack_env,
    celery_env,
    ensure_instance,
    finished_run,
    index_snapshot,
    launch_range_run,
    redis_server,
    step_executions,
    with_data,
)

EXPORT = Path(__file__).resolve().parent.parent / "rag_pipeline" / "data" / "slack_ubuntu" / "export" / "ubuntu"
CHANNEL = "C0UBUNTU00"
ASSETS = ("slack_threads", "slack_parent_chunks", "slack_child_chunks", "slack_dense_vectors",
          "slack_sparse_vectors", "slack_qdrant_points")  # fmt: skip


def _days() -> list[str]:
    return sorted(p.stem for p in EXPORT.glob("*.json"))


def _step_stats(home: Path, run_ids: list[str]) -> dict[str, Any]:
    """Seconds per asset summed over the runs (step start -> success), and what the steps wrote."""
    seconds: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for run_id in run_ids:
            started: dict[str, float] = {}
            for record in instance.all_logs(run_id):
                event = record.dagster_event
                if event is None or event.step_key is None:
                    continue
                if event.event_type == dg.DagsterEventType.STEP_START:
                    started[event.step_key] = record.timestamp
                elif event.event_type == dg.DagsterEventType.STEP_SUCCESS and event.step_key in started:
                    seconds[event.step_key] += record.timestamp - started[event.step_key]
                elif event.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION:
                    metadata = event.event_specific_data.materialization.metadata  # type: ignore[union-attr]
                    for name in ("vectors", "points_written", "child_chunks", "documents"):
                        if name in metadata and event.step_key in ("slack_dense_vectors", "slack_qdrant_points",
                                                                   "slack_child_chunks", "slack_threads"):  # fmt: skip
                            counts[f"{event.step_key}.{name}"] += int(metadata[name].value)  # type: ignore[arg-type]
    return {"step_seconds": {k: round(v, 2) for k, v in sorted(seconds.items())}, "written": dict(counts)}


def _run_all(env: dict[str, str], days: list[str], concurrent: int) -> tuple[list[str], float]:
    """Launch one range run per day, ``concurrent`` at a time; their run ids and the wall seconds."""
    began = time.perf_counter()
    pending = list(days)
    running: list[subprocess.Popen[str]] = []
    run_ids: list[str] = []
    while pending or running:
        while pending and len(running) < concurrent:
            day = pending.pop(0)
            running.append(launch_range_run(env, "slack", CHANNEL, day, day))
        for process in [p for p in running if p.poll() is not None]:
            run_ids.append(str(finished_run(process)["run_id"]))
            running.remove(process)
        time.sleep(0.2)
    return run_ids, round(time.perf_counter() - began, 1)


def in_process_arm(folder: Path, days: list[str]) -> tuple[dict[str, Any], dict[str, object]]:
    env = with_data(bundled_slack_env(folder), folder / "data")
    ensure_instance(env)
    run_ids, wall = _run_all(env, days, 1)
    home = Path(env["DAGSTER_HOME"])
    return {"runs": len(run_ids), "wall_seconds": wall, **_step_stats(home, run_ids)}, index_snapshot(folder / "data")


def celery_arm(folder: Path, days: list[str], concurrent: int) -> tuple[dict[str, Any], dict[str, object]]:
    with redis_server(folder / "redis") as broker:
        env = celery_env(bundled_slack_env(folder), folder / "data", broker.url(), 7200)
        ensure_instance(env)
        cluster = Cluster(env, folder)
        peaks: dict[str, int] = defaultdict(int)
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.5):
                for worker in cluster.workers:
                    peaks[worker.name] = max(peaks[worker.name], worker.rss_bytes())

        try:
            for name in ("w1", "w2"):
                cluster.start_worker(name)
            for worker in cluster.workers:
                worker.wait_ready()
            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            run_ids, wall = _run_all(env, days, concurrent)
            stop.set()
            sampler.join()
            redis_peak = broker.used_memory_peak()
        finally:
            cluster.stop()
    home = Path(env["DAGSTER_HOME"])
    executions = step_executions(home, run_ids)
    latency: dict[str, list[float]] = defaultdict(list)
    for e in executions:
        latency[e.step].append(e.started - e.submitted)
    every = [x for xs in latency.values() for x in xs]
    return {
        "runs": len(run_ids),
        "concurrent_runs": concurrent,
        "workers": 2,
        "wall_seconds": wall,
        **_step_stats(home, run_ids),
        "steps_per_worker": dict(Counter(e.worker for e in executions)),
        "queue_latency_seconds": {
            "all": {"p50": round(statistics.median(every), 2), "max": round(max(every), 2), "steps": len(every)},
            **{
                step: {"p50": round(statistics.median(xs), 2), "max": round(max(xs), 2)}
                for step, xs in sorted(latency.items())
            },
        },
        "redis_used_memory_peak_mb": round(redis_peak / 2**20, 1),
        "worker_peak_rss_mb": {name: round(v / 2**20) for name, v in sorted(peaks.items())},
    }, index_snapshot(folder / "data")


def cli_arm(folder: Path) -> dict[str, Any]:
    env = with_data(bundled_slack_env(folder), folder / "data")
    command = [str(Path(sys.executable).parent / "rag-pipeline"), "index", "--source", "slack", "--json"]
    began = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    summary = json.loads(done.stdout)
    return {"wall_seconds": round(time.perf_counter() - began, 1), "runs": summary.get("runs"),
            "points": summary.get("points")}  # fmt: skip


def _per(seconds: float, units: int) -> float:
    return round(seconds / max(1, units), 5)


def main() -> int:
    args_parser = parser(__doc__)
    args_parser.add_argument("--concurrent-runs", type=int, default=4, help="Celery arm: runs at once (default 4)")
    args_parser.add_argument("--out", type=Path, default=RESULTS / "scale_out.json")
    args = args_parser.parse_args()
    days = _days()
    with tempfile.TemporaryDirectory(prefix="scale_out_") as tmp:
        root = Path(tmp)
        print(f"in-process: {len(days)} range runs, one at a time ...", file=sys.stderr, flush=True)
        in_process, reference = in_process_arm(root / "in_process", days)
        print(f"  {in_process['wall_seconds']} s", file=sys.stderr, flush=True)
        print(f"celery: 2 workers, {args.concurrent_runs} runs at a time ...", file=sys.stderr, flush=True)
        celery, built = celery_arm(root / "celery", days, args.concurrent_runs)
        print(f"  {celery['wall_seconds']} s", file=sys.stderr, flush=True)
        print("cli: rag-pipeline index --source slack ...", file=sys.stderr, flush=True)
        cli = cli_arm(root / "cli")
        print(f"  {cli['wall_seconds']} s", file=sys.stderr, flush=True)
    seconds = in_process["step_seconds"]
    written = in_process["written"]
    result = {
        **run_record(),
        "runs": len(days),
        "in_process": in_process,
        "celery": celery,
        "cli": cli,
        "same_index": built == reference,
        "points": reference["counts"],
        "per_unit_seconds": {
            "dense_per_vector": _per(seconds["slack_dense_vectors"], written["slack_dense_vectors.vectors"]),
            "write_per_point": _per(seconds["slack_qdrant_points"], written["slack_qdrant_points.points_written"]),
            # What a step costs more on a worker (loading the code location and resources per task), on average.
            "step_overhead_celery_vs_in_process": round(
                (sum(celery["step_seconds"].values()) - sum(seconds.values())) / (len(ASSETS) * len(days)), 2
            ),
        },
    }
    write_json(args.out, result)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
