"""Channel discovery: new Slack channels become partitions and get their latest day synced."""

import json
from datetime import UTC, datetime

import dagster as dg

from rag_pipeline.defs.partitions import multi_key, slack_channels, slack_partitions
from rag_pipeline.defs.slack.resources import SlackResource

SLACK_CHAIN_SELECTION = dg.AssetSelection.assets(
    "slack_threads",
    "slack_parent_chunks",
    "slack_child_chunks",
    "slack_dense_vectors",
    "slack_sparse_vectors",
    "slack_qdrant_points",
)


@dg.sensor(
    minimum_interval_seconds=3600,
    asset_selection=SLACK_CHAIN_SELECTION,
    description="Lists the workspace's channels (public, and private ones the bot was invited to; archived skipped "
    "by default; allow/deny lists from the slack resource), adds new ones as `slack_channels` partitions and "
    "requests their latest day.",
)
def slack_channel_discovery_sensor(context: dg.SensorEvaluationContext, slack: SlackResource) -> dg.SensorResult:
    channels = slack.reader(context.log.info).discover_channels()
    known = set(context.instance.get_dynamic_partitions(slack_channels.name))
    new = [c for c in channels if c.id not in known]
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    return dg.SensorResult(
        dynamic_partitions_requests=[slack_channels.build_add_request([c.id for c in new])] if new else [],
        run_requests=[
            dg.RunRequest(
                run_key=f"slack-discovered:{c.id}",
                partition_key=multi_key(slack_partitions, today, c.id),
                tags={"rag/channel_name": c.name},
            )
            for c in new
        ],
        cursor=json.dumps(sorted(c.id for c in channels)),
    )
