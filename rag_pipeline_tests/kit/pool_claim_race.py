"""Two orchestrators claiming one pool slot at the same moment, with their reads paused as a preempted process's.

Dagster's SQL event logs claim a slot in separate read-then-write statements (rag_pipeline/runs/pool_claims.py;
docs/notes/celery_pool_overlap.md). On a loaded machine a process is preempted between the read and the write;
here every read of the pool's tables is followed by a pause instead, so claimers started together always
interleave there, as the Celery test's orchestrators did once on CI. Used for the SQLite and the PostgreSQL
instances (rag_pipeline_tests/unit/runs/test_pool_claims*.py).
"""

from __future__ import annotations

import itertools
import multiprocessing
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import dagster as dg
from sqlalchemy.sql import Select

POOL = "qdrant"
STEP = "slack_qdrant_points"
# Long beside the scheduling noise of a loaded 2-core machine, so the claimers' reads always interleave.
READ_PAUSE = 0.1
HOLD = 0.2
CLAIMERS = 2

Hold = tuple[float, float, str]  # claimed at, freed at, run id

# The controls: Dagster's own event logs with the runners' pool settings (limit 1), as the project's instances were
# configured before the pool-slot lock. PostgreSQL reads the server from the DAGSTER_PG_* variables; SQLite's
# ``{home}`` is the instance folder.
PLAIN_POSTGRES_YAML = """storage:
  postgres:
    postgres_db:
      username: {env: DAGSTER_PG_USERNAME}
      password: {env: DAGSTER_PG_PASSWORD}
      hostname: {env: DAGSTER_PG_HOST}
      db_name: {env: DAGSTER_PG_DB}
      port: {env: DAGSTER_PG_PORT}
      scheme: postgresql+psycopg2
concurrency:
  pools:
    default_limit: 1
telemetry:
  enabled: false
"""

PLAIN_SQLITE_YAML = """event_log_storage:
  module: dagster._core.storage.event_log
  class: SqliteEventLogStorage
  config:
    base_dir: {home}/history/runs
concurrency:
  pools:
    default_limit: 1
telemetry:
  enabled: false
"""


class _PausingReads:
    """A connection whose reads of the pool's tables pause before the caller goes on to act on them."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, statement: Any, *args: Any, **kwargs: Any) -> Any:
        result = self._conn.execute(statement, *args, **kwargs)
        if isinstance(statement, Select) and any(
            name in str(statement) for name in ("concurrency_slots", "pending_steps")
        ):
            time.sleep(READ_PAUSE)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def pause_pool_reads(storage: Any) -> None:
    """Make every read of the pool's tables through ``storage.index_connection()`` pause (both Dagster event logs
    run their pool statements there; ``index_transaction()`` opens it too)."""
    storage.get_pool_limits()  # its cached column check inspects the connection: done before the proxy
    connect = storage.index_connection

    @contextmanager
    def index_connection() -> Iterator[_PausingReads]:
        with connect() as conn:
            yield _PausingReads(conn)

    storage.index_connection = index_connection


def _claimer(home: str, run_id: str, start: Barrier, holds: Any) -> None:
    """Claim the pool's slot for one step (as an orchestrator polls), hold it, free it; report the hold."""
    with dg.DagsterInstance.from_config(home) as instance:
        storage = instance.event_log_storage
        pause_pool_reads(storage)
        start.wait()
        while not storage.claim_concurrency_slot(POOL, run_id, STEP).is_claimed:
            time.sleep(0.1)
        claimed = time.time()
        time.sleep(HOLD)
        freed = time.time()
        storage.free_concurrency_slot_for_step(run_id, STEP)
        holds.put((claimed, freed, run_id))


def claim_together(home: Path, config: str) -> list[Hold]:
    """Write ``config`` as ``home``'s dagster.yaml (its pools' default limit must be 1), then let :data:`CLAIMERS`
    forked processes claim, hold and free the pool's slot together; their holds in the order they were claimed.

    The processes inherit the environment (a PostgreSQL instance's ``DAGSTER_PG_*`` variables)."""
    (home / "dagster.yaml").write_text(config, encoding="utf-8")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.event_log_storage.initialize_concurrency_limit_to_default(POOL)
        assert [(p.name, p.limit) for p in instance.event_log_storage.get_pool_limits()] == [(POOL, 1)]
    fork = multiprocessing.get_context("fork")
    start, holds = fork.Barrier(CLAIMERS), fork.Queue()
    processes = [fork.Process(target=_claimer, args=(str(home), f"run{i}", start, holds)) for i in range(CLAIMERS)]
    for process in processes:
        process.start()
    try:
        out = sorted(holds.get(timeout=60) for _ in processes)
    finally:
        for process in processes:
            process.join(timeout=30)
    assert all(process.exitcode == 0 for process in processes)
    return out


def overlaps(holds: list[Hold]) -> list[tuple[str, str]]:
    """The pairs of runs that held the slot at the same time."""
    return [(a[2], b[2]) for a, b in itertools.pairwise(holds) if b[0] < a[1]]
