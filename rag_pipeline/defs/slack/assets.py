"""Slack raw threads (one document per thread, in the partition of its latest activity)."""

import time

import dagster as dg

from rag_pipeline.defs.automation import API_RETRY, RAW_FRESHNESS
from rag_pipeline.defs.chain import IO_MANAGER_KEY
from rag_pipeline.defs.partitions import days_by_container
from rag_pipeline.defs.raw import source_read_output
from rag_pipeline.defs.slack.resources import SLACK_API_POOL, SlackSourceResource
from rag_pipeline.settings import DEFAULT_MAX_DOCUMENT_CHARS


def build_slack_threads(
    partitions_def: dg.MultiPartitionsDefinition,
    automation_condition: dg.AutomationCondition,
    max_document_chars: int = DEFAULT_MAX_DOCUMENT_CHARS,
) -> dg.AssetsDefinition:
    """The ``slack_threads`` asset over (day, channel) partitions."""

    @dg.asset(
        partitions_def=partitions_def,
        backfill_policy=dg.BackfillPolicy.single_run(),
        io_manager_key=IO_MANAGER_KEY,
        group_name="slack",
        kinds={"slack", "parquet"},
        owners=["team:rag-platform"],
        pool=SLACK_API_POOL,
        automation_condition=automation_condition,
        freshness_policy=RAW_FRESHNESS,
        retry_policy=API_RETRY,
        description="Slack threads with activity on the partition's day (UTC) in the partition's channel: root and "
        "replies in order, markup cleaned, system and bot messages dropped, with version and channel ACL. Read from "
        "the Slack Web API (late replies through a lookback over roots) or, offline, from a Slack export.",
    )
    def slack_threads(context: dg.AssetExecutionContext, slack_source: SlackSourceResource) -> dg.Output:
        started = time.perf_counter()
        read = slack_source.read_partitions(days_by_container(partitions_def, context.partition_keys), context.log.info)
        return source_read_output(context, partitions_def, read, started, "channels_failed", max_document_chars)

    return slack_threads
