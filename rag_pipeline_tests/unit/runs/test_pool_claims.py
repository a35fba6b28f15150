"""A pool of limit 1 admits one step at a time when orchestrators in several processes claim it at once.

Dagster's SQLite event log claims a slot in separate read-then-write statements (rag_pipeline/runs/pool_claims.py;
docs/notes/celery_pool_overlap.md). On a loaded machine a process is preempted between the read and the write; here
every read of the pool's tables is followed by a pause instead, so two claimers started together always
interleave there, as the Celery test's orchestrators did once on CI.
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
import pytest
from sqlalchemy.sql import Select

from rag_pipeline.runs.instance import DAGSTER_YAML
from rag_pipeline.runs.pool_claims import ProcessSharedLock, SerializedPoolClaimsStorage

POOL = "qdrant"
STEP = "slack_qdrant_points"
# Long beside the scheduling noise of a loaded 2-core machine, so the claimers' reads always interleave.
READ_PAUSE = 0.1
HOLD = 0.2
CLAIMERS = 2

# Dagster's own SQLite event log, with the runners' pool settings: the control.
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


def _pause_pool_reads(storage: Any) -> None:
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
        _pause_pool_reads(storage)
        start.wait()
        while not storage.claim_concurrency_slot(POOL, run_id, STEP).is_claimed:
            time.sleep(0.1)
        claimed = time.time()
        time.sleep(HOLD)
        freed = time.time()
        storage.free_concurrency_slot_for_step(run_id, STEP)
        holds.put((claimed, freed, run_id))


def _holds(home: Path, config: str) -> list[tuple[float, float, str]]:
    (home / "dagster.yaml").write_text(config.format(home=home), encoding="utf-8")
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


def _overlaps(holds: list[tuple[float, float, str]]) -> list[tuple[str, str]]:
    return [(a[2], b[2]) for a, b in itertools.pairwise(holds) if b[0] < a[1]]


def test_the_runners_instance_admits_one_step_at_a_time_when_claims_interleave(tmp_path: Path) -> None:
    holds = _holds(tmp_path, DAGSTER_YAML)
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert isinstance(instance.event_log_storage, SerializedPoolClaimsStorage)
    assert len(holds) == CLAIMERS
    assert _overlaps(holds) == [], holds


def test_dagster_s_own_sqlite_claims_admit_two_steps_when_claims_interleave(tmp_path: Path) -> None:
    """The race the lock exists for. If a Dagster upgrade makes this fail, its claims hold the limit by themselves
    and rag_pipeline/runs/pool_claims.py may go."""
    holds = _holds(tmp_path, PLAIN_SQLITE_YAML)
    assert _overlaps(holds), f"no two holds overlapped: {holds}"


def test_the_lock_is_reentrant_in_a_thread_and_exclusive_across_processes(tmp_path: Path) -> None:
    lock = ProcessSharedLock(tmp_path / "pool_slots.lock")
    fork = multiprocessing.get_context("fork")
    with lock, lock:  # a freed slot assigns the next queued step under the same lock
        other = fork.Process(target=_take_at_once, args=(lock.path,))
        other.start()
        other.join(timeout=30)
        assert other.exitcode == 1  # held here: the other process cannot take it
    other = fork.Process(target=_take_at_once, args=(lock.path,))
    other.start()
    other.join(timeout=30)
    assert other.exitcode == 0  # released on the outermost exit


def _take_at_once(path: Path) -> None:
    import fcntl
    import os

    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os._exit(1)
    os._exit(0)


@pytest.fixture(autouse=True)
def _no_dagster_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
