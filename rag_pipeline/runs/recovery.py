"""Runs whose process is gone, and the pool slots they hold.

Dagster's in-process executor claims a pool slot in the instance's database before a step and frees it
after; a runner killed in between (``kill -9``, the OOM killer, a power cut) leaves the run STARTED and the
slot claimed forever, and every later step of that pool waits for it. Dagster itself only repairs this
for runs its daemon launched (the code server fails a run whose worker died; run monitoring frees the slots
of finished runs). The runners' in-process runs are tagged with their process (``rag/pid``, ``rag/host``,
``rag/pid_started``), so a runner can tell an orphan from a run that is merely slow: on this host, a pid that
no longer exists, or that now belongs to a process started at another time, ran no step any more.

See docs/notes/crash_recovery.md for the Dagster internals this relies on.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from rag_pipeline.runs.dagster_private import JobFailureData, RunFailureReason

PID_TAG = "rag/pid"
HOST_TAG = "rag/host"
# The pid's start time in clock ticks since boot (Linux /proc): a recycled pid has another one.
PID_STARTED_TAG = "rag/pid_started"

UNFINISHED_STATUSES = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]

log = logging.getLogger("rag_pipeline.runs")


def _host() -> str:
    return socket.gethostname()


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """``(state, start ticks)`` of a process from /proc, or None where there is no such file (not Linux,
    or no such process)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: the fixed fields start after the last ')'.
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], fields[19]


def process_started(pid: int) -> str | None:
    """An opaque start stamp of ``pid`` (Linux), None where the platform does not tell."""
    stat = _proc_stat(pid)
    return stat[1] if stat else None


def runner_tags() -> dict[str, str]:
    """The tags that let a later runner decide whether the process running a run still exists."""
    tags = {PID_TAG: str(os.getpid()), HOST_TAG: _host()}
    started = process_started(os.getpid())
    if started is not None:
        tags[PID_STARTED_TAG] = started
    return tags


def process_alive(pid: int, started: str | None = None) -> bool:
    """Whether ``pid`` runs on this host and, when ``started`` is given, is still the same process.

    A zombie (killed, not yet reaped by its parent) counts as gone: it runs no code any more.
    """
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    stat = _proc_stat(pid)
    if stat is None:
        return True  # no /proc: os.kill is all there is to know
    state, ticks = stat
    return state not in ("Z", "X") and (started is None or ticks == started)


@dataclass(frozen=True)
class RunnerProcess:
    """The process a run's tags name; ``local`` when it ran on this host (only then can it be checked)."""

    pid: int
    host: str
    started: str | None

    @property
    def local(self) -> bool:
        return self.host == _host()

    def alive(self) -> bool:
        return self.local and process_alive(self.pid, self.started)

    def describe(self) -> str:
        where = "this host" if self.local else f"host {self.host}"
        state = ("alive" if self.alive() else "gone") if self.local else "not checked"
        return f"pid {self.pid} on {where}, {state}"


def runner_process(run: dg.DagsterRun) -> RunnerProcess | None:
    """The runner process of a run, None for runs not launched by a runner (the daemon, the UI)."""
    pid, host = run.tags.get(PID_TAG), run.tags.get(HOST_TAG)
    if pid is None or host is None or not pid.isdigit():
        return None
    return RunnerProcess(int(pid), host, run.tags.get(PID_STARTED_TAG))


@dataclass(frozen=True)
class Recovered:
    """A run a runner repaired: ``orphan`` (its process was gone; marked failed) or ``finished`` (it had
    ended but still held pool slots or pending claims)."""

    run_id: str
    kind: str
    pools: tuple[str, ...]
    detail: str

    def line(self) -> str:
        pools = f"; freed its slots in pool {', '.join(self.pools)}" if self.pools else ""
        if self.kind == "orphan":
            return f"recovered run {self.run_id}: its process is gone ({self.detail}), marked it failed{pools}"
        return f"recovered run {self.run_id}: it had ended ({self.detail}) but still held pool slots{pools}"


