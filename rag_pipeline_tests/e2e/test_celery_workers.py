"""Scale-out on Dagster's Celery executor: Redis from Debian as the broker, two ``rag-pipeline worker`` processes,
range runs of the bundled Slack export launched as processes of their own against one instance.

- The runs' steps are spread over both workers (which worker ran what is read from the run's event log), and the
  index they build equals the one the same runs build in-process.
- The ``qdrant`` pool still admits one index step at a time across runs and workers.
- A worker killed with SIGKILL in the middle of writing the index: its step is run again by the other worker, the
  run succeeds, and the index holds every point once.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.pipeline.partition_start import record_planned_start
from rag_pipeline_tests.kit.celery_cluster import (
    Cluster,
    bundled_slack_env,
    celery_env,
    ensure_instance,
    finished_run,
    index_snapshot,
    launch_range_run,
    redis_server,
    redis_server_binary,
    step_executions,
    step_intervals,
    with_data,
)
from rag_pipeline_tests.kit.paths import REPO_ROOT
from rag_pipeline_tests.kit.range_run import SOURCE_TAG

pytestmark = pytest.mark.slow  # about three minutes: runs in the slow suite (make test runs both)

# The bundled #ubuntu channel (partitions are keyed by channel id).
CHANNEL = "C0UBUNTU00"
# Three days of #ubuntu in the bundled export (203, 202 and 18 messages), one range run each, launched together.
BACKFILL_DAYS = ["2004-11-16", "2005-08-09", "2007-01-12"]
KILL_DAY = "2005-06-27"
# The broker hands a dead worker's step to another worker after this long; every step here takes far less.
VISIBILITY_TIMEOUT = 25
PAUSE_HOOK = Path(__file__).resolve().parents[1] / "kit" / "pause_after_first_write"
STEPS = {"slack_threads", "slack_parent_chunks", "slack_child_chunks", "slack_dense_vectors",
         "slack_sparse_vectors", "slack_qdrant_points"}  # fmt: skip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if redis_server_binary() is None:
        if os.environ.get("RAG_REQUIRE_REDIS"):
            pytest.fail("RAG_REQUIRE_REDIS is set but redis-server is not installed")
        pytest.skip("redis-server is not installed (Debian package redis-server; `make test` installs it)")
    folder = tmp_path_factory.mktemp("celery")
    with redis_server(folder / "redis") as broker:
        env = celery_env(bundled_slack_env(folder), folder / "data", broker.url(), VISIBILITY_TIMEOUT)
        # The workers load the pause hook (kit/pause_after_first_write), armed by the kill test only.
        env["PYTHONPATH"] = os.pathsep.join([str(PAUSE_HOOK), str(REPO_ROOT)])
        env["RAG_TEST_PAUSE_MARKER"] = str(folder / "paused")
        ensure_instance(env)
        # The runs below are launched together, as a backfill's are: the earliest planned week is recorded once
        # before any of them, as the sync sensor records it before requesting its runs (otherwise the first run to
        # write a later week makes the workers load a partition start after another run's range).
        first_day = min([*BACKFILL_DAYS, KILL_DAY])
        record_planned_start(folder / "data", "slack", date.fromisoformat(first_day))
        cluster = Cluster(env, folder)
        try:
            for name in ("w1", "w2"):
                cluster.start_worker(name)
            for worker in cluster.workers:
                worker.wait_ready()
            yield cluster
        finally:
            cluster.stop()


@pytest.fixture(scope="module")
def in_process_index(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    """The same range runs, each in-process, in a data folder of its own: the index after the backfill's days,
    and after the killed run's day too."""
    folder = tmp_path_factory.mktemp("in_process")
    env = with_data(bundled_slack_env(folder), folder / "data")
    ensure_instance(env)
    for day in BACKFILL_DAYS:
        finished_run(launch_range_run(env, "slack", CHANNEL, day, day))
    backfill = index_snapshot(folder / "data")
    finished_run(launch_range_run(env, "slack", CHANNEL, KILL_DAY, KILL_DAY))
    return {"backfill": backfill, "all": index_snapshot(folder / "data")}


def _home(cluster: Cluster) -> Path:
    return Path(cluster.env["DAGSTER_HOME"])


