"""Combine the runs of several retrieval arms into one comparable summary.

Each arm is scored per query (:mod:`rag_pipeline.evaluation.metrics`), then summarised by its means, a 95 %
bootstrap interval per metric, latency percentiles, ACL leak counts and – for every arm but the baseline –
a paired randomization test against the baseline, Holm-adjusted across the non-baseline arms per metric.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, PrivateAttr

from rag_pipeline.evaluation.metrics import DEFAULT_METRICS, per_query_metrics, ragas_id_metrics, split_unjudged
from rag_pipeline.evaluation.statistics import bootstrap_ci, holm, paired_permutation_pvalues, percentile_ms

RAGAS_K = 10
RAGAS_COLUMNS: tuple[str, ...] = (f"context_precision@{RAGAS_K}", f"context_recall@{RAGAS_K}")
# The metrics the CLI prints; any of them missing from a summary's metrics is left out of cli_json.
CLI_METRICS: tuple[str, ...] = ("ndcg@10", "recall@10", "recall@100", "mrr@10", "map@100")
# The metric whose baseline p-value the CLI and the report show.
PRIMARY_METRIC = "ndcg@10"
RANKED_IDS_KEPT = 100


@dataclass
class ArmRun:
    """One arm's output over an eval set.

    ``rankings`` maps a query id to ``(doc_id, score)`` pairs best first, excluded ids already removed; the
    list order is authoritative (scores only label it). ``leaks`` maps a query id to how many returned
    results that query's principal may not read.
    """

    arm: str
    rankings: dict[str, list[tuple[str, float]]]
    latency_ms: dict[str, float]
    leaks: dict[str, int] = field(default_factory=dict)

    def run(self) -> dict[str, dict[str, float]]:
        """The rankings as a ranx-style run whose scores reproduce the list order.

        Rank-derived scores (n, n-1, ...) rather than the arm's own make tied or unsorted scores harmless;
        a document listed twice keeps its first (best) position.
        """
        out: dict[str, dict[str, float]] = {}
        for query_id, ranking in self.rankings.items():
            ids = list(dict.fromkeys(doc_id for doc_id, _ in ranking))
            out[query_id] = {doc_id: float(len(ids) - rank) for rank, doc_id in enumerate(ids)}
        return out


class ArmSummary(BaseModel):
    """One arm's aggregate figures."""

    # NaN (an eval set with nothing judged) must survive a JSON round trip.
    model_config = ConfigDict(ser_json_inf_nan="constants")

    means: dict[str, float]
    ci95: dict[str, tuple[float, float]]
    p_vs_baseline: dict[str, float]
    p50_ms: float
    p95_ms: float
    leaks: int
    queries_with_leaks: int


class EvalSummary(BaseModel):
    """All arms over one eval set. ``per_query`` (the frame behind the figures) is kept out of the JSON.

    ``queries`` counts the judged queries that were scored; ``unjudged`` names those dropped because their
    qrels hold no relevant document.
    """

    model_config = ConfigDict(ser_json_inf_nan="constants")

    queries: int
    documents: int | None
    baseline: str
    metrics: list[str]
    arms: dict[str, ArmSummary]
    unjudged: list[str] = []
    _per_query: pd.DataFrame | None = PrivateAttr(default=None)

    @property
    def per_query(self) -> pd.DataFrame | None:
        """The per-query frame of :func:`per_query_frame` this summary was computed from (None once re-loaded)."""
        return self._per_query

    def __eq__(self, other: object) -> bool:
        # pydantic compares private attributes too, and comparing DataFrames has no truth value; two summaries
        # are equal when their figures are.
        if not isinstance(other, EvalSummary):
            return NotImplemented
        return self.model_dump() == other.model_dump()

    def cli_json(self) -> dict[str, Any]:
        """The compact shape the CLI prints: headline means, latency, CIs, the Holm p on nDCG@10 and ACL leaks."""
        arms: dict[str, Any] = {}
        for name, arm in self.arms.items():
            shown = [metric for metric in CLI_METRICS if metric in arm.means]
            entry: dict[str, Any] = {metric: _finite(arm.means[metric]) for metric in shown}
            entry["p50_ms"] = _finite(arm.p50_ms)
            entry["p95_ms"] = _finite(arm.p95_ms)
            entry["ci95"] = {metric: [_finite(v) for v in arm.ci95[metric]] for metric in shown}
            entry["p_vs_baseline"] = _finite(arm.p_vs_baseline.get(PRIMARY_METRIC))
            # Over every query, judged or not: an ACL set's readers who may see nothing are where leaks show.
            entry["leaks"] = arm.leaks
            entry["queries_with_leaks"] = arm.queries_with_leaks
            arms[name] = entry
        return {"arms": arms, "queries": self.queries, "documents": self.documents}


