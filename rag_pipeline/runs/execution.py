"""In-process runs that never strand a pool slot, say what they wait for, and stop on Ctrl-C.

Every runner executes its jobs through :func:`execute_run` on an instance opened by :func:`runner_instance`:

- ``runner_instance`` repairs the instance first: runs of this host whose runner process is gone are
  marked failed and their pool slots freed (``recovery.recover_runs``).
- ``execute_run`` tags the run with its process (``recovery.runner_tags``), and afterwards frees whatever
  the run still holds: Dagster frees a step's slot when the step ends, not when the run ends abruptly.
- While a step waits for a pool slot, Dagster 1.13's in-process loop spins without sleeping (its
  ``interval_to_next_pending_claim_check`` returns ``min(0, ...)``), logs nothing, and only looks at a
  captured Ctrl-C/SIGTERM when a step's own code runs, which a blocked step never does. The executor
  builds its ``InstanceConcurrencyContext`` by name, so for the duration of a runner's run that name points
  at :class:`WatchedConcurrencyContext`, which sleeps between checks, logs every few seconds who holds the
  pool, frees slots of dead runners it finds there, and turns a captured interrupt into Dagster's own
  ``DagsterExecutionInterruptedError`` (the run is then recorded as failed, its pending claims dropped).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import dagster as dg

from rag_pipeline.runs.dagster_private import (
    InstanceConcurrencyContext,
    JobFailureData,
    RunFailureReason,
    in_process_executor,
    make_new_run_id,
    pop_captured_interrupt,
)
from rag_pipeline.runs.instance import open_instance
from rag_pipeline.runs.recovery import describe_pool, log, recover_runs, runner_tags

# How often a blocked step says what it waits for.
REPORT_EVERY_SECONDS = 5.0
# The longest sleep between two looks at a blocked claim, i.e. how late Ctrl-C is noticed while waiting.
# Dagster still spaces its database checks of the claim by its own backoff (1 s growing to 15 s).
WAIT_POLL_SECONDS = 0.5


class WatchedConcurrencyContext(InstanceConcurrencyContext):
    """Dagster's per-run pool claims, plus what its in-process loop lacks while a step waits for a slot."""

    report_every_seconds = REPORT_EVERY_SECONDS

    def __init__(self, instance: dg.DagsterInstance, dagster_run: dg.DagsterRun) -> None:
        super().__init__(instance, dagster_run)
        self._watched_instance = instance
        self._watched_run_id = dagster_run.run_id
        self._waiting_since: dict[str, float] = {}
        self._reported_at: dict[str, float] = {}

    def claim(self, concurrency_key: str, step_key: str, step_priority: int = 0) -> bool:
        if super().claim(concurrency_key, step_key, step_priority):
            since = self._waiting_since.pop(step_key, None)
            if since is not None and step_key in self._reported_at:
                waited = time.monotonic() - since
                log.warning(f"step {step_key} got a slot in pool {concurrency_key} after {waited:.0f} s")
            self._reported_at.pop(step_key, None)
            return True
        if pop_captured_interrupt():
            raise dg.DagsterExecutionInterruptedError(
                f"interrupted while step {step_key} waited for a slot in pool {concurrency_key}"
            )
        now = time.monotonic()
        if step_key not in self._waiting_since:
            self._waiting_since[step_key] = now
            # A runner that died after this one started holds no slot for long: free it right away.
            recover_runs(self._watched_instance)
            return False
        since = self._waiting_since[step_key]
        if now - self._reported_at.get(step_key, since) >= self.report_every_seconds:
            self._reported_at[step_key] = now
            recover_runs(self._watched_instance)
            assign_lost_slot(self._watched_instance, concurrency_key, step_key)
            holders = describe_pool(self._watched_instance, concurrency_key, self._watched_run_id)
            log.warning(
                f"step {step_key} (run {self._watched_run_id}) has waited {now - since:.0f} s for a slot in pool "
                f"{concurrency_key}: {holders}. Ctrl-C stops this run."
            )
        return False

    def interval_to_next_pending_claim_check(self) -> float:
        # Dagster's own version returns min(0, ...) <= 0, so its loop never sleeps (~75 % CPU while waiting).
        return WAIT_POLL_SECONDS if self.has_pending_claims() else 0.0


