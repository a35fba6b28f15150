"""Runs the evaluation assets in-process: every arm of ``retrieval_eval`` in one run, then the report."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg

from rag_pipeline.evaluation.eval_set import load_eval_set_meta
from rag_pipeline.evaluation.report import markdown_table
from rag_pipeline.evaluation.report_store import ReportStore
from rag_pipeline.evaluation.summary import EvalSummary
from rag_pipeline.pipeline.sources import document_sources as mined_sources
from rag_pipeline.pipeline.tags import RANGE_END_TAG, RANGE_START_TAG
from rag_pipeline.runs.code_location import (
    EvaluationResource,
    build_mined_eval_sets,
    build_quality_over_time,
    build_resources,
    evaluation_definitions,
    source_specs,
)
from rag_pipeline.runs.execution import execute_run, runner_instance
from rag_pipeline.runs.instance import QUIET_RUN_CONFIG, ensure_dagster_home
from rag_pipeline.settings import Settings

ProgressFn = Callable[[str, int, int], None]


@dataclass
class EvaluationSummary:
    """The report the demo prints: per eval set, its markdown table, CLI-shaped figures and its summary (the
    terminal's tables, :mod:`rag_pipeline.commands.tables`)."""

    tables: dict[str, str]
    figures: dict[str, dict[str, Any]]
    seconds: float
    ran: bool
    report_dir: str
    checks: dict[str, bool] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    summaries: dict[str, EvalSummary] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The ``evaluation`` object of ``demo --json`` and ``evaluate --json``."""
        return {
            "seconds": round(self.seconds, 1),
            "report_dir": self.report_dir,
            "checks": self.checks,
            "failures": self.failures,
            "eval_sets": self.figures,
        }


def step_failure_reason(result: dg.ExecuteInProcessResult) -> str:
    """The first line of each failed step's error (the evaluation step names the arms that failed), so the command's
    stderr and JSON say which arm it was, not only the Dagster UI."""
    reasons = [
        event.step_failure_data.error.message.strip().splitlines()[0]
        for event in result.get_step_failure_events()
        if event.step_failure_data.error is not None and event.step_failure_data.error.message.strip()
    ]
    return "; ".join(reasons) or "no step error recorded"


def scoped_eval_sets(eval_dir: Path, sources: tuple[str, ...]) -> list[str]:
    """The eval sets whose queries search only these sources (a partial index is not scored on others)."""
    names = []
    for path in sorted(eval_dir.glob("*.jsonl")):
        scope = load_eval_set_meta(path).sources
        if scope and set(scope) <= set(sources):
            names.append(path.stem)
    return names


def _range_run(job: dg.JobDefinition, instance: dg.DagsterInstance, keys: Sequence[str]) -> dg.ExecuteInProcessResult:
    """One run of ``job`` over the partition range ``keys[0]...keys[-1]`` (single-run backfills), quietly."""
    return execute_run(
        job,
        instance,
        tags={RANGE_START_TAG: keys[0], RANGE_END_TAG: keys[-1]},
        run_config=QUIET_RUN_CONFIG,
        raise_on_error=False,
    )


def run_evaluation(
    settings: Settings,
    force: bool = False,
    on_progress: ProgressFn | None = None,
    sources: tuple[str, ...] | None = None,
    on_start: Callable[[int, int], None] | None = None,
    mine: bool = False,
) -> EvaluationSummary:
    """Materialize ``retrieval_eval`` (every arm) and ``retrieval_eval_report`` on the runners' instance.

    Skipped (the last report is shown) when a report exists and ``force`` is false: the caller forces
    it whenever the index changed. ``sources`` (a partial demo) keeps only the eval sets scoped to
    those sources, so a Slack-only index is not scored on Jira queries. ``on_start(eval_sets, arms)`` is
    called when the evaluation runs, before its first arm. With ``mine`` (the demo), ``mined_eval_sets`` is
    materialized over every week first, so the evaluation runs the workspace's own questions too; the weekly quality
    (``retrieval_quality_over_time``) follows the report either way.
    """

    ensure_dagster_home(settings)
    specs = source_specs(settings)
    # The demo always reads the offline sources, even where a live API is configured.
    resources = build_resources(settings, specs, live=False)
    evaluation: EvaluationResource = resources["evaluation"]  # type: ignore[assignment]
    if sources is not None and not set(specs) <= set(sources):
        names = scoped_eval_sets(Path(evaluation.eval_dir), sources)
        if not names:
            return EvaluationSummary(
                {}, {}, 0.0, False, "", failures=[f"no eval set is scoped to {', '.join(sources)}"]
            )
        resources["evaluation"] = EvaluationResource(
            eval_dir=evaluation.eval_dir,
            reports_dir=evaluation.reports_dir,
            llm_reranker_model=evaluation.llm_reranker_model,
            eval_sets=names,
            workers=evaluation.workers,
        )
    store = ReportStore(evaluation.reports_dir)
    started = time.perf_counter()
    ran = force or not store.baseline_path.exists()
    checks: dict[str, bool] = {}
    failures: list[str] = []
    if ran:
        definitions = evaluation_definitions(settings, specs)
        mined = build_mined_eval_sets(specs, mined_sources(specs), settings.partition_start)
        quality = build_quality_over_time(definitions.retrieval_eval_report)
        jobs = [
            *definitions.jobs,
            dg.define_asset_job("mined_eval_sets_job", selection=[mined]),
            dg.define_asset_job("retrieval_quality_over_time_job", selection=[quality]),
        ]
        defs = dg.Definitions(assets=[*definitions.assets, mined, quality], jobs=jobs, resources=resources)
        with runner_instance() as instance:
            if mine:
                weeks = mined.partitions_def.get_partition_keys() if mined.partitions_def else []
                mined_run = _range_run(defs.resolve_job_def("mined_eval_sets_job"), instance, weeks)
                if not mined_run.success:
                    failures.append(
                        f"mined_eval_sets failed (run {mined_run.run_id}): {step_failure_reason(mined_run)}"
                    )
            arms = definitions.arms.get_partition_keys()
            if on_start:
                on_start(len(resources["evaluation"].eval_set_paths()), len(arms))  # type: ignore[attr-defined]
            eval_job = defs.resolve_job_def("retrieval_eval_job")
            if on_progress:
                on_progress("evaluation (arms)", 0, len(arms))
            # Every arm in one run (a partition range): each eval set's arms share their searches and the run's
            # index, models and query embeddings; an arm that fails leaves the others' results and fails the run.
            arm_run = _range_run(eval_job, instance, arms)
            if not arm_run.success:
                failures.append(
                    f"retrieval_eval[{arms[0]}...{arms[-1]}] failed (run {arm_run.run_id}): "
                    f"{step_failure_reason(arm_run)}; see the Dagster UI"
                )
            if on_progress:
                on_progress("evaluation (arms)", len(arms), len(arms))
            report_job = defs.resolve_job_def("retrieval_eval_report_job")
            result = execute_run(report_job, instance, run_config=QUIET_RUN_CONFIG, raise_on_error=False)
            if not result.success:
                failures.append(f"retrieval_eval_report failed (run {result.run_id}); see the Dagster UI")
            checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
            weekly = execute_run(
                defs.resolve_job_def("retrieval_quality_over_time_job"),
                instance,
                run_config=QUIET_RUN_CONFIG,
                raise_on_error=False,
            )
            if not weekly.success:
                failures.append(f"retrieval_quality_over_time failed (run {weekly.run_id}); see the Dagster UI")
            checks.update({c.check_name: c.passed for c in weekly.get_asset_check_evaluations()})
    # The newest report, not the regression baseline, which stays put after a regression.
    latest = store.newest()
    if latest is None:
        raise RuntimeError("; ".join(failures) or f"no evaluation report under {store.root}")
    summaries = {name: EvalSummary.model_validate(data) for name, data in latest.items()}
    return EvaluationSummary(
        tables={name: markdown_table(s) for name, s in summaries.items()},
        figures={name: s.cli_json() for name, s in summaries.items()},
        seconds=time.perf_counter() - started,
        ran=ran,
        report_dir=str(store.latest_dir),
        checks=checks,
        failures=failures,
        summaries=summaries,
    )
