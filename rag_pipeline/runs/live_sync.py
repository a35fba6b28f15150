"""``rag-pipeline sync``: materializes a live source's chain for a range of days, in-process, on the
same Dagster instance as the demo and the daemon, then reconciles deletions for the synced containers.

One run covers every selected container (Slack channel, Jira project), each from its own watermark, as the
sync sensor's runs do; a container that cannot be read fails alone (the run succeeds for the others and names
it in ``rag/failed_containers``). Without ``--start`` each container continues from its watermark (a new one
gets its initial history; a backlog longer than ``max_range_days`` takes several runs), and a range through
today that starts at or before the watermark moves it, so a hand sync and the schedule never disagree about
what is synced.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import dagster as dg

from rag_pipeline.pipeline.policy import sync_policy
from rag_pipeline.pipeline.tags import FAILED_CONTAINERS_TAG, SOURCE_TAG
from rag_pipeline.runs.code_location import build_resources, source_specs
from rag_pipeline.runs.execution import execute_run, runner_instance
from rag_pipeline.runs.instance import QUIET_RUN_CONFIG, enable_range_batching, ensure_dagster_home
from rag_pipeline.runs.metadata import failure_message, step_metadata
from rag_pipeline.runs.migration import upgrade_data_folder
from rag_pipeline.runs.sync_runs import source_states, sync_request
from rag_pipeline.scheduling.plan import RangeRequest, SyncPolicy, day_of, next_range
from rag_pipeline.scheduling.watermarks import ContainerState
from rag_pipeline.settings import Settings
from rag_pipeline.sources.problems import RecordProblem, SourceError
from rag_pipeline.sources.registry import registered_sources


@dataclass
class SyncSummary:
    """What a sync did; ``as_dict`` is the ``--json`` contract."""

    source: str
    start: str
    end: str
    containers: list[str] = field(default_factory=list)
    documents: int = 0
    documents_updated: int = 0
    documents_removed: int = 0
    api_calls: int = 0
    retries: int = 0
    seconds: float = 0.0
    failed: dict[str, str] = field(default_factory=dict)
    runs: int = 0
    # Named containers the connector cannot read, skipped by a ``readable_only`` sync.
    skipped: list[str] = field(default_factory=list)
    # What the runs' raw steps turned away: their bad_records count, and the examples their metadata lists.
    bad_records: int = 0
    problems: list[RecordProblem] = field(default_factory=list)
    # Each chain run's chunks: its run id, the parent chunks (what a result returns) and the child chunks (what is
    # embedded and searched) it wrote.
    chunk_runs: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = {
            "source": self.source,
            "start": self.start,
            "end": self.end,
            "containers": self.containers,
            "documents": self.documents,
            "documents_updated": self.documents_updated,
            "documents_removed": self.documents_removed,
            "api_calls": self.api_calls,
            "retries": self.retries,
            "seconds": round(self.seconds, 2),
            "runs": self.runs,
            "failed": self.failed,
            "parent_chunks": sum(int(r["parent_chunks"]) for r in self.chunk_runs),
            "child_chunks": sum(int(r["child_chunks"]) for r in self.chunk_runs),
            "chunk_runs": self.chunk_runs,
        }
        if self.skipped:
            out["unreadable"] = self.skipped
        source = registered_sources().get(self.source)
        for alias, name in (source.sync_metadata_aliases if source is not None else {}).items():
            out[alias] = out[name]  # a name a source's contract started with (Slack: threads_updated)
        return out


# A backlog longer than this many capped ranges is left to the next sync (or the sensor).
MAX_RUNS = 50


def explicit_pieces(start: str, end: str, max_days: int) -> list[tuple[str, str]]:
    """``start``..``end`` cut into consecutive ranges of at most ``max_days`` days (RAG_SYNC_MAX_RANGE_DAYS), one
    run each: a run holds its range's documents in memory, so a year asked for at once is read, embedded and
    written a month at a time (issue 68), as the scheduled sync does with a backlog."""
    first, last = date.fromisoformat(start), date.fromisoformat(end)
    pieces = []
    while first <= last:
        piece_end = min(last, first + timedelta(days=max_days - 1))
        pieces.append((first.isoformat(), piece_end.isoformat()))
        first = piece_end + timedelta(days=1)
    return pieces


def _range(
    state: ContainerState,
    policy: SyncPolicy,
    now: datetime,
    start: str | None,
    end: str,
    whole_start: str | None = None,
) -> RangeRequest | None:
    """The next range of a container: ``start``..``end`` when given (it moves the watermark only when it
    reaches today and the command's whole range, from ``whole_start``, starts at or before it), else from the
    container's watermark through today."""
    if start is None:
        found = next_range(state, now, now, policy)
        return found if isinstance(found, RangeRequest) else None
    first, last = date.fromisoformat(start), date.fromisoformat(end)
    since = date.fromisoformat(whole_start) if whole_start else first
    moves = last == day_of(now) and (state.watermark is None or since <= day_of(state.watermark))
    return RangeRequest(
        container=state.container,
        start=first,
        end=last,
        sync_from=state.watermark,
        synced_through=now if moves else None,  # a past range never moves the watermark
        reason="sync command" if moves else "sync command (past range)",
        estimated_requests=0,
    )


def run_sync(
    settings: Settings,
    source: str,
    start: str | None = None,
    end: str | None = None,
    containers: Sequence[str] = (),
    resource: dg.ConfigurableResource | None = None,
    reconcile: bool = True,
    on_progress: Callable[[str, int, int], None] | None = None,
    readable_only: bool = False,
    run_tags: dict[str, str] | None = None,
) -> SyncSummary:
    """Sync days ``start``..``end`` (default: today) of a live source for the named containers
    (Slack channels or Jira projects; default: all discovered); without ``start``, each container from its
    watermark (or its initial history). ``resource`` replaces the configured API resource (tests, benchmarks).
    ``readable_only`` skips named containers the connector cannot read (reported in ``skipped``) instead of failing
    the sync: an event or webhook may name one. ``run_tags`` go on the chain's runs (a targeted sync's events)."""

    specs = source_specs(settings)
    spec = specs[source]
    if resource is None and not spec.is_live:
        raise SourceError(f"the live {source} API is not configured")
    if spec.live is None or spec.select_live_containers is None:
        raise SourceError(f"source {source} has no live API to sync")
    live, select_containers = spec.live, spec.select_live_containers
    enable_range_batching()
    started = time.perf_counter()
    # Whole seconds: watermarks are recorded to the second, and one a fraction short of `now` would look behind
    # and be planned again (a sync without --start ran its 50-run cap for a single container before this).
    now = datetime.now(UTC).replace(microsecond=0)
    end = end or now.strftime("%Y-%m-%d")
    if start is not None and start < settings.partition_start:
        raise SourceError(f"--start {start} is before the first partition day {settings.partition_start}")
    policy = sync_policy(settings, source)
    ensure_dagster_home(settings)
    resources = build_resources(settings, specs)
    if resource is not None:
        resources[source] = resources[spec.source_resource_key] = resource
    refused: list[RecordProblem] = []  # listings with an invalid id: skipped containers, in the report
    if readable_only and containers:
        wanted = {c.lstrip("#") for c in containers}
        readable = select_containers(resources[source], (), refused)
        selected = [(cid, name) for cid, name in readable if cid in wanted or name in wanted]
        found = {cid for cid, _ in selected} | {name for _, name in selected}
        unreadable = sorted(wanted - found)
    else:
        selected, unreadable = select_containers(resources[source], containers, refused), []
    summary = SyncSummary(source, start or end, end, containers=[name for _, name in selected], skipped=unreadable)
    summary.problems.extend(refused)
    summary.bad_records += len(refused)
    chain_job = dg.Definitions(assets=spec.assets, resources=resources).resolve_implicit_global_asset_job_def()
    names = dict(selected)
    with runner_instance() as instance:
        upgrade_data_folder(settings.paths.parquet, instance)
        instance.add_dynamic_partitions(spec.containers_name, [cid for cid, _ in selected])
        previous: list[tuple[str, date, date]] = []
        # An explicit range runs a piece of at most max_range_days at a time (its own bounded batches).
        pieces = explicit_pieces(start, end, policy.max_range_days) if start is not None else []
        for piece in range(MAX_RUNS if start is None else len(pieces)):
            states, _runs = source_states(instance, spec)
            by_container = {s.container: s for s in states}
            first, last = pieces[piece] if start is not None else (None, end)
            requests = [
                request
                for cid, name in selected
                if name not in summary.failed
                and (request := _range(by_container[cid], policy, now, first, last, start)) is not None
            ]
            if not requests:
                break
            planned = [(r.container, r.start, r.end) for r in requests]
            if planned == previous:
                break  # the last run moved no watermark: planning again would only repeat it
            previous = planned
            summary.start = min(summary.start, *(r.start.isoformat() for r in requests))
            tags, run_config = sync_request(spec, requests, now)
            tags = {**(run_tags or {}), **tags}  # the plan's own tags win
            result = execute_run(
                chain_job, instance, tags=tags, raise_on_error=False, run_config={**QUIET_RUN_CONFIG, **run_config}
            )
            summary.runs += 1
            raw = step_metadata(result, spec.keys.raw)
            summary.api_calls += int(raw.get("api_calls", 0))
            summary.retries += int(raw.get("api_retries", 0))
            summary.bad_records += int(raw.get("bad_records", 0))
            summary.problems.extend(
                RecordProblem(str(item["location"]), str(item["reason"]))
                for item in raw.get("bad_record_list") or []
                if isinstance(item, dict) and "location" in item and "reason" in item
            )
            if not result.success:
                message = failure_message(result) or "the sync run failed"
                for request in requests:
                    summary.failed[names[request.container]] = message
                break
            run = instance.get_run_by_id(result.run_id)
            failed = json.loads((run.tags if run else {}).get(FAILED_CONTAINERS_TAG) or "{}")
            for container, message in failed.items():
                summary.failed[names.get(container, container)] = message
            summary.documents += int(raw.get("documents", 0))
            summary.documents_updated += int(step_metadata(result, spec.keys.points).get("documents_written", 0))
            summary.chunk_runs.append({
                "run_id": result.run_id,
                "parent_chunks": int(step_metadata(result, spec.keys.parents).get("parent_chunks", 0)),
                "child_chunks": int(step_metadata(result, spec.keys.children).get("child_chunks", 0)),
            })  # fmt: skip
            if on_progress and start is not None:
                on_progress(f"{source} {start}..{end}", piece + 1, len(pieces))
            elif on_progress:
                on_progress(source, len(selected) - len(summary.failed), len(selected))
        synced = [cid for cid, name in selected if name not in summary.failed]
        if reconcile and synced:
            reconciliation = live.reconciliation
            asset_name = reconciliation.key.to_user_string()
            reconciled = dg.Definitions(assets=[reconciliation], resources=resources)
            result = execute_run(
                reconciled.resolve_implicit_global_asset_job_def(),
                instance,
                run_config={**QUIET_RUN_CONFIG, "ops": {asset_name: {"config": {spec.containers_label: synced}}}},
                raise_on_error=False,
                tags={**(run_tags or {}), SOURCE_TAG: spec.api_tag},
            )
            summary.runs += 1
            meta = step_metadata(result, asset_name)
            summary.documents_removed = int(meta.get("documents_removed", 0))
            summary.documents_updated += int(meta.get("documents_rewritten", 0))
            summary.documents_updated += int(meta.get("documents_acl_updated", 0))
            summary.api_calls += int(meta.get("api_calls", 0))
            summary.retries += int(meta.get("api_retries", 0))
            if not result.success:
                summary.failed["reconciliation"] = failure_message(result) or "reconciliation failed"
    summary.seconds = time.perf_counter() - started
    return summary
