"""The Dagster code location: every asset, check, sensor and resource of rag_pipeline."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, NamedTuple

import dagster as dg

from rag_pipeline import settings
from rag_pipeline.defs.automation import eval_sets_changed_sensor_for
from rag_pipeline.defs.evaluation.assets import EVAL_ARMS, reranker_model, retrieval_eval, retrieval_eval_report
from rag_pipeline.defs.evaluation.jobs import EVAL_JOBS
from rag_pipeline.defs.evaluation.resources import EvaluationResource
from rag_pipeline.defs.io_manager import PartitionedParquetIOManager
from rag_pipeline.defs.jira.assets import jira_chain, jira_issues
from rag_pipeline.defs.jira.reconciliation import (
    jira_reconciliation,
    jira_reconciliation_job,
    jira_reconciliation_schedule,
)
from rag_pipeline.defs.jira.resources import JiraResource
from rag_pipeline.defs.jira.sensors import jira_project_discovery_sensor
from rag_pipeline.defs.notifications import (
    SlackNotificationResource,
    eval_check_slack_notification_sensor,
    run_failure_slack_notification_sensor,
)
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

if TYPE_CHECKING:
    # What define_asset_job returns; dagster does not export the type at the top level.
    from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

ASSETS = [
    slack_threads,
    *slack_chain,
    jira_issues,
    *jira_chain,
    reranker_model,
    retrieval_eval,
    retrieval_eval_report,
]


eval_sets_changed_sensor = eval_sets_changed_sensor_for(
    list(EVAL_ARMS.get_partition_keys()), [retrieval_eval.key.to_user_string()]
)


class LiveSourceDefinitions(NamedTuple):
    """What a live source adds to the code location when it is configured."""

    reconciliation: dg.AssetsDefinition
    job: UnresolvedAssetJobDefinition
    schedule: dg.ScheduleDefinition
    discovery_sensor: dg.SensorDefinition


SLACK_LIVE = LiveSourceDefinitions(
    slack_reconciliation, slack_reconciliation_job, slack_reconciliation_schedule, slack_channel_discovery_sensor
)
JIRA_LIVE = LiveSourceDefinitions(
    jira_reconciliation, jira_reconciliation_job, jira_reconciliation_schedule, jira_project_discovery_sensor
)
NOTIFICATION_SENSORS = [run_failure_slack_notification_sensor, eval_check_slack_notification_sensor]


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


def jira_is_live() -> bool:
    """Live Jira is configured: the REST API feeds ``jira_issues`` and the live-only definitions load."""
    return bool(os.environ.get("JIRA_URL"))


def _env_flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    return default if value is None or value == "" else value.strip().lower() not in ("0", "false", "no", "off")


def jira_api_resource() -> JiraResource:
    """The live Jira connector, configured from the environment (secrets stay EnvVars).

    Cloud (default) authenticates with JIRA_USERNAME + JIRA_API_TOKEN; Server/Data Center
    (JIRA_CLOUD=0, or only JIRA_PAT set) with the personal access token JIRA_PAT.
    """
    has_pat = bool(os.environ.get("JIRA_PAT"))
    has_token = bool(os.environ.get("JIRA_API_TOKEN"))
    return JiraResource(
        url=os.environ.get("JIRA_URL", ""),
        cloud=_env_flag("JIRA_CLOUD", default=not (has_pat and not has_token)),
        username=os.environ.get("JIRA_USERNAME") or None,
        api_token=dg.EnvVar("JIRA_API_TOKEN") if has_token else None,
        personal_access_token=dg.EnvVar("JIRA_PAT") if has_pat else None,
        site=os.environ.get("JIRA_SITE") or None,
        page_size=int(os.environ.get("JIRA_PAGE_SIZE", "100")),
        overlap_minutes=int(os.environ.get("JIRA_OVERLAP_MINUTES", "15")),
    )


def notifications_enabled() -> bool:
    """Slack notifications are configured: a channel and a token to post with."""
    return bool(os.environ.get("RAG_NOTIFY_SLACK_CHANNEL")) and bool(
        os.environ.get("RAG_NOTIFY_SLACK_TOKEN") or os.environ.get("SLACK_BOT_TOKEN")
    )


def slack_notification_resource() -> SlackNotificationResource:
    """Notifications from the environment: RAG_NOTIFY_SLACK_TOKEN, else the connector's SLACK_BOT_TOKEN."""
    token = "RAG_NOTIFY_SLACK_TOKEN" if os.environ.get("RAG_NOTIFY_SLACK_TOKEN") else "SLACK_BOT_TOKEN"
    return SlackNotificationResource(
        token=dg.EnvVar(token),
        channel=os.environ.get("RAG_NOTIFY_SLACK_CHANNEL", ""),
        base_url=os.environ.get("SLACK_API_BASE_URL") or None,
        webserver_url=os.environ.get("DAGSTER_WEBSERVER_URL", "http://127.0.0.1:3000"),
    )


