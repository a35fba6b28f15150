"""The raw documents asset every source has: read the run's cells (containers x days) from the source
resource, then select and check each document for its week."""

import json
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any

import dagster as dg
import pandas as pd
from pydantic import Field

from rag_pipeline.defs.automation import API_RETRY, RAW_FRESHNESS
from rag_pipeline.defs.chain.assets import IO_MANAGER_KEY
from rag_pipeline.defs.chain.coverage import coverage_of, run_days
from rag_pipeline.defs.chain.frames import CoveredFrames
from rag_pipeline.defs.executors import source_api_queue, step_tags
from rag_pipeline.pipeline.keys import week_key
from rag_pipeline.pipeline.tags import API_CALLS_TAG, FAILED_CONTAINERS_TAG
from rag_pipeline.scheduling.coverage import CONTAINER_COLUMN, DAY_COLUMN, Coverage, days_of_week
from rag_pipeline.settings import DEFAULT_MAX_DOCUMENT_CHARS
from rag_pipeline.sources.document import Document
from rag_pipeline.sources.problems import RecordProblem
from rag_pipeline.sources.source_read import SourceRead, admit_documents
from rag_pipeline.stages import documents_frame

# Problems a raw step lists in its metadata (all of them are counted in ``bad_records``).
BAD_RECORD_EXAMPLES = 10


class ContainerPlan(dg.Config):
    """One container's part of a sync run: the days read, and what a success makes good."""

    first_day: str = Field(description="First day (YYYY-MM-DD, UTC) read for this container")
    last_day: str = Field(description="Last day read for this container")
    synced_through: str | None = Field(
        default=None, description="The instant a success makes good (its new watermark); none: a past range"
    )
    sync_from: str | None = Field(default=None, description="The watermark it continues from (none: history)")
    reason: str = ""
    estimated_requests: int = 0


class RawReadConfig(dg.Config):
    """What a run of a raw asset reads: by default every registered channel/project over every day of the run's
    weeks. Name containers to re-sync just them (their rows of these weeks are replaced, the others' kept)."""

    containers: list[str] = Field(
        default_factory=list,
        description="Channel ids / project keys to read over the run's weeks; empty: every registered one",
    )
    plan: dict[str, ContainerPlan] = Field(
        default_factory=dict,
        description="Set by the sync sensor and `rag-pipeline sync`: each container's own days and watermark",
    )


