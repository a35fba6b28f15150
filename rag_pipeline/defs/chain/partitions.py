"""Partitions: UTC days (today included, so hourly syncs can refresh it) x channel / project.

The day dimension starts at the configured first day, so the partitions are built from settings;
the container dimensions are dynamic (discovery adds channels and projects) and fixed by name.
"""

from collections import defaultdict
from collections.abc import Sequence

import dagster as dg

SLACK_CHANNELS = "slack_channels"
JIRA_PROJECTS = "jira_projects"
slack_channels = dg.DynamicPartitionsDefinition(name=SLACK_CHANNELS)
jira_projects = dg.DynamicPartitionsDefinition(name=JIRA_PROJECTS)


def day_by_container_partitions(
    start: str, container_dimension: str, containers: dg.DynamicPartitionsDefinition
) -> dg.MultiPartitionsDefinition:
    """(UTC day from ``start`` through today) x (a dynamic channel/project dimension)."""
    daily = dg.DailyPartitionsDefinition(start_date=start, end_offset=1, timezone="UTC")
    return dg.MultiPartitionsDefinition({"date": daily, container_dimension: containers})


def container_dimension(partitions_def: dg.MultiPartitionsDefinition) -> str:
    """The name of the channel/project dimension."""
    return next(d.name for d in partitions_def.partitions_defs if d.name != "date")


def multi_key(partitions_def: dg.MultiPartitionsDefinition, day: str, container: str) -> dg.MultiPartitionKey:
    """The partition key of (day, channel/project) for either source."""
    return dg.MultiPartitionKey({"date": day, container_dimension(partitions_def): container})


def days_by_container(partitions_def: dg.MultiPartitionsDefinition, keys: Sequence[str]) -> dict[str, list[str]]:
    """The days of each channel/project among a run's partition keys."""
    other = container_dimension(partitions_def)
    out: dict[str, list[str]] = defaultdict(list)
    for key in keys:
        dims = partitions_def.get_partition_key_from_str(str(key)).keys_by_dimension
        out[dims[other]].append(dims["date"])
    return {container: sorted(days) for container, days in out.items()}
