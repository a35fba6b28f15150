"""Shared body of the raw documents assets: select a source's documents for the run's partitions."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg
import pandas as pd

from rag_pipeline.defs.partitions import multi_key
from rag_pipeline.sources.document import Document
from rag_pipeline.sources.problems import RecordProblem
from rag_pipeline.sources.source_read import SourceRead
from rag_pipeline.stages import documents_frame


def documents_by_partition(
    context: dg.AssetExecutionContext,
    partitions_def: dg.MultiPartitionsDefinition,
    documents: Sequence[Document],
    problems: Sequence[RecordProblem],
    started: float,
    partition_day: Mapping[str, str] | None = None,
    extra_metadata: Mapping[str, Any] | None = None,
) -> dg.Output:
    """Each document lands in the partition (day of its latest activity, container) of the run,
    unless ``partition_day`` names another day for it."""
    wanted = {str(k) for k in context.partition_keys}
    selected: dict[str, list[Document]] = {k: [] for k in wanted}
    day_of = partition_day or {}
    for doc in documents:
        key = str(multi_key(partitions_def, day_of.get(doc.id, doc.day), doc.container))
        if key in wanted:
            selected[key].append(doc)
    frames = {k: documents_frame(docs) for k, docs in selected.items()}
    total = sum(len(f) for f in frames.values())
    if problems:
        context.log.warning(f"{len(problems)} source records could not be read; first: {problems[0]}")
    authors = {a for docs in selected.values() for d in docs for a in d.authors}
    return dg.Output(
        frames,
        metadata={
            "partitions": len(wanted),
            "partitions_with_documents": sum(1 for f in frames.values() if len(f)),
            "documents": total,
            "dagster/row_count": total,
            "authors": len(authors),
            "characters": int(sum(f["text"].str.len().sum() for f in frames.values() if len(f))),
            "bad_records": len(problems),
            "bad_record_examples": dg.MetadataValue.md("\n".join(f"- `{p}`" for p in problems[:10]) or "none"),
            "preview": dg.MetadataValue.md(_preview(frames)),
            **(extra_metadata or {}),
            "elapsed_seconds": round(time.perf_counter() - started, 3),
        },
    )


def source_read_output(
    context: dg.AssetExecutionContext,
    partitions_def: dg.MultiPartitionsDefinition,
    read: SourceRead,
    started: float,
    failed_label: str,
) -> dg.Output:
    """A live or offline source's read as the raw asset's output; containers that could not be read
    fail the run (with the reasons and the call counts as metadata) so the gap is seen."""
    if read.failed:
        for message in read.failed.values():
            context.log.error(message)
        raise dg.Failure(
            description="; ".join(read.failed.values()),
            metadata={failed_label: sorted(read.failed), **read.metadata},
            # Access errors (auth, permissions, unknown container) do not heal by retrying the step.
            allow_retries=False,
        )
    return documents_by_partition(
        context,
        partitions_def,
        read.documents,
        read.problems,
        started,
        partition_day=read.partition_day,
        extra_metadata=read.metadata,
    )


def _preview(frames: dict[str, pd.DataFrame], rows: int = 5) -> str:
    nonempty = [f for f in frames.values() if len(f)]
    if not nonempty:
        return "no documents in these partitions"
    head = pd.concat(nonempty).head(rows)[["document_id", "title", "updated"]]
    head["title"] = head["title"].str.slice(0, 80)
    return head.to_markdown(index=False)
