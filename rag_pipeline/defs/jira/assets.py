"""Jira raw issues (one document per issue, in the partition of its ``updated`` day)."""

import time

import dagster as dg

from rag_pipeline.defs.automation import API_RETRY, RAW_FRESHNESS, raw_sync
from rag_pipeline.defs.chain import IO_MANAGER_KEY, build_source_chain
from rag_pipeline.defs.jira.resources import JIRA_API_POOL, JiraSourceResource
from rag_pipeline.defs.partitions import days_by_container, jira_partitions
from rag_pipeline.defs.raw import source_read_output


@dg.asset(
    partitions_def=jira_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    io_manager_key=IO_MANAGER_KEY,
    group_name="jira",
    kinds={"jira", "parquet"},
    owners=["team:rag-platform"],
    pool=JIRA_API_POOL,
    automation_condition=raw_sync,
    freshness_policy=RAW_FRESHNESS,
    retry_policy=API_RETRY,
    description="Jira issues of the partition's project updated on the partition's day (UTC): summary, "
    "description (ADF or wiki markup) and every comment as text, status, typed links and the project's (or the "
    "issue security level's) ACL. Read from the Jira REST API (Cloud /search/jql or Server /search) or, offline, "
    "from a dump.",
)
def jira_issues(context: dg.AssetExecutionContext, jira_source: JiraSourceResource) -> dg.Output:
    started = time.perf_counter()
    read = jira_source.read_partitions(days_by_container(jira_partitions, context.partition_keys), context.log.info)
    return source_read_output(context, jira_partitions, read, started, "projects_failed")


jira_chain = build_source_chain("jira", "jira_issues", jira_partitions)
