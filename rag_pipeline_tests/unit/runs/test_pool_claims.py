"""A pool of limit 1 admits one step at a time when orchestrators in several processes claim it at once
(SQLite instances; the harness, which pauses every read of the pool's tables as a preempted process would, is
rag_pipeline_tests/kit/pool_claim_race.py; PostgreSQL instances: test_pool_claims_postgres.py).
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.runs.instance import DAGSTER_YAML
from rag_pipeline.runs.pool_claims import ProcessSharedLock, SerializedPoolClaimsStorage
from rag_pipeline_tests.kit.pool_claim_race import CLAIMERS, PLAIN_SQLITE_YAML, claim_together, overlaps


def test_the_runners_instance_admits_one_step_at_a_time_when_claims_interleave(tmp_path: Path) -> None:
    holds = claim_together(tmp_path, DAGSTER_YAML.format(home=tmp_path))
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert isinstance(instance.event_log_storage, SerializedPoolClaimsStorage)
    assert len(holds) == CLAIMERS
    assert overlaps(holds) == [], holds


def test_dagster_s_own_sqlite_claims_admit_two_steps_when_claims_interleave(tmp_path: Path) -> None:
    """The race the lock exists for. If a Dagster upgrade makes this fail, its claims hold the limit by themselves
    and rag_pipeline/runs/pool_claims.py may go."""
    holds = claim_together(tmp_path, PLAIN_SQLITE_YAML.format(home=tmp_path))
    assert overlaps(holds), f"no two holds overlapped: {holds}"


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
