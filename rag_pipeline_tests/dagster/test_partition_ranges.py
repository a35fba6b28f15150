"""The sources' (day x container) partitions give exactly Dagster's keys for a range, also after a container
is registered or removed, while building the keys of a range once instead of at every input and output of a run."""

from __future__ import annotations

import dagster as dg

from rag_pipeline.defs.chain.partitions import DayByContainerPartitions, day_by_container_partitions

containers = dg.DynamicPartitionsDefinition(name="test_containers")


def test_a_range_has_dagsters_keys_and_follows_the_registered_containers() -> None:
    ours = day_by_container_partitions("2024-01-01", "container", containers)
    assert isinstance(ours, DayByContainerPartitions)
    plain = dg.MultiPartitionsDefinition({dim.name: dim.partitions_def for dim in ours.partitions_defs})
    assert ours == plain
    whole = dg.PartitionKeyRange("A|2024-01-01", "C|2024-03-31")
    one = dg.PartitionKeyRange("C|2024-02-01", "C|2024-02-10")
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("test_containers", ["A", "X", "C"])
        for _ in range(2):  # built, then remembered
            for key_range in (whole, one):
                keys = ours.get_partition_keys_in_range(key_range, dynamic_partitions_store=instance)
                assert keys == plain.get_partition_keys_in_range(key_range, dynamic_partitions_store=instance)
        assert len(ours.get_partition_keys_in_range(whole, dynamic_partitions_store=instance)) == 91 * 3
        # Each caller has a list of its own.
        ours.get_partition_keys_in_range(whole, dynamic_partitions_store=instance).clear()
        assert len(ours.get_partition_keys_in_range(whole, dynamic_partitions_store=instance)) == 91 * 3

        # The same range over other containers: X removed (containers keep the order they were registered in).
        instance.delete_dynamic_partition("test_containers", "X")
        keys = ours.get_partition_keys_in_range(whole, dynamic_partitions_store=instance)
        assert keys == plain.get_partition_keys_in_range(whole, dynamic_partitions_store=instance)
        assert len(keys) == 91 * 2 and {k.keys_by_dimension["container"] for k in keys} == {"A", "C"}