def documents_by_partition(
    context: dg.AssetExecutionContext,
    documents: Sequence[Document],
    problems: Sequence[RecordProblem],
    started: float,
    coverage: Coverage,
    first_day: str,
    partition_day: Mapping[str, str] | None = None,
    extra_metadata: Mapping[str, Any] | None = None,
    max_document_chars: int = DEFAULT_MAX_DOCUMENT_CHARS,
) -> dg.Output:
    """Each document lands in the week of its latest activity (or of the day ``partition_day`` names for it),
    in a cell the run covers.

    Every source's documents pass the same checks first (:func:`admit_documents`): a document whose day has
    no partition (before the first day), an invalid container, a second copy of an id or text over
    ``max_document_chars`` is reported in ``bad_records`` instead of failing the run or going unnoticed."""
    wanted = {str(k) for k in context.partition_keys}
    selected: dict[str, list[tuple[str, Document]]] = {k: [] for k in wanted}
    day_of = partition_day or {}
    admitted = admit_documents(
        documents,
        day_of=lambda doc: day_of.get(doc.id, doc.day),
        first_day=first_day,
        last_day=datetime.now(UTC).date().isoformat(),
        max_chars=max_document_chars,
        wanted=lambda day, container: coverage.covers(container, day) and week_key(day) in wanted,
    )
    for day, doc in admitted.documents:
        selected[week_key(day)].append((day, doc))
    problems = [*problems, *admitted.problems]
    empty = _cells_frame([])
    frames = {k: _cells_frame(cells) if cells else empty for k, cells in selected.items()}
    total = sum(len(f) for f in frames.values())
    if problems:
        context.log.warning(f"{len(problems)} source records could not be read; first: {problems[0]}")
    authors = {a for cells in selected.values() for _, d in cells for a in d.authors}
    with_documents = sorted({d.container for cells in selected.values() for _, d in cells})
    covered = coverage.containers
    return dg.Output(
        CoveredFrames(frames, coverage),
        metadata={
            "partitions": len(wanted),
            "partitions_with_documents": sum(1 for f in frames.values() if len(f)),
            "containers_covered": "all" if coverage.whole else len(covered),
            "containers_with_documents": len(with_documents),
            # Which containers the materialization holds documents of (the first 50 by id).
            "containers": dg.MetadataValue.json(with_documents[:50]),
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


def _cells_frame(cells: Sequence[tuple[str, Document]]) -> pd.DataFrame:
    """Documents as rows, with the day and container of each (the cells a partial run replaces)."""
    frame = documents_frame([doc for _, doc in cells])
    frame[DAY_COLUMN] = pd.Series([day for day, _ in cells], dtype=object)
    frame[CONTAINER_COLUMN] = pd.Series([doc.container for _, doc in cells], dtype=object)
    return frame


def source_read_output(
    context: dg.AssetExecutionContext,
    read: SourceRead,
    started: float,
    failed_label: str,
    coverage: Coverage,
    first_day: str,
    registered: Sequence[str] = (),
    max_document_chars: int = DEFAULT_MAX_DOCUMENT_CHARS,
) -> dg.Output:
    """A live or offline source's read as the raw asset's output. Containers that could not be read keep what
    was stored for them (they are left out of the run's coverage) and are recorded on the run
    (``rag/failed_containers``), so their watermark stays and the next sync reads them again; the others are
    written. Only a run where no container could be read fails (with the reasons and the call counts)."""
    if read.failed:
        for message in read.failed.values():
            context.log.error(message)
        covered = registered if coverage.whole else coverage.containers
        if not [c for c in covered if c not in read.failed]:
            raise dg.Failure(
                description="; ".join(read.failed.values()),
                metadata={failed_label: sorted(read.failed), **read.metadata},
                # Access errors (auth, permissions, unknown container) do not heal by retrying the step.
                allow_retries=False,
            )
        context.instance.add_run_tags(
            context.run_id,
            {FAILED_CONTAINERS_TAG: json.dumps({c: m.splitlines()[0][:300] for c, m in sorted(read.failed.items())})},
        )
        read.metadata[failed_label] = sorted(read.failed)
        coverage = _without(coverage, read.failed, context.partition_keys, registered)
    return documents_by_partition(
        context,
        read.documents,
        read.problems,
        started,
        coverage,
        first_day,
        partition_day=read.partition_day,
        extra_metadata=read.metadata,
        max_document_chars=max_document_chars,
    )


def _without(
    coverage: Coverage, failed: Mapping[str, str], partition_keys: Sequence[str], registered: Sequence[str]
) -> Coverage:
    """``coverage`` less the containers that failed (a whole coverage becomes the registered containers')."""
    if coverage.ranges is not None:
        return Coverage({c: r for c, r in coverage.ranges.items() if c not in failed})
    first, last = run_days(partition_keys)
    return Coverage({c: (first, last) for c in registered if c not in failed})


def sync_lag_metadata(documents: Sequence[Document], sync_from: Mapping[str, str | None]) -> dict[str, Any]:
    """How long the documents that changed since their container's watermark (``sync_from``) waited to be
    read: the lag from their source timestamp (latest activity) to now, p50 and max, and the newest source
    timestamp read. Containers reading their initial history (no watermark) have no lag: their age is not one."""
    if not documents:
        return {}
    now = datetime.now(UTC)
    newest = max(d.updated for d in documents)
    out: dict[str, Any] = {"newest_source_timestamp": newest.astimezone(UTC).isoformat(timespec="seconds")}
    since = {c: datetime.fromisoformat(m) for c, m in sync_from.items() if m}
    lags = sorted(
        (now - d.updated).total_seconds() for d in documents if d.container in since and d.updated > since[d.container]
    )
    if lags:
        out["sync_lag_p50_seconds"] = round(lags[len(lags) // 2], 1)
        out["sync_lag_max_seconds"] = round(lags[-1], 1)
        out["documents_since_watermark"] = len(lags)
    return out


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
    partitions_def: dg.PartitionsDefinition,
    first_day: str,
    containers_name: str,
    max_document_chars: int,
    failed_label: str,
    description: str,
) -> dg.AssetsDefinition:
    """A source's raw documents asset: reads through the ``<source>_source`` resource (its live API or its
    offline file), one step for a whole range of weeks, holding the source's API ``pool``. It has no
    automation condition: a live source's sync sensor requests its runs (``defs/sync``).

    What it reads is its config (:class:`RawReadConfig`): every registered container (``containers_name``)
    over the run's days, the named ones, or each container's own days of a sync plan."""
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
    def raw_documents(context: dg.AssetExecutionContext, config: RawReadConfig) -> dg.Output:
        started = time.perf_counter()
        reader = getattr(context.resources, resource_key)
        coverage = coverage_of(config.model_dump(), context.partition_keys)
        today = datetime.now(UTC).date()
        days = [
            d for week in context.partition_keys for d in days_of_week(str(week), date.fromisoformat(first_day), today)
        ]
        registered = context.instance.get_dynamic_partitions(containers_name) if coverage.whole else []
        read = reader.read_partitions(coverage.days_by_container(days, registered), context.log.info)
        calls = read.metadata.get("api_calls")
        if isinstance(calls, int):
            # The sync planner estimates the next run's requests from this run's (Slack's request budget).
            context.instance.add_run_tags(context.run_id, {API_CALLS_TAG: str(calls)})
        read.metadata.update(sync_lag_metadata(read.documents, {c: p.sync_from for c, p in config.plan.items()}))
        return source_read_output(
            context, read, started, failed_label, coverage, first_day, registered, max_document_chars
        )

    return raw_documents
