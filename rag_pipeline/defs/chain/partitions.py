"""Partitions: UTC days (today included, so hourly syncs can refresh it) x channel / project.

The day dimension starts at the configured first day, so the partitions are built from settings;
the container dimensions are dynamic (discovery adds channels and projects) and fixed by name.
"""

import threading
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from itertools import product
from typing import Any

import dagster as dg

SLACK_CHANNELS = "slack_channels"
JIRA_PROJECTS = "jira_projects"
slack_channels = dg.DynamicPartitionsDefinition(name=SLACK_CHANNELS)
jira_projects = dg.DynamicPartitionsDefinition(name=JIRA_PROJECTS)


# Ranges whose keys a partitions definition keeps: a run asks for one range; the CLI's runs, a few in turn.
_RANGES_KEPT = 8


class DayByContainerPartitions(dg.MultiPartitionsDefinition):
    """Dagster's two-dimensional partitions, remembering the keys of the last few ranges asked for.

    A range run asks for the keys of its range ~6 times per step (every input and output context builds its
    subset from them), and Dagster builds each of the range's thousands of keys again every time: 21 s of the
    demo's first index. The keys are the product of each dimension's keys in the range, which are looked up on
    every call (cheap: days and the registered containers) and are what the keys are built from, so a container
    registered or removed since is never missed. A lock keeps a code server's threads from sharing a half-made
    entry."""

    def __init__(self, partitions_defs: dict[str, dg.PartitionsDefinition]) -> None:
        super().__init__(partitions_defs)
        self._keys_by_dimension_keys: OrderedDict[tuple[tuple[str, ...], ...], list[dg.MultiPartitionKey]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def get_partition_keys_in_range(
        self,
        partition_key_range: dg.PartitionKeyRange,
        dynamic_partitions_store: Any = None,
    ) -> list[dg.MultiPartitionKey]:
        with dg.partition_loading_context(dynamic_partitions_store=dynamic_partitions_store):
            start = self.get_partition_key_from_str(partition_key_range.start)
            end = self.get_partition_key_from_str(partition_key_range.end)
            dimension_keys = tuple(
                tuple(
                    dimension.partitions_def.get_partition_keys_in_range(
                        dg.PartitionKeyRange(
                            start.keys_by_dimension[dimension.name], end.keys_by_dimension[dimension.name]
                        )
                    )
                )
                for dimension in self.partitions_defs
            )
        with self._lock:
            keys = self._keys_by_dimension_keys.get(dimension_keys)
            if keys is not None:
                self._keys_by_dimension_keys.move_to_end(dimension_keys)
                return list(keys)  # callers get their own list; the keys themselves are immutable strings
        # As Dagster builds them: the dimensions in name order, the first one varying slowest.
        names = [dimension.name for dimension in self.partitions_defs]
        keys = [dg.MultiPartitionKey(dict(zip(names, parts, strict=True))) for parts in product(*dimension_keys)]
        with self._lock:
            self._keys_by_dimension_keys[dimension_keys] = keys
            while len(self._keys_by_dimension_keys) > _RANGES_KEPT:
                self._keys_by_dimension_keys.popitem(last=False)
        return list(keys)


def day_by_container_partitions(
    start: str, container_dimension: str, containers: dg.DynamicPartitionsDefinition
) -> dg.MultiPartitionsDefinition:
    """(UTC day from ``start`` through today) x (a dynamic channel/project dimension)."""
    daily = dg.DailyPartitionsDefinition(start_date=start, end_offset=1, timezone="UTC")
    return DayByContainerPartitions({"date": daily, container_dimension: containers})


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
