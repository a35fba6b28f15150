"""The spec of a source read from offline files only: what a plugin source without a live API needs to build."""

import dagster as dg

from rag_pipeline.defs.chain.assets import build_source_chain
from rag_pipeline.defs.chain.partitions import weekly_partitions
from rag_pipeline.defs.chain.raw import build_raw_documents_asset
from rag_pipeline.defs.chain.source_spec import OfflineSource, SourceSpec
from rag_pipeline.pipeline.keys import ChainKeys


def offline_source_spec(
    *,
    name: str,
    raw_asset: str,
    containers_label: str,
    offline_resource: OfflineSource,
    settings_partition_start: str,
    max_document_chars: int,
    description: str,
) -> SourceSpec:
    """The spec of a source read from offline files only: weekly partitions, its containers registered as the
    dynamic partitions ``<name>_<containers_label>``, its raw asset (``raw_asset``) and the shared chain down to
    the Qdrant
    points, with ``offline_resource`` feeding them (a ``read``/``read_partitions``/``identity`` resource)."""
    containers = dg.DynamicPartitionsDefinition(name=f"{name}_{containers_label}")
    partitions = weekly_partitions(settings_partition_start)
    keys = ChainKeys(name, raw_asset)
    raw = build_raw_documents_asset(
        name=raw_asset,
        source=name,
        pool=f"{name}_source",
        partitions_def=partitions,
        first_day=settings_partition_start,
        containers_name=f"{name}_{containers_label}",
        max_document_chars=max_document_chars,
        failed_label=f"{containers_label}_failed",
        description=description,
    )
    return SourceSpec(
        name=name,
        containers_label=containers_label,
        partitions=partitions,
        containers=containers,
        keys=keys,
        assets=(raw, *build_source_chain(keys, partitions)),
        offline_resource_key=f"{name}_files",
        offline_resource=offline_resource,
        live_resource=None,
    )
