"""A runner killed mid-run (kill -9, the OOM killer) never blocks the next one.

End to end: ``rag-pipeline demo`` in real processes, killed with SIGKILL inside three different steps (the raw
read holding the ``slack_api`` slot, the parent chunking, the Qdrant write holding the ``qdrant`` slot with
half of its points written); each next run recovers the dead one and gets past its step, the last completes,
and the index equals a clean run's. Unit level, on a real SQLite instance: orphaned runs are failed and their
slots freed on the next start, other runs are left alone; a step waiting for a pool says who holds it, frees
a dead holder's slot, does not spin, and stops on SIGINT and SIGTERM. The instance configs parse.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.instance.config import dagster_instance_config
from dagster._core.instance.ref import InstanceRef
from dagster._core.utils import make_new_run_id

from rag_pipeline.runs.execution import WatchedConcurrencyContext, execute_run, runner_instance
from rag_pipeline.runs.instance import DAGSTER_YAML
from rag_pipeline.runs.recovery import HOST_TAG, PID_STARTED_TAG, PID_TAG, process_started, recover_runs
from rag_pipeline_tests.kit.celery_cluster import index_snapshot
from rag_pipeline_tests.kit.data import D1, basic_days, ts, write_slack_export
from rag_pipeline_tests.kit.paths import REPO_ROOT

ROOT = REPO_ROOT

# Runs the CLI with one step paused: it writes the marker file (its pid and the step) and sleeps, so the
# test kills a real process at a known point. The pauses replace nothing the step has done before them.
PAUSING_CLI = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path

    marker, where = Path(os.environ["CRASH_MARKER"]), os.environ["CRASH_PAUSE_AT"]

    def pause():
        marker.write_text(f"{os.getpid()} {where}")
        time.sleep(600)

    if where == "raw":  # inside slack_threads, which holds the slack_api slot
        from rag_pipeline.defs.slack.resources import SlackExportResource
        SlackExportResource.read_partitions = lambda self, *args, **kwargs: pause()
    elif where == "parents":  # inside slack_parent_chunks (no pool), the raw parquet already written
        import rag_pipeline.defs.chain.assets as chain
        chain.chunk_documents = lambda *args, **kwargs: pause()
    elif where == "points":  # inside slack_qdrant_points (qdrant slot): parents written, children not
        from rag_pipeline.index.edge_store import EdgeVectorStore
        upsert, calls = EdgeVectorStore.upsert, []
        def paused_upsert(self, collection, points):
            if calls:
                pause()
            calls.append(collection)
            upsert(self, collection, points)
        EdgeVectorStore.upsert = paused_upsert

    from rag_pipeline.cli import main
    sys.exit(main(sys.argv[1:]))
    """
)

# Waits for a slot in pool "qdrant" through the runners' execute_run, reporting every second.
WAITING_RUN = textwrap.dedent(
    """
    import sys
    import dagster as dg
    from rag_pipeline.runs.execution import WatchedConcurrencyContext, execute_run, runner_instance

    WatchedConcurrencyContext.report_every_seconds = 1.0

    @dg.asset(pool="qdrant")
    def blocked() -> None:
        pass

    job = dg.Definitions(assets=[blocked]).resolve_implicit_global_asset_job_def()
    with runner_instance() as instance:
        try:
            execute_run(job, instance, run_config={"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}})
        except KeyboardInterrupt:
            print("stopped", flush=True)
            sys.exit(130)
    print("finished", flush=True)
    """
)

RUN_TIMEOUT = 120  # a re-run of the tiny export takes ~20 s on 2 cores; a hang on a slot never ends


# --- helpers ------------------------------------------------------------------------------------------------
def _home(tmp_path: Path) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(DAGSTER_YAML.format(home=home))
    return home


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = _home(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


@pytest.fixture
def instance(home: Path) -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        yield instance


@pytest.fixture
def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


@pytest.fixture
def live_process() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "300"])
    yield process
    process.kill()
    process.wait()


def _tags(pid: int, host: str | None = None, started: str | None = None) -> dict[str, str]:
    tags = {PID_TAG: str(pid), HOST_TAG: host or socket.gethostname()}
    if started is not None:
        tags[PID_STARTED_TAG] = started
    return tags