def slot_holders(instance: dg.DagsterInstance) -> dict[str, set[str]]:
    """Run id -> the pools where it holds a slot or has a pending claim."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return {}
    holders: dict[str, set[str]] = {}
    keys = sorted(storage.get_concurrency_keys())
    for pool, info in storage.get_concurrency_infos(keys).items():
        for slot in info.claimed_slots:
            holders.setdefault(slot.run_id, set()).add(pool)
        for step in info.pending_steps:
            holders.setdefault(step.run_id, set()).add(pool)
    return holders


def _orphan_message(process: RunnerProcess) -> str:
    return (
        f"The rag-pipeline process that ran this run (pid {process.pid} on {process.host}) is gone: it was "
        f"killed or crashed mid-run. Marked failed by pid {os.getpid()}, which also freed the run's pool slots. "
        "Re-run the command: finished partitions are kept, this run's partitions are redone."
    )


def recover_runs(
    instance: dg.DagsterInstance,
    report: Callable[[str], None] | None = None,
    finished_grace_seconds: float | None = None,
) -> list[Recovered]:
    """Fail this host's runs whose runner process is gone, and free the pool slots of every ended run.

    Runs without the runner tags (launched by the daemon or the UI) are never failed here: Dagster's code
    server and run monitoring own them. Their slots are freed once they ended, after
    ``finished_grace_seconds`` (default: the instance's ``run_monitoring.free_slots_after_run_end_seconds``,
    else 0) because a step process of a daemon run may outlive its run for a moment; a runner's own
    in-process run runs no step after it ended, so its slots are freed at once. ``report`` gets one line per
    recovered run (default: a warning on the ``rag_pipeline.runs`` logger).
    """
    say = report or log.warning
    if finished_grace_seconds is None:
        configured = instance.run_monitoring_settings.get("free_slots_after_run_end_seconds")
        finished_grace_seconds = float(configured or 0)
    holders = slot_holders(instance)
    recovered = [
        *_fail_orphans(instance, holders),
        *_free_ended(instance, holders, finished_grace_seconds),
    ]
    for item in recovered:
        say(item.line())
    return recovered


def _fail_orphans(instance: dg.DagsterInstance, holders: dict[str, set[str]]) -> Iterable[Recovered]:
    records = instance.get_run_records(dg.RunsFilter(statuses=UNFINISHED_STATUSES, tags={HOST_TAG: _host()}))
    for record in records:
        run = record.dagster_run
        process = runner_process(run)
        if process is None or process.pid == os.getpid() or process.alive():
            continue
        # Another runner may have recovered it since the query.
        current = instance.get_run_by_id(run.run_id)
        if current is None or current.is_finished:
            continue
        message = _orphan_message(process)
        if current.status == dg.DagsterRunStatus.CANCELING:
            instance.report_run_canceled(current, message)
        else:
            instance.report_run_failed(
                current, message, JobFailureData(error=None, failure_reason=RunFailureReason.UNEXPECTED_TERMINATION)
            )
        pools = holders.pop(run.run_id, set())
        if instance.event_log_storage.supports_global_concurrency_limits:
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        yield Recovered(run.run_id, "orphan", tuple(sorted(pools)), f"pid {process.pid}, {current.status.value}")


def _free_ended(instance: dg.DagsterInstance, holders: dict[str, set[str]], grace: float) -> Iterable[Recovered]:
    if not holders:
        return
    records = {r.dagster_run.run_id: r for r in instance.get_run_records(dg.RunsFilter(run_ids=list(holders)))}
    now = time.time()
    for run_id, pools in sorted(holders.items()):
        record = records.get(run_id)
        if record is None:
            detail = "the run was deleted"
        elif record.dagster_run.is_finished:
            ended = record.end_time or record.update_timestamp.timestamp()
            own = runner_process(record.dagster_run) is not None
            if not own and now - ended < grace:
                continue
            detail = record.dagster_run.status.value
        else:
            continue
        instance.event_log_storage.free_concurrency_slots_for_run(run_id)
        yield Recovered(run_id, "finished", tuple(sorted(pools)), detail)


# A run without the runner tags is never failed by a runner: only a person can tell whether its process is gone.
_UNTAGGED = (
    "no rag/pid tag: launched by the daemon, the UI or an older rag-pipeline; if its process is gone, force-"
    "terminate it in the Dagster UI (Terminate, 'Force termination immediately') and its slots are freed here"
)


def describe_pool(instance: dg.DagsterInstance, pool: str, waiting_run_id: str) -> str:
    """Who holds ``pool`` ahead of ``waiting_run_id``: per slot, the run, its step and status, and its process."""
    info = instance.event_log_storage.get_concurrency_info(pool)
    # A slot is taken by a claim, and reserved by a pending step already assigned to it.
    taken = {(slot.run_id, slot.step_key) for slot in info.claimed_slots}
    taken |= {(step.run_id, step.step_key) for step in info.pending_steps if step.assigned_timestamp is not None}
    taken = {(run_id, step) for run_id, step in taken if run_id != waiting_run_id}
    if not taken:
        return f"limit {info.limit}, no slot assigned to this run yet"
    parts = []
    for run_id, step_key in sorted(taken):
        run = instance.get_run_by_id(run_id)
        if run is None:
            parts.append(f"deleted run {run_id} (step {step_key})")
            continue
        process = runner_process(run)
        owner = process.describe() if process else _UNTAGGED
        parts.append(f"run {run_id} (step {step_key}, {run.status.value}, {owner})")
    return f"held by {'; '.join(parts)}"
