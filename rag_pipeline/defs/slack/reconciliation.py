"""Slack reconciliation: threads deleted at the source leave the index; threads whose replies
were deleted (or edited quietly) within the lookback are rewritten; threads of a channel whose members
changed (private channels, external members of shared ones) get the new ACL in place."""

import time
from collections.abc import Mapping

import dagster as dg
from pydantic import Field

from rag_pipeline.connectors.slack.reconcile import plan_channel
from rag_pipeline.connectors.slack.threads import SOURCE
from rag_pipeline.defs.automation import API_RETRY
from rag_pipeline.defs.chain.assets import QDRANT_POOL, ChainKeys
from rag_pipeline.defs.chain.partitions import SLACK_CHANNELS
from rag_pipeline.defs.chain.resources import Bm25Resource, ChunkingResource, DenseEmbedderResource, QdrantResource
from rag_pipeline.defs.chain.source_spec import LiveDefinitions
from rag_pipeline.defs.executors import QDRANT_QUEUE, step_tags
from rag_pipeline.defs.slack.resources import SlackResource
from rag_pipeline.defs.sync.reconciliation import live_definitions, reconcile_containers, reconciliation_output
from rag_pipeline.index.store import IndexedDocument
from rag_pipeline.reconciliation.reconcile import ReconcilePlan


class SlackReconciliationConfig(dg.Config):
    """Which channels to reconcile (default: every discovered channel)."""

    channels: list[str] = Field(default_factory=list, description="Channel ids; empty: every discovered channel")
    lookback_days: int | None = Field(
        None, description="Re-read threads whose root is this recent (default: the slack resource's lookback_days)"
    )


def build_slack_reconciliation(keys: ChainKeys, discovery_sensor: dg.SensorDefinition) -> LiveDefinitions:
    """The live-only Slack definitions: reconciliation asset, its job and daily schedule, and discovery."""

    @dg.asset(
        deps=[keys.points],
        group_name="slack",
        kinds={"slack", "qdrant"},
        owners=["team:rag-platform"],
        pool=QDRANT_POOL,
        op_tags=step_tags(QDRANT_QUEUE),
        retry_policy=API_RETRY,
        description="Compares every discovered channel's indexed threads with what Slack lists now: removes threads "
        "whose root is gone (a tombstoned root keeps its thread) and rewrites threads in the lookback whose "
        "messages changed without a newer timestamp (deleted replies); gives every indexed thread of a channel "
        "whose members changed (private channels) the channel's ACL now, without re-embedding.",
    )
    def slack_reconciliation(
        context: dg.AssetExecutionContext,
        config: SlackReconciliationConfig,
        slack: SlackResource,
        qdrant: QdrantResource,
        dense_embedder: DenseEmbedderResource,
        chunking: ChunkingResource,
        bm25: Bm25Resource,
    ) -> dg.MaterializeResult:
        started = time.perf_counter()
        reader = slack.reader(context.log.info)
        channels = config.channels or context.instance.get_dynamic_partitions(SLACK_CHANNELS)
        lookback = slack.lookback_days if config.lookback_days is None else config.lookback_days

        def plan(channel_id: str, indexed: Mapping[str, IndexedDocument]) -> ReconcilePlan:
            return plan_channel(reader, channel_id, indexed, lookback)

        done = reconcile_containers(SOURCE, channels, plan, qdrant, dense_embedder, chunking, bm25, context.log.error)
        return reconciliation_output(done, "channels", len(channels), reader.stats, started)

    return live_definitions(
        "slack",
        slack_reconciliation,
        discovery_sensor,
        cron="0 3 * * *",
        job_description="Removes Slack threads deleted at the source, rewrites threads whose replies were deleted "
        "and updates the ACL of threads in channels whose members changed.",
        schedule_description="Daily Slack reconciliation (deletions) at 03:00 UTC.",
    )
