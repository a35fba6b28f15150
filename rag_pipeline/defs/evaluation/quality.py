"""``retrieval_quality_over_time``: nDCG@10 per arm per week of the mined questions (a chart in the UI), and a check
that fails on a significant drop (the same questions answered worse than last time, or this month's questions
answered worse than earlier ones). Thin: :mod:`rag_pipeline.evaluation.quality_over_time` does the work."""

import base64
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd

from rag_pipeline.defs.evaluation.resources import EvaluationResource
from rag_pipeline.defs.executors import QDRANT_QUEUE, step_tags
from rag_pipeline.evaluation.eval_set import load_eval_set_meta
from rag_pipeline.evaluation.mining.mine import MINED_TAG
from rag_pipeline.evaluation.mining.store import raw_queries, week_of
from rag_pipeline.evaluation.quality_over_time import (
    METRIC,
    DropReport,
    paired_drop,
    plot_weekly,
    recent_drop,
    weekly_quality,
)
from rag_pipeline.evaluation.report_store import ReportStore

CHECK = "no_significant_drop"


def _image(path: Path) -> str:
    return f"![nDCG@10 per week](data:image/png;base64,{base64.b64encode(path.read_bytes()).decode()})"


def build_quality_over_time(report: dg.AssetsDefinition) -> dg.AssetsDefinition:
    """The weekly quality of the mined sets, after each evaluation report."""

    @dg.asset(
        deps=[report],
        check_specs=[
            dg.AssetCheckSpec(
                CHECK,
                asset="retrieval_quality_over_time",
                description="No arm's nDCG@10 dropped significantly on the mined questions: the same questions "
                "since the previous evaluation (paired), or the last weeks' questions against earlier ones",
            )
        ],
        automation_condition=dg.AutomationCondition.eager(),
        # Reads the report folder the evaluation steps write: it runs where they do.
        op_tags=step_tags(QDRANT_QUEUE),
        group_name="evaluation",
        owners=["team:rag-platform"],
        kinds={"python"},
        description="Is retrieval getting worse on this workspace? nDCG@10 per arm per week the mined questions "
        "were asked (chart and table), from the newest evaluation report's per-query scores; the check fails on a "
        "drop larger than the tolerance with p < alpha (permutation tests).",
    )
    def retrieval_quality_over_time(evaluation: EvaluationResource):
        store = ReportStore(evaluation.reports_dir)
        metadata: dict[str, Any] = {}
        failures: list[str] = []
        tests: dict[str, Any] = {}
        mined = sorted(Path(evaluation.mined_dir).glob("*.jsonl")) if evaluation.mined_dir else []
        for path in mined:
            meta = load_eval_set_meta(path)
            if MINED_TAG not in meta.tags:
                continue
            stamps = store.stamps_with(meta.name)
            if not stamps:
                continue
            weeks = {q.id: week_of(q) for q in raw_queries(path) if week_of(q)}
            current = pd.read_parquet(store.report_dir(stamps[-1], meta.name) / "per_query.parquet")
            table = weekly_quality(current, weeks)
            chart = plot_weekly(
                table, Path(evaluation.reports_dir) / "quality_over_time" / f"{meta.name}.png", meta.name
            )
            reports: list[DropReport] = [
                recent_drop(current, weeks, evaluation.recent_weeks, evaluation.drop_alpha, evaluation.drop_tolerance)
            ]
            if len(stamps) > 1:
                previous = pd.read_parquet(store.report_dir(stamps[-2], meta.name) / "per_query.parquet")
                reports.append(paired_drop(previous, current, evaluation.drop_alpha, evaluation.drop_tolerance))
            tests[meta.name] = [r.as_json() for r in reports]
            failures += [
                f"{meta.name} {d.arm}: {d.before:.3f} -> {d.after:.3f} ({r.kind}, p={d.p_value:.4f})"
                for r in reports
                for d in r.failed
            ]
            wide = table.pivot(index="week", columns="arm", values=METRIC).round(4).reset_index()
            metadata[f"{meta.name}/chart"] = dg.MetadataValue.md(f"### {meta.name}\n\n{_image(chart)}")
            metadata[f"{meta.name}/weeks"] = dg.MetadataValue.md(wide.to_markdown(index=False))
            metadata[f"{meta.name}/report"] = dg.MetadataValue.path(str(store.report_dir(stamps[-1], meta.name)))
        metadata["mined_sets"] = len(tests)
        yield dg.MaterializeResult(metadata=metadata)
        yield dg.AssetCheckResult(
            check_name=CHECK,
            passed=not failures,
            metadata={
                "failures": dg.MetadataValue.json(failures),
                "tests": dg.MetadataValue.json(tests),
                "alpha": evaluation.drop_alpha,
                "tolerance": evaluation.drop_tolerance,
                "recent_weeks": evaluation.recent_weeks,
            },
        )

    return retrieval_quality_over_time
