"""What the ingestion API does (http/routes/ingest.py): report the scheduler's state and start syncs, by running
the project's own commands as child processes, so that the service never loads Dagster.

A sync is ``rag-pipeline sync --source NAME --json``: the same planner the daemon's sync sensor uses (each container
from its watermark, capped backlogs), the same Dagster run with the same tags, recorded in the same instance, with
the index handed over by the service like any writer's. One job runs at a time and reads its sources one after the
other, since two writers of one index would only queue behind each other. The scheduler's state is
``rag-pipeline status --json``, kept for a few seconds. Each job's output goes to a log file under
``<data dir>/ingest_api/``; the job record keeps only exit codes and the sync's JSON summary.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rag_pipeline.sources.pushed_documents import PushLimits

log = logging.getLogger(__name__)
STATUS_CACHE_SECONDS = 10.0
SYNC_TIMEOUT_SECONDS = 6 * 3600  # a first sync of a large workspace; a job past it is stopped and failed
KEPT_JOBS = 50


class IngestBusy(Exception):
    """A job is already running; ``job`` is its record."""

    def __init__(self, job: IngestJob) -> None:
        super().__init__(f"a sync is already running (job {job.id}, sources {', '.join(job.sources)})")
        self.job = job


@dataclass
class IngestJob:
    """One request's syncs: its sources in order, and how each ended (exit code and the sync's summary)."""

    id: str
    sources: list[str]
    state: str = "queued"  # queued, running, succeeded, failed
    created_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    finished_at: str | None = None
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    log: str = ""
    # A targeted job (serving/live_events.py): only these containers per source, these Dagster run tags, or the
    # directory alone.
    containers: dict[str, list[str]] = field(default_factory=dict)
    run_tags: dict[str, str] = field(default_factory=dict)
    directory_only: bool = False
    # False: the sync leaves the directory alone (``--no-directory``: its events were content only).
    refresh_directory: bool = True
    # False: the sync skips the reconciliation (``--no-reconcile``: its events only added content).
    reconcile: bool = True
    # A push job (``POST /v1/ingest/documents``): ``rag-pipeline push`` of this checked JSON-lines file.
    push_file: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The job as the API answers it, with the chunks its syncs wrote in all (each source's in ``results``)."""
        return {**asdict(self), **self.chunk_counts()}

    def chunk_counts(self) -> dict[str, int]:
        """The parent and child chunks every sync of the job wrote (0 before any finished)."""
        synced = [r for r in self.results.values() if isinstance(r, dict)]
        return {kind: sum(int(r.get(kind) or 0) for r in synced) for kind in ("parent_chunks", "child_chunks")}


def chunks_of(summary: Any) -> dict[str, Any]:
    """A sync summary's chunk counts (``rag-pipeline sync --json``: totals and each chain run's), None for a
    command that reports none (a directory refresh, a sync that failed before it printed)."""
    found = summary if isinstance(summary, dict) else {}
    return {
        "parent_chunks": found.get("parent_chunks"),
        "child_chunks": found.get("child_chunks"),
        "chunk_runs": found.get("chunk_runs") or [],
    }


