"""Tables the commands print on a terminal, laid out for the terminal's width.

A table is printed in the first of its layouts that fits the console without cutting a word: rich then wraps
cells only between words, so no header loses its end to an ellipsis and no number is cut. Each command offers
its wide layout first (one row per source, arm or container, as on a wide terminal) and a narrower one after
(figures as rows, two tables, or ``key  value`` blocks), which an 80-column terminal reads whole.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:  # the evaluation's modules (pandas) are imported where an evaluation is printed
    from rag_pipeline.evaluation.summary import EvalSummary

# Wide enough never to limit a measurement: what a table needs, not what the console has.
_UNLIMITED = 10_000


def fits(console: Console, renderable: RenderableType) -> bool:
    """Whether ``renderable`` prints at the console's width with no word (header or figure) cut.

    A table fits when rich gives each column at least the width of its longest word: rich narrows the widest
    columns first, past their longest word, and cuts that word with an ellipsis. A group fits when each of its
    parts does.
    """
    if isinstance(renderable, Group):
        return all(fits(console, part) for part in renderable.renderables)
    unlimited = console.options.update_width(_UNLIMITED)
    if not isinstance(renderable, Table):
        return Measurement.get(console, unlimited, renderable).minimum <= console.width
    try:
        widths = renderable._calculate_column_widths(
            console, console.options.update_width(console.width - renderable._extra_width)
        )
        needed = [renderable._measure_column(console, unlimited, column).minimum for column in renderable.columns]
    except AttributeError:  # rich's internals moved: a table fits where it needs no wrapping at all
        return Measurement.get(console, unlimited, renderable).maximum <= console.width
    return sum(widths) + renderable._extra_width <= console.width and all(
        width >= need for width, need in zip(widths, needed, strict=True)
    )


def first_fitting(console: Console, layouts: Sequence[RenderableType]) -> RenderableType:
    """The first of ``layouts`` that fits the console, else the last (the most compact)."""
    for layout in layouts:
        if fits(console, layout):
            return layout
    return layouts[-1]


def key_value_blocks(blocks: dict[str, list[tuple[str, str]]], title: str | None = None) -> Group:
    """The vertical layout: per block its name, then one indented ``key  value`` line per figure; long values
    wrap within their column."""
    parts: list[RenderableType] = [Text(title, style="italic")] if title else []
    for name, rows in blocks.items():
        grid = Table.grid(padding=(0, 2))
        grid.add_column(no_wrap=True)
        grid.add_column(overflow="fold")
        for key, value in rows:
            grid.add_row(Text(key), Text(value))
        parts += [Text(name, style="bold"), Padding(grid, (0, 0, 0, 2))]
    return Group(*parts)


@dataclass(frozen=True)
class _ArmCells:
    arm: Text  # Text: an arm named like reranked[fixed-weights] is no markup
    ndcg: str  # the mean with its significance mark
    ci: str
    plain: list[str]  # TABLE_METRICS' means
    p50: str
    p95: str
    leaks: str


def evaluation_layouts(summary: EvalSummary) -> list[RenderableType]:
    """The evaluation table (the report's markdown table as rich tables): one table with every column, then
    the same figures as two narrower tables (quality; latency and leaks) for an 80-column terminal."""
    from rag_pipeline.evaluation.report import TABLE_METRICS, format_figure, leak_cell, significance_mark
    from rag_pipeline.evaluation.summary import PRIMARY_METRIC

    rows = []
    for name, arm in summary.arms.items():
        low, high = arm.ci95.get(PRIMARY_METRIC, (math.nan, math.nan))
        rows.append(
            _ArmCells(
                arm=Text(f"{name} (baseline)" if name == summary.baseline else name),
                ndcg=format_figure(arm.means.get(PRIMARY_METRIC, math.nan))
                + significance_mark(arm.p_vs_baseline.get(PRIMARY_METRIC)),
                ci=f"[{format_figure(low)}, {format_figure(high)}]",
                plain=[format_figure(arm.means.get(metric, math.nan)) for _, metric in TABLE_METRICS],
                p50=format_figure(arm.p50_ms, 1),
                p95=format_figure(arm.p95_ms, 1),
                leaks=leak_cell(arm.leaks, arm.queries_with_leaks),
            )
        )

    def table(*headers: str) -> Table:
        """A table of arms: their names wrap (or fold, as a last resort); figures never do."""
        out = Table()
        out.add_column("Arm", overflow="fold")
        for header in headers:
            out.add_column(header, justify="left" if header.startswith(("nDCG", "95%")) else "right", no_wrap=True)
        return out

    metrics = [header for header, _ in TABLE_METRICS]
    wide = table("nDCG@10 [95% CI]", *metrics, "p50 / p95 ms", "Leaks")
    quality = table("nDCG@10", "95% CI", *metrics)
    cost = table("p50 ms", "p95 ms", "Leaks")
    for row in rows:
        wide.add_row(row.arm, f"{row.ndcg} {row.ci}", *row.plain, f"{row.p50} / {row.p95}", row.leaks)
        quality.add_row(row.arm, row.ndcg, row.ci, *row.plain)
        cost.add_row(row.arm, row.p50, row.p95, row.leaks)
    return [wide, Group(quality, cost)]


def print_evaluation_table(summary: EvalSummary, console: Console) -> None:
    """The report's table on a terminal, in the layout its width allows, then the legend (wrapped)."""
    from rag_pipeline.evaluation.report import legend_text

    console.print(first_fitting(console, evaluation_layouts(summary)))
    console.print(legend_text(summary, markdown=False), highlight=False)
