"""The whole ``Definitions`` of the code location, from one ``Settings``: the parts a run executes with
(:mod:`rag_pipeline.defs.parts`: the source specs, the resources, the evaluation) with the jobs, schedules and
sensors around them.

The code location (:mod:`rag_pipeline.definitions`) calls :func:`build_definitions`; the in-process runners never
load it (they take the parts, through :mod:`rag_pipeline.runs.code_location`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from datetime import date
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

from rag_pipeline.defs.automation import build_automation_condition_sensor
from rag_pipeline.defs.chain.discovery import build_offline_source_discovery_sensor
from rag_pipeline.defs.chain.source_spec import SourceSpec
from rag_pipeline.defs.directory import build_access_audit_asset, build_directory_asset
from rag_pipeline.defs.evaluation.answers import build_answer_quality
from rag_pipeline.defs.evaluation.mining import build_mined_eval_sets
from rag_pipeline.defs.evaluation.quality import build_quality_over_time
from rag_pipeline.defs.evaluation.sensors import build_eval_sets_changed_sensor, build_mined_queries_sensor
from rag_pipeline.defs.evaluation.tool_search import build_tool_search_eval
from rag_pipeline.defs.executors import build_executor
from rag_pipeline.defs.notifications import eval_check_slack_notification_sensor, run_failure_slack_notification_sensor
from rag_pipeline.defs.parts import build_resources, data_partition_starts, evaluation_definitions, source_specs
from rag_pipeline.defs.retention import build_retention_definitions
from rag_pipeline.defs.sync.sensor import build_gap_check, build_lag_check, build_sync_sensor
from rag_pipeline.pipeline.partition_start import partition_start_of, record_planned_start
from rag_pipeline.pipeline.policy import sync_policy
from rag_pipeline.pipeline.sources import document_points, document_sources
from rag_pipeline.scheduling.pause import IngestionPause
from rag_pipeline.settings import Settings
from rag_pipeline.sources.registry import get_source, tool_sources

if TYPE_CHECKING:
    from rag_pipeline.runs.dagster_private import UnresolvedAssetJobDefinition

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


def source_settings(settings: Settings, starts: Mapping[str, str], source: str) -> Settings:
    """``settings`` with ``source``'s partition start (what its spec was built with)."""
    start = partition_start_of(source, starts, settings.partition_start, settings.partition_start_explicit)
    return settings.model_copy(update={"partition_start": start})


def planned_start_recorder(settings: Settings, source: str) -> Callable[[date], None]:
    """What a sync sensor tells of each run it plans: the first day, recorded as the source's partition start before
    the run is requested (its steps load the code location again); nothing where RAG_PARTITION_START is set."""
    if settings.partition_start_explicit:
        return lambda _first_day: None
    return partial(record_planned_start, settings.data_dir, source)


def build_definitions(settings: Settings) -> dg.Definitions:
    """All definitions; the embedded engine locks its folder, so steps run in one process unless a server is used.

    A live source's definitions (discovery sensor, reconciliation asset, job and schedule) load only
    where its API is configured (SLACK_BOT_TOKEN, JIRA_URL); offline, the export and the dump feed the
    same chains.
    """
    quiet_chosen_beta_warnings()
    # Each source's partitions start at its first data week (read from the data folder now: a partitions
    # definition is fixed for as long as the code location is loaded).
    starts = data_partition_starts(settings)
    specs = source_specs(settings, starts)
    # A sensor plans no run before its source's first partition: such a run could not be launched.
    policies = {name: sync_policy(source_settings(settings, starts, name), name) for name in specs}
    evaluation = evaluation_definitions(settings, specs)
    live = [s.live_definitions for s in specs.values() if s.is_live]
    # A live source whose sync is switched off keeps its assets and reconciliation job (run by hand) but
    # defines no sensor or schedule, so nothing of it runs by itself.
    synced = [s for s in specs.values() if s.name in settings.synced_sources]
    # One switch for all of them (rag-pipeline pause / RAG_INGESTION_PAUSED), read at every tick.
    sync_sensors = [
        build_sync_sensor(
            s,
            settings.automation.sync(s.name).cron,
            policies[s.name],
            paused=settings.ingestion_pause,
            planned=planned_start_recorder(settings, s.name),
        )
        for s in synced
    ]
    directories = [build_directory_asset(s.name) for s in specs.values() if s.directory]
    if directories:
        audited = [s.name for s in specs.values() if s.directory]
        directories.append(build_access_audit_asset(audited, settings.audit_mass_change_accounts))
    assets = [a for s in specs.values() for a in s.assets] + directories + evaluation.assets
    documents = document_sources(specs)
    # The mined sets' weeks start with the earliest document source's (they read every week of every source).
    mined_start = min(
        (source_settings(settings, starts, name).partition_start for name in documents),
        default=settings.partition_start,
    )
    mined = build_mined_eval_sets(specs, documents, mined_start)
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
                build_lag_check(s, settings.automation.sync(s.name).cron, policies[s.name])
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
