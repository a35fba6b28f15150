"""Partitions: UTC days (today included, so hourly syncs can refresh it) x channel / project."""

import dagster as dg

from rag_pipeline.settings import partition_start

daily = dg.DailyPartitionsDefinition(start_date=partition_start(), end_offset=1, timezone="UTC")
slack_channels = dg.DynamicPartitionsDefinition(name="slack_channels")
jira_projects = dg.DynamicPartitionsDefinition(name="jira_projects")

slack_partitions = dg.MultiPartitionsDefinition({"date": daily, "channel": slack_channels})
jira_partitions = dg.MultiPartitionsDefinition({"date": daily, "project": jira_projects})


def multi_key(partitions_def: dg.MultiPartitionsDefinition, day: str, container: str) -> dg.MultiPartitionKey:
    """The partition key of (day, channel/project) for either source."""
    other = next(d.name for d in partitions_def.partitions_defs if d.name != "date")
    return dg.MultiPartitionKey({"date": day, other: container})
