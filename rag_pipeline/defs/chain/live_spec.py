"""The spec of a source with a live API, built from what the source declares (:class:`LiveSource`).

Every live source gets the same Dagster shape: weekly partitions, its containers as the dynamic partitions
``<name>_<containers_label>``, its raw asset and the shared chain down to the Qdrant points, a discovery sensor
adding new containers, and a reconciliation asset with its job and daily schedule. Only what differs is declared
in ``defs/<name>/spec.py``: the asset's name and description, how discovery reads the containers and what it
skipped, and how a container is reconciled; the API and offline resources live in ``defs/<name>/resources.py``.
"""

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import dagster as dg

from rag_pipeline.defs.automation import API_RETRY
from rag_pipeline.defs.chain.assets import QDRANT_POOL, build_source_chain
from rag_pipeline.defs.chain.discovery import MAX_REPORTED_SKIPS, report_skips, skipped_note
from rag_pipeline.defs.chain.partitions import weekly_partitions
from rag_pipeline.defs.chain.raw import build_raw_documents_asset
from rag_pipeline.defs.chain.source_spec import ContainerSelector, LiveDefinitions, OfflineSource, SourceSpec
from rag_pipeline.defs.executors import QDRANT_QUEUE, step_tags
from rag_pipeline.defs.sync.reconciliation import live_definitions, reconcile_containers, reconciliation_output
from rag_pipeline.pipeline.keys import ChainKeys
from rag_pipeline.reconciliation.reconcile import ReconcilePlan
from rag_pipeline.settings import ApiLimits, Settings
from rag_pipeline.sources.problems import RecordProblem

# The resources every reconciliation writes the index with.
INDEX_RESOURCES = ("qdrant", "dense_embedder", "chunking", "bm25")

_log = logging.getLogger(__name__)


class ApiLimitFields(TypedDict):
    """The read bounds every live API resource has as config fields."""

    timeout_seconds: int
    page_cap: int
    requests_per_partition: int
    seconds_per_partition: int


def api_limits(limits: ApiLimits | None) -> ApiLimitFields:
    """The bounds of every read a live API resource takes from the settings (timeouts, page cap, per-partition
    budgets; ``RAG_API_*``), as its config fields."""
    limits = limits or ApiLimits()
    return ApiLimitFields(
        timeout_seconds=limits.timeout_seconds,
        page_cap=limits.page_cap,
        requests_per_partition=limits.requests_per_partition,
        seconds_per_partition=limits.seconds_per_partition,
    )


def report_listing_problems(label: str, found: Sequence[RecordProblem], problems: list[RecordProblem] | None) -> None:
    """Listings a discovery refused (an invalid id): into ``problems`` (the sync's report of what it skipped) when
    given, else to the log."""
    if problems is not None:
        problems.extend(found)
    else:
        for problem in found:
            _log.warning("%s: skipped %s", label, problem)


@dataclass(frozen=True)
class Skipped:
    """What one discovery left out, as the tick reports it: its words, its cursor key and the items."""

    what: str  # "channel(s) the bot is not a member of (invite it to sync them)"
    cursor_key: str  # "not_member"
    items: Sequence[str]


@dataclass(frozen=True)
class Discovered:
    """The containers one discovery listed (ids, the partition keys) and what it skipped."""

    ids: Sequence[str]
    skipped: Sequence[Skipped] = ()


# (resource, reader, config) -> plan(container, the documents the index holds for it[, their stored payload fields])
ReconcilePlanner = Callable[[Any, Any, Any], Callable[..., ReconcilePlan]]


@dataclass(frozen=True)
class Reconciliation:
    """A live source's reconciliation: its config (``containers`` names the config's list field), how to plan a
    container, when it runs and how the UI describes it."""

    config: type[dg.Config]
    containers_field: str  # "channels": the config's list of container ids (empty: every discovered one)
    plan: ReconcilePlanner
    cron: str
    description: str
    job_description: str
    schedule_description: str
    # Payload fields of the indexed documents the planner also needs (passed as a third argument).
    stored_fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class LiveSource:
    """What a live source declares; :func:`live_source_spec` builds its whole spec from it."""

    name: str  # "slack": the asset group, the API resource key, the payload's ``source``
    containers_label: str  # "channels"
    raw_asset: str  # "slack_threads"
    raw_description: str
    api_pool: str  # "slack_api": the pool bounding concurrent reads of the API
    offline_resource_key: str  # "slack_export"
    offline_resource: OfflineSource
    live_resource: dg.ConfigurableResource | None  # None where the live API is not configured
    select_live_containers: ContainerSelector
    discover: Callable[[Any, Callable[[str], None]], Discovered]  # (API resource, log) -> containers
    discovery_sensor: str  # "slack_channel_discovery_sensor"
    discovery_description: str
    cursor_key: str  # "channels": the discovery cursor's list of ids
    reconciliation: Reconciliation
    directory: bool = True  # its resources read a principal directory
    kinds: frozenset[str] = field(default_factory=frozenset)  # extra asset kinds (default: the name)