def assign_lost_slot(instance: dg.DagsterInstance, pool: str, step_key: str) -> bool:
    """Hand a free slot of ``pool`` to the first waiting step when Dagster left it unassigned.

    Dagster assigns waiting steps when a slot is freed, and a new claim only when a slot is free at that moment.
    Between the two checks of a claim (is a slot free? then queue the step) the holder can free its slot and
    find nobody queued yet: the slot stays free and the queued step waits forever (seen in two ``index``
    processes started together, with limit 1). A free slot with an unassigned waiting step is that state."""
    storage = instance.event_log_storage
    has_free = getattr(storage, "has_unassigned_slots", None)
    assign = getattr(storage, "assign_pending_steps", None)
    if has_free is None or assign is None or not has_free(pool):
        return False
    assign([pool])
    log.warning(f"step {step_key}: pool {pool} had a free slot no waiting step was given; assigned it")
    return True


@contextmanager
def watched_pools() -> Iterator[None]:
    """Make the in-process executor use :class:`WatchedConcurrencyContext` (restored afterwards)."""
    original = in_process_executor.InstanceConcurrencyContext
    in_process_executor.InstanceConcurrencyContext = WatchedConcurrencyContext  # type: ignore[misc]
    try:
        yield
    finally:
        in_process_executor.InstanceConcurrencyContext = original  # type: ignore[misc]


@contextmanager
def runner_instance() -> Iterator[dg.DagsterInstance]:
    """``DagsterInstance.get()`` (opened one process at a time: :func:`open_instance`), after failing this host's
    orphaned runs and freeing stranded slots."""
    with open_instance() as instance:
        recover_runs(instance)
        yield instance


def execute_run(
    job: dg.JobDefinition,
    instance: dg.DagsterInstance,
    tags: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> dg.ExecuteInProcessResult:
    """``job.execute_in_process`` on ``instance`` (other arguments passed on), tagged with this process.

    Raises ``KeyboardInterrupt`` when the run was interrupted (Ctrl-C, SIGTERM), also where
    ``raise_on_error=False`` turned the interrupt into a failed result, so a runner's loop stops instead
    of starting its next run.
    """
    run_id = make_new_run_id()
    try:
        with watched_pools():
            result = job.execute_in_process(
                instance=instance, run_id=run_id, tags={**(tags or {}), **runner_tags()}, **kwargs
            )
    except dg.DagsterExecutionInterruptedError as exc:
        raise KeyboardInterrupt(str(exc) or "interrupted") from exc
    finally:
        _release(instance, run_id)
    if _was_interrupted(result):
        raise KeyboardInterrupt(f"run {run_id} was interrupted")
    return result


def _release(instance: dg.DagsterInstance, run_id: str) -> None:
    """Leave nothing of the run behind: an unfinished status (an exception left the run mid-way) or a slot."""
    run = instance.get_run_by_id(run_id)
    if run is None:
        return
    if not run.is_finished:
        instance.report_run_failed(
            run,
            "The runner stopped while this run was in progress (see the command's error).",
            JobFailureData(error=None, failure_reason=RunFailureReason.UNEXPECTED_TERMINATION),
        )
    if instance.event_log_storage.supports_global_concurrency_limits:
        instance.event_log_storage.free_concurrency_slots_for_run(run_id)


def _was_interrupted(result: dg.ExecuteInProcessResult) -> bool:
    # Dagster records an interrupted run's failure with this reason (and only that failure).
    for event in result.all_events:
        if event.event_type == dg.DagsterEventType.RUN_FAILURE:
            data = event.event_specific_data
            return isinstance(data, JobFailureData) and data.failure_reason == RunFailureReason.UNEXPECTED_TERMINATION
    return False