def _add_run(instance: dg.DagsterInstance, tags: dict[str, str], pools: tuple[str, ...] = ()) -> str:
    """A STARTED run holding a slot (claimed) in each of ``pools``."""
    run_id = make_new_run_id()
    instance.add_run(dg.DagsterRun(job_name="held", run_id=run_id, tags=tags, status=dg.DagsterRunStatus.STARTED))
    storage = instance.event_log_storage
    for pool in pools:
        storage.initialize_concurrency_limit_to_default(pool)
        assert storage.claim_concurrency_slot(pool, run_id, f"{pool}_step").is_claimed
    return run_id


def _holders(instance: dg.DagsterInstance, pool: str) -> set[str]:
    info = instance.event_log_storage.get_concurrency_info(pool)
    return {s.run_id for s in info.claimed_slots} | {s.run_id for s in info.pending_steps}


def _status(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRunStatus:
    run = instance.get_run_by_id(run_id)
    assert run is not None
    return run.status


def _failure_message(instance: dg.DagsterInstance, run_id: str) -> str:
    events = instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
    return events[-1].message if events else ""


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- unit level: recovery on start --------------------------------------------------------------------------
def test_an_orphaned_run_is_failed_and_its_slot_freed_on_the_next_start(
    home: Path,
    instance: dg.DagsterInstance,
    dead_pid: int,
    live_process: subprocess.Popen[bytes],
    caplog: pytest.LogCaptureFixture,
) -> None:
    orphan = _add_run(instance, _tags(dead_pid), pools=("qdrant",))
    alive = _add_run(instance, _tags(live_process.pid, started=process_started(live_process.pid)), pools=("jira_api",))
    # A recycled pid: the number is alive, but the process behind it started at another time.
    recycled = _add_run(instance, _tags(live_process.pid, started="1"), pools=("slack_api",))
    remote = _add_run(instance, _tags(dead_pid, host="another-host"), pools=("remote",))
    untagged = _add_run(instance, {}, pools=("daemon",))
    # Ended without freeing its slot (Dagster frees a slot when its step ends, not when the run does).
    ended = _add_run(instance, _tags(dead_pid), pools=("ended",))
    instance.report_run_failed(instance.get_run_by_id(ended))

    with caplog.at_level(logging.WARNING, logger="rag_pipeline.runs"), runner_instance():
        pass

    for run_id, pool in ((orphan, "qdrant"), (recycled, "slack_api")):
        assert _status(instance, run_id) == dg.DagsterRunStatus.FAILURE
        assert "is gone: it was killed or crashed mid-run" in _failure_message(instance, run_id)
        assert _holders(instance, pool) == set()
    assert _holders(instance, "ended") == set()
    # Left alone: a live runner, a runner on another host (its pid cannot be checked here), the daemon's run.
    for run_id, pool in ((alive, "jira_api"), (remote, "remote"), (untagged, "daemon")):
        assert _status(instance, run_id) == dg.DagsterRunStatus.STARTED
        assert _holders(instance, pool) == {run_id}
    lines = sorted(r.getMessage() for r in caplog.records)
    assert len(lines) == 3
    assert (
        f"recovered run {orphan}: its process is gone (pid {dead_pid}, STARTED), marked it failed; "
        "freed its slots in pool qdrant"
    ) in lines
    assert (
        f"recovered run {ended}: it had ended (FAILURE) but still held pool slots; freed its slots in pool ended"
    ) in lines

    # Nothing left to do: a second start reports nothing.
    assert recover_runs(instance) == []


def test_an_untagged_ended_run_keeps_its_slots_for_the_instances_grace_period(instance: dg.DagsterInstance) -> None:
    daemon_run = _add_run(instance, {}, pools=("daemon",))
    instance.report_run_failed(instance.get_run_by_id(daemon_run))
    # DAGSTER_YAML sets run_monitoring.free_slots_after_run_end_seconds: a step process of a daemon run may
    # outlive its run for a moment, so its slots wait as long as the daemon would have them wait.
    assert recover_runs(instance) == []
    assert _holders(instance, "daemon") == {daemon_run}
    assert [r.run_id for r in recover_runs(instance, finished_grace_seconds=0)] == [daemon_run]
    assert _holders(instance, "daemon") == set()


# --- unit level: a step waiting for a pool -----------------------------------------------------------------
@dg.asset(pool="qdrant")
def needs_qdrant() -> int:
    return 1


def test_a_waiting_step_frees_a_dead_runners_slot_and_runs(
    instance: dg.DagsterInstance, dead_pid: int, caplog: pytest.LogCaptureFixture
) -> None:
    # The holder died after this runner started (no recovery on start here): the wait itself recovers it.
    orphan = _add_run(instance, _tags(dead_pid), pools=("qdrant",))
    job = dg.Definitions(assets=[needs_qdrant]).resolve_implicit_global_asset_job_def()
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="rag_pipeline.runs"):
        result = execute_run(job, instance)
    assert result.success and time.monotonic() - started < 15
    assert _status(instance, orphan) == dg.DagsterRunStatus.FAILURE
    assert any(r.getMessage().startswith(f"recovered run {orphan}") for r in caplog.records)
    assert _holders(instance, "qdrant") == set()  # and the run that got the slot released it
    assert result.dagster_run.tags[PID_TAG] == str(os.getpid())