def build_resources(
    data_dir: str | None = None, live_slack: bool | None = None, live_jira: bool | None = None
) -> dict[str, object]:
    """Resources for a data directory (default ``RAG_DATA_DIR``); the Qdrant server is used when QDRANT_URL is set.

    Slack threads come from the Web API when ``live_slack`` (default: when SLACK_BOT_TOKEN is set),
    else from the export (``RAG_SLACK_EXPORT``, the bundled one by default); Jira issues from the
    REST API when ``live_jira`` (default: when JIRA_URL is set), else from the dump (``RAG_JIRA_DUMP``).
    """
    base = os.path.abspath(data_dir) if data_dir else str(settings.data_dir())
    qdrant_url = os.environ.get("QDRANT_URL")
    live = slack_is_live() if live_slack is None else live_slack
    jira_live = jira_is_live() if live_jira is None else live_jira
    slack_export = SlackExportResource(path=os.environ.get("RAG_SLACK_EXPORT", str(settings.BUNDLED_SLACK_EXPORT)))
    jira_dump = JiraDumpResource(path=os.environ.get("RAG_JIRA_DUMP", str(settings.BUNDLED_JIRA_DUMP)))
    # Only a live setup has the `slack`/`jira` resources: their secret EnvVars must not be needed offline.
    slack: dict[str, object] = {"slack": slack_api_resource()} if live else {}
    jira: dict[str, object] = {"jira": jira_api_resource()} if jira_live else {}
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
            shard_number=int(os.environ["QDRANT_SHARDS"]) if os.environ.get("QDRANT_SHARDS") else None,
            replication_factor=int(os.environ["QDRANT_REPLICAS"]) if os.environ.get("QDRANT_REPLICAS") else None,
        ),
        "slack_export": slack_export,
        **slack,
        "slack_source": slack.get("slack", slack_export),
        "jira_dump": jira_dump,
        **jira,
        "jira_source": jira.get("jira", jira_dump),
        **({"slack_notifications": slack_notification_resource()} if notifications_enabled() else {}),
        "evaluation": EvaluationResource(
            eval_dir=str(settings.eval_dir()),
            reports_dir=os.path.join(base, "reports"),
            llm_reranker_model=os.environ.get("RAG_LLM_RERANK_MODEL") or None,
        ),
    }


def build_definitions(data_dir: str | None = None) -> dg.Definitions:
    """All definitions; the embedded engine locks its folder, so steps run in one process unless a server is used.

    The live Slack definitions (discovery sensor, reconciliation asset, job and schedule) load only
    where SLACK_BOT_TOKEN is set, the live Jira ones only where JIRA_URL is set; offline, the export
    and the dump feed the same chains.
    """
    live = [d for d, on in ((SLACK_LIVE, slack_is_live()), (JIRA_LIVE, jira_is_live())) if on]
    return dg.Definitions(
        # Each asset links to the file and line that defines it ("code references" in the UI).
        assets=dg.with_source_code_references([*ASSETS, *(d.reconciliation for d in live)]),
        jobs=[*EVAL_JOBS, *(d.job for d in live)],
        schedules=[d.schedule for d in live],
        sensors=[
            offline_source_discovery_sensor,
            eval_sets_changed_sensor,
            *(d.discovery_sensor for d in live),
            *(NOTIFICATION_SENSORS if notifications_enabled() else []),
        ],
        resources=build_resources(data_dir),
        executor=dg.multiprocess_executor if os.environ.get("QDRANT_URL") else dg.in_process_executor,
    )


defs = build_definitions()
