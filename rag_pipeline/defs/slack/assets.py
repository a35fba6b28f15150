"""Slack raw threads (one document per thread, in the partition of its latest activity)."""

import time

import dagster as dg

from rag_pipeline.defs.automation import API_RETRY, RAW_FRESHNESS, raw_sync
from rag_pipeline.defs.chain import IO_MANAGER_KEY, build_source_chain
from rag_pipeline.defs.partitions import days_by_container, slack_partitions
from rag_pipeline.defs.raw import source_read_output
from rag_pipeline.defs.slack.resources import SLACK_API_POOL, SlackSourceResource


@dg.asset(
    partitions_def=slack_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    io_manager_key=IO_MANAGER_KEY,
    group_name="slack",
    kinds={"slack", "parquet"},
    owners=["team:rag-platform"],
    pool=SLACK_API_POOL,
    automation_condition=raw_sync,
    freshness_policy=RAW_FRESHNESS,
    retry_policy=API_RETRY,
    description="Slack threads with activity on the partition's day (UTC) in the partition's channel: root and "
    "replies in order, markup cleaned, system and bot messages dropped, with version and channel ACL. Read from "
    "the Slack Web API (late replies through a lookback over roots) or, offline, from a Slack export.",
)
def slack_threads(context: dg.AssetExecutionContext, slack_source: SlackSourceResource) -> dg.Output:
    started = time.perf_counter()
    read = slack_source.read_partitions(days_by_container(slack_partitions, context.partition_keys), context.log.info)
    return source_read_output(context, slack_partitions, read, started, "channels_failed")


slack_chain = build_source_chain("slack", "slack_threads", slack_partitions)
