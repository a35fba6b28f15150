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
from rag_pipeline.defs.slack.reconciliation import (
    slack_reconciliation,
    slack_reconciliation_job,
    slack_reconciliation_schedule,
)
from rag_pipeline.defs.slack.resources import SlackResource
from rag_pipeline.defs.slack.sensors import slack_channel_discovery_sensor
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


def slack_is_live() -> bool:
    """Live Slack is configured: the Web API feeds ``slack_threads`` and the live-only definitions load."""
    return bool(os.environ.get("SLACK_BOT_TOKEN"))


def slack_api_resource() -> SlackResource:
    """The live Slack connector, configured from the environment (the token stays an EnvVar)."""
    return SlackResource(
        token=dg.EnvVar("SLACK_BOT_TOKEN"),
        base_url=os.environ.get("SLACK_API_BASE_URL") or None,
        page_size=int(os.environ.get("SLACK_PAGE_SIZE", "200")),
        lookback_days=int(os.environ.get("SLACK_LOOKBACK_DAYS", "30")),
    )


def build_resources(data_dir: str | None = None, live_slack: bool | None = None) -> dict[str, object]:
    """Resources for a data directory (default ``RAG_DATA_DIR``); the Qdrant server is used when QDRANT_URL is set.

    Slack threads come from the Web API when ``live_slack`` (default: when SLACK_BOT_TOKEN is set),
    else from the export (``RAG_SLACK_EXPORT``, the bundled one by default).
    """
    base = os.path.abspath(data_dir) if data_dir else str(settings.data_dir())
    qdrant_url = os.environ.get("QDRANT_URL")
    live = slack_is_live() if live_slack is None else live_slack
    slack_export = SlackExportResource(path=os.environ.get("RAG_SLACK_EXPORT", str(settings.BUNDLED_SLACK_EXPORT)))
    # Only a live setup has the `slack` resource: its token EnvVar must not be needed offline.
    slack: dict[str, object] = {"slack": slack_api_resource()} if live else {}
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
        "slack_export": slack_export,
        **slack,
        "slack_source": slack.get("slack", slack_export),
        "jira_dump": JiraDumpResource(path=os.environ.get("RAG_JIRA_DUMP", str(settings.BUNDLED_JIRA_DUMP))),
        "evaluation": EvaluationResource(eval_dir=str(settings.eval_dir()), reports_dir=os.path.join(base, "reports")),
    }


def build_definitions(data_dir: str | None = None) -> dg.Definitions:
    """All definitions; the embedded engine locks its folder, so steps run in one process unless a server is used.

    The live Slack definitions (discovery sensor, reconciliation asset, job and schedule) load only
    where SLACK_BOT_TOKEN is set; offline, the export feeds the same Slack chain.
    """
    live = slack_is_live()
    return dg.Definitions(
        assets=[*ASSETS, slack_reconciliation] if live else ASSETS,
        jobs=[*EVAL_JOBS, slack_reconciliation_job] if live else EVAL_JOBS,
        schedules=[slack_reconciliation_schedule] if live else [],
        sensors=[offline_source_discovery_sensor, *([slack_channel_discovery_sensor] if live else [])],
        resources=build_resources(data_dir),
        executor=dg.multiprocess_executor if os.environ.get("QDRANT_URL") else dg.in_process_executor,
    )


defs = build_definitions()
