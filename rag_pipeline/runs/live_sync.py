"""``rag-pipeline sync``: materializes a live source's chain for a range of days, in-process, on the
same Dagster instance as the demo, then reconciles deletions for the synced containers.

One run per container (Slack channel, Jira project), so a container that cannot be read fails alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from rag_pipeline.defs.partitions import multi_key
from rag_pipeline.runs.execution import execute_run, runner_instance
from rag_pipeline.runs.instance import (
    QUIET_RUN_CONFIG,
    SOURCE_TAG,
    enable_range_batching,
    ensure_dagster_home,
    range_tags,
)
from rag_pipeline.runs.metadata import failure_message, step_metadata
from rag_pipeline.settings import Settings
from rag_pipeline.sources.days import days_between
from rag_pipeline.sources.problems import SourceError


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
        }
        if self.source == "slack":
            out["threads_updated"] = self.documents_updated  # the name the Slack contract started with
        return out


def run_sync(
    settings: Settings,
    source: str,
    start: str,
    end: str | None = None,
    containers: Sequence[str] = (),
    resource: dg.ConfigurableResource | None = None,
    reconcile: bool = True,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> SyncSummary:
    """Sync days ``start``..``end`` (default: today) of a live source for the named containers
    (Slack channels or Jira projects; default: all discovered). ``resource`` replaces the configured
    API resource (tests, benchmarks)."""
    from rag_pipeline.definitions import build_resources, source_specs

    specs = source_specs(settings)
    spec = specs[source]
    if resource is None and not spec.is_live:
        raise SourceError(f"the live {source} API is not configured")
    enable_range_batching()
    started = time.perf_counter()
    end = end or time.strftime("%Y-%m-%d", time.gmtime())
    days = days_between(start, end)
    if start < settings.partition_start:
        raise SourceError(f"--start {start} is before the first partition day {settings.partition_start}")
    ensure_dagster_home(settings)
    resources = build_resources(settings, specs)
    if resource is not None:
        resources[source] = resources[spec.source_resource_key] = resource
    selected = spec.select_live_containers(resources[source], containers)
    summary = SyncSummary(source, days[0], days[-1], containers=[name for _, name in selected])
    chain_job = dg.Definitions(assets=spec.assets, resources=resources).resolve_implicit_global_asset_job_def()
    with runner_instance() as instance:
        instance.add_dynamic_partitions(spec.containers_name, [cid for cid, _ in selected])
        for done, (container, name) in enumerate(selected, start=1):
            result = execute_run(
                chain_job,
                instance,
                tags=range_tags(
                    str(multi_key(spec.partitions, days[0], container)),
                    str(multi_key(spec.partitions, days[-1], container)),
                    **{SOURCE_TAG: spec.api_tag},
                ),
                raise_on_error=False,
                run_config=QUIET_RUN_CONFIG,
            )
            summary.runs += 1
            raw = step_metadata(result, spec.keys.raw)
            summary.api_calls += int(raw.get("api_calls", 0))
            summary.retries += int(raw.get("api_retries", 0))
            if result.success:
                summary.documents += int(raw.get("documents", 0))
                summary.documents_updated += int(step_metadata(result, spec.keys.points).get("documents_written", 0))
            else:
                summary.failed[name] = failure_message(result) or f"the sync run for {name} failed"
            if on_progress:
                on_progress(source, done, len(selected))
        synced = [cid for cid, name in selected if name not in summary.failed]
        if reconcile and synced:
            reconciliation = spec.live.reconciliation
            asset_name = reconciliation.key.to_user_string()
            reconciled = dg.Definitions(assets=[reconciliation], resources=resources)
            result = execute_run(
                reconciled.resolve_implicit_global_asset_job_def(),
                instance,
                run_config={**QUIET_RUN_CONFIG, "ops": {asset_name: {"config": {spec.containers_label: synced}}}},
                raise_on_error=False,
                tags={SOURCE_TAG: spec.api_tag},
            )
            summary.runs += 1
            meta = step_metadata(result, asset_name)
            summary.documents_removed = int(meta.get("documents_removed", 0))
            summary.documents_updated += int(meta.get("documents_rewritten", 0))
            summary.api_calls += int(meta.get("api_calls", 0))
            summary.retries += int(meta.get("api_retries", 0))
            if not result.success:
                summary.failed["reconciliation"] = failure_message(result) or "reconciliation failed"
    summary.seconds = time.perf_counter() - started
    return summary