def test_a_free_slot_dagster_left_unassigned_is_given_to_the_waiting_step(
    instance: dg.DagsterInstance, caplog: pytest.LogCaptureFixture
) -> None:
    """Two processes claiming together: the holder frees its slot between the waiter's "is a slot free?" and
    its queueing, so Dagster assigns the free slot to nobody and the queued step would wait forever (what
    failed the concurrent-index test in CI, 166 s and counting, "no slot assigned to this run yet")."""
    storage = instance.event_log_storage
    storage.initialize_concurrency_limit_to_default("qdrant")
    run = dg.DagsterRun(job_name="waiting", run_id=make_new_run_id())
    # The state that race leaves: the pool's one slot is free, this step is queued and unassigned.
    storage.add_pending_step("qdrant", run.run_id, "needs_qdrant", priority=0, should_assign=False)
    assert not storage.check_concurrency_claim("qdrant", run.run_id, "needs_qdrant").is_assigned
    waiting = WatchedConcurrencyContext(instance, run)
    waiting.report_every_seconds = 0.0
    deadline, claimed = time.monotonic() + 15, False
    with caplog.at_level(logging.WARNING, logger="rag_pipeline.runs"), waiting:
        while not claimed and time.monotonic() < deadline:
            claimed = waiting.claim("qdrant", "needs_qdrant")
            time.sleep(0.05)
        assert claimed
        assert _holders(instance, "qdrant") == {run.run_id}
        waiting.free_step("needs_qdrant")  # as the executor does when the step ends
    assert any("had a free slot no waiting step was given" in r.getMessage() for r in caplog.records)
    assert _holders(instance, "qdrant") == set()


@dg.asset
def pressed_ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)  # Dagster's handler raises inside the step, before the sleep ends
    time.sleep(10)


def test_an_interrupted_run_stops_the_runner_also_without_raise_on_error(instance: dg.DagsterInstance) -> None:
    # Live sync and the evaluation run with raise_on_error=False: Dagster then records the interrupt as a
    # failed run and returns, and the runner's loop would go on with its next run.
    job = dg.Definitions(assets=[pressed_ctrl_c]).resolve_implicit_global_asset_job_def()
    with pytest.raises(KeyboardInterrupt):
        execute_run(job, instance, raise_on_error=False)
    [run] = instance.get_runs()
    assert run.status == dg.DagsterRunStatus.FAILURE