def test_a_backfill_runs_its_steps_on_both_workers_and_builds_the_in_process_index(
    cluster: Cluster, in_process_index: dict[str, dict[str, object]]
) -> None:
    runs = [launch_range_run(cluster.env, "slack", CHANNEL, day, day) for day in BACKFILL_DAYS]
    run_ids = [str(finished_run(run)["run_id"]) for run in runs]

    executions = step_executions(_home(cluster), run_ids)
    # Every step of every run ran once, on a worker.
    assert sorted((e.run_id, e.step) for e in executions) == sorted((r, s) for r in run_ids for s in STEPS)
    assert {e.worker for e in executions} == {w.hostname for w in cluster.workers}
    # The qdrant pool admits one index step at a time, whichever worker runs it. A step's STEP_START..STEP_SUCCESS
    # (written by its worker) lies inside the time its run's orchestrator holds the slot: claimed before the step
    # is handed to Celery, freed once the orchestrator has read the step's success. Steps that overlap therefore
    # held the slot together: the pool itself let two in (docs/notes/celery_pool_overlap.md).
    intervals = sorted(step_intervals(_home(cluster), run_ids, "slack_qdrant_points"))
    assert len(intervals) == len(BACKFILL_DAYS)
    overlapping = [(a, b) for a, b in itertools.pairwise(intervals) if b[0] < a[1]]
    assert not overlapping, f"qdrant steps overlapped: {overlapping} (all: {intervals})"
    # Steps were routed by their queue tag (read by the Celery executor when it submits them).
    with dg.DagsterInstance.from_config(str(_home(cluster))) as instance:
        submitted = [
            r.user_message
            for r in instance.all_logs(run_ids[0], of_type=dg.DagsterEventType.ENGINE_EVENT)
            if (r.user_message or "").startswith("Submitting celery task")
        ]
    assert 'Submitting celery task for step "slack_dense_vectors" to queue "embed".' in submitted
    assert 'Submitting celery task for step "slack_qdrant_points" to queue "qdrant".' in submitted

    snapshot = index_snapshot(Path(cluster.env["RAG_DATA_DIR"]))
    assert snapshot == in_process_index["backfill"]
    assert snapshot["documents"]  # something was indexed


def test_a_worker_killed_mid_step_has_the_step_run_by_the_other_worker(
    cluster: Cluster, in_process_index: dict[str, dict[str, object]]
) -> None:
    home = _home(cluster)
    marker = Path(cluster.env["RAG_TEST_PAUSE_MARKER"])
    Path(f"{marker}.armed").touch()  # the next index write pauses once written
    run = launch_range_run(cluster.env, "slack", CHANNEL, KILL_DAY, KILL_DAY)
    run_id = _run_id_of(home, f"slack:{KILL_DAY}", run)
    # Wait until a worker has written part of the index step's points, then take the whole worker down.
    deadline = time.monotonic() + 300
    while not marker.exists() or not marker.read_text():
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline, "the index step never wrote"
        time.sleep(0.2)
    pid = int(marker.read_text().split()[0])
    victim = next(w for w in cluster.workers if os.getsid(pid) == w.process.pid)
    victim.kill()

    assert finished_run(run)["success"] is True
    executions = [e for e in step_executions(home, [run_id]) if e.step == "slack_qdrant_points"]
    survivor = next(w for w in cluster.workers if w is not victim)
    assert [e.worker for e in executions] == [victim.hostname, survivor.hostname]
    assert marker.read_text().split()[1] == "rag_parents"  # it died with the parents written, the children not
    # Handed over after the broker's visibility timeout, not before.
    assert executions[1].started - executions[0].started >= VISIBILITY_TIMEOUT - 1
    # Every point once, none missing: the index equals the in-process one of the same days.
    assert index_snapshot(Path(cluster.env["RAG_DATA_DIR"])) == in_process_index["all"]


def _run_id_of(home: Path, tag: str, process: object) -> str:
    deadline = time.monotonic() + 120
    with dg.DagsterInstance.from_config(str(home)) as instance:
        while True:
            records = instance.get_run_records(dg.RunsFilter(tags={SOURCE_TAG: tag}))
            if records:
                return records[0].dagster_run.run_id
            assert time.monotonic() < deadline, f"no run tagged {tag} appeared"
            time.sleep(0.2)
