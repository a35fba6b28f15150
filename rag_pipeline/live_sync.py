"""``rag-pipeline sync``: materializes a live source's chain for a range of days, in-process, on the
same Dagster instance as the demo, then reconciles deletions for the synced containers.

One run per container (Slack channel, Jira project), so a container that cannot be read fails alone.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg

from rag_pipeline import settings
from rag_pipeline.backfill import SOURCE_TAG, ensure_dagster_home, materialization_metadata
from rag_pipeline.defs.jira.assets import jira_chain, jira_issues
from rag_pipeline.defs.jira.reconciliation import jira_reconciliation
from rag_pipeline.defs.jira.resources import JiraResource
from rag_pipeline.defs.partitions import jira_partitions, jira_projects, multi_key, slack_channels, slack_partitions
from rag_pipeline.defs.slack.assets import slack_chain, slack_threads
from rag_pipeline.defs.slack.reconciliation import slack_reconciliation
from rag_pipeline.defs.slack.resources import SlackResource
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


@dataclass(frozen=True)
class LiveSource:
    """How ``sync`` drives one live source through its Dagster chain (raw documents asset first)."""

    partitions_def: dg.MultiPartitionsDefinition
    dynamic: dg.DynamicPartitionsDefinition
    chain: Sequence[dg.AssetsDefinition]
    reconciliation: dg.AssetsDefinition
    reconciliation_field: str
    tag: str
    select: Callable[[Any, Sequence[str]], list[tuple[str, str]]]

    @property
    def raw_asset(self) -> str:
        return self.chain[0].key.to_user_string()

    @property
    def reconciliation_asset(self) -> str:
        return self.reconciliation.key.to_user_string()


def _select_channels(slack: SlackResource, names: Sequence[str]) -> list[tuple[str, str]]:
    # Outside a run the token is still an unresolved EnvVar; initializing resolves it.
    discovered = slack.process_config_and_initialize().reader().discover_channels()
    by_key = {c.name: c for c in discovered} | {c.id: c for c in discovered}
    wanted = [n.lstrip("#") for n in names] or [c.id for c in discovered]
    missing = [n for n in wanted if n not in by_key]
    if missing:
        known = ", ".join(sorted(c.name for c in discovered)) or "none"
        raise SourceError(
            f"Slack channel(s) {', '.join(missing)} not found among the channels the bot can read ({known}); "
            "invite the bot to a private channel, or check the allow/deny lists"
        )
    return [(by_key[n].id, by_key[n].name) for n in wanted]


def _select_projects(jira: JiraResource, keys: Sequence[str]) -> list[tuple[str, str]]:
    discovered = jira.process_config_and_initialize().reader().discover_projects()
    by_key = {p.key: p for p in discovered}
    wanted = [k.upper() for k in keys] or [p.key for p in discovered]
    missing = [k for k in wanted if k not in by_key]
    if missing:
        known = ", ".join(sorted(by_key)) or "none"
        raise SourceError(
            f"Jira project(s) {', '.join(missing)} not found among the projects the API user can browse ({known}); "
            "grant it Browse projects, or check the allow/deny lists and include_archived"
        )
    return [(k, k) for k in wanted]


LIVE_SOURCES = {
    "slack": LiveSource(
        slack_partitions, slack_channels, [slack_threads, *slack_chain], slack_reconciliation, "channels",
        "slack-api", _select_channels,
    ),
    "jira": LiveSource(
        jira_partitions, jira_projects, [jira_issues, *jira_chain], jira_reconciliation, "projects",
        "jira-api", _select_projects,
    ),
}  # fmt: skip


def run_sync(
    source: str,
    start: str,
    end: str | None = None,
    containers: Sequence[str] = (),
    data_dir: str | Path | None = None,
    resource: SlackResource | JiraResource | None = None,
    reconcile: bool = True,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> SyncSummary:
    """Sync days ``start``..``end`` (default: today) of a live source for the named containers
    (Slack channels or Jira projects; default: all discovered)."""
    from rag_pipeline.definitions import build_resources

    spec = LIVE_SOURCES[source]
    os.environ.setdefault("DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS", "1")
    started = time.perf_counter()
    end = end or time.strftime("%Y-%m-%d", time.gmtime())
    days = days_between(start, end)
    if start < settings.partition_start():
        raise SourceError(f"--start {start} is before the first partition day {settings.partition_start()}")
    base = Path(data_dir).resolve() if data_dir else settings.data_dir()
    ensure_dagster_home(base)
    resources = build_resources(str(base), live_slack=source == "slack", live_jira=source == "jira")
    if resource is not None:
        resources[source] = resources[f"{source}_source"] = resource
    selected = spec.select(resources[source], containers)
    summary = SyncSummary(source, days[0], days[-1], containers=[name for _, name in selected])
    chain_job = dg.Definitions(assets=spec.chain, resources=resources).resolve_implicit_global_asset_job_def()
    points_asset = f"{source}_qdrant_points"
    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions(spec.dynamic.name, [cid for cid, _ in selected])
        for done, (container, name) in enumerate(selected, start=1):
            result = chain_job.execute_in_process(
                instance=instance,
                tags={
                    "dagster/asset_partition_range_start": str(multi_key(spec.partitions_def, days[0], container)),
                    "dagster/asset_partition_range_end": str(multi_key(spec.partitions_def, days[-1], container)),
                    SOURCE_TAG: spec.tag,
                },
                raise_on_error=False,
                run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
            )
            summary.runs += 1
            raw = _metadata(result, spec.raw_asset)
            summary.api_calls += int(raw.get("api_calls", 0))
            summary.retries += int(raw.get("api_retries", 0))
            if result.success:
                summary.documents += int(raw.get("documents", 0))
                summary.documents_updated += int(_metadata(result, points_asset).get("documents_written", 0))
            else:
                summary.failed[name] = _failure(result) or f"the sync run for {name} failed"
            if on_progress:
                on_progress(source, done, len(selected))
        synced = [cid for cid, name in selected if name not in summary.failed]
        if reconcile and synced:
            reconciled = dg.Definitions(assets=[spec.reconciliation], resources=resources)
            result = reconciled.resolve_implicit_global_asset_job_def().execute_in_process(
                instance=instance,
                run_config={"ops": {spec.reconciliation_asset: {"config": {spec.reconciliation_field: synced}}}},
                raise_on_error=False,
                tags={SOURCE_TAG: spec.tag},
            )
            summary.runs += 1
            meta = _metadata(result, spec.reconciliation_asset)
            summary.documents_removed = int(meta.get("documents_removed", 0))
            summary.documents_updated += int(meta.get("documents_rewritten", 0))
            summary.api_calls += int(meta.get("api_calls", 0))
            summary.retries += int(meta.get("api_retries", 0))
            if not result.success:
                summary.failed["reconciliation"] = _failure(result) or "reconciliation failed"
    summary.seconds = time.perf_counter() - started
    return summary


def run_slack_sync(
    start: str,
    end: str | None = None,
    channels: Sequence[str] = (),
    data_dir: str | Path | None = None,
    slack: SlackResource | None = None,
    reconcile: bool = True,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> SyncSummary:
    """Sync Slack days ``start``..``end`` (default: today) for the named channels (default: all)."""
    return run_sync("slack", start, end, channels, data_dir, slack, reconcile, on_progress)


def _metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    """The materialization's metadata, or a failed step's ``dg.Failure`` metadata."""
    materialized = materialization_metadata(result, asset)
    if materialized:
        return materialized
    for event in result.all_events:
        if event.is_step_failure and event.step_key == asset and event.step_failure_data.user_failure_data:
            return {k: v.value for k, v in event.step_failure_data.user_failure_data.metadata.items()}
    return {}


def _failure(result: dg.ExecuteInProcessResult) -> str | None:
    for event in result.all_events:
        if event.is_step_failure:
            data = event.step_failure_data
            if data.user_failure_data and data.user_failure_data.description:
                return data.user_failure_data.description
            return data.error.message.strip() if data.error else None
    return None