def live_source_spec(settings: Settings, live: LiveSource) -> SourceSpec:
    """The whole spec of a live source: partitions, raw asset and chain, resources, discovery, reconciliation."""
    partitions = weekly_partitions(settings.partition_start)
    containers = dg.DynamicPartitionsDefinition(name=f"{live.name}_{live.containers_label}")
    keys = ChainKeys(live.name, live.raw_asset)
    raw = build_raw_documents_asset(
        name=live.raw_asset,
        source=live.name,
        pool=live.api_pool,
        partitions_def=partitions,
        first_day=settings.partition_start,
        containers_name=f"{live.name}_{live.containers_label}",
        max_document_chars=settings.max_document_chars,
        failed_label=f"{live.containers_label}_failed",
        description=live.raw_description,
    )
    sensor = _discovery_sensor(live, keys, containers)
    return SourceSpec(
        name=live.name,
        containers_label=live.containers_label,
        partitions=partitions,
        containers=containers,
        keys=keys,
        assets=(raw, *build_source_chain(keys, partitions)),
        offline_resource_key=live.offline_resource_key,
        offline_resource=live.offline_resource,
        live_resource=live.live_resource,
        live=_reconciliation(live, keys, containers, sensor),
        api_tag=f"{live.name}-api",
        select_live_containers=live.select_live_containers,
        directory=live.directory,
    )


def _discovery_sensor(
    live: LiveSource, keys: ChainKeys, containers: dg.DynamicPartitionsDefinition
) -> dg.SensorDefinition:
    """New containers become partitions (the sync sensor then requests their history)."""
    name = live.name

    @dg.sensor(
        name=live.discovery_sensor,
        minimum_interval_seconds=3600,
        asset_selection=keys.all,
        default_status=dg.DefaultSensorStatus.RUNNING,
        required_resource_keys={name},
        description=live.discovery_description,
    )
    def discovery_sensor(context: dg.SensorEvaluationContext, **given: Any) -> dg.SensorResult:
        # Direct invocation hands the resource over as a keyword; the daemon leaves it on the context.
        resource = given.get(name) or getattr(context.resources, name)
        found = live.discover(resource, context.log.info)
        known = set(context.instance.get_dynamic_partitions(containers.name or ""))
        new = [c for c in found.ids if c not in known]
        notes = report_skips(context, [skipped_note(s.what, list(s.items)) for s in found.skipped])
        cursor: dict[str, object] = {live.cursor_key: sorted(found.ids)}
        if notes:
            cursor["skipped"] = {s.cursor_key: list(s.items)[:MAX_REPORTED_SKIPS] for s in found.skipped}
        return dg.SensorResult(
            dynamic_partitions_requests=[containers.build_add_request(new)] if new else [],
            cursor=json.dumps(cursor),
            skip_reason=None if new else "; ".join([f"no new {live.containers_label}", *notes]),
        )

    return discovery_sensor


def _reconciliation(
    live: LiveSource, keys: ChainKeys, containers: dg.DynamicPartitionsDefinition, sensor: dg.SensorDefinition
) -> LiveDefinitions:
    """The reconciliation asset (every discovered container, or those its config names), job and schedule."""
    name, declared = live.name, live.reconciliation

    def reconciliation(context: dg.AssetExecutionContext, config: dg.Config) -> dg.MaterializeResult:
        started = time.perf_counter()
        resources = context.resources
        resource = getattr(resources, name)
        reader = resource.reader(context.log.info)
        chosen = list(getattr(config, declared.containers_field))
        ids = chosen or context.instance.get_dynamic_partitions(containers.name or "")
        plan = declared.plan(resource, reader, config)
        done = reconcile_containers(
            name,
            ids,
            plan,
            resources.qdrant,
            resources.dense_embedder,
            resources.chunking,
            resources.bm25,
            context.log.error,
            declared.stored_fields,
        )
        return reconciliation_output(done, live.containers_label, len(ids), reader.stats, started)

    # Dagster reads the run config's schema from the parameter's annotation: the source's own config class.
    reconciliation.__annotations__["config"] = declared.config
    asset = dg.asset(
        name=f"{name}_reconciliation",
        deps=[keys.points],
        group_name=name,
        kinds=set(live.kinds or {name}) | {"qdrant"},
        owners=["team:rag-platform"],
        pool=QDRANT_POOL,
        op_tags=step_tags(QDRANT_QUEUE),
        retry_policy=API_RETRY,
        required_resource_keys={name, *INDEX_RESOURCES},
        description=declared.description,
    )(reconciliation)

    return live_definitions(
        name,
        asset,
        sensor,
        cron=declared.cron,
        job_description=declared.job_description,
        schedule_description=declared.schedule_description,
    )
