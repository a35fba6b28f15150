"""Changes pushed by the sources (Slack's Events API, Jira and Confluence webhooks) turned into targeted syncs.

An event is only a hint: its content is never indexed. It names a container (a channel, a project, a space) whose
recent window is synced again through the ingestion API's launcher
(:class:`~rag_pipeline.serving.ingest_runs.IngestLauncher`): the same ``rag-pipeline sync`` child, the same
planner from each container's watermark, the same Dagster runs and reconciliation (which removes what vanished)
as the scheduled sync, so nothing is indexed twice and watermarks move as they always do. Where only people or
memberships changed (a Slack ``user_change``), the job is ``rag-pipeline directory`` for that source.

:class:`TargetedSyncs` coalesces and bounds them:

* **coalesced** — the events of one container wait a short debounce window (``debounce_seconds`` after the
  latest, at most ``max_wait_seconds`` after the first), then every container due of one source goes in one job:
  a burst of 100 messages in a channel is one run;
* **bounded** — one job at a time (the launcher's rule, shared with ``POST /v1/ingest``), at most
  ``max_containers_per_run`` containers per job, and at most ``max_pending`` containers waiting; an event past
  that is dropped and counted, and the scheduled sync (the safety net) reads it at its next tick;
* **visible** — the job passes ``rag/trigger=events`` and the events it covers as Dagster run tags;
* **timed** — once a job succeeds, each event it covers reports its freshness (seconds from its arrival here to
  the job's end, when the run had written the index) through ``on_fresh`` (the service's
  ``rag_event_freshness_seconds`` histogram). The first ``TIMED_EVENTS`` events of a container are timed; a
  flood's rest is counted in the run tags, not in the histogram.

Pending events live in memory: a restart loses them, and the scheduled sync catches up.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rag_pipeline.serving.ingest_runs import IngestBusy, IngestLauncher
from rag_pipeline.sources.pushed import SyncTarget

log = logging.getLogger(__name__)

# Run tags a targeted job's Dagster runs carry (``rag-pipeline sync --run-tag``).
TRIGGER_TAG = "rag/trigger"
EVENTS_TAG = "rag/events"
EVENT_IDS_TAG = "rag/event_ids"
EVENT_CONTAINERS_TAG = "rag/event_containers"
# Event ids listed per container and per run tag; the rest are counted.
LISTED_IDS = 20
# Arrival times kept per container for the freshness histogram (bounded memory under a flood).
TIMED_EVENTS = 1000
# How often a job's watcher looks whether it ended.
_WATCH_SECONDS = 0.2


def _first(item: tuple[float, tuple[str, str | None]]) -> float:
    return item[0]


@dataclass
class _Pending:
    """The events of one (source, container) waiting for their job."""

    first: float
    last: float
    kinds: Counter[str] = field(default_factory=Counter)
    ids: list[str] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)  # clock readings of the first TIMED_EVENTS events
    directory: bool = False  # an event that may touch the directory came in (SyncTarget.touches_directory)
    reconcile: bool = False  # an event that may remove or change content came in (not SyncTarget.adds_only)


@dataclass
class TargetedJob:
    """One job the events started: its launcher job id, source, containers and the events it covers."""

    job_id: str
    source: str
    containers: list[str]
    events: int
    kinds: dict[str, int]


class TargetedSyncs:
    """Coalesces the pushed changes per container and runs them through ``launcher``, one job at a time."""

    def __init__(
        self,
        launcher: IngestLauncher,
        debounce_seconds: float = 2.0,
        max_wait_seconds: float = 10.0,
        max_containers_per_run: int = 50,
        max_pending: int = 500,
        clock: Callable[[], float] = time.monotonic,
        on_fresh: Callable[[str, float], None] | None = None,
    ) -> None:
        self.launcher = launcher
        self.debounce_seconds = debounce_seconds
        self.max_wait_seconds = max(max_wait_seconds, debounce_seconds)
        self.max_containers_per_run = max_containers_per_run
        self.max_pending = max_pending
        self.clock = clock
        # Called (source, seconds) per event once its job succeeded: the service's freshness histogram.
        self.on_fresh = on_fresh
        self.dropped = 0  # events over the cap, left to the scheduled sync
        self.queued = 0  # events accepted
        self.started: list[TargetedJob] = []
        self._pending: dict[tuple[str, str | None], _Pending] = {}
        self._wake = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None

    # --- the receivers' side ---------------------------------------------------------------------------------
    def add(self, source: str, target: SyncTarget, event_id: str) -> str:
        """Queue ``target`` of ``source``: "queued" (a new container), "coalesced" (one already waiting), "dropped"
        (over the cap: the scheduled sync will read it) or "ignored" (the source has no live API here)."""
        if source not in self.launcher.live_sources:
            return "ignored"
        key = (source, target.container)
        now = self.clock()
        with self._wake:
            pending = self._pending.get(key)
            if pending is None:
                if len(self._pending) >= self.max_pending:
                    self.dropped += 1
                    return "dropped"
                pending = self._pending[key] = _Pending(first=now, last=now)
                outcome = "queued"
            else:
                pending.last = now
                outcome = "coalesced"
            pending.kinds[target.kind] += 1
            pending.directory = pending.directory or target.touches_directory
            pending.reconcile = pending.reconcile or not target.adds_only
            if len(pending.ids) < LISTED_IDS:
                pending.ids.append(event_id)
            if len(pending.arrivals) < TIMED_EVENTS:
                pending.arrivals.append(now)
            self.queued += 1
            self._wake.notify()
        self._ensure_thread()
        return outcome

    def pending(self) -> dict[str, int]:
        """Events waiting per ``source:container`` (``source:directory`` for directory refreshes)."""
        with self._wake:
            return {f"{s}:{c or 'directory'}": sum(p.kinds.values()) for (s, c), p in self._pending.items()}

    def stop(self) -> None:
        with self._wake:
            self._stopped = True
            self._wake.notify_all()

    # --- the dispatcher --------------------------------------------------------------------------------------
    def _ensure_thread(self) -> None:
        with self._wake:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="targeted-syncs", daemon=True)
                self._thread.start()

    def _due(self, pending: _Pending, now: float) -> float:
        """When ``pending`` goes: ``debounce_seconds`` after its latest event, at most ``max_wait_seconds`` after
        its first (a steady trickle still syncs)."""
        return min(pending.last + self.debounce_seconds, pending.first + self.max_wait_seconds) - now

    def _loop(self) -> None:
        while True:
            with self._wake:
                if self._stopped:
                    return
                now = self.clock()
                waits = [self._due(p, now) for p in self._pending.values()]
                if not waits:
                    self._wake.wait(timeout=60)
                    continue
                if min(waits) > 0:
                    self._wake.wait(timeout=min(waits))
                    continue
            if self._busy():
                time.sleep(0.5)  # a job (ours or POST /v1/ingest's) runs: the events wait and fold into the next
                continue
            self._start_next()

    def _busy(self) -> bool:
        return any(job.state in ("queued", "running") for job in self.launcher.jobs())

    def _take(self) -> tuple[str, dict[str | None, _Pending]] | None:
        """Once a container is due: the waiting containers of its source, oldest first (at most a run's worth).
        Those not due yet ride along: one run covers many containers as cheaply as one."""
        with self._wake:
            now = self.clock()
            due = sorted(((p.first, k) for k, p in self._pending.items() if self._due(p, now) <= 0), key=_first)
            if not due:
                return None
            source = due[0][1][0]
            waiting = sorted(((p.first, k) for k, p in self._pending.items() if k[0] == source), key=_first)
            keys = [k for _, k in waiting][: self.max_containers_per_run]
            return source, {k[1]: self._pending.pop(k) for k in keys}

    def _start_next(self) -> None:
        taken = self._take()
        if taken is None:
            return
        source, parts = taken
        containers = sorted(c for c in parts if c is not None)
        kinds: Counter[str] = Counter()
        ids: list[str] = []
        arrivals: list[float] = []
        for part in parts.values():
            kinds.update(part.kinds)
            ids.extend(part.ids)
            arrivals.extend(part.arrivals)
        events = sum(kinds.values())
        tags = {
            TRIGGER_TAG: "events",
            EVENTS_TAG: ", ".join(f"{kind} x{n}" for kind, n in kinds.most_common())[:1000],
            EVENT_IDS_TAG: ",".join(ids[:LISTED_IDS]) + (f" (+{events - LISTED_IDS})" if events > LISTED_IDS else ""),
            EVENT_CONTAINERS_TAG: ",".join(containers)[:1000],
        }
        try:
            # A sync of the containers refreshes the directory too when one of its events may touch it (a member
            # joined; not a message posted: the scheduled sync refreshes it anyway), and reconciles unless every
            # event only added content (new messages); a directory change alone runs the directory command.
            job = self.launcher.start(
                [source], containers={source: containers}, run_tags=tags, directory_only=not containers,
                refresh_directory=any(part.directory for part in parts.values()),
                reconcile=any(part.reconcile for part in parts.values()),
            )  # fmt: skip
        except IngestBusy:
            self._put_back(source, parts)  # POST /v1/ingest took the slot in between: the next round
            return
        except Exception as exc:  # a launcher that cannot start: left to the scheduled sync, never raised to Slack
            log.error("a targeted %s sync could not start: %s", source, type(exc).__name__)
            self.dropped += events
            return
        self.started.append(TargetedJob(job.id, source, containers, events, dict(kinds)))
        del self.started[:-50]
        if self.on_fresh is not None and arrivals:
            threading.Thread(target=self._time_job, args=(job.id, source, arrivals), name=f"fresh-{job.id}",
                             daemon=True).start()  # fmt: skip
        log.info(
            "targeted %s sync %s: %d event(s) over %s", source, job.id, events, ", ".join(containers) or "the directory"
        )

    def _put_back(self, source: str, parts: dict[str | None, _Pending]) -> None:
        with self._wake:
            for container, part in parts.items():
                kept = self._pending.setdefault((source, container), part)
                if kept is not part:
                    kept.first = min(kept.first, part.first)
                    kept.kinds.update(part.kinds)
                    kept.directory = kept.directory or part.directory
                    kept.reconcile = kept.reconcile or part.reconcile
                    kept.ids = (part.ids + kept.ids)[:LISTED_IDS]
                    kept.arrivals = (part.arrivals + kept.arrivals)[:TIMED_EVENTS]

    def _time_job(self, job_id: str, source: str, arrivals: list[float]) -> None:
        """Wait for job ``job_id`` to end; if it succeeded, each event's seconds from arrival to now go to
        ``on_fresh`` (a failed job's events are left to the scheduled sync, and not timed)."""
        while not self._stopped:
            job = self.launcher.job(job_id)
            if job is None:  # forgotten by the launcher (a very long queue of jobs): nothing to time
                return
            if job.state in ("succeeded", "failed"):
                break
            time.sleep(_WATCH_SECONDS)
        else:
            return
        if job.state != "succeeded" or self.on_fresh is None:
            return
        now = self.clock()
        for arrived in arrivals:
            self.on_fresh(source, max(0.0, now - arrived))

    def as_dict(self) -> dict[str, Any]:
        """What the status shows: events accepted, dropped, waiting, and the recent jobs."""
        return {
            "queued": self.queued,
            "dropped": self.dropped,
            "pending": self.pending(),
            "jobs": [vars(j) for j in self.started[-10:]],
        }
