"""``rag-pipeline sync``: materializes a live source's chain for a range of days, in-process, on the
same Dagster instance as the demo, then reconciles deletions for the synced containers.

One run per channel, so a channel the bot cannot read fails alone.
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
from rag_pipeline.defs.partitions import multi_key, slack_channels, slack_partitions
from rag_pipeline.defs.slack.resources import SlackResource
from rag_pipeline.sources.problems import SourceError
from rag_pipeline.sources.slack_api import days_between


@dataclass
class SyncSummary:
    """What a sync did; ``as_dict`` is the ``--json`` contract."""

    source: str
    start: str
    end: str
    containers: list[str] = field(default_factory=list)
    documents: int = 0
    threads_updated: int = 0
    documents_removed: int = 0
    api_calls: int = 0
    retries: int = 0
    seconds: float = 0.0
    failed: dict[str, str] = field(default_factory=dict)
    runs: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "start": self.start,
            "end": self.end,
            "containers": self.containers,
            "documents": self.documents,
            "threads_updated": self.threads_updated,
            "documents_removed": self.documents_removed,
            "api_calls": self.api_calls,
            "retries": self.retries,
            "seconds": round(self.seconds, 2),
            "runs": self.runs,
            "failed": self.failed,
        }


def _select_channels(slack: SlackResource, names: Sequence[str]) -> list[tuple[str, str]]:
    # Outside a run the token is still an unresolved EnvVar; initializing resolves it.
    discovered = slack.process_config_and_initialize().reader().discover_channels()
    if not names:
        return [(c.id, c.name) for c in discovered]
    by_key = {c.name: c for c in discovered} | {c.id: c for c in discovered}
    missing = [n for n in names if n.lstrip("#") not in by_key]
    if missing:
        known = ", ".join(sorted(c.name for c in discovered)) or "none"
        raise SourceError(
            f"Slack channel(s) {', '.join(missing)} not found among the channels the bot can read ({known}); "
            "invite the bot to a private channel, or check the allow/deny lists"
        )
    return [(by_key[n.lstrip("#")].id, by_key[n.lstrip("#")].name) for n in names]


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
    from rag_pipeline.definitions import build_resources
    from rag_pipeline.defs.slack.assets import slack_chain, slack_threads
    from rag_pipeline.defs.slack.reconciliation import slack_reconciliation

    os.environ.setdefault("DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS", "1")
    started = time.perf_counter()
    end = end or time.strftime("%Y-%m-%d", time.gmtime())
    days = days_between(start, end)
    if start < settings.partition_start():
        raise SourceError(f"--start {start} is before the first partition day {settings.partition_start()}")
    base = Path(data_dir).resolve() if data_dir else settings.data_dir()
    ensure_dagster_home(base)
    resources = build_resources(str(base), live_slack=True)
    if slack is not None:
        resources["slack"] = resources["slack_source"] = slack
    slack_resource: SlackResource = resources["slack"]  # type: ignore[assignment]
    selected = _select_channels(slack_resource, channels)
    summary = SyncSummary("slack", days[0], days[-1], containers=[name for _, name in selected])
    chain = dg.Definitions(assets=[slack_threads, *slack_chain], resources=resources)
    chain_job = chain.resolve_implicit_global_asset_job_def()
    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions(slack_channels.name, [cid for cid, _ in selected])
        for done, (channel_id, name) in enumerate(selected, start=1):
            result = chain_job.execute_in_process(
                instance=instance,
                tags={
                    "dagster/asset_partition_range_start": str(multi_key(slack_partitions, days[0], channel_id)),
                    "dagster/asset_partition_range_end": str(multi_key(slack_partitions, days[-1], channel_id)),
                    SOURCE_TAG: "slack-api",
                },
                raise_on_error=False,
                run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
            )
            summary.runs += 1
            raw = _metadata(result, "slack_threads")
            summary.api_calls += int(raw.get("api_calls", 0))
            summary.retries += int(raw.get("api_retries", 0))
            if result.success:
                summary.documents += int(raw.get("documents", 0))
                summary.threads_updated += int(_metadata(result, "slack_qdrant_points").get("documents_written", 0))
            else:
                summary.failed[name] = _failure(result) or f"the sync run for #{name} failed"
            if on_progress:
                on_progress("slack", done, len(selected))
        synced = [cid for cid, name in selected if name not in summary.failed]
        if reconcile and synced:
            reconciled = dg.Definitions(assets=[slack_reconciliation], resources=resources)
            result = reconciled.resolve_implicit_global_asset_job_def().execute_in_process(
                instance=instance,
                run_config={"ops": {"slack_reconciliation": {"config": {"channels": synced}}}},
                raise_on_error=False,
                tags={SOURCE_TAG: "slack-api"},
            )
            summary.runs += 1
            meta = _metadata(result, "slack_reconciliation")
            summary.documents_removed = int(meta.get("documents_removed", 0))
            summary.threads_updated += int(meta.get("documents_rewritten", 0))
            summary.api_calls += int(meta.get("api_calls", 0))
            summary.retries += int(meta.get("api_retries", 0))
            if not result.success:
                summary.failed["reconciliation"] = _failure(result) or "reconciliation failed"
    summary.seconds = time.perf_counter() - started
    return summary


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
