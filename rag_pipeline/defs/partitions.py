"""Partitions: UTC days (today included, so hourly syncs can refresh it) x channel / project."""

from collections import defaultdict
from collections.abc import Sequence

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


def days_by_container(partitions_def: dg.MultiPartitionsDefinition, keys: Sequence[str]) -> dict[str, list[str]]:
    """The days of each channel/project among a run's partition keys."""
    other = next(d.name for d in partitions_def.partitions_defs if d.name != "date")
    out: dict[str, list[str]] = defaultdict(list)
    for key in keys:
        dims = partitions_def.get_partition_key_from_str(str(key)).keys_by_dimension
        out[dims[other]].append(dims["date"])
    return {container: sorted(days) for container, days in out.items()}
