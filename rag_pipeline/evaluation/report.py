"""Render an :class:`~rag_pipeline.evaluation.summary.EvalSummary`: a Markdown table, two PNG charts, files.

Charts draw on a bare :class:`matplotlib.figure.Figure`, which renders through the Agg canvas without
pyplot: no display is needed and the process-wide backend is left alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
from tabulate import tabulate

from rag_pipeline.evaluation.summary import PRIMARY_METRIC, EvalSummary

RECALL_KS: tuple[int, ...] = (5, 10, 50, 100)
NDCG_PLOT = "ndcg_at_10.png"
RECALL_PLOT = "recall_at_k.png"
# (column header, metric) pairs of the plain metric columns after nDCG@10.
TABLE_METRICS: tuple[tuple[str, str], ...] = (
    ("R@10", "recall@10"),
    ("R@100", "recall@100"),
    ("MRR@10", "mrr@10"),
    ("MAP@100", "map@100"),
)


def significance_mark(p: float | None) -> str:
    """``**`` for p < 0.01, ``*`` for p < 0.05, else nothing."""
    if p is None or math.isnan(p):
        return ""
    if p < 0.01:
        return "**"
    if p < 0.05:
        return "*"
    return ""


def format_figure(value: float | None, digits: int = 3) -> str:
    """A table's figure: ``digits`` decimals, ``–`` where there is none."""
    return "–" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def leak_cell(leaks: int, queries: int) -> str:
    """``0``, or the leaked results with how many queries leaked them."""
    if not leaks:
        return "0"
    return f"{leaks} ({queries} quer{'y' if queries == 1 else 'ies'})"


def markdown_table(summary: EvalSummary) -> str:
    """One row per arm (summary order): nDCG@10 with CI and significance, recall, MRR, MAP, latency, leaks.

    Followed by a legend line explaining the marks and the interval.
    """
    headers = ["Arm", "nDCG@10 [95% CI]", *(header for header, _ in TABLE_METRICS), "p50 / p95 ms", "Leaks"]
    rows = []
    for name, arm in summary.arms.items():
        label = f"{name} (baseline)" if name == summary.baseline else name
        low, high = arm.ci95.get(PRIMARY_METRIC, (math.nan, math.nan))
        ndcg = (
            f"{format_figure(arm.means.get(PRIMARY_METRIC, math.nan))}"
            f"{significance_mark(arm.p_vs_baseline.get(PRIMARY_METRIC))} [{format_figure(low)}, {format_figure(high)}]"
        )
        plain = [format_figure(arm.means.get(metric, math.nan)) for _, metric in TABLE_METRICS]
        latency = f"{format_figure(arm.p50_ms, 1)} / {format_figure(arm.p95_ms, 1)}"
        leaks = leak_cell(arm.leaks, arm.queries_with_leaks)
        rows.append([label, ndcg, *plain, latency, leaks])
    table = tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)
    return table + "\n\n" + legend_text(summary) + "\n"


def legend_text(summary: EvalSummary, markdown: bool = True) -> str:
    """The line under the table: what the marks, the intervals and the leaks mean (marks in backticks for
    Markdown, bare for a terminal)."""
    others = len(summary.arms) - 1
    one, two = ("`*`", "`**`") if markdown else ("*", "**")
    return (
        f"{one} p < 0.05, {two} p < 0.01 vs the baseline ({summary.baseline}) on nDCG@10: paired randomization test "
        f"over {summary.queries} queries, Holm-adjusted across {others} arm{'s' if others != 1 else ''}. "
        "Intervals: 95 % bootstrap over queries. Leaks: results the query's principal may not read."
    )


