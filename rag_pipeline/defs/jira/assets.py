"""Jira raw issues (one document per issue, in the partition of its ``updated`` day)."""

import time

import dagster as dg

from rag_pipeline.defs.automation import API_RETRY, RAW_FRESHNESS
from rag_pipeline.defs.chain import IO_MANAGER_KEY
from rag_pipeline.defs.jira.resources import JIRA_API_POOL, JiraSourceResource
from rag_pipeline.defs.partitions import days_by_container
from rag_pipeline.defs.raw import source_read_output
from rag_pipeline.settings import DEFAULT_MAX_DOCUMENT_CHARS


def build_jira_issues(
    partitions_def: dg.MultiPartitionsDefinition,
    automation_condition: dg.AutomationCondition,
    max_document_chars: int = DEFAULT_MAX_DOCUMENT_CHARS,
) -> dg.AssetsDefinition:
    """The ``jira_issues`` asset over (day, project) partitions."""

    @dg.asset(
        partitions_def=partitions_def,
        backfill_policy=dg.BackfillPolicy.single_run(),
        io_manager_key=IO_MANAGER_KEY,
        group_name="jira",
        kinds={"jira", "parquet"},
        owners=["team:rag-platform"],
        pool=JIRA_API_POOL,
        automation_condition=automation_condition,
        freshness_policy=RAW_FRESHNESS,
        retry_policy=API_RETRY,
        description="Jira issues of the partition's project updated on the partition's day (UTC): summary, "
        "description (ADF or wiki markup) and every comment as text, status, typed links and the project's (or the "
        "issue security level's) ACL. Read from the Jira REST API (Cloud /search/jql or Server /search) or, "
        "offline, from a dump.",
    )
    def jira_issues(context: dg.AssetExecutionContext, jira_source: JiraSourceResource) -> dg.Output:
        started = time.perf_counter()
        read = jira_source.read_partitions(days_by_container(partitions_def, context.partition_keys), context.log.info)
        return source_read_output(context, partitions_def, read, started, "projects_failed", max_document_chars)

    return jira_issues
