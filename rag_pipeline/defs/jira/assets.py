"""Jira raw issues (one document per issue, in the partition of its ``updated`` day)."""

import dagster as dg

from rag_pipeline.defs.chain.partitions import JIRA_PROJECTS
from rag_pipeline.defs.chain.raw import build_raw_documents_asset
from rag_pipeline.defs.jira.resources import JIRA_API_POOL
from rag_pipeline.settings import DEFAULT_MAX_DOCUMENT_CHARS


def build_jira_issues(
    partitions_def: dg.PartitionsDefinition,
    first_day: str,
    max_document_chars: int = DEFAULT_MAX_DOCUMENT_CHARS,
) -> dg.AssetsDefinition:
    """The ``jira_issues`` asset over weekly partitions."""
    return build_raw_documents_asset(
        name="jira_issues",
        source="jira",
        pool=JIRA_API_POOL,
        partitions_def=partitions_def,
        first_day=first_day,
        containers_name=JIRA_PROJECTS,
        max_document_chars=max_document_chars,
        failed_label="projects_failed",
        description="Jira issues updated in the partition's week (UTC), of every project the run covers: summary, "
        "description (ADF or wiki markup) and every comment as text, status, typed links and the project's (or the "
        "issue security level's) ACL. Read from the Jira REST API (Cloud /search/jql or Server /search) or, "
        "offline, from a dump.",
    )
