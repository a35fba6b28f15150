"""Shared body of the reconciliation assets: plan each container against the index, apply the plans
(rewrites and ACL updates before removals), and describe what changed."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg
import pandas as pd

from rag_pipeline.defs.chain.resources import Bm25Resource, ChunkingResource, DenseEmbedderResource, QdrantResource
from rag_pipeline.defs.chain.source_spec import LiveDefinitions
from rag_pipeline.index.index_info import check_dense_model, check_sparse_terms
from rag_pipeline.index.store import SearchFilter
from rag_pipeline.reconciliation.reconcile import IndexWriters, ReconcilePlan, ReconcileResult, apply_plans
from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline.sources.problems import SourceError
from rag_pipeline.vectors.cache import EmbeddingCache


@dataclass
class Reconciliation:
    """What a reconciliation run changed, and which containers could not be checked."""

    result: ReconcileResult
    failed: dict[str, str] = field(default_factory=dict)


def reconcile_containers(
    source: str,
    containers: Sequence[str],
    plan: Callable[..., ReconcilePlan],
    qdrant: QdrantResource,
    dense_embedder: DenseEmbedderResource,
    chunking: ChunkingResource,
    bm25: Bm25Resource,
    log: Callable[[str], None],
    stored_fields: Sequence[str] = (),
) -> Reconciliation:
    """Plan every container against the source's documents the index holds for it (a container that
    cannot be read is skipped and reported), then apply the plans. With ``stored_fields``, the planner also gets
    those payload fields of each indexed document (``{document_id: {field: value}}``, read from its parent
    points): what the source cannot say from a version (Confluence: the ancestors a page was indexed under)."""
    failed: dict[str, str] = {}
    with qdrant.open() as store:
        check_dense_model(store, dense_embedder.model_name())
        check_sparse_terms(store, bm25.encoder().terms_id)
        plans = []
        for container in containers:
            try:
                flt = SearchFilter(sources=(source,), containers=(container,))
                indexed = store.indexed_documents(flt)
                if stored_fields:
                    payloads = store.parent_payloads(flt, ("document_id", *stored_fields))
                    stored = {str(p["document_id"]): p for p in payloads if p.get("document_id")}
                    plans.append(plan(container, indexed, stored))
                else:
                    plans.append(plan(container, indexed))
            except SourceError as exc:
                failed[container] = str(exc)
                log(str(exc))
        caches: list[EmbeddingCache] = []

        def writers() -> IndexWriters:
            # Only a rewrite embeds: ACL updates and removals never load the dense model.
            encoder = dense_embedder.encoder()
            caches.append(dense_embedder.cache())
            return IndexWriters(chunking.chunker(encoder), encoder, bm25.encoder(), caches[-1])

        try:
            result = apply_plans(store, plans, writers)
        finally:
            for cache in caches:
                cache.close()
    return Reconciliation(result, failed)


def reconciliation_output(
    done: Reconciliation, containers_label: str, containers: int, stats: ApiStats, started: float
) -> dg.MaterializeResult:
    """The materialization's metadata; a run with unreadable containers still applies the others'
    changes, then fails so the gap is seen."""
    result = done.result
    changes = pd.DataFrame(
        [("removed", d) for d in result.removed]
        + [("rewritten", d) for d in result.rewritten]
        + [("acl updated", d) for d in result.acl_updated],
        columns=["change", "document_id"],
    )
    metadata: dict[str, Any] = {
        containers_label: containers,
        f"{containers_label}_failed": dg.MetadataValue.json(done.failed),
        "documents_checked": result.checked,
        "documents_removed": len(result.removed),
        "documents_rewritten": len(result.rewritten),
        "documents_acl_updated": len(result.acl_updated),
        "changes": dg.MetadataValue.md(changes.head(50).to_markdown(index=False) if len(changes) else "none"),
        "api_calls": stats.api_calls,
        "api_retries": stats.total_retries,
        "elapsed_seconds": round(time.perf_counter() - started, 3),
    }
    if done.failed:
        raise dg.Failure(description="; ".join(done.failed.values()), metadata=metadata, allow_retries=False)
    return dg.MaterializeResult(metadata=metadata)


def live_definitions(
    source: str,
    reconciliation: dg.AssetsDefinition,
    discovery_sensor: dg.SensorDefinition,
    cron: str,
    job_description: str,
    schedule_description: str,
) -> LiveDefinitions:
    """A live source's reconciliation asset with its job (``<source>_reconciliation_job``) and daily schedule
    (``<source>_reconciliation_schedule``, UTC), plus its discovery sensor."""
    job = dg.define_asset_job(f"{source}_reconciliation_job", selection=[reconciliation], description=job_description)
    schedule = dg.ScheduleDefinition(
        name=f"{source}_reconciliation_schedule",
        job=job,
        cron_schedule=cron,
        execution_timezone="UTC",
        description=schedule_description,
        # Defined only where the source is configured and its sync switched on: it runs from the first start.
        default_status=dg.DefaultScheduleStatus.RUNNING,
    )
    return LiveDefinitions(reconciliation, job, schedule, discovery_sensor)
