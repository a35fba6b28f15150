"""Jira raw issues (one document per issue, in the partition of its ``updated`` day)."""

import time

import dagster as dg

from rag_pipeline.defs.chain import IO_MANAGER_KEY, build_source_chain
from rag_pipeline.defs.partitions import jira_partitions
from rag_pipeline.defs.raw import documents_by_partition
from rag_pipeline.defs.resources import JiraDumpResource


@dg.asset(
    partitions_def=jira_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    io_manager_key=IO_MANAGER_KEY,
    group_name="jira",
    kinds={"jira", "parquet"},
    owners=["team:rag-platform"],
    description="Jira issues of the partition's project updated on the partition's day (UTC): summary, "
    "description and every comment as text, status, links and project ACL.",
)
def jira_issues(context: dg.AssetExecutionContext, jira_dump: JiraDumpResource) -> dg.Output:
    started = time.perf_counter()
    read = jira_dump.read()
    return documents_by_partition(context, jira_partitions, read.documents, read.problems, started)


jira_chain = build_source_chain("jira", "jira_issues", jira_partitions)