def plot_ndcg_bars(summary: EvalSummary, path: Path) -> Path:
    """Bar chart of mean nDCG@10 per arm with 95 % CI error bars; returns ``path``."""
    path = Path(path)
    names = list(summary.arms)
    means = [summary.arms[name].means.get(PRIMARY_METRIC, math.nan) for name in names]
    lows, highs = [], []
    for name, mean in zip(names, means, strict=True):
        low, high = summary.arms[name].ci95.get(PRIMARY_METRIC, (mean, mean))
        # matplotlib rejects negative error lengths, which a BCa interval not covering the mean would give.
        lows.append(max(0.0, mean - low) if not math.isnan(low) else 0.0)
        highs.append(max(0.0, high - mean) if not math.isnan(high) else 0.0)
    from matplotlib.figure import Figure  # imported where a chart is drawn (matplotlib: ~0.7 s)

    figure = Figure(figsize=(max(4.0, 1.2 * len(names) + 2), 4), layout="constrained")
    axes = figure.add_subplot()
    colors = ["tab:gray" if name == summary.baseline else "tab:blue" for name in names]
    axes.bar(names, means, yerr=[lows, highs], capsize=4, color=colors)
    axes.set_ylabel("nDCG@10")
    axes.set_ylim(0, 1)
    axes.set_title(f"nDCG@10 per arm, 95 % CI ({summary.queries} queries)")
    axes.tick_params(axis="x", labelrotation=20)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=120)
    return path


def _recall_means(source: EvalSummary | pd.DataFrame, ks: Sequence[int]) -> dict[str, list[float]]:
    if isinstance(source, EvalSummary):
        return {name: [arm.means.get(f"recall@{k}", math.nan) for k in ks] for name, arm in source.arms.items()}
    means = source.groupby("arm", sort=False)[[f"recall@{k}" for k in ks]].mean()
    return {str(name): [float(v) for v in row] for name, row in means.iterrows()}


def plot_recall_curves(source: EvalSummary | pd.DataFrame, path: Path, ks: Sequence[int] = RECALL_KS) -> Path:
    """Mean recall@k against k, one line per arm, from a summary or a per-query frame; returns ``path``.

    Only the ``k`` the source has a ``recall@k`` for are drawn.
    """
    path = Path(path)
    if isinstance(source, pd.DataFrame):
        available = set(source.columns)
    else:
        available = {metric for arm in source.arms.values() for metric in arm.means}
    ks = [k for k in ks if f"recall@{k}" in available]
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 4), layout="constrained")
    axes = figure.add_subplot()
    for name, values in _recall_means(source, ks).items():
        axes.plot(ks, values, marker="o", label=name)
    axes.set_xscale("log")
    axes.set_xticks(ks, [str(k) for k in ks])
    axes.set_xlabel("k")
    axes.set_ylabel("mean recall@k")
    axes.set_ylim(0, 1)
    axes.grid(alpha=0.3)
    if ks:
        axes.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=120)
    return path


def write_report(summary: EvalSummary, per_query: pd.DataFrame, out_dir: Path, title: str) -> dict[str, Path]:
    """Write report.md, summary.json, per_query.parquet and the two charts into ``out_dir``.

    Returns the paths under the keys ``report``, ``summary``, ``per_query``, ``ndcg_plot``, ``recall_plot``.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "ndcg_plot": plot_ndcg_bars(summary, out_dir / NDCG_PLOT),
        "recall_plot": plot_recall_curves(per_query if not per_query.empty else summary, out_dir / RECALL_PLOT),
        "summary": out_dir / "summary.json",
        "per_query": out_dir / "per_query.parquet",
        "report": out_dir / "report.md",
    }
    paths["summary"].write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
    per_query.to_parquet(paths["per_query"], index=False)
    documents = f", {summary.documents} documents" if summary.documents is not None else ""
    unjudged = (
        f" {len(summary.unjudged)} quer{'y' if len(summary.unjudged) == 1 else 'ies'} without a relevant "
        "judgement were left out."
        if summary.unjudged
        else ""
    )
    lines = [
        f"# {title}",
        "",
        f"{summary.queries} queries{documents}; baseline: {summary.baseline}.{unjudged}",
        "",
        markdown_table(summary),
        f"![nDCG@10 per arm with 95 % CI]({NDCG_PLOT})",
        "",
        f"![Mean recall@k per arm]({RECALL_PLOT})",
        "",
    ]
    paths["report"].write_text("\n".join(lines), encoding="utf-8")
    return paths
