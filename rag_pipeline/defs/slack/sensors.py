"""Channel discovery: new Slack channels become partitions; the sync sensor gives them their history."""

import json

import dagster as dg

from rag_pipeline.defs.chain.assets import ChainKeys
from rag_pipeline.defs.chain.discovery import MAX_REPORTED_SKIPS, report_skips, skipped_note
from rag_pipeline.defs.chain.partitions import SLACK_CHANNELS, slack_channels
from rag_pipeline.defs.slack.resources import SlackResource


def build_slack_channel_discovery_sensor(keys: ChainKeys) -> dg.SensorDefinition:
    """Discovery of new channels: they become partitions (``slack_sync_sensor`` requests their history)."""

    @dg.sensor(
        minimum_interval_seconds=3600,
        asset_selection=keys.all,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Lists the workspace's channels (public ones the bot is in, and private ones it was invited to; "
        "archived skipped by default; allow/deny lists from the slack resource), adds new ones as `slack_channels` "
        "partitions (the sync sensor then requests their initial history). Public channels the bot is not in and "
        "listings with an invalid id are skipped and reported in the tick.",
    )
    def slack_channel_discovery_sensor(context: dg.SensorEvaluationContext, slack: SlackResource) -> dg.SensorResult:
        discovery = slack.reader(context.log.info).discover()
        channels = discovery.channels
        known = set(context.instance.get_dynamic_partitions(SLACK_CHANNELS))
        new = [c for c in channels if c.id not in known]
        not_member = [f"#{c.name} ({c.id})" for c in discovery.not_member]
        invalid = [str(p) for p in discovery.problems]
        notes = report_skips(
            context,
            [
                skipped_note("channel(s) the bot is not a member of (invite it to sync them)", not_member),
                skipped_note("channel listing(s) with an invalid id", invalid),
            ],
        )
        cursor: dict[str, object] = {"channels": sorted(c.id for c in channels)}
        if notes:
            cursor["skipped"] = {"not_member": not_member[:MAX_REPORTED_SKIPS], "invalid": invalid[:MAX_REPORTED_SKIPS]}
        return dg.SensorResult(
            dynamic_partitions_requests=[slack_channels.build_add_request([c.id for c in new])] if new else [],
            cursor=json.dumps(cursor),
            skip_reason=None if new else "; ".join(["no new channels", *notes]),
        )

    return slack_channel_discovery_sensor
