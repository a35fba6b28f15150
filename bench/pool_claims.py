"""Pool claims under contention, nothing paused: how often a pool of limit 1 is held by two steps at once (issue 70).

    .venv/bin/python -m bench.pool_claims            # 22 min on 2 cores at load average 16-25, 15 of them PostgreSQL
    .venv/bin/python -m bench.pool_claims --processes 6 --claims 30 --busy 2 --repeats 2 --only postgres

Each of ``--processes`` processes opens the instance and claims the pool ``qdrant`` (limit 1) ``--claims`` times
with Dagster's own calls, as an orchestrator does: ``claim_concurrency_slot`` polled every 10 ms until claimed, the
slot held 20 ms, then ``free_concurrency_slot_for_step``. ``--busy`` processes spin beside them, so the claimers
are preempted as on a loaded machine. Counted: holds that began while another hold was still open (``overlaps``)
and the most holds open at once (``max_holders``; 1 is the pool's limit kept).

The instances: Dagster's plain event logs (``storage: postgres``, as deploy/dagster.postgres.yaml configured it
before the lock; ``SqliteEventLogStorage``) against the project's (deploy/dagster.postgres.yaml's
``SerializedPoolClaimsPostgresStorage``; the runners' ``BatchingSqliteEventLogStorage``). PostgreSQL is a throwaway
server from the Debian packages (the test kit's, fsync off), on loopback. Results: bench/results/pool_claims.json.
The deterministic form of this race is rag_pipeline_tests/unit/runs/test_pool_claims*.py.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.synchronize import Barrier, Event
from pathlib import Path
from typing import Any

import dagster as dg

from bench.common import RESULTS, ROOT, parser, run_record, write_json
from rag_pipeline.runs.instance import DAGSTER_YAML
from rag_pipeline_tests.kit.pool_claim_race import PLAIN_POSTGRES_YAML, PLAIN_SQLITE_YAML, POOL, STEP
from rag_pipeline_tests.kit.postgres_server import running_postgres

POLL, HOLD = 0.01, 0.02


def _configs(home: Path) -> dict[str, str]:
    return {
        "postgres_plain": PLAIN_POSTGRES_YAML,
        "postgres_project": (ROOT / "deploy" / "dagster.postgres.yaml").read_text(encoding="utf-8"),
        "sqlite_plain": PLAIN_SQLITE_YAML.format(home=home),
        "sqlite_project": DAGSTER_YAML.format(home=home),
    }


def _claimer(home: str, index: int, claims: int, start: Barrier, out: Any) -> None:
    holds = []
    with dg.DagsterInstance.from_config(home) as instance:
        storage = instance.event_log_storage
        start.wait()
        for i in range(claims):
            run_id = f"p{index}c{i}"
            while not storage.claim_concurrency_slot(POOL, run_id, STEP).is_claimed:
                time.sleep(POLL)
            claimed = time.time()
            time.sleep(HOLD)
            freed = time.time()
            storage.free_concurrency_slot_for_step(run_id, STEP)
            holds.append((claimed, freed))
    out.put(holds)


def _spin(stop: Event) -> None:
    while not stop.is_set():
        pass


def _count(holds: list[tuple[float, float]]) -> dict[str, int]:
    holds = sorted(holds)
    overlaps, max_holders = 0, 1
    for i, (start, _) in enumerate(holds):
        open_now = 1 + sum(1 for s, e in holds[:i] if e > start)
        overlaps += open_now > 1
        max_holders = max(max_holders, open_now)
    return {"holds": len(holds), "overlaps": overlaps, "max_holders": max_holders}


def measure(home: Path, config: str, processes: int, claims: int, busy: int) -> dict[str, Any]:
    (home / "dagster.yaml").write_text(config, encoding="utf-8")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.wipe()
        instance.event_log_storage.initialize_concurrency_limit_to_default(POOL)
        kind = type(instance.event_log_storage).__name__
    fork = multiprocessing.get_context("fork")
    start, out, stop = fork.Barrier(processes), fork.Queue(), fork.Event()
    spinners = [fork.Process(target=_spin, args=(stop,)) for _ in range(busy)]
    claimers = [fork.Process(target=_claimer, args=(str(home), n, claims, start, out)) for n in range(processes)]
    began = time.perf_counter()
    for process in spinners + claimers:
        process.start()
    try:
        holds = [hold for _ in claimers for hold in out.get(timeout=1800)]
    finally:
        stop.set()
        for process in spinners + claimers:
            process.join(timeout=60)
    return {"storage": kind, **_count(holds), "seconds": round(time.perf_counter() - began, 1)}


@contextmanager
def _postgres_env() -> Iterator[None]:
    root = Path(tempfile.mkdtemp(prefix="rag_pg_bench_"))
    saved = dict(os.environ)
    try:
        with running_postgres(root) as server:
            os.environ.update(server.env())
            yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    args = parser(__doc__)
    args.add_argument("--processes", type=int, default=6, help="claiming processes (default: %(default)s)")
    args.add_argument("--claims", type=int, default=30, help="claims per process (default: %(default)s)")
    args.add_argument("--busy", type=int, default=2, help="busy-loop processes beside them (default: %(default)s)")
    args.add_argument("--repeats", type=int, default=2, help="runs per instance (default: %(default)s)")
    args.add_argument("--only", choices=["postgres", "sqlite"], help="one database only")
    args.add_argument("--out", type=Path, default=RESULTS / "pool_claims.json")
    opts = args.parse_args()
    os.environ.pop("DAGSTER_HOME", None)
    results: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="rag_pool_bench_") as tmp, _postgres_env():
        for name, config in _configs(Path(tmp)).items():
            if opts.only and not name.startswith(opts.only):
                continue
            for repeat in range(opts.repeats):
                home = Path(tmp) / f"{name}_{repeat}"
                home.mkdir()
                load = os.getloadavg()[0]
                row = measure(home, config, opts.processes, opts.claims, opts.busy)
                row["load_average_1min_before"] = round(load, 2)
                results.setdefault(name, []).append(row)
                print(name, row, flush=True)
    settings = {"processes": opts.processes, "claims": opts.claims, "busy": opts.busy, "poll_s": POLL, "hold_s": HOLD}
    write_json(opts.out, {"run": run_record(), "settings": settings, "results": results})
    print(f"wrote {opts.out}")


if __name__ == "__main__":
    main()
