"""The parts of the code location a run executes with, as functions of one ``Settings``: every registered
source's spec (its assets), the resources and the evaluation's assets.

:mod:`rag_pipeline.defs.builders` assembles them with the jobs, schedules and sensors into the ``Definitions``; the
in-process runners take them from here (through :mod:`rag_pipeline.runs.code_location` alone), so a run started
from the command line executes the very assets the UI shows. They never load the whole ``Definitions``: that
would import the retention job's wiring, which imports the runners' retention.
"""

from collections.abc import Mapping

import dagster as dg

from rag_pipeline.defs.chain.io_manager import PartitionedParquetIOManager
from rag_pipeline.defs.chain.resources import (
    AUTO,
    Bm25Resource,
    ChunkingResource,
    DenseEmbedderResource,
    qdrant_resource,
)
from rag_pipeline.defs.chain.source_spec import SourceSpec
from rag_pipeline.defs.directory import directory_resource
from rag_pipeline.defs.evaluation.answers import answer_resource
from rag_pipeline.defs.evaluation.assets import EvaluationDefinitions, build_evaluation
from rag_pipeline.defs.evaluation.mining import MiningResource
from rag_pipeline.defs.evaluation.resources import EvaluationResource
from rag_pipeline.defs.notifications import SlackNotificationResource
from rag_pipeline.pipeline.partition_start import partition_start_of, update_partition_starts
from rag_pipeline.pipeline.sources import document_points
from rag_pipeline.settings import NotificationSettings, Settings
from rag_pipeline.sources.registry import load_object, registered_sources


def source_specs(settings: Settings, partition_starts: Mapping[str, str] | None = None) -> dict[str, SourceSpec]:
    """Every registered source's spec, by name (:mod:`rag_pipeline.sources.registry`). ``partition_starts``: where
    each source's weekly partitions start (the code location's, :func:`data_partition_starts`); without it every
    source's start at ``RAG_PARTITION_START`` (the in-process runners': any admitted week can be run)."""
    specs: dict[str, SourceSpec] = {}
    for name, source in registered_sources().items():
        start = partition_start_of(
            name, partition_starts or {}, settings.partition_start, settings.partition_start_explicit
        )
        spec = load_object(source.dagster_spec)(settings.model_copy(update={"partition_start": start}))
        if not isinstance(spec, SourceSpec) or spec.name != name:
            raise TypeError(f"{source.dagster_spec} must return the SourceSpec of {name!r}, got {spec!r}")
        specs[name] = spec
    return specs


def data_partition_starts(settings: Settings) -> dict[str, str]:
    """Each registered source's first data week, from the data folder (the record brought up to date from the week
    files: :mod:`rag_pipeline.pipeline.partition_start`); empty where RAG_PARTITION_START is set (it wins)."""
    if settings.partition_start_explicit:
        return {}
    starts = update_partition_starts(settings.data_dir, settings.paths.parquet, registered_sources())
    return dict(starts.weeks)


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
        trust_remote_code=settings.dense_trust_remote_code,
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
