"""Runs the partitioned asset chains over the partitions that hold data, in as few Dagster runs as
possible: one single-run backfill per stretch of consecutive non-empty days of a channel/project.

Used by ``rag-pipeline demo`` and the benchmark. Every partition that holds data is materialized
through the real assets (so the Dagster UI shows them); empty days between two stretches closer
than ``bridge_days`` are included in one run (materialized as empty, which is also true sync state)
because a run costs more than a few empty partitions.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg

from rag_pipeline import settings
from rag_pipeline.defs.partitions import jira_partitions, multi_key, slack_partitions

FINGERPRINT_TAG = "rag/source_fingerprint"
SOURCE_TAG = "rag/source"
# Measured on the bundled Jira project AC (full refresh): 53 runs over 493 partitions took 78 s,
# 16 runs over 1,431 partitions 51 s, 1 run over 2,376 partitions 39 s. With the batching event log
# an empty partition costs next to nothing and a run ~0.8 s, so gaps up to a year share one run.
DEFAULT_BRIDGE_DAYS = 366

# The demo's own instance (used only when DAGSTER_HOME is unset): SQLite, with the event log that
# writes a range's materializations in one transaction (10x faster than one event at a time), and
# without per-step stdout capture (it spawns two `tail` processes per step; structured event logs
# are kept).
DAGSTER_YAML = """telemetry:
  enabled: false
nux:
  enabled: false
event_log_storage:
  module: rag_pipeline.defs.event_storage
  class: BatchingSqliteEventLogStorage
  config:
    base_dir: {home}/history/runs
compute_logs:
  module: dagster._core.storage.noop_compute_log_manager
  class: NoOpComputeLogManager
concurrency:
  pools:
    default_limit: 1
run_retries:
  enabled: true
  max_retries: 1
"""


@dataclass(frozen=True)
class Segment:
    """Consecutive days of one container, materialized by one run."""

    source: str
    container: str
    start: date
    end: date
    days_with_data: int

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1


def segments_for(source: str, days_by_container: dict[str, list[date]], bridge_days: int) -> list[Segment]:
    """Group each container's data days into runs, bridging gaps of at most ``bridge_days`` empty days."""
    out = []
    for container, days in sorted(days_by_container.items()):
        days = sorted(set(days))
        start = prev = days[0]
        count = 1
        for day in days[1:]:
            if (day - prev).days - 1 > bridge_days:
                out.append(Segment(source, container, start, prev, count))
                start, count = day, 0
            prev = day
            count += 1
        out.append(Segment(source, container, start, prev, count))
    return out


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
    stage_seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))


@dataclass
class BackfillSummary:
    """Totals over all sources, the shape ``rag-pipeline demo --json`` prints."""

    sources: dict[str, SourceSummary]
    seconds: float
    dagster_home: str
    data_dir: str

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
        }


