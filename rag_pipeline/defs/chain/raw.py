"""The raw documents asset every source has: read the run's partitions from the source resource, then
select and check each document for its partition."""

import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import dagster as dg
import pandas as pd

from rag_pipeline.defs.automation import API_RETRY, RAW_FRESHNESS
from rag_pipeline.defs.chain.assets import IO_MANAGER_KEY
from rag_pipeline.defs.chain.partitions import days_by_container, multi_key
from rag_pipeline.defs.executors import source_api_queue, step_tags
from rag_pipeline.defs.sync.runs import API_CALLS_TAG, SYNC_FROM_TAG
from rag_pipeline.settings import DEFAULT_MAX_DOCUMENT_CHARS
from rag_pipeline.sources.document import Document
from rag_pipeline.sources.problems import RecordProblem
from rag_pipeline.sources.source_read import SourceRead, admit_documents
from rag_pipeline.stages import documents_frame

# Problems a raw step lists in its metadata (all of them are counted in ``bad_records``).
BAD_RECORD_EXAMPLES = 10


def documents_by_partition(
    context: dg.AssetExecutionContext,
    partitions_def: dg.MultiPartitionsDefinition,
    documents: Sequence[Document],
    problems: Sequence[RecordProblem],
    started: float,
    partition_day: Mapping[str, str] | None = None,
    extra_metadata: Mapping[str, Any] | None = None,
    max_document_chars: int = DEFAULT_MAX_DOCUMENT_CHARS,
) -> dg.Output:
    """Each document lands in the partition (day of its latest activity, container) of the run,
    unless ``partition_day`` names another day for it.

    Every source's documents pass the same checks first (:func:`admit_documents`): a document whose day has
    no partition (before the first day), an invalid container, a second copy of an id or text over
    ``max_document_chars`` is reported in ``bad_records`` instead of failing the run or going unnoticed."""
    wanted = {str(k) for k in context.partition_keys}
    selected: dict[str, list[Document]] = {k: [] for k in wanted}
    day_of = partition_day or {}
    first_day, last_day = _day_range(partitions_def)
    admitted = admit_documents(
        documents,
        day_of=lambda doc: day_of.get(doc.id, doc.day),
        first_day=first_day,
        last_day=last_day,
        max_chars=max_document_chars,
        wanted=lambda day, container: str(multi_key(partitions_def, day, container)) in wanted,
    )
    for day, doc in admitted.documents:
        selected[str(multi_key(partitions_def, day, doc.container))].append(doc)
    problems = [*problems, *admitted.problems]
    # Partitions without documents (most days of a backfill) share one empty frame; assets never mutate inputs.
    empty = documents_frame([])
    frames = {k: documents_frame(docs) if docs else empty for k, docs in selected.items()}
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
            "bad_record_examples": dg.MetadataValue.md(_examples(problems)),
            # The same examples as data, for the commands' report of what was skipped (rag-pipeline sync). Only
            # the first ones: a range run repeats its metadata on every partition's materialization.
            "bad_record_list": dg.MetadataValue.json(
                [{"location": p.location, "reason": p.reason} for p in problems[:BAD_RECORD_EXAMPLES]]
            ),
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
    max_document_chars: int = DEFAULT_MAX_DOCUMENT_CHARS,
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
        max_document_chars=max_document_chars,
    )


def sync_lag_metadata(documents: Sequence[Document], sync_from: str | None) -> dict[str, Any]:
    """How long the documents that changed since the run's watermark waited to be read: the lag from their
    source timestamp (latest activity) to now, p50 and max, and the newest source timestamp read."""
    if not documents:
        return {}
    now = datetime.now(UTC)
    newest = max(d.updated for d in documents)
    out: dict[str, Any] = {"newest_source_timestamp": newest.astimezone(UTC).isoformat(timespec="seconds")}
    if sync_from is None:
        return out  # initial history: its age is not a lag
    since = datetime.fromisoformat(sync_from)
    lags = sorted((now - d.updated).total_seconds() for d in documents if d.updated > since)
    if lags:
        out["sync_lag_p50_seconds"] = round(lags[len(lags) // 2], 1)
        out["sync_lag_max_seconds"] = round(lags[-1], 1)
        out["documents_since_watermark"] = len(lags)
    return out


def _day_range(partitions_def: dg.MultiPartitionsDefinition) -> tuple[str, str]:
    """The first and last day of the partitions' date dimension (the last one moves with the clock)."""
    daily = partitions_def.get_partitions_def_for_dimension("date")
    first, last = daily.get_first_partition_key(), daily.get_last_partition_key()
    assert first is not None and last is not None, "the date dimension starts in the past"
    return first, last


def _examples(problems: Sequence[RecordProblem], limit: int = BAD_RECORD_EXAMPLES) -> str:
    """The first problems as a markdown list; a backtick from the input must not end the code span."""
    return "\n".join("- `" + str(p).replace("`", "'") + "`" for p in problems[:limit]) or "none"


def _preview(frames: dict[str, pd.DataFrame], rows: int = 5) -> str:
    nonempty = [f for f in frames.values() if len(f)]
    if not nonempty:
        return "no documents in these partitions"
    head = pd.concat(nonempty).head(rows)[["document_id", "title", "updated"]]
    head["title"] = head["title"].str.slice(0, 80)
    return head.to_markdown(index=False)


def build_raw_documents_asset(
    *,
    name: str,
    source: str,
    pool: str,
    partitions_def: dg.MultiPartitionsDefinition,
    max_document_chars: int,
    failed_label: str,
    description: str,
) -> dg.AssetsDefinition:
    """A source's raw documents asset: reads through the ``<source>_source`` resource (its live API or its
    offline file), one step for a whole partition range, holding the source's API ``pool``. It has no
    automation condition: a live source's sync sensor requests its range runs (``defs/sync.py``)."""
    resource_key = f"{source}_source"

    @dg.asset(
        name=name,
        partitions_def=partitions_def,
        backfill_policy=dg.BackfillPolicy.single_run(),
        io_manager_key=IO_MANAGER_KEY,
        group_name=source,
        kinds={source, "parquet"},
        owners=["team:rag-platform"],
        pool=pool,
        op_tags=step_tags(source_api_queue(source)),
        freshness_policy=RAW_FRESHNESS,
        retry_policy=API_RETRY,
        required_resource_keys={resource_key},
        description=description,
    )
    def raw_documents(context: dg.AssetExecutionContext) -> dg.Output:
        started = time.perf_counter()
        reader = getattr(context.resources, resource_key)
        read = reader.read_partitions(days_by_container(partitions_def, context.partition_keys), context.log.info)
        calls = read.metadata.get("api_calls")
        if isinstance(calls, int):
            # The sync planner estimates the next run's requests from this run's (Slack's request budget).
            context.instance.add_run_tags(context.run_id, {API_CALLS_TAG: str(calls)})
        read.metadata.update(sync_lag_metadata(read.documents, context.run.tags.get(SYNC_FROM_TAG)))
        return source_read_output(context, partitions_def, read, started, failed_label, max_document_chars)

    return raw_documents