def _finite(value: float | None) -> float | None:
    # JSON has no NaN; null reads as "not available" to every consumer.
    return None if value is None or math.isnan(value) else float(value)


def per_query_frame(
    qrels: Mapping[str, Mapping[str, int]], runs: Sequence[ArmRun], metrics: Sequence[str] = DEFAULT_METRICS
) -> pd.DataFrame:
    """Long frame, one row per (arm, judged query): arm, query_id, each metric, the ragas columns,
    latency_ms (NaN if not recorded), leaks, ranked_ids (top 100 ids)."""
    frames = []
    for arm_run in runs:
        run = arm_run.run()
        scores = per_query_metrics(qrels, run, metrics).join(ragas_id_metrics(qrels, run, k=RAGAS_K))
        scores.insert(0, "arm", arm_run.arm)
        scores["latency_ms"] = [float(arm_run.latency_ms.get(q, math.nan)) for q in scores.index]
        scores["leaks"] = [int(arm_run.leaks.get(q, 0)) for q in scores.index]
        scores["ranked_ids"] = [
            list(dict.fromkeys(doc_id for doc_id, _ in arm_run.rankings.get(q, [])))[:RANKED_IDS_KEPT]
            for q in scores.index
        ]
        frames.append(scores.reset_index())
    columns = ["arm", "query_id", *metrics, *RAGAS_COLUMNS, "latency_ms", "leaks", "ranked_ids"]
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)[columns]


def summarize(
    qrels: Mapping[str, Mapping[str, int]],
    runs: list[ArmRun],
    baseline: str = "bm25",
    metrics: Sequence[str] = DEFAULT_METRICS,
    documents: int | None = None,
    seed: int = 0,
) -> EvalSummary:
    """Score and compare ``runs`` on ``qrels``; ``baseline`` must name one of the arms.

    Latency percentiles use every latency the arm recorded and leak counts every query it ran, judged or
    not: neither depends on relevance labels.
    """
    names = [arm_run.arm for arm_run in runs]
    if len(set(names)) != len(names):
        raise ValueError(f"arm names repeat: {names}")
    if baseline not in names:
        raise ValueError(f"baseline arm {baseline!r} is not among the runs {names}")
    metrics = list(dict.fromkeys(metrics))
    _, unjudged = split_unjudged(qrels)
    frame = per_query_frame(qrels, runs, metrics)
    value_columns = [*metrics, *RAGAS_COLUMNS]
    by_arm = {name: frame[frame["arm"] == name].set_index("query_id") for name in names}
    base = by_arm[baseline]

    raw_p: dict[str, dict[str, float]] = {metric: {} for metric in metrics}
    for name in names:
        if name == baseline:
            continue
        scores = by_arm[name].loc[base.index]
        # metrics x queries, tested in one call
        pvalues = paired_permutation_pvalues(
            scores[metrics].to_numpy(dtype=float).T, base[metrics].to_numpy(dtype=float).T, seed=seed
        )
        for metric, pvalue in zip(metrics, pvalues, strict=True):
            raw_p[metric][name] = float(pvalue)
    adjusted = {metric: holm(raw_p[metric]) for metric in metrics}

    arms: dict[str, ArmSummary] = {}
    for arm_run in runs:
        scores = by_arm[arm_run.arm]
        arms[arm_run.arm] = ArmSummary(
            means={col: float(scores[col].mean()) if len(scores) else math.nan for col in value_columns},
            ci95={col: bootstrap_ci(scores[col].to_numpy(), seed=seed) for col in value_columns},
            p_vs_baseline={} if arm_run.arm == baseline else {m: adjusted[m][arm_run.arm] for m in metrics},
            p50_ms=percentile_ms(arm_run.latency_ms, 50),
            p95_ms=percentile_ms(arm_run.latency_ms, 95),
            leaks=int(sum(arm_run.leaks.values())),
            queries_with_leaks=sum(1 for count in arm_run.leaks.values() if count > 0),
        )
    summary = EvalSummary(
        queries=len(base), documents=documents, baseline=baseline, metrics=metrics, arms=arms, unjudged=unjudged
    )
    summary._per_query = frame
    return summary
