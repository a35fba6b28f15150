"""Per-query ranking metrics: ranx for the IR measures, ragas for the ID-based context metrics.

Inputs are TREC-style dictionaries: ``qrels`` maps a query id to ``{doc_id: grade}`` and ``run`` maps a
query id to ``{doc_id: score}`` (higher is better). Grades ``>= 1`` are relevant; nDCG uses the grades as
linear gains (ranx's Järvelin–Kekäläinen formulation, ``ndcg``; ``ndcg_burges`` would use ``2**grade - 1``).

Two classes of query are treated specially, so that every arm is scored on the same query set:

* a query whose qrels have no grade ``>= 1`` ("unjudged") cannot be scored at all – every metric would be
  0 whatever the ranking – so it is *dropped*: :func:`split_unjudged` names them, and the frames returned
  here list them in ``frame.attrs["unjudged"]``;
* a query with an empty ranking, or missing from the run, scores 0 on every metric (ranx itself fails on
  an empty ranking with a bare ``AssertionError``).

Ties in ``run`` scores are broken by the run's insertion order (first inserted ranks higher): ranx sorts
scores with an unstable sort, so tied documents would otherwise land in an arbitrary order.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping, Sequence

import pandas as pd

logger = logging.getLogger(__name__)

DEFAULT_METRICS: tuple[str, ...] = (
    "ndcg@10",
    "recall@5",
    "recall@10",
    "recall@50",
    "recall@100",
    "mrr@10",
    "map@100",
    "hit_rate@10",
)

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Mapping[str, float]]


def split_unjudged(qrels: Qrels) -> tuple[dict[str, dict[str, int]], list[str]]:
    """Keep the relevant (grade >= 1) judgements; name the queries left with none.

    Returns ``(judged, unjudged)``: ``judged`` keeps qrels order and only positive grades (grade-0 entries
    carry no gain in any metric here, so dropping them changes nothing); ``unjudged`` lists the dropped
    query ids in qrels order.
    """
    judged: dict[str, dict[str, int]] = {}
    unjudged: list[str] = []
    for query_id, grades in qrels.items():
        positive = {doc_id: int(grade) for doc_id, grade in grades.items() if grade >= 1}
        if positive:
            judged[query_id] = positive
        else:
            unjudged.append(query_id)
    return judged, unjudged


def ranked_ids(scores: Mapping[str, float]) -> list[str]:
    """Document ids best first; ties keep insertion order (``sorted`` is stable)."""
    return [doc_id for doc_id, _ in sorted(scores.items(), key=lambda item: -item[1])]


def _warn_unjudged(unjudged: list[str]) -> None:
    # Info, not warning: ACL eval sets judge nothing for principals who may read nothing, on purpose,
    # and EvalSummary.unjudged names them for the report.
    if unjudged:
        logger.info(
            "dropped %d quer%s with no relevant (grade >= 1) judgement: %s",
            len(unjudged),
            "y" if len(unjudged) == 1 else "ies",
            ", ".join(unjudged[:10]) + (" ..." if len(unjudged) > 10 else ""),
        )


def per_query_metrics(qrels: Qrels, run: Run, metrics: Sequence[str] = DEFAULT_METRICS) -> pd.DataFrame:
    """Score every judged query with ranx.

    Returns a frame indexed by query id (judged queries, in qrels order; name ``query_id``) with one float
    column per metric. Queries absent from ``run`` or with an empty ranking score 0. Unjudged queries are
    dropped and listed in ``frame.attrs["unjudged"]``.
    """
    metrics = list(dict.fromkeys(metrics))
    judged, unjudged = split_unjudged(qrels)
    _warn_unjudged(unjudged)
    frame = pd.DataFrame(0.0, index=pd.Index(list(judged), name="query_id", dtype=object), columns=metrics)
    frame.attrs["unjudged"] = unjudged

    scored = [query_id for query_id in judged if run.get(query_id)]
    if scored and metrics:
        # ranx turns plain dicts into arrays by iterating .values() and only checks that the key *sets* match,
        # so both dicts must be built in the same query order or scores land on the wrong queries.
        sub_qrels = {query_id: judged[query_id] for query_id in scored}
        sub_run: dict[str, dict[str, float]] = {}
        for query_id in scored:
            order = ranked_ids(run[query_id])
            # Strictly decreasing rank-derived scores pin ranx to our tie-broken order.
            sub_run[query_id] = {doc_id: float(len(order) - rank) for rank, doc_id in enumerate(order)}
        # ranx (with numba, ~1 s) is imported when a ranking is scored, not by every command that imports this.
        from numba.core.errors import NumbaTypeSafetyWarning
        from ranx import evaluate

        with warnings.catch_warnings():
            # ranx hashes doc ids to uint64 and numba warns about the cast to int64 on every call; harmless.
            warnings.simplefilter("ignore", NumbaTypeSafetyWarning)
            # With one metric and return_mean=False, ranx 0.3.21 looks its result up under the name stripped
            # of "@k" and raises KeyError; asking twice keeps it on the dict-returning path.
            asked = metrics if len(metrics) > 1 else metrics * 2
            scores = evaluate(sub_qrels, sub_run, asked, return_mean=False, save_results_in_run=False)
        for metric in metrics:
            frame.loc[scored, metric] = scores[metric]
    return frame


def ragas_id_metrics(qrels: Qrels, run: Run, k: int = 10) -> pd.DataFrame:
    """ragas ID-based context precision and recall on the top-``k`` retrieved ids of every judged query.

    Columns ``context_precision@k`` and ``context_recall@k``, indexed like :func:`per_query_metrics`.
    ragas computes precision as (relevant retrieved) / (number retrieved) – the denominator is how many ids
    came back, at most ``k``, not ``k`` itself. An empty retrieval scores precision 0.0 rather than ragas's
    NaN: returning nothing for a query that has relevant documents is a failure, and a NaN would silently
    drop the query from the arm's mean and make arms with different empty sets incomparable.
    """
    # ragas posts usage telemetry from an atexit hook unless told not to; an explicit user setting wins.
    os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
    # Imported here: ragas pulls in langchain and costs seconds, which only callers of this function pay.
    # The private module paths import quietly; ``ragas.metrics.IDBased...`` is deprecated and warns, and
    # ragas.metrics.collections (which the warning points to) has no ID-based metrics in 0.4.3.
    from ragas.async_utils import run as run_async
    from ragas.dataset_schema import SingleTurnSample
    from ragas.metrics._context_precision import IDBasedContextPrecision
    from ragas.metrics._context_recall import IDBasedContextRecall

    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    precision_metric = IDBasedContextPrecision()
    recall_metric = IDBasedContextRecall()
    judged, unjudged = split_unjudged(qrels)
    precision_col, recall_col = f"context_precision@{k}", f"context_recall@{k}"
    rows: dict[str, dict[str, float]] = {}
    samples: dict[str, SingleTurnSample] = {}
    for query_id, grades in judged.items():
        retrieved = ranked_ids(run.get(query_id) or {})[:k]
        if not retrieved:
            rows[query_id] = {precision_col: 0.0, recall_col: 0.0}
            continue
        samples[query_id] = SingleTurnSample(retrieved_context_ids=retrieved, reference_context_ids=list(grades))

    async def score_all() -> dict[str, dict[str, float]]:
        # One event loop for every sample: ragas' synchronous single_turn_score starts one per call, which was
        # most of this function's time (~0.3 ms a sample, thousands per report).
        return {
            query_id: {
                precision_col: float(await precision_metric.single_turn_ascore(sample)),
                recall_col: float(await recall_metric.single_turn_ascore(sample)),
            }
            for query_id, sample in samples.items()
        }

    scored = run_async(score_all)
    rows = {query_id: rows.get(query_id) or scored[query_id] for query_id in judged}  # the index below is in this order
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=[precision_col, recall_col], dtype=float)
    frame.index = pd.Index(list(judged), name="query_id", dtype=object)
    frame.attrs["unjudged"] = unjudged
    return frame