def ensure_dagster_home(data_dir: Path) -> Path:
    """DAGSTER_HOME if set, else ``<data dir>/dagster_home`` (created with the default instance config)."""
    home = Path(os.environ.get("DAGSTER_HOME") or data_dir / "dagster_home").resolve()
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text(DAGSTER_YAML.format(home=home), encoding="utf-8")
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def _fingerprint(path: str) -> str:
    digest = hashlib.sha256()
    target = Path(path)
    files = sorted(p for p in target.rglob("*") if p.is_file()) if target.is_dir() else [target]
    for file in files:
        digest.update(str(file.relative_to(target) if target.is_dir() else file.name).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


ProgressFn = Callable[[str, int, int], None]


def run_backfill(
    data_dir: str | Path | None = None,
    bridge_days: int = DEFAULT_BRIDGE_DAYS,
    full_refresh: bool = False,
    sources: tuple[str, ...] = ("slack", "jira"),
    on_progress: ProgressFn | None = None,
) -> BackfillSummary:
    """Register the offline sources' partitions and materialize every partition that holds data."""
    from rag_pipeline.definitions import build_resources
    from rag_pipeline.defs.jira.assets import jira_chain, jira_issues
    from rag_pipeline.defs.slack.assets import slack_chain, slack_threads

    # One planned event per asset per run instead of one per partition (Dagster's documented switch
    # for single-run backfills); a failed run then does not mark its partitions failed individually.
    os.environ.setdefault("DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS", "1")
    # Lets Dagster hand a range's materialization events to the event log as batches.
    os.environ.setdefault("DAGSTER_EVENT_BATCH_SIZE", "1000")
    base = Path(data_dir).resolve() if data_dir else settings.data_dir()
    home = ensure_dagster_home(base)
    started = time.perf_counter()
    # The demo always reads the bundled/offline sources, even where a Slack token is configured.
    resources = build_resources(str(base), live_slack=False, live_jira=False)
    chains = {
        "slack": (slack_partitions, [slack_threads, *slack_chain], resources["slack_export"]),
        "jira": (jira_partitions, [jira_issues, *jira_chain], resources["jira_dump"]),
    }
    summaries: dict[str, SourceSummary] = {}
    # One job per source, built once: materialize() would rebuild the asset graph on every call.
    jobs = {
        name: dg.Definitions(assets=assets, resources=resources).resolve_implicit_global_asset_job_def()
        for name, (_, assets, _) in chains.items()
    }
    with dg.DagsterInstance.get() as instance:
        for source in sources:
            partitions_def, _, reader = chains[source]
            read = reader.read()  # type: ignore[attr-defined]
            days: dict[str, list[date]] = defaultdict(list)
            for doc in read.documents:
                days[doc.container].append(date.fromisoformat(doc.day))
            dynamic = next(d for d in partitions_def.partitions_defs if d.name != "date").partitions_def
            instance.add_dynamic_partitions(dynamic.name, sorted(days))  # type: ignore[attr-defined]
            fingerprint = _fingerprint(reader.path)  # type: ignore[attr-defined]
            done = set() if full_refresh else _completed_ranges(instance, source, fingerprint)
            summary = summaries[source] = SourceSummary()
            segments = segments_for(source, days, bridge_days)
            total_partitions = sum(s.days for s in segments)
            finished = 0
            for segment in segments:
                start = str(multi_key(partitions_def, segment.start.isoformat(), segment.container))
                end = str(multi_key(partitions_def, segment.end.isoformat(), segment.container))
                summary.partitions += segment.days
                if (start, end) in done:
                    summary.runs_skipped += 1
                else:
                    result = jobs[source].execute_in_process(
                        instance=instance,
                        tags={
                            "dagster/asset_partition_range_start": start,
                            "dagster/asset_partition_range_end": end,
                            FINGERPRINT_TAG: fingerprint,
                            SOURCE_TAG: source,
                        },
                        raise_on_error=True,
                        run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
                    )
                    _collect(summary, source, result)
                finished += segment.days
                if on_progress:
                    on_progress(source, finished, total_partitions)
    return BackfillSummary(summaries, time.perf_counter() - started, str(home), str(base))


def _completed_ranges(instance: dg.DagsterInstance, source: str, fingerprint: str) -> set[tuple[str, str]]:
    records = instance.get_run_records(
        dg.RunsFilter(tags={SOURCE_TAG: source, FINGERPRINT_TAG: fingerprint}, statuses=[dg.DagsterRunStatus.SUCCESS])
    )
    return {
        (
            r.dagster_run.tags["dagster/asset_partition_range_start"],
            r.dagster_run.tags["dagster/asset_partition_range_end"],
        )
        for r in records
    }


def materialization_metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    """The metadata values of an asset's materialization in a run ({} when it did not materialize)."""
    events = result.asset_materializations_for_node(asset)
    return {k: v.value for k, v in events[0].metadata.items()} if events else {}


def _collect(summary: SourceSummary, source: str, result: dg.ExecuteInProcessResult) -> None:
    def meta(asset: str) -> dict[str, Any]:
        return materialization_metadata(result, asset)

    raw = meta(f"{source}_threads" if source == "slack" else f"{source}_issues")
    parents, children = meta(f"{source}_parent_chunks"), meta(f"{source}_child_chunks")
    dense, sparse, points = (
        meta(f"{source}_dense_vectors"),
        meta(f"{source}_sparse_vectors"),
        meta(f"{source}_qdrant_points"),
    )
    summary.runs += 1
    summary.documents += int(raw.get("documents", 0))
    summary.parent_chunks += int(parents.get("parent_chunks", 0))
    summary.child_chunks += int(children.get("child_chunks", 0))
    summary.points += int(points.get("points_written", 0))
    summary.embeddings_computed += int(dense.get("embeddings_computed", 0))
    summary.embeddings_cached += int(dense.get("embeddings_cached", 0))
    for stage, values in (
        ("read", raw),
        ("parent_chunks", parents),
        ("child_chunks", children),
        ("dense_vectors", dense),
        ("sparse_vectors", sparse),
        ("qdrant_points", points),
    ):
        summary.stage_seconds[stage] += float(values.get("elapsed_seconds", 0.0))


@dataclass
class EvaluationSummary:
    """The report the demo prints: per eval set, its markdown table and CLI-shaped figures."""

    tables: dict[str, str]
    figures: dict[str, dict[str, Any]]
    seconds: float
    ran: bool
    report_dir: str
    checks: dict[str, bool] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def run_evaluation(
    data_dir: str | Path | None = None,
    force: bool = False,
    on_progress: ProgressFn | None = None,
    sources: tuple[str, ...] | None = None,
) -> EvaluationSummary:
    """Materialize ``retrieval_eval`` (every arm) and ``retrieval_eval_report`` on the demo instance.

    Skipped (the last report is shown) when a report exists and ``force`` is false: the caller forces
    it whenever the index changed. ``sources`` (a partial demo) keeps only the eval sets scoped to
    those sources, so a Slack-only index is not scored on Jira queries.
    """
    from rag_pipeline.definitions import build_resources
    from rag_pipeline.defs.evaluation.assets import EVAL_ARMS, LATEST_SUMMARY, retrieval_eval, retrieval_eval_report
    from rag_pipeline.defs.evaluation.jobs import EVAL_JOBS
    from rag_pipeline.defs.evaluation.resources import EvaluationResource
    from rag_pipeline.evaluation.eval_set import load_eval_set_meta
    from rag_pipeline.evaluation.report import markdown_table
    from rag_pipeline.evaluation.summary import EvalSummary

    base = Path(data_dir).resolve() if data_dir else settings.data_dir()
    ensure_dagster_home(base)
    # The demo always reads the bundled/offline sources, even where a Slack token is configured.
    resources = build_resources(str(base), live_slack=False, live_jira=False)
    evaluation: EvaluationResource = resources["evaluation"]  # type: ignore[assignment]
    if sources is not None and not {"slack", "jira"} <= set(sources):
        names = []
        for path in sorted(Path(evaluation.eval_dir).glob("*.jsonl")):
            scope = load_eval_set_meta(path).sources
            if scope and set(scope) <= set(sources):
                names.append(path.stem)
        if not names:
            return EvaluationSummary(
                {}, {}, 0.0, False, "", failures=[f"no eval set is scoped to {', '.join(sources)}"]
            )
        resources["evaluation"] = EvaluationResource(
            eval_dir=evaluation.eval_dir, reports_dir=evaluation.reports_dir, eval_sets=names
        )
    reports = Path(evaluation.reports_dir)
    started = time.perf_counter()
    ran = force or not (reports / LATEST_SUMMARY).exists()
    checks: dict[str, bool] = {}
    failures: list[str] = []
    if ran:
        defs = dg.Definitions(assets=[retrieval_eval, retrieval_eval_report], jobs=EVAL_JOBS, resources=resources)
        quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
        with dg.DagsterInstance.get() as instance:
            arms = EVAL_ARMS.get_partition_keys()
            eval_job = defs.resolve_job_def("retrieval_eval_job")
            for done, arm in enumerate(arms):
                if on_progress:
                    on_progress("evaluation (arms)", done, len(arms))
                arm_run = eval_job.execute_in_process(
                    instance=instance, partition_key=arm, run_config=quiet, raise_on_error=False
                )
                if not arm_run.success:
                    failures.append(f"retrieval_eval[{arm}] failed (run {arm_run.run_id}); see the Dagster UI")
            if on_progress:
                on_progress("evaluation (arms)", len(arms), len(arms))
            report_job = defs.resolve_job_def("retrieval_eval_report_job")
            result = report_job.execute_in_process(instance=instance, run_config=quiet, raise_on_error=False)
            if not result.success:
                failures.append(f"retrieval_eval_report failed (run {result.run_id}); see the Dagster UI")
            checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
    # The newest report (history), not the regression baseline, which stays put after a regression.
    newest = sorted((reports / "history").glob(f"*/{LATEST_SUMMARY}"))
    source = newest[-1] if newest else reports / LATEST_SUMMARY
    if not source.exists():
        raise RuntimeError("; ".join(failures) or f"no evaluation report under {reports}")
    latest = json.loads(source.read_text())
    summaries = {name: EvalSummary.model_validate(data) for name, data in latest.items()}
    return EvaluationSummary(
        tables={name: markdown_table(s) for name, s in summaries.items()},
        figures={name: s.cli_json() for name, s in summaries.items()},
        seconds=time.perf_counter() - started,
        ran=ran,
        report_dir=str(reports / "latest"),
        checks=checks,
        failures=failures,
    )
