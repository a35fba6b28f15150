"""The Dagster code location: every asset, check, sensor and resource of rag_pipeline."""

from __future__ import annotations

import os

import dagster as dg

from rag_pipeline import settings
from rag_pipeline.defs.evaluation.assets import reranker_model, retrieval_eval, retrieval_eval_report
from rag_pipeline.defs.evaluation.jobs import EVAL_JOBS
from rag_pipeline.defs.evaluation.resources import EvaluationResource
from rag_pipeline.defs.io_manager import PartitionedParquetIOManager
from rag_pipeline.defs.jira.assets import jira_chain, jira_issues
from rag_pipeline.defs.resources import (
    Bm25Resource,
    ChunkingResource,
    DenseEmbedderResource,
    JiraDumpResource,
    QdrantResource,
    SlackExportResource,
)
from rag_pipeline.defs.sensors import offline_source_discovery_sensor
from rag_pipeline.defs.slack.assets import slack_chain, slack_threads
from rag_pipeline.vectors.dense import DEFAULT_DENSE_MODEL

ASSETS = [
    slack_threads,
    *slack_chain,
    jira_issues,
    *jira_chain,
    reranker_model,
    retrieval_eval,
    retrieval_eval_report,
]


def build_resources(data_dir: str | None = None) -> dict[str, object]:
    """Resources for a data directory (default ``RAG_DATA_DIR``); the Qdrant server is used when QDRANT_URL is set."""
    base = os.path.abspath(data_dir) if data_dir else str(settings.data_dir())
    qdrant_url = os.environ.get("QDRANT_URL")
    return {
        "parquet_io_manager": PartitionedParquetIOManager(base_dir=os.path.join(base, "parquet")),
        "dense_embedder": DenseEmbedderResource(
            model=os.environ.get("RAG_DENSE_MODEL", DEFAULT_DENSE_MODEL),
            cache_path=os.path.join(base, "embedding_cache.sqlite"),
        ),
        "chunking": ChunkingResource(),
        "bm25": Bm25Resource(),
        "qdrant": QdrantResource(
            path=os.path.join(base, "qdrant"),
            url=qdrant_url,
            api_key=dg.EnvVar("QDRANT_API_KEY") if os.environ.get("QDRANT_API_KEY") else None,
        ),
        "slack_export": SlackExportResource(
            path=os.environ.get("RAG_SLACK_EXPORT", str(settings.BUNDLED_SLACK_EXPORT))
        ),
        "jira_dump": JiraDumpResource(path=os.environ.get("RAG_JIRA_DUMP", str(settings.BUNDLED_JIRA_DUMP))),
        "evaluation": EvaluationResource(eval_dir=str(settings.eval_dir()), reports_dir=os.path.join(base, "reports")),
    }


def build_definitions(data_dir: str | None = None) -> dg.Definitions:
    """All definitions; the embedded engine locks its folder, so steps run in one process unless a server is used."""
    return dg.Definitions(
        assets=ASSETS,
        jobs=EVAL_JOBS,
        sensors=[offline_source_discovery_sensor],
        resources=build_resources(data_dir),
        executor=dg.multiprocess_executor if os.environ.get("QDRANT_URL") else dg.in_process_executor,
    )


defs = build_definitions()
