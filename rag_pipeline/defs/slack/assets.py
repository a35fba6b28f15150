"""Slack raw threads (one document per thread, in the partition of its latest activity)."""

import time

import dagster as dg

from rag_pipeline.defs.chain import IO_MANAGER_KEY, build_source_chain
from rag_pipeline.defs.partitions import slack_partitions
from rag_pipeline.defs.raw import documents_by_partition
from rag_pipeline.defs.resources import SlackExportResource


@dg.asset(
    partitions_def=slack_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    io_manager_key=IO_MANAGER_KEY,
    group_name="slack",
    kinds={"slack", "parquet"},
    owners=["team:rag-platform"],
    description="Slack threads with activity on the partition's day (UTC) in the partition's channel: root and "
    "replies in order, markup cleaned, system messages dropped, with version and channel ACL.",
)
def slack_threads(context: dg.AssetExecutionContext, slack_export: SlackExportResource) -> dg.Output:
    started = time.perf_counter()
    read = slack_export.read()
    return documents_by_partition(context, slack_partitions, read.documents, read.problems, started)


slack_chain = build_source_chain("slack", "slack_threads", slack_partitions)
