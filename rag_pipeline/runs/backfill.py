"""Runs each offline source's asset chain over its whole history in bounded batches: consecutive weeks from the
source's first document through the current one, grouped so that each batch holds at most
``RAG_BACKFILL_BATCH_DOCUMENTS`` documents (a busier week is a batch alone), one Dagster range run per batch, for
every channel/project at once.

Why a document budget and not a fixed number of weeks: a run holds its batch's documents, chunks and vectors in
memory (about 45 MB per thousand documents, docs/notes/company_scale.md), and a company's weeks differ by orders of
magnitude (a quiet first year, a busy last one), so weeks would bound nothing. Each batch is read, chunked,
embedded and written before the next is read, so a first index's memory follows its largest batch, not its
history (issue 68).

Resumable: a batch counts as done when a successful run of the same input (fingerprint) covered its weeks, so a
command killed in the middle (even ``kill -9``) starts again at the first unfinished batch; a batch cut off half
way is run again whole, which rewrites the same week files and upserts the same point ids (nothing duplicated).

Used by ``rag-pipeline demo``, ``rag-pipeline index`` and the benchmarks. Every week is materialized through
the real assets (so the Dagster UI shows the whole history as synced, nothing after it as missing); a week
without documents costs its Dagster events and no file.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import dagster as dg

from rag_pipeline.pipeline.keys import week_key
from rag_pipeline.pipeline.tags import RANGE_END_TAG, RANGE_START_TAG, SOURCE_TAG
from rag_pipeline.runs.code_location import SourceSpec, build_resources, source_specs
from rag_pipeline.runs.execution import execute_run, runner_instance
from rag_pipeline.runs.instance import (
    QUIET_RUN_CONFIG,
    enable_range_batching,
    ensure_dagster_home,
    range_tags,
)
from rag_pipeline.runs.language import decide_language
from rag_pipeline.runs.metadata import materialization_metadata
from rag_pipeline.runs.migration import MigrationReport, upgrade_data_folder
from rag_pipeline.scheduling.coverage import weeks_between
from rag_pipeline.settings import Settings
from rag_pipeline.sources.document import Document
from rag_pipeline.sources.identity import SourceIdentity, claim_identities
from rag_pipeline.sources.problems import RecordProblem, UnreadableSource
from rag_pipeline.sources.source_read import OUTSIDE_PARTITIONS, AdmittedDocuments, admit_documents
from rag_pipeline.text.language import SAMPLE_SIZE as LANGUAGE_SAMPLE_SIZE
from rag_pipeline.text.language import LanguageChoice

FINGERPRINT_TAG = "rag/source_fingerprint"


@dataclass
class SourceSummary:
    """What the backfill did for one source."""

    documents: int = 0
    parent_chunks: int = 0
    child_chunks: int = 0
    points: int = 0
    embeddings_computed: int = 0
    embeddings_cached: int = 0
    runs: int = 0
    runs_skipped: int = 0
    partitions: int = 0
    # Dated before the first partition day (or after today): no partition can hold them.
    documents_outside_partitions: int = 0
    # Child chunks with Japanese, Chinese or Korean text: what decides whether the word tokenizer will do.
    cjk_child_chunks: int = 0
    # What the BM25 vectors score: "child chunk", or "thread" (Slack threads of a CJK index, issue 53).
    bm25_scored_text: str = ""
    stage_seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))


@dataclass
class BackfillSummary:
    """Totals over all sources, the shape ``rag-pipeline demo --json`` prints."""

    sources: dict[str, SourceSummary]
    seconds: float
    dagster_home: str
    data_dir: str
    identities: dict[str, dict[str, str | None]] = field(default_factory=dict)  # per source: team/domain or site
    # Per source: what its read and the raw step's checks turned away (the raw assets' bad_records), once each.
    problems: dict[str, list[RecordProblem]] = field(default_factory=dict)
    # The language the index is built for (None: both models set explicitly), and whether this run chose it.
    language: LanguageChoice | None = None
    language_chosen_now: bool = False
    # What upgrading a data folder of an earlier version did (None: nothing to upgrade).
    migration: MigrationReport | None = None

    def as_dict(self) -> dict[str, Any]:
        total = lambda name: sum(getattr(s, name) for s in self.sources.values())  # noqa: E731
        return {
            "documents": total("documents"),
            "parent_chunks": total("parent_chunks"),
            "child_chunks": total("child_chunks"),
            "points": total("points"),
            "embeddings_computed": total("embeddings_computed"),
            "embeddings_cached": total("embeddings_cached"),
            "seconds": round(self.seconds, 2),
            "runs": total("runs"),
            "runs_skipped_unchanged": total("runs_skipped"),
            "partitions": total("partitions"),
            "per_source": {
                name: {
                    **{k: v for k, v in vars(s).items() if k != "stage_seconds"},
                    "stage_seconds": {k: round(v, 2) for k, v in s.stage_seconds.items()},
                }
                for name, s in self.sources.items()
            },
            "dagster_home": self.dagster_home,
            "data_dir": self.data_dir,
            "identities": self.identities,
            "language": None
            if self.language is None
            else {**asdict(self.language), "chosen_by_this_run": self.language_chosen_now},
            **({"migration": self.migration.as_dict()} if self.migration else {}),
        }


def _fingerprint(paths: list[str], identity: SourceIdentity) -> str:
    """What the source's documents follow from: its files and whose data it is read as."""
    digest = hashlib.sha256(repr(identity).encode())
    for path in paths:
        target = Path(path)
        files = sorted(p for p in target.rglob("*") if p.is_file()) if target.is_dir() else [target]
        for file in files:
            digest.update(str(file.relative_to(target) if target.is_dir() else file.name).encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


ProgressFn = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Batch:
    """Consecutive weeks one run indexes: ``start``..``end`` (week keys) holding ``documents`` documents."""

    start: str
    end: str
    documents: int


def plan_batches(weeks: Sequence[str], documents_by_week: Mapping[str, int], budget: int) -> list[Batch]:
    """``weeks`` (in order) cut into consecutive batches of at most ``budget`` documents each; a week holding more
    is a batch alone (a week is the smallest unit a run covers), and weeks without documents join the batch
    before them (the first ones the batch after them)."""
    batches: list[Batch] = []
    start, end, held = "", "", 0
    for week in weeks:
        count = documents_by_week.get(week, 0)
        if start and held and count and held + count > budget:
            batches.append(Batch(start, end, held))
            start, held = "", 0
        start = start or week
        end, held = week, held + count
    if start:
        batches.append(Batch(start, end, held))
    return batches


@dataclass
class ReadOutline:
    """What the runs need to know of a source's read once its documents are let go: its containers, documents
    per week, first and last day, and the problems found (the documents themselves are read again per batch by
    the raw step, so the whole history is not held through the runs)."""

    containers: list[str]
    documents_by_week: Counter[str]
    first_day: str | None
    last_day: str | None
    problems: list[RecordProblem]

    @classmethod
    def of(cls, read: AdmittedDocuments) -> ReadOutline:
        outline = cls([], Counter(), None, None, list(read.problems))
        outline.add(read.documents)
        outline.containers.sort()
        return outline

    def add(self, documents: Sequence[tuple[str, Document]]) -> None:
        """Count admitted (day, document) pairs in (containers are kept sorted by :func:`read_outline`)."""
        containers = set(self.containers)
        for day, doc in documents:
            containers.add(doc.container)
            self.documents_by_week[week_key(day)] += 1
            self.first_day = day if self.first_day is None else min(self.first_day, day)
            self.last_day = day if self.last_day is None else max(self.last_day, day)
        self.containers = sorted(containers)


class EvenSample:
    """At most ``2 * size`` of the texts added, evenly spaced over all of them (every ``stride``-th, the stride
    doubling as they come): what the language choice samples, without holding every text of the history."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.stride = 1
        self.seen = 0
        self.kept: list[str] = []

    def add(self, text: str) -> None:
        if self.seen % self.stride == 0:
            self.kept.append(text)
            if len(self.kept) >= 2 * self.size:
                self.kept = self.kept[::2]
                self.stride *= 2
        self.seen += 1

    def values(self) -> list[str]:
        return list(self.kept)


def run_backfill(
    settings: Settings,
    full_refresh: bool = False,
    sources: tuple[str, ...] | None = None,
    on_progress: ProgressFn | None = None,
) -> BackfillSummary:
    """Register the offline sources' containers (default: every registered source) and materialize every week
    of their history in batches of weeks (:func:`plan_batches`), one run per batch."""

    enable_range_batching()
    home = ensure_dagster_home(settings)
    started = time.perf_counter()
    specs = source_specs(settings)
    sources = tuple(specs) if sources is None else sources
    unknown = sorted(set(sources) - set(specs))
    if unknown:
        raise ValueError(f"unknown source(s) {', '.join(unknown)}: choose from {', '.join(specs)}")
    identities = {source: specs[source].offline_resource.identity() for source in sources}
    claim_identities(settings.paths.source_identities, identities)
    # Every source is read (and checked) before the first run, so one that cannot be read stops the command
    # before anything of another source is indexed.
    # Only an outline is kept of each read (the runs read each batch's documents themselves), and of the texts
    # an even sample for the language choice.
    texts = EvenSample(LANGUAGE_SAMPLE_SIZE)
    outlines = {
        source: read_outline(specs[source], _partition_days(settings), settings, texts.add) for source in sources
    }
    # The folder's first index chooses its language (tokenizer and dense model) from what it is about to write.
    undecided = settings.language_undecided()
    settings, language = decide_language(settings, texts.values)
    # The demo always reads the offline sources, even where a live API is configured.
    resources = build_resources(settings, specs, live=False)
    summaries: dict[str, SourceSummary] = {}
    with runner_instance() as instance:
        migration = upgrade_data_folder(settings.paths.parquet, instance)
        for source in sources:
            spec = specs[source]
            # One job per source: materialize() would rebuild the asset graph on every call.
            job = dg.Definitions(assets=spec.assets, resources=resources).resolve_implicit_global_asset_job_def()
            summaries[source] = _backfill_source(
                instance,
                spec,
                job,
                outlines[source],
                _partition_days(settings),
                full_refresh,
                on_progress,
                settings.backfill_batch_documents,
            )
    return BackfillSummary(
        summaries,
        time.perf_counter() - started,
        str(home),
        str(settings.data_dir),
        {source: dict(vars(identity)) for source, identity in identities.items()},
        {source: outline.problems for source, outline in outlines.items()},
        language,
        undecided and language is not None,
        migration,
    )


class NothingRead(UnreadableSource):
    """No document of a source could be indexed, and its read reported why: the command's error, with the
    problems for the report of what was skipped."""

    def __init__(self, source: str, message: str, problems: list[RecordProblem]) -> None:
        super().__init__(message)
        self.source = source
        self.problems = problems


def read_outline(
    spec: SourceSpec, partition_days: tuple[date, date], settings: Settings, on_text: Callable[[str], None]
) -> ReadOutline:
    """:func:`admitted_read`'s outline, each admitted document's text handed to ``on_text``. A source that spills
    its file to one file per week (``spill()``: the Slack export) is checked a week at a time, so the whole
    history is never in memory; the checks decide as over the whole read (every copy of an id read twice sits in
    the spill's shared file, checked together). :class:`NothingRead` as in :func:`admitted_read`."""
    spill = getattr(spec.offline_resource, "spill", None)
    if spill is None:
        read = admitted_read(spec, partition_days, settings)
        for _, doc in read.documents:
            on_text(doc.text)
        return ReadOutline.of(read)
    first, last = partition_days
    spilled = spill()
    outline = ReadOutline([], Counter(), None, None, list(spilled.problems))
    for documents in spilled.groups():
        admitted = admit_documents(
            documents,
            day_of=lambda doc: doc.day,
            first_day=first.isoformat(),
            last_day=last.isoformat(),
            max_chars=settings.max_document_chars,
        )
        outline.add(admitted.documents)
        outline.problems.extend(admitted.problems)
        for _, doc in admitted.documents:
            on_text(doc.text)
    if outline.problems and not outline.documents_by_week:
        raise _nothing_read(spec, outline.problems)
    return outline


def _nothing_read(spec: SourceSpec, problems: list[RecordProblem]) -> NothingRead:
    paths = ", ".join(spec.offline_resource.input_paths())
    return NothingRead(
        spec.name,
        f"nothing could be read from the {spec.name} source {paths}: {len(problems)} record(s) skipped, "
        f"the first: {problems[0]}",
        problems,
    )


def admitted_read(spec: SourceSpec, partition_days: tuple[date, date], settings: Settings) -> AdmittedDocuments:
    """The documents of an offline source that its runs will write, and every problem found on the way: the
    reader's (bad records, files not read, containers refused at entry) and those of the checks each raw step
    applies (:func:`admit_documents`: days without a partition, second copies, truncated text). These are the
    problems the raw steps report as ``bad_records``; reading them here reports them once per source, also
    when every run is skipped as unchanged.

    :class:`NothingRead` when problems left no document: exiting 0 with an empty index would hide them."""
    first, last = partition_days
    read = spec.offline_resource.read()
    admitted = admit_documents(
        read.documents,
        day_of=lambda doc: doc.day,
        first_day=first.isoformat(),
        last_day=last.isoformat(),
        max_chars=settings.max_document_chars,
    )
    problems = [*read.problems, *admitted.problems]
    if problems and not admitted.documents:
        raise _nothing_read(spec, problems)
    return AdmittedDocuments(admitted.documents, problems)


def _partition_days(settings: Settings) -> tuple[date, date]:
    """The first and last day a partition exists for: the configured start through today (UTC)."""
    return date.fromisoformat(settings.partition_start), datetime.now(UTC).date()


def _backfill_source(
    instance: dg.DagsterInstance,
    spec: SourceSpec,
    job: dg.JobDefinition,
    read: ReadOutline,
    partition_days: tuple[date, date],
    full_refresh: bool,
    on_progress: ProgressFn | None,
    batch_documents: int,
) -> SourceSummary:
    """One source's whole history as range runs over consecutive batches of weeks (:func:`plan_batches`); a batch
    a successful run of the same file already covered is skipped (a re-run, or a resumed one after a kill)."""
    first, last = partition_days
    summary = SourceSummary()
    summary.documents_outside_partitions = sum(1 for p in read.problems if OUTSIDE_PARTITIONS in p.reason)
    if summary.documents_outside_partitions:
        print(
            f"{spec.name}: {summary.documents_outside_partitions} document(s) dated outside the partitions "
            f"({first}..{last}) were not indexed; set RAG_PARTITION_START earlier to include them",
            file=sys.stderr,
        )
    if not read.containers or read.first_day is None or read.last_day is None:
        return summary
    instance.add_dynamic_partitions(spec.containers_name, read.containers)
    fingerprint = _fingerprint(spec.offline_resource.input_paths(), spec.offline_resource.identity())
    # From the week of the source's first document: the weeks before it hold nothing of this source, and each
    # week costs its Dagster events (~1.5 ms per week and asset). RAG_PARTITION_START at the data's first day
    # makes the partitions start there too.
    first_data_day = date.fromisoformat(read.first_day)
    last_data_week = week_key(read.last_day)
    weeks = weeks_between(first_data_day, last)
    summary.partitions = len(weeks)
    batches = plan_batches(weeks, read.documents_by_week, batch_documents)
    done = [
        not full_refresh
        and _indexed_before(instance, spec.name, fingerprint, batch.start, min(batch.end, last_data_week))
        for batch in batches
    ]
    if on_progress:
        on_progress(spec.name, sum(done), len(batches))
    for batch, skip in zip(batches, done, strict=True):
        if skip:
            summary.runs_skipped += 1
            continue
        result = execute_run(
            job,
            instance,
            tags=range_tags(batch.start, batch.end, **{FINGERPRINT_TAG: fingerprint, SOURCE_TAG: spec.name}),
            raise_on_error=True,
            run_config=QUIET_RUN_CONFIG,
        )
        _collect(summary, spec, result)
        if on_progress:
            on_progress(spec.name, sum(done) + summary.runs, len(batches))
    return summary


def _indexed_before(instance: dg.DagsterInstance, source: str, fingerprint: str, start: str, through: str) -> bool:
    """Whether one successful run indexed this file (same fingerprint) over weeks from ``start`` (or earlier)
    through ``through`` or later (the current week moves on; the file's last week does not). Week keys are ISO
    dates, so they compare as strings; a run without range tags covers nothing."""
    records = instance.get_run_records(
        dg.RunsFilter(tags={SOURCE_TAG: source, FINGERPRINT_TAG: fingerprint}, statuses=[dg.DagsterRunStatus.SUCCESS])
    )
    return any(
        "" < r.dagster_run.tags.get(RANGE_START_TAG, "") <= start
        and r.dagster_run.tags.get(RANGE_END_TAG, "") >= through
        for r in records
    )


def _collect(summary: SourceSummary, spec: SourceSpec, result: dg.ExecuteInProcessResult) -> None:
    keys = spec.keys
    raw, parents, children, dense, sparse, points = (materialization_metadata(result, key) for key in keys.all)
    summary.runs += 1
    summary.documents += int(raw.get("documents", 0))
    summary.parent_chunks += int(parents.get("parent_chunks", 0))
    summary.child_chunks += int(children.get("child_chunks", 0))
    summary.points += int(points.get("points_written", 0))
    summary.embeddings_computed += int(dense.get("embeddings_computed", 0))
    summary.embeddings_cached += int(dense.get("embeddings_cached", 0))
    summary.cjk_child_chunks += int(sparse.get("cjk_child_chunks", 0))
    summary.bm25_scored_text = str(sparse.get("scored_text", summary.bm25_scored_text))
    for stage, values in (
        ("read", raw),
        ("parent_chunks", parents),
        ("child_chunks", children),
        ("dense_vectors", dense),
        ("sparse_vectors", sparse),
        ("qdrant_points", points),
    ):
        summary.stage_seconds[stage] += float(values.get("elapsed_seconds", 0.0))


def index_runs(instance: dg.DagsterInstance, candidates: Sequence[dg.RunRecord]) -> dict[str, str]:
    """Retention's question to the index runs (``RunKeeper`` in ``runs/retention.py``): run id -> why it is kept, for
    the newest successful ``index``/``demo`` run of each source and input file among ``candidates`` (``index`` skips
    an unchanged file because that run exists; without it the whole history would be indexed again)."""
    pairs = {
        (r.dagster_run.tags[SOURCE_TAG], r.dagster_run.tags[FINGERPRINT_TAG])
        for r in candidates
        if SOURCE_TAG in r.dagster_run.tags and FINGERPRINT_TAG in r.dagster_run.tags
    }
    keep = {}
    for source, fingerprint in sorted(pairs):
        newest = instance.get_run_records(
            dg.RunsFilter(
                tags={SOURCE_TAG: source, FINGERPRINT_TAG: fingerprint}, statuses=[dg.DagsterRunStatus.SUCCESS]
            ),
            limit=1,
        )
        if newest:
            keep[newest[0].dagster_run.run_id] = f"the newest index run of {source}'s input {fingerprint}"
    return keep
