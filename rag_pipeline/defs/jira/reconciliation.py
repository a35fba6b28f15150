"""Jira reconciliation: issues deleted at the source leave the index; issues moved to another project
(new key, same id) are rewritten there."""

import time
from collections.abc import Mapping

import dagster as dg
from pydantic import Field

from rag_pipeline.connectors.jira.dump import SOURCE
from rag_pipeline.connectors.jira.reconcile import plan_project
from rag_pipeline.defs.automation import API_RETRY
from rag_pipeline.defs.chain.assets import QDRANT_POOL, ChainKeys
from rag_pipeline.defs.chain.partitions import JIRA_PROJECTS
from rag_pipeline.defs.chain.resources import Bm25Resource, ChunkingResource, DenseEmbedderResource, QdrantResource
from rag_pipeline.defs.chain.source_spec import LiveDefinitions
from rag_pipeline.defs.executors import QDRANT_QUEUE, step_tags
from rag_pipeline.defs.jira.resources import JiraResource
from rag_pipeline.defs.sync.reconciliation import live_definitions, reconcile_containers, reconciliation_output
from rag_pipeline.index.store import IndexedDocument
from rag_pipeline.reconciliation.reconcile import ReconcilePlan


class JiraReconciliationConfig(dg.Config):
    """Which projects to reconcile (default: every discovered project)."""

    projects: list[str] = Field(default_factory=list, description="Project keys; empty: every discovered project")


def build_jira_reconciliation(keys: ChainKeys, discovery_sensor: dg.SensorDefinition) -> LiveDefinitions:
    """The live-only Jira definitions: reconciliation asset, its job and daily schedule, and discovery."""

    @dg.asset(
        deps=[keys.points],
        group_name="jira",
        kinds={"jira", "qdrant"},
        owners=["team:rag-platform"],
        pool=QDRANT_POOL,
        op_tags=step_tags(QDRANT_QUEUE),
        retry_policy=API_RETRY,
        description="Lists every discovered project's current issue ids (ids only, large pages) and compares them with "
        "the index: issues Jira no longer has are removed; issues moved to another project (new key, same id) are "
        "rewritten under their new project, never duplicated.",
    )
    def jira_reconciliation(
        context: dg.AssetExecutionContext,
        config: JiraReconciliationConfig,
        jira: JiraResource,
        qdrant: QdrantResource,
        dense_embedder: DenseEmbedderResource,
        chunking: ChunkingResource,
        bm25: Bm25Resource,
    ) -> dg.MaterializeResult:
        started = time.perf_counter()
        reader = jira.reader(context.log.info)
        projects = config.projects or context.instance.get_dynamic_partitions(JIRA_PROJECTS)

        def plan(project: str, indexed: Mapping[str, IndexedDocument]) -> ReconcilePlan:
            return plan_project(reader, project, indexed)

        done = reconcile_containers(SOURCE, projects, plan, qdrant, dense_embedder, chunking, bm25, context.log.error)
        return reconciliation_output(done, "projects", len(projects), reader.stats, started)

    return live_definitions(
        "jira",
        jira_reconciliation,
        discovery_sensor,
        cron="30 3 * * *",
        job_description="Removes Jira issues deleted at the source and rewrites issues moved to another project.",
        schedule_description="Daily Jira reconciliation (deletions and moves) at 03:30 UTC.",
    )