class IngestLauncher:
    """Runs sync jobs one at a time in a background thread; reads the scheduler's state on request."""

    def __init__(
        self,
        data_dir: Path,
        live_sources: Sequence[str],
        command: Sequence[str] | None = None,
        push_limits: PushLimits | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.live_sources = tuple(live_sources)
        # POST /v1/ingest/documents: the registered pushed sources and the request limits (serving/pushed_documents).
        self.push_limits = push_limits or PushLimits()
        # The CLI of this very interpreter, so the child runs the same code and environment as the service.
        self.command = list(command or [sys.executable, "-m", "rag_pipeline.cli"])
        self.logs = data_dir / "ingest_api"
        self._jobs: dict[str, IngestJob] = {}
        self._lock = threading.Lock()
        self._status: tuple[float, dict[str, Any]] | None = None

    # --- jobs ------------------------------------------------------------------------------------------------
    def start(
        self,
        sources: Sequence[str],
        containers: Mapping[str, Sequence[str]] | None = None,
        run_tags: Mapping[str, str] | None = None,
        directory_only: bool = False,
        refresh_directory: bool = True,
        reconcile: bool = True,
    ) -> IngestJob:
        """Queue a job for ``sources`` (each must be a live source) and start it; :class:`IngestBusy` while another
        runs. ``containers`` narrows a source's sync to those it can read (the others are skipped), ``run_tags``
        go on its Dagster runs, ``directory_only`` refreshes the directory instead of syncing, ``refresh_directory``
        False leaves it out of a sync and ``reconcile`` False the reconciliation."""
        unknown = [s for s in sources if s not in self.live_sources]
        if unknown:
            live = ", ".join(self.live_sources) or "none is configured"
            raise ValueError(f"not a live source: {', '.join(unknown)} (live sources: {live})")
        job = IngestJob(id=uuid.uuid4().hex[:12], sources=list(sources), directory_only=directory_only,
                        refresh_directory=refresh_directory, reconcile=reconcile,
                        containers={s: list(c) for s, c in (containers or {}).items() if c},
                        run_tags=dict(run_tags or {}))  # fmt: skip
        return self._queue(job)

    def start_push(self, source: str, write_file: Callable[[str], Path]) -> IngestJob:
        """Queue ``rag-pipeline push`` of a pushed source's checked batch: ``write_file(job_id)`` writes the batch
        (only once the job has the slot, so a refused job leaves no file) and returns its path. :class:`IngestBusy`
        while another job runs: one writer of the index at a time, pushes included."""
        job = IngestJob(id=uuid.uuid4().hex[:12], sources=[source])
        return self._queue(job, lambda: setattr(job, "push_file", str(write_file(job.id))))

    def _queue(self, job: IngestJob, prepare: Callable[[], None] | None = None) -> IngestJob:
        with self._lock:
            running = next((j for j in self._jobs.values() if j.state in ("queued", "running")), None)
            if running is not None:
                raise IngestBusy(running)
            if prepare is not None:
                prepare()
            job.log = str(self.logs / f"{job.id}.log")
            self._jobs[job.id] = job
            for old in list(self._jobs)[:-KEPT_JOBS]:
                del self._jobs[old]
        threading.Thread(target=self._run, args=(job,), name=f"ingest-{job.id}", daemon=True).start()
        return job

    def job(self, job_id: str) -> IngestJob | None:
        with self._lock:
            return self._jobs.get(job_id)

    def jobs(self) -> list[IngestJob]:
        with self._lock:
            return list(self._jobs.values())

    def _run(self, job: IngestJob) -> None:
        job.state = "running"
        ok = False
        try:
            ok = self._run_sources(job)
        except Exception as exc:  # a log that cannot be written, a child that cannot start: the job failed
            log.error("ingestion job %s failed: %s", job.id, type(exc).__name__)
            job.results["error"] = {"exit_code": None, "error": type(exc).__name__}
        finally:
            self._status = None  # the scheduler's state changed
            job.finished_at = datetime.now(UTC).isoformat(timespec="seconds")
            job.state = "succeeded" if ok else "failed"

    def _run_sources(self, job: IngestJob) -> bool:
        self.logs.mkdir(parents=True, exist_ok=True)
        ok = True
        with open(job.log, "a", encoding="utf-8") as log:
            for source in job.sources:
                arguments = self._arguments(job, source)
                log.write(f"--- rag-pipeline {' '.join(arguments)} ({datetime.now(UTC).isoformat()})\n")
                log.flush()
                started = time.monotonic()
                try:
                    done = subprocess.run(
                        [*self.command, *arguments, "--json", "--data-dir", str(self.data_dir)],
                        stdout=subprocess.PIPE,
                        stderr=log,
                        text=True,
                        timeout=SYNC_TIMEOUT_SECONDS,
                    )
                    code, output = done.returncode, done.stdout
                except subprocess.TimeoutExpired:
                    code, output = -1, ""
                log.write(output)
                summary: Any = None
                try:
                    summary = json.loads(output) if output.strip() else None
                except ValueError:
                    summary = None
                job.results[source] = {
                    "exit_code": code,
                    "seconds": round(time.monotonic() - started, 1),
                    "summary": summary,
                    **chunks_of(summary),
                }
                ok = ok and code == 0
        return ok

    @staticmethod
    def _arguments(job: IngestJob, source: str) -> list[str]:
        """The command line of ``job``'s part for ``source`` (without ``--json`` and the data folder)."""
        if job.push_file is not None:
            return ["push", job.push_file, "--source", source, "--remove-when-written"]
        if job.directory_only:
            return ["directory", "--source", source]
        arguments = ["sync", "--source", source]
        if job.containers.get(source):
            from rag_pipeline.sources.registry import registered_sources

            live = registered_sources()[source].live_api
            flag = live.containers_flag if live is not None else "--container"
            arguments += [*(a for c in job.containers[source] for a in (flag, c)), "--readable-only"]
        if not job.refresh_directory:
            arguments.append("--no-directory")
        if not job.reconcile:
            arguments.append("--no-reconcile")
        return arguments + [a for k, v in job.run_tags.items() for a in ("--run-tag", f"{k}={v}")]

    # --- the scheduler's state -------------------------------------------------------------------------------
    def scheduler_status(self) -> dict[str, Any]:
        """``rag-pipeline status --json`` (per source: sync switch, cron, next tick, each container's watermark and
        lag), with the pause in force; read again at most every few seconds."""
        cached = self._status
        if cached is not None and time.monotonic() - cached[0] < STATUS_CACHE_SECONDS:
            return cached[1]
        if not self.live_sources:
            status: dict[str, Any] = {"sources": [], "note": "no live source is configured"}
        else:
            done = subprocess.run(
                [*self.command, "status", "--json", "--data-dir", str(self.data_dir)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            if done.returncode != 0:
                # The command's one error line (never a traceback): e.g. the instance cannot be opened.
                reason = (done.stderr.strip().splitlines() or ["status failed"])[-1]
                raise RuntimeError(reason.removeprefix("error: "))
            status = json.loads(done.stdout)
        self._status = (time.monotonic(), status)
        return status
