"""Everything the code location is built from, as functions of one ``Settings``: the source specs (from the
source registry), the resources, the evaluation, the sync policy and the whole ``Definitions``.

The code location (:mod:`rag_pipeline.definitions`) calls :func:`build_definitions`; the in-process runners
(``rag_pipeline.runs``) and the commands build the same resources and specs from here, so a run started from the
command line executes the very assets the UI shows.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

from rag_pipeline.defs.automation import build_automation_condition_sensor
from rag_pipeline.defs.chain.discovery import build_offline_source_discovery_sensor
from rag_pipeline.defs.chain.io_manager import PartitionedParquetIOManager
from rag_pipeline.defs.chain.resources import (
    AUTO,
    Bm25Resource,
    ChunkingResource,
    DenseEmbedderResource,
    qdrant_resource,
)
from rag_pipeline.defs.chain.source_spec import SourceSpec
from rag_pipeline.defs.directory import build_access_audit_asset, build_directory_asset, directory_resource
from rag_pipeline.defs.evaluation.answers import answer_resource, build_answer_quality
from rag_pipeline.defs.evaluation.assets import EvaluationDefinitions, build_evaluation
from rag_pipeline.defs.evaluation.mining import MiningResource, build_mined_eval_sets
from rag_pipeline.defs.evaluation.quality import build_quality_over_time
from rag_pipeline.defs.evaluation.resources import EvaluationResource
from rag_pipeline.defs.evaluation.sensors import build_eval_sets_changed_sensor, build_mined_queries_sensor
from rag_pipeline.defs.evaluation.tool_search import build_tool_search_eval
from rag_pipeline.defs.executors import build_executor
from rag_pipeline.defs.notifications import (
    SlackNotificationResource,
    eval_check_slack_notification_sensor,
    run_failure_slack_notification_sensor,
)
from rag_pipeline.defs.retention import build_retention_definitions
from rag_pipeline.defs.sync.sensor import build_gap_check, build_lag_check, build_sync_sensor
from rag_pipeline.scheduling.pause import IngestionPause
from rag_pipeline.scheduling.plan import SyncPolicy
from rag_pipeline.settings import NotificationSettings, Settings
from rag_pipeline.sources.registry import get_source, load_object, registered_sources, tool_sources

if TYPE_CHECKING:
    from rag_pipeline.defs.dagster_private import UnresolvedAssetJobDefinition

# The Beta/Preview APIs the project uses on purpose (docs/notes/quiet_load.md says why); any other
# warning, and these categories from any other API, stays visible.
CHOSEN_BETA_APIS = (
    r".*\bbackfill_policy\b",
    r".*\bwith_source_code_references\b",
    r".*\bCodeReferencesMetadataValue\b",
    r".*\bLocalFileCodeReference\b",
    r".*\bAutomationConditionSensorDefinition\b",
    r".*\bFreshnessPolicy\b",
    r".*\bfreshness_policy\b",
    r".*\bpool\b",
    # Checks planned for a run's week are recorded against it (docs/notes/quiet_load.md).
    r".*\bpartitions_def on an AssetCheckSpec\b",
)


def source_specs(settings: Settings) -> dict[str, SourceSpec]:
    """Every registered source's spec, by name (:mod:`rag_pipeline.sources.registry`)."""
    specs: dict[str, SourceSpec] = {}
    for name, source in registered_sources().items():
        spec = load_object(source.dagster_spec)(settings)
        if not isinstance(spec, SourceSpec) or spec.name != name:
            raise TypeError(f"{source.dagster_spec} must return the SourceSpec of {name!r}, got {spec!r}")
        specs[name] = spec
    return specs


def document_points(specs: dict[str, SourceSpec]) -> list[str]:
    """The Qdrant points assets of the document sources: what the document evaluations read (a tool catalog has its
    own evaluation, tool_search_eval)."""
    tools = set(tool_sources())
    return [s.keys.points for name, s in specs.items() if name not in tools]


def evaluation_definitions(settings: Settings, specs: dict[str, SourceSpec]) -> EvaluationDefinitions:
    """The evaluation over every document source's Qdrant points."""
    return build_evaluation(
        document_points(specs),
        settings.llm_rerank_model,
        settings.automation.eval_cron,
        settings.rewrite_model,
    )


def evaluation_resource(settings: Settings) -> EvaluationResource:
    return EvaluationResource(
        eval_dir=str(settings.eval_dir),
        reports_dir=str(settings.paths.reports),
        llm_reranker_model=settings.llm_rerank_model,
        exact_dense=settings.eval_exact_dense,
        workers=settings.eval_workers,
        sparse_query=settings.sparse_query,
        learned_fusion=settings.learned_fusion,
        rewrite_model=settings.rewrite_model,
        directory_path=str(settings.paths.directory),
        identity_links=str(settings.identity_links_file),
        mined_dir=str(settings.paths.mined_eval_sets / "sets"),
    )


