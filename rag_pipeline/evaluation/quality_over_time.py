"""Is retrieval getting worse? Mined queries carry the week they were asked, and every evaluation keeps its
per-query scores: from those, nDCG@10 per arm per week (a table and a chart) and two tests of a drop.

- **Same questions, evaluated again** (:func:`paired_drop`): the queries both the previous and the newest evaluation
  scored, paired; a significant drop means the index or the models got worse at questions they answered before.
- **New questions vs older ones** (:func:`recent_drop`): the last weeks' questions against every earlier week's,
  unpaired; a significant drop means what people ask now is answered worse than what they asked before (new
  content, new words, a channel the models handle badly).

A drop counts when it is larger than ``tolerance`` nDCG@10 and its p-value below ``alpha`` (two-sided permutation
tests, 10,000 resamples, seeded).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from rag_pipeline.evaluation.statistics import paired_permutation_p

METRIC = "ndcg@10"
DEFAULT_RECENT_WEEKS = 4
DEFAULT_ALPHA = 0.01
DEFAULT_TOLERANCE = 0.03
# Fewer queries than this on either side: no test (a week or two of a quiet channel says nothing).
MIN_QUERIES = 10


def weekly_quality(per_query: pd.DataFrame, weeks: Mapping[str, str]) -> pd.DataFrame:
    """``week, arm, ndcg@10, queries``: the mean per arm over the queries asked each week (queries without a week
    are left out)."""
    frame = per_query[["arm", "query_id", METRIC]].copy()
    frame["week"] = frame["query_id"].map(weeks)
    frame = frame.dropna(subset=["week"])
    table = frame.groupby(["week", "arm"], sort=True)[METRIC].agg(["mean", "count"]).reset_index()
    return table.rename(columns={"mean": METRIC, "count": "queries"})


@dataclass
class Drop:
    """One arm's comparison: the two means, the drop (earlier − later), its p-value, and whether it counts."""

    arm: str
    before: float
    after: float
    queries: tuple[int, int]
    p_value: float
    significant: bool

    @property
    def drop(self) -> float:
        return self.before - self.after


@dataclass
class DropReport:
    """Every arm's comparison and the ones that count (``failed``)."""

    kind: str
    drops: list[Drop] = field(default_factory=list)
    note: str = ""

    @property
    def failed(self) -> list[Drop]:
        return [d for d in self.drops if d.significant]

    def as_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "note": self.note,
            "arms": {
                d.arm: {"before": round(d.before, 4), "after": round(d.after, 4), "drop": round(d.drop, 4),
                        "queries": list(d.queries), "p": round(d.p_value, 4), "significant": d.significant}
                for d in self.drops
            },
        }  # fmt: skip


def _unpaired_p(a: np.ndarray, b: np.ndarray, seed: int = 0) -> float:
    from scipy import stats

    result = stats.permutation_test(
        (a, b), lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis), vectorized=True,
        n_resamples=10_000, alternative="two-sided", rng=np.random.default_rng(seed),
    )  # fmt: skip
    return float(min(1.0, result.pvalue))


def recent_drop(
    per_query: pd.DataFrame,
    weeks: Mapping[str, str],
    recent_weeks: int = DEFAULT_RECENT_WEEKS,
    alpha: float = DEFAULT_ALPHA,
    tolerance: float = DEFAULT_TOLERANCE,
) -> DropReport:
    """The last ``recent_weeks`` weeks that have questions, against every earlier week, per arm."""
    frame = per_query[["arm", "query_id", METRIC]].copy()
    frame["week"] = frame["query_id"].map(weeks)
    frame = frame.dropna(subset=["week"])
    asked = sorted(frame["week"].unique())
    report = DropReport("recent weeks vs earlier weeks")
    if len(asked) <= recent_weeks:
        report.note = f"{len(asked)} weeks with questions: nothing earlier than the last {recent_weeks} to compare"
        return report
    cut = asked[-recent_weeks]
    report.note = f"questions asked since {cut} vs before"
    for arm, rows in frame.groupby("arm", sort=True):
        before = rows[rows["week"] < cut][METRIC].to_numpy(dtype=float)
        after = rows[rows["week"] >= cut][METRIC].to_numpy(dtype=float)
        if min(before.size, after.size) < MIN_QUERIES:
            continue
        p = _unpaired_p(before, after)
        drop = float(before.mean() - after.mean())
        report.drops.append(
            Drop(str(arm), float(before.mean()), float(after.mean()), (before.size, after.size), p,
                 drop > tolerance and p < alpha)
        )  # fmt: skip
    return report


def paired_drop(
    previous: pd.DataFrame,
    current: pd.DataFrame,
    alpha: float = DEFAULT_ALPHA,
    tolerance: float = DEFAULT_TOLERANCE,
) -> DropReport:
    """The queries both evaluations scored, paired per arm: the previous scores against the newest."""
    report = DropReport("the same questions, previous evaluation vs this one")
    for arm, rows in current.groupby("arm", sort=True):
        old = previous[previous["arm"] == arm].set_index("query_id")[METRIC]
        new = rows.set_index("query_id")[METRIC]
        shared = new.index.intersection(old.index)
        if len(shared) < MIN_QUERIES:
            continue
        a, b = old.loc[shared].to_numpy(dtype=float), new.loc[shared].to_numpy(dtype=float)
        p = paired_permutation_p(a.tolist(), b.tolist())
        drop = float(a.mean() - b.mean())
        report.drops.append(
            Drop(str(arm), float(a.mean()), float(b.mean()), (len(shared), len(shared)), p,
                 drop > tolerance and p < alpha)
        )  # fmt: skip
    if not report.drops:
        report.note = "no earlier evaluation scored these questions"
    return report


def plot_weekly(table: pd.DataFrame, path: Path, title: str) -> Path:
    """nDCG@10 per arm per week (lines), and the questions each week (bars, right axis)."""
    from matplotlib.figure import Figure  # imported where a chart is drawn (matplotlib: ~0.7 s)

    figure = Figure(figsize=(9, 4.2), layout="constrained")
    axes = figure.add_subplot()
    weeks = sorted(table["week"].unique())
    positions = {w: i for i, w in enumerate(weeks)}
    counts = table.groupby("week")["queries"].max()
    bars = axes.twinx()
    bars.bar([positions[w] for w in weeks], [int(counts[w]) for w in weeks], color="0.85", width=0.8)
    bars.set_ylabel("questions asked that week")
    axes.set_zorder(bars.get_zorder() + 1)
    axes.patch.set_visible(False)
    for arm, rows in table.groupby("arm", sort=True):
        axes.plot([positions[w] for w in rows["week"]], rows[METRIC], marker="o", markersize=3, label=str(arm))
    step = max(1, len(weeks) // 12)
    axes.set_xticks(range(0, len(weeks), step), [weeks[i] for i in range(0, len(weeks), step)], rotation=45,
                    ha="right", fontsize=7)  # fmt: skip
    axes.set_ylim(0, 1)
    axes.set_ylabel("mean nDCG@10")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, ncol=3)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=110)
    return path
