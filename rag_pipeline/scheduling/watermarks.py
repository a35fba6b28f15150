"""What the sync runs of one container say about it: the watermark (the last instant known to be fully
synced), the first synced day, whether a run is in flight and the last success and failure.

A sync run records the instant it makes good (``synced_through``: the moment it was planned, or the end of
the last day of a capped range) when it is created; only a *successful* run moves the watermark, so a run
that failed or stopped part-way leaves its range to be read again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import Enum


class RunState(Enum):
    """The part of a run's status the planner cares about."""

    SUCCESS = "success"
    FAILURE = "failure"
    IN_FLIGHT = "in_flight"


@dataclass(frozen=True)
class SyncRun:
    """One sync run of one container (a range of days), as the instance records it."""

    run_id: str
    container: str
    state: RunState
    first_day: str
    last_day: str
    planned_at: datetime
    synced_through: datetime | None  # None: a range that does not make anything good (a past range)
    finished_at: datetime | None = None
    error: str | None = None
    api_calls: int | None = None
    estimated_requests: int | None = None

    @property
    def days(self) -> int:
        return (datetime.fromisoformat(self.last_day) - datetime.fromisoformat(self.first_day)).days + 1


@dataclass(frozen=True)
class ContainerState:
    """A container's sync state, derived from its runs."""

    container: str
    watermark: datetime | None
    first_synced_day: str | None
    in_flight: SyncRun | None
    last_success: SyncRun | None
    last_failure: SyncRun | None  # only when it is newer than the last success

    @property
    def failing(self) -> bool:
        return self.last_failure is not None

    def requests_per_day(self) -> float | None:
        """API requests per day of range in the last successful run (None when unknown)."""
        run = self.last_success
        if run is None or run.api_calls is None:
            return None
        return run.api_calls / max(1, run.days)


def container_state(container: str, runs: Iterable[SyncRun]) -> ContainerState:
    """Fold a container's runs (any order) into its state."""
    mine = sorted((r for r in runs if r.container == container), key=lambda r: r.planned_at)
    succeeded = [r for r in mine if r.state is RunState.SUCCESS]
    marks = [r.synced_through for r in succeeded if r.synced_through is not None]
    last_success = succeeded[-1] if succeeded else None
    failures = [r for r in mine if r.state is RunState.FAILURE]
    last_failure = failures[-1] if failures else None
    # A run retried by Dagster keeps its tags: a success planned at the same instant as a failure is its retry.
    if last_failure is not None and last_success is not None and last_failure.planned_at <= last_success.planned_at:
        last_failure = None
    in_flight = [r for r in mine if r.state is RunState.IN_FLIGHT]
    return ContainerState(
        container=container,
        watermark=max(marks) if marks else None,
        first_synced_day=min((r.first_day for r in succeeded if r.synced_through is not None), default=None),
        in_flight=in_flight[-1] if in_flight else None,
        last_success=last_success,
        last_failure=last_failure,
    )