def mining_resource(settings: Settings) -> MiningResource:
    return MiningResource(
        parquet_dir=str(settings.paths.parquet),
        mined_dir=str(settings.paths.mined_eval_sets),
        directory_path=str(settings.paths.directory),
        identity_links=str(settings.identity_links_file),
        max_queries=settings.mined_max_queries,
        run_as=settings.mined_run_as,
        feedback_dir=str(settings.paths.feedback),
    )


def mined_sources(specs: dict[str, SourceSpec]) -> list[str]:
    """The document sources whose raw documents are mined for eval sets."""
    tools = set(tool_sources())
    return [name for name in specs if name not in tools]


def undecided_language_file(settings: Settings) -> str | None:
    """The data folder's language file while its language is still to be chosen by a first index run from
    Dagster (no choice recorded, no index yet): the resources' unpinned models are then ``auto``."""
    existing_index = settings.qdrant.url is not None or settings.has_embedded_index()
    return None if existing_index or not settings.language_undecided() else str(settings.paths.language)


def dense_embedder_resource(settings: Settings) -> DenseEmbedderResource:
    language_file = undecided_language_file(settings)
    return DenseEmbedderResource(
        model=AUTO if language_file and not settings.dense_model_pinned else settings.dense_model,
        language_file=language_file,
        cache_path=str(settings.paths.embedding_cache),
        backend=settings.dense_backend,
        device=settings.dense_device,
        model_cache=str(settings.model_cache) if settings.model_cache else None,
    )


def bm25_resource(settings: Settings) -> Bm25Resource:
    language_file = undecided_language_file(settings)
    if language_file and not settings.bm25_tokenizer_pinned:
        return Bm25Resource(tokenizer="auto", language_file=language_file)
    return Bm25Resource(tokenizer=settings.bm25_tokenizer)


def slack_notification_resource(notifications: NotificationSettings) -> SlackNotificationResource:
    """Notifications: RAG_NOTIFY_SLACK_TOKEN, else the connector's SLACK_BOT_TOKEN (an EnvVar either way)."""
    return SlackNotificationResource(
        token=dg.EnvVar(notifications.token_env),
        channel=notifications.channel,
        base_url=notifications.base_url,
        webserver_url=notifications.webserver_url,
    )


def build_resources(
    settings: Settings, specs: dict[str, SourceSpec] | None = None, live: bool | None = None
) -> dict[str, object]:
    """Every resource for these settings. Each source reads its live API where configured (``live=False``
    forces the offline files, as the demo does); the Qdrant server is used where QDRANT_URL is set."""
    specs = source_specs(settings) if specs is None else specs
    sources: dict[str, object] = {}
    for spec in specs.values():
        sources.update(spec.resources(live))
    notifications = settings.notifications
    return {
        "parquet_io_manager": PartitionedParquetIOManager(base_dir=str(settings.paths.parquet)),
        "dense_embedder": dense_embedder_resource(settings),
        "chunking": ChunkingResource(
            parent_tokens=settings.chunking.parent_tokens,
            parent_overlap=settings.chunking.parent_overlap,
            child_tokens=settings.chunking.child_tokens,
            child_overlap=settings.chunking.child_overlap,
        ),
        "bm25": bm25_resource(settings),
        "qdrant": qdrant_resource(settings),
        "directory": directory_resource(settings),
        **({"answers": answers} if (answers := answer_resource(settings)) else {}),
        **sources,
        **({"slack_notifications": slack_notification_resource(notifications)} if notifications else {}),
        "evaluation": evaluation_resource(settings),
        "mining": mining_resource(settings),
    }


def resync_job(spec: SourceSpec) -> UnresolvedAssetJobDefinition:
    """``<source>_resync``: the source's chain over the selected weeks, for the containers named in the
    launchpad (``ops: {<raw asset>: {config: {containers: [...]}}}``); only their rows are read and
    rewritten, the other containers' rows of those weeks are kept."""
    return dg.define_asset_job(
        f"{spec.name}_resync",
        selection=list(spec.keys.all),
        description=f"Re-sync {spec.containers_label} of {spec.name} over a range of weeks: pick the weeks, then "
        f"name the {spec.containers_label} in the config of `{spec.keys.raw}` (`containers: [...]`; empty: all).",
        tags={"rag/resync": spec.name},
    )


def sync_policy(settings: Settings, source: str) -> SyncPolicy:
    """How a live source's scheduled sync plans its range runs."""
    sync = settings.automation.sync(source)
    return SyncPolicy(
        first_day=settings.partition_start,
        initial_history_days=sync.initial_history_days,
        settle=timedelta(hours=settings.automation.settle_hours),
        max_range_days=settings.automation.max_range_days,
        requests_per_minute=sync.requests_per_minute,
    )


