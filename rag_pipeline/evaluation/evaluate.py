"""Evaluate retrieval arms on one eval set: run, score, compare (the function the CLI and Dagster call)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta
from rag_pipeline.evaluation.metrics import per_query_metrics
from rag_pipeline.evaluation.runner import (
    DEFAULT_DEPTH,
    KEPT_PAYLOAD,
    TEMPORAL_ARM,
    ArmOutcome,
    ProgressCallback,
    cross_fitted_rerankers,
    dated,
    run_arm,
    temporal_rerankers,
)
from rag_pipeline.evaluation.statistics import percentile_ms
from rag_pipeline.evaluation.summary import ArmRun, EvalSummary, summarize
from rag_pipeline.retrieval.rerank.base import Reranker
from rag_pipeline.retrieval.results import MODES, SEARCH_MODES, Mode
from rag_pipeline.retrieval.retriever import Retriever

CHUNK_METRICS = ("ndcg@10", "recall@10", "recall@100", "mrr@10")


@dataclass
class EvalResult:
    """Everything one eval set's evaluation produced."""

    name: str
    meta: EvalSetMeta
    summary: EvalSummary
    per_query: pd.DataFrame
    outcomes: dict[str, ArmOutcome] = field(default_factory=dict)

    @property
    def leaks(self) -> int:
        return sum(a.leaks for a in self.summary.arms.values())


def qrels_of(queries: Sequence[EvalQuery]) -> dict[str, dict[str, int]]:
    return {q.id: dict(q.relevant) for q in queries}


def chunk_level_means(queries: Sequence[EvalQuery], outcomes: dict[str, ArmOutcome]) -> dict[str, dict[str, float]]:
    """``chunk_<metric>`` means over the queries that judge chunks (none: empty), ranking each result's best chunk."""
    qrels = {q.id: dict(q.relevant_chunks) for q in queries if q.relevant_chunks}
    if not qrels:
        return {}
    out = {}
    for arm, outcome in outcomes.items():
        run = ArmRun(arm, {qid: outcome.chunk_rankings.get(qid, []) for qid in qrels}, {}).run()
        frame = per_query_metrics(qrels, run, CHUNK_METRICS)
        out[arm] = {f"chunk_{m}": float(frame[m].mean()) for m in CHUNK_METRICS}
    return out


def headline_figures(queries: Sequence[EvalQuery], outcome: ArmOutcome) -> dict[str, float | int]:
    """An arm's nDCG@10 and Recall@100 means (over the judged queries, as the report's), p50 latency and leaks: what
    an evaluation step says of each arm, without the intervals, tests and ragas columns the report computes."""
    frame = per_query_metrics(qrels_of(queries), outcome.run.run(), ("ndcg@10", "recall@100"))
    return {
        "ndcg@10": round(float(frame["ndcg@10"].mean()), 4) if len(frame) else math.nan,
        "recall@100": round(float(frame["recall@100"].mean()), 4) if len(frame) else math.nan,
        "p50_ms": round(percentile_ms(outcome.run.latency_ms, 50), 2),
        "leaks": int(sum(outcome.run.leaks.values())),
    }


def run_arms(
    retriever: Retriever,
    queries: Sequence[EvalQuery],
    arms: Sequence[Mode] = MODES,
    sources: Sequence[str] | None = None,
    reranker: Reranker | None = None,
    folds: int = 5,
    progress: ProgressCallback | None = None,
    depth: int = DEFAULT_DEPTH,
    model_cache: Path | None = None,
) -> dict[str, ArmOutcome]:
    """Each arm's outcome. ``reranked`` uses ``reranker`` when given, else cross-fitted learned rerankers (fits
    already in ``model_cache`` are loaded, not trained again)."""
    for arm in arms:
        if arm not in SEARCH_MODES:
            raise ValueError(f"unknown arm {arm!r}; expected some of {', '.join(SEARCH_MODES)}")
    outcomes: dict[str, ArmOutcome] = {}
    # One eval set's searches are shared by its arms (the reranked arm reuses its training candidates, their
    # signals and the hybrid arm's deeper list); kept for this set only.
    with retriever.shared_work(remember=KEPT_PAYLOAD):
        for arm in arms:
            rerankers = None
            if arm == "reranked":
                rerankers = reranker or cross_fitted_rerankers(
                    retriever, queries, folds=folds, sources=sources, progress=progress, cache_dir=model_cache
                )
            outcomes[arm] = run_arm(
                retriever, arm, queries, depth=depth, sources=sources, rerankers=rerankers, progress=progress
            )
    return outcomes


def arm_outcomes(
    retriever: Retriever,
    queries: Sequence[EvalQuery],
    arms: Sequence[Mode],
    sources: Sequence[str] | None = None,
    folds: int = 5,
    progress: ProgressCallback | None = None,
    depth: int = DEFAULT_DEPTH,
    model_cache: Path | None = None,
) -> Iterator[tuple[str, ArmOutcome | Exception]]:
    """Each arm's outcome over one eval set, or the exception it raised: one arm's failure leaves the others to
    run (the Dagster evaluation saves them and names the failed one). The arms share the set's searches. A set whose
    queries carry their week (a mined one) also gets :data:`TEMPORAL_ARM` after ``reranked``."""
    with retriever.shared_work(remember=KEPT_PAYLOAD):
        for arm in arms:
            try:
                outcome: ArmOutcome | Exception = run_arms(
                    retriever, queries, [arm], sources, folds=folds, progress=progress, depth=depth,
                    model_cache=model_cache,
                )[arm]  # fmt: skip
            except Exception as exc:
                outcome = exc
            yield arm, outcome
            if arm == "reranked" and dated(queries):
                # Mined sets say each query's week: the reranked arm again, trained on earlier weeks only.
                try:
                    by_week = temporal_rerankers(
                        retriever, queries, sources=sources, progress=progress, cache_dir=model_cache
                    )
                    temporal: ArmOutcome | Exception = run_arm(
                        retriever, "reranked", queries, depth, sources, by_week, TEMPORAL_ARM, progress
                    )
                except Exception as exc:
                    temporal = exc
                yield TEMPORAL_ARM, temporal


def evaluate_queries(
    retriever: Retriever,
    queries: Sequence[EvalQuery],
    meta: EvalSetMeta,
    arms: Sequence[Mode] = MODES,
    baseline: str = "bm25",
    reranker: Reranker | None = None,
    documents: int | None = None,
    progress: ProgressCallback | None = None,
) -> EvalResult:
    outcomes = run_arms(retriever, queries, arms, meta.sources, reranker, progress=progress)
    return summarize_outcomes(meta, queries, outcomes, baseline, documents)


def summarize_outcomes(
    meta: EvalSetMeta,
    queries: Sequence[EvalQuery],
    outcomes: dict[str, ArmOutcome],
    baseline: str = "bm25",
    documents: int | None = None,
) -> EvalResult:
    runs: list[ArmRun] = [o.run for o in outcomes.values()]
    if baseline not in outcomes:
        baseline = runs[0].arm
    qrels = qrels_of(queries)
    summary = summarize(qrels, runs, baseline=baseline, documents=documents)
    for arm, means in chunk_level_means(queries, outcomes).items():
        summary.arms[arm].means.update(means)
    assert summary.per_query is not None  # summarize() keeps the frame it scored
    return EvalResult(meta.name, meta, summary, summary.per_query, outcomes)