def test_a_blocked_step_says_what_it_waits_for_without_spinning_and_stops_on_sigint_and_sigterm(
    home: Path, instance: dg.DagsterInstance, live_process: subprocess.Popen[bytes]
) -> None:
    holder = _add_run(instance, _tags(live_process.pid, started=process_started(live_process.pid)), pools=("qdrant",))
    script = home.parent / "waiting_run.py"
    script.write_text(WAITING_RUN)
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(ROOT)}
    # Two runners wait for the holder's slot at once; one gets Ctrl-C (SIGINT), the other SIGTERM.
    waiting = {
        stop: subprocess.Popen(
            [sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for stop in (signal.SIGINT, signal.SIGTERM)
    }
    said: dict[signal.Signals, list[str]] = {stop: [] for stop in waiting}
    for stop, process in waiting.items():
        threading.Thread(target=lambda p=process, s=stop: said[s].extend(p.stdout or []), daemon=True).start()
    try:
        deadline = time.monotonic() + 60
        while not all(any("has waited" in line for line in lines) for lines in said.values()):
            for stop, process in waiting.items():
                assert process.poll() is None and time.monotonic() < deadline, "".join(said[stop])
            time.sleep(0.1)
        # Dagster's own loop re-checks the claim without sleeping (~75 % of a core); this one sleeps.
        cpu, wall = {s: _cpu_seconds(p.pid) for s, p in waiting.items()}, time.monotonic()
        time.sleep(2.0)
        cpu_share = {s: (_cpu_seconds(p.pid) - cpu[s]) / (time.monotonic() - wall) for s, p in waiting.items()}
        for stop, process in waiting.items():
            process.send_signal(stop)
        signalled = time.monotonic()
        for process in waiting.values():
            process.wait(timeout=30)
        stopped_after = time.monotonic() - signalled
    finally:
        for process in waiting.values():
            if process.poll() is None:
                process.kill()
                process.wait()
    for stop, process in waiting.items():
        output = "".join(said[stop])
        assert process.returncode == 130 and "stopped" in output, output
        assert cpu_share[stop] < 0.25, cpu_share
        assert re.search(
            rf"has waited \d+ s for a slot in pool qdrant: held by run {holder} \(step qdrant_step, STARTED, "
            rf"pid {live_process.pid} on this host, alive\)\. Ctrl-C stops this run\.",
            output,
        ), output
    assert stopped_after < 15
    # The interrupted runs are recorded as failed and hold nothing; the live holder keeps its slot.
    runs = [r for r in instance.get_runs() if r.run_id != holder]
    assert [r.status for r in runs] == [dg.DagsterRunStatus.FAILURE] * 2
    assert _holders(instance, "qdrant") == {holder}


# --- the instance configurations ----------------------------------------------------------------------------
@pytest.mark.parametrize("config", ["deploy/dagster.postgres.yaml", "dagster.yaml", "runners"])
def test_instance_configs_enable_run_monitoring_and_slot_freeing(tmp_path: Path, config: str) -> None:
    if config == "runners":
        (tmp_path / "dagster.yaml").write_text(DAGSTER_YAML.format(home=tmp_path))
        folder, name = tmp_path, "dagster.yaml"
    else:
        folder, name = (ROOT / config).parent, (ROOT / config).name
    # Validated against Dagster's instance schema (an unknown or mistyped key raises).
    settings, _ = dagster_instance_config(str(folder), name)
    monitoring = settings["run_monitoring"]
    assert monitoring["enabled"] and monitoring["free_slots_after_run_end_seconds"] > 0
    assert monitoring["max_resume_run_attempts"] == 0  # the default launcher cannot resume runs
    assert "max_runtime_seconds" not in monitoring  # it would fail long in-process CLI runs
    assert settings["concurrency"]["pools"]["default_limit"] == 1
    if config != "deploy/dagster.postgres.yaml":  # the PostgreSQL one loads in test_postgres_instance.py
        home = tmp_path / "home"
        home.mkdir()
        (home / "dagster.yaml").write_text((folder / name).read_text())
        with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as loaded:
            assert "MONITORING" in loaded.get_required_daemon_types()


def test_a_mistyped_instance_config_is_refused(tmp_path: Path) -> None:
    (tmp_path / "dagster.yaml").write_text("run_monitoring:\n  enabled: true\n  free_slots_after_end: 60\n")
    with pytest.raises(dg.DagsterInvalidConfigError):
        dagster_instance_config(str(tmp_path), "dagster.yaml")


# --- end to end: kill -9 at three steps ---------------------------------------------------------------------
class Demo:
    """``rag-pipeline demo --source slack --no-eval --json`` in its own process, optionally paused in a step."""

    def __init__(self, tmp_path: Path, env: dict[str, str], data: Path, pause_at: str = "") -> None:
        argv = ["demo", "--source", "slack", "--no-eval", "--json", "--data-dir", str(data)]
        entry = ["-c", PAUSING_CLI] if pause_at else ["-m", "rag_pipeline.cli"]
        name = f"{data.name}-{pause_at or 'complete'}"
        # Files, not pipes: nobody reads a pipe while the test waits, and a full pipe would block the run.
        self.out, self.err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.process = subprocess.Popen(
                [sys.executable, *entry, *argv], env={**env, "CRASH_PAUSE_AT": pause_at}, stdout=out, stderr=err
            )
        self.marker = Path(env["CRASH_MARKER"])
        self.pause_at = pause_at

    def stderr(self) -> str:
        return self.err.read_text()

    def kill_when_paused(self) -> Demo:
        """SIGKILL the process once it paused inside its step."""
        deadline = time.monotonic() + RUN_TIMEOUT
        while not self.marker.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()
                self.process.wait()
                pytest.fail(f"the run never reached {self.pause_at} (exit {self.process.returncode}):\n{self.stderr()}")
            time.sleep(0.05)
        assert self.marker.read_text() == f"{self.process.pid} {self.pause_at}"
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.marker.unlink()
        assert self.process.returncode == -signal.SIGKILL
        return self

    def completed(self) -> dict:
        try:
            self.process.wait(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"the run did not finish in {RUN_TIMEOUT} s (waiting on a pool slot?):\n{self.stderr()}")
        assert self.process.returncode == 0, self.stderr()
        return dict(json.loads(self.out.read_text()))

    def recovered(self) -> list[str]:
        """The runner's lines about the runs it recovered on start."""
        return [line for line in self.stderr().splitlines() if line.startswith("recovered run ")]


@pytest.mark.slow  # about a minute: runs in the slow suite (make test runs both)
def test_kill_9_at_three_steps_then_rerun_gives_the_clean_index(tmp_path: Path) -> None:
    private = {"2024-03-01": [{"type": "message", "user": "U3", "text": "private plans", "ts": ts(D1 + 700)}]}
    export = write_slack_export(tmp_path / "slack_export", basic_days(), private)
    env = {
        **os.environ,
        "RAG_SLACK_EXPORT": str(export),
        "RAG_JIRA_DUMP": str(tmp_path / "no_jira.jsonl.gz"),
        "SLACK_TEAM_ID": "T0TEST",
        "RAG_EVAL_DIR": str(tmp_path / "no_eval_sets"),
        "PYTHONPATH": str(ROOT),
        "CRASH_MARKER": str(tmp_path / "paused"),
    }
    env.pop("DAGSTER_HOME", None)
    # The clean run shares nothing with the crashed one but the export; it uses the second core meanwhile.
    clean = Demo(tmp_path, env, tmp_path / "clean")
    crashed = tmp_path / "crashed"

    # Each next run must get past the dead one (its slot, its STARTED run) to reach its own pause.
    raw = Demo(tmp_path, env, crashed, "raw").kill_when_paused()
    parents = Demo(tmp_path, env, crashed, "parents").kill_when_paused()
    points = Demo(tmp_path, env, crashed, "points").kill_when_paused()
    half_written = index_snapshot(crashed)["counts"]
    assert half_written == {"rag_children": 0, "rag_parents": 4}  # both channels' parents (one run), no children
    rerun = Demo(tmp_path, env, crashed)
    summary = rerun.completed()
    clean_summary = clean.completed()

    # One line per recovered run: the first held slack_api, the second no slot (parents have no pool), the
    # third the qdrant slot, with half of its points written.
    assert raw.recovered() == []
    [line] = parents.recovered()
    assert f"(pid {raw.process.pid}, STARTED), marked it failed; freed its slots in pool slack_api" in line
    [line] = points.recovered()
    assert line.endswith(f"(pid {parents.process.pid}, STARTED), marked it failed")
    [line] = rerun.recovered()
    assert f"(pid {points.process.pid}, STARTED), marked it failed; freed its slots in pool qdrant" in line
    assert summary["documents"] == clean_summary["documents"] == 4
    assert summary["points"] == clean_summary["points"] > 0

    assert index_snapshot(crashed) == index_snapshot(tmp_path / "clean")
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(crashed / "dagster_home"))) as instance:
        runs = instance.get_runs()
        failed = [r for r in runs if r.status == dg.DagsterRunStatus.FAILURE]
        killed = {raw.process.pid, parents.process.pid, points.process.pid}
        assert sorted(int(r.tags[PID_TAG]) for r in failed) == sorted(killed)
        assert all("killed or crashed mid-run" in _failure_message(instance, r.run_id) for r in failed)
        assert all(r.is_finished for r in runs)
        assert not instance.event_log_storage.get_concurrency_run_ids()
        with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(tmp_path / "clean" / "dagster_home"))) as reference:
            key = dg.AssetKey("slack_qdrant_points")
            assert instance.get_materialized_partitions(key) == reference.get_materialized_partitions(key)