def quiet_chosen_beta_warnings() -> None:
    """Silence Dagster's Beta/Preview warnings for the APIs listed in :data:`CHOSEN_BETA_APIS` only."""
    for category in (dg.BetaWarning, dg.PreviewWarning):
        for pattern in CHOSEN_BETA_APIS:
            warnings.filterwarnings("ignore", message=pattern, category=category)


def pausable(schedule: dg.ScheduleDefinition, paused: Callable[[], IngestionPause | None]) -> dg.ScheduleDefinition:
    """``schedule`` with its ticks skipped while ``paused()`` names a pause (scheduling/pause.py)."""

    def should_execute(context: dg.ScheduleEvaluationContext) -> bool:
        pause = paused()
        if pause is not None:
            context.log.info(f"skipped: {pause.describe()}")
        return pause is None

    return dg.ScheduleDefinition(
        name=schedule.name,
        job=schedule.job,
        cron_schedule=schedule.cron_schedule,
        execution_timezone=schedule.execution_timezone,
        description=schedule.description,
        default_status=schedule.default_status,
        should_execute=should_execute,
    )


def build_definitions(settings: Settings) -> dg.Definitions:
    """All definitions; the embedded engine locks its folder, so steps run in one process unless a server is used.

    A live source's definitions (discovery sensor, reconciliation asset, job and schedule) load only
    where its API is configured (SLACK_BOT_TOKEN, JIRA_URL); offline, the export and the dump feed the
    same chains.
    """
    quiet_chosen_beta_warnings()
    specs = source_specs(settings)
    evaluation = evaluation_definitions(settings, specs)
    live = [s.live_definitions for s in specs.values() if s.is_live]
    # A live source whose sync is switched off keeps its assets and reconciliation job (run by hand) but
    # defines no sensor or schedule, so nothing of it runs by itself.
    synced = [s for s in specs.values() if s.name in settings.synced_sources]
    # One switch for all of them (rag-pipeline pause / RAG_INGESTION_PAUSED), read at every tick.
    sync_sensors = [
        build_sync_sensor(
            s, settings.automation.sync(s.name).cron, sync_policy(settings, s.name), paused=settings.ingestion_pause
        )
        for s in synced
    ]
    directories = [build_directory_asset(s.name) for s in specs.values() if s.directory]
    if directories:
        audited = [s.name for s in specs.values() if s.directory]
        directories.append(build_access_audit_asset(audited, settings.audit_mass_change_accounts))
    assets = [a for s in specs.values() for a in s.assets] + directories + evaluation.assets
    mined = build_mined_eval_sets(specs, mined_sources(specs), settings.partition_start)
    assets += [mined, build_quality_over_time(evaluation.retrieval_eval_report)]
    if settings.answer_model:
        # Answers are checked only where a model writes them (each query costs LLM calls).
        assets.append(build_answer_quality([dg.AssetDep(points) for points in document_points(specs)]))
    for name in (n for n in tool_sources() if n in specs):
        # A tool catalog is scored by tool search's own evaluation (its section names the eval set).
        section = settings.section(name, get_source(name).settings)
        eval_dir = Path(getattr(section, "eval_dir"))  # noqa: B009 - a tool source's section, typed as any source's
        points = dg.AssetKey(specs[name].keys.points)
        assets.append(build_tool_search_eval(points, eval_dir, settings.paths.reports))
    assets += [d.reconciliation for d in live]
    notification_sensors = [run_failure_slack_notification_sensor, eval_check_slack_notification_sensor]
    retention_jobs, retention_schedules = build_retention_definitions(settings)
    return dg.Definitions(
        # Each asset links to the file and line that defines it ("code references" in the UI).
        assets=dg.with_source_code_references(assets),
        asset_checks=[
            *(build_gap_check(s) for s in specs.values() if s.is_live),
            *(
                build_lag_check(s, settings.automation.sync(s.name).cron, sync_policy(settings, s.name))
                for s in specs.values()
                if s.is_live
            ),
        ],
        jobs=[*evaluation.jobs, *(d.job for d in live), *(resync_job(s) for s in specs.values()), *retention_jobs],
        schedules=[
            *(pausable(s.live_definitions.schedule, settings.ingestion_pause) for s in synced),
            *retention_schedules,
        ],
        sensors=[
            build_automation_condition_sensor(running=bool(synced)),
            *sync_sensors,
            *(s.live_definitions.discovery_sensor for s in synced),
            build_offline_source_discovery_sensor(list(specs.values())),
            build_eval_sets_changed_sensor(
                list(evaluation.arms.get_partition_keys()),
                [evaluation.retrieval_eval.key.to_user_string()],
                settings.eval_dir,
            ),
            build_mined_queries_sensor(
                list(evaluation.arms.get_partition_keys()),
                [evaluation.retrieval_eval.key.to_user_string()],
                settings.paths.mined_eval_sets / "sets",
                settings.mined_min_new_queries,
            ),
            *(notification_sensors if settings.notifications else []),
        ],
        resources=build_resources(settings, specs),
        executor=build_executor(settings),
    )
