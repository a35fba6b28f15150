"""Learn hybrid fusion settings by cross-validation, from each query's candidate lists fetched once.

Hybrid search fuses child-chunk lists inside Qdrant with ``Σ 1 / ((rank_i + 1) / w_i + k − 1)`` (rank
from 0; with every weight 1 this is the textbook ``Σ 1 / (k + rank_i)``) and then keeps each document's
best child. The same arithmetic is done here on lists fetched once per query, so a grid of (k, weights)
costs milliseconds per setting instead of a search per query. :func:`fuse` reproduces the engine's
scores (checked against Qdrant in the tests).

Settings are chosen on the training folds and scored on the held-out fold only, so the reported
figure never comes from settings tuned on the queries it scores. Queries that share a text (the ACL set
asks one question as several principals) always share a fold.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from rag_pipeline.evaluation.metrics import per_query_metrics
from rag_pipeline.index.store import Hit

DEFAULT_KS: tuple[int, ...] = (2, 5, 10, 20, 40, 60, 100)
DEFAULT_DENSE_SHARES: tuple[float, ...] = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


@dataclass(frozen=True)
class FusionSetting:
    """Weighted RRF over named lists: ``weights[name]`` per list, constant ``k``."""

    k: int
    weights: tuple[tuple[str, float], ...]

    def describe(self) -> str:
        return f"rrf(k={self.k}, " + ", ".join(f"{n}={w:g}" for n, w in self.weights) + ")"


@dataclass
class QueryCandidates:
    """One query's child hits per list (best first), its judgements and what to leave out."""

    query_id: str
    text: str
    lists: dict[str, list[Hit]]
    relevant: Mapping[str, int]
    exclude: tuple[str, ...] = ()
    length: int = 0  # query length in BM25 terms, for length-aware settings


def fuse(lists: Sequence[Sequence[Hit]], weights: Sequence[float], k: int) -> list[Hit]:
    """Weighted reciprocal-rank fusion of child lists, as Qdrant computes it: a weight divides the 1-based
    rank rather than multiplying the term (measured against the engine; its source says the same)."""
    scores: dict[str, float] = {}
    hits: dict[str, Hit] = {}
    for ranked, weight in zip(lists, weights, strict=True):
        for rank, hit in enumerate(ranked):
            scores[hit.id] = scores.get(hit.id, 0.0) + 1.0 / ((rank + 1) / weight + k - 1)
            hits.setdefault(hit.id, hit)
    return [Hit(pid, score, hits[pid].payload) for pid, score in sorted(scores.items(), key=lambda x: (-x[1], x[0]))]


def ranking(hits: Sequence[Hit], exclude: Sequence[str] = (), depth: int = 100) -> list[tuple[str, float]]:
    """Documents in the retriever's order (score of the best child, ties by document id), without building
    results: the grid ranks hundreds of thousands of lists."""
    excluded = set(exclude)
    best: dict[str, float] = {}
    for hit in hits:
        doc = hit.payload["document_id"]
        if doc not in excluded and hit.score > best.get(doc, float("-inf")):
            best[doc] = hit.score
    return sorted(best.items(), key=lambda x: (-x[1], x[0]))[:depth]


def ndcg_at_10(candidates: Sequence[QueryCandidates], rankings: Mapping[str, list[tuple[str, float]]]) -> np.ndarray:
    """Per-query nDCG@10 (ranx), in ``candidates`` order; unjudged queries are left out by the caller."""
    qrels = {c.query_id: dict(c.relevant) for c in candidates}
    run = {qid: {doc: float(len(r) - i) for i, (doc, _) in enumerate(r)} for qid, r in rankings.items()}
    frame = per_query_metrics(qrels, run, ("ndcg@10",))
    return frame["ndcg@10"].reindex([c.query_id for c in candidates]).to_numpy(dtype=float)


def setting_scores(candidates: Sequence[QueryCandidates], settings: Sequence[FusionSetting]) -> np.ndarray:
    """A ``len(settings) × len(candidates)`` matrix of per-query nDCG@10."""
    rows = []
    for setting in settings:
        names = [n for n, _ in setting.weights]
        weights = [w for _, w in setting.weights]
        rankings = {
            c.query_id: ranking(fuse([c.lists[n] for n in names], weights, setting.k), c.exclude) for c in candidates
        }
        rows.append(ndcg_at_10(candidates, rankings))
    return np.vstack(rows)


def grid(
    dense: str, sparse: str, ks: Sequence[int] = DEFAULT_KS, dense_shares: Sequence[float] = DEFAULT_DENSE_SHARES
) -> list[FusionSetting]:
    """Weighted RRF settings over two lists; weights sum to 2 so share 0.5 is plain RRF."""
    return [
        FusionSetting(k, ((dense, round(2 * share, 4)), (sparse, round(2 * (1 - share), 4))))
        for k in ks
        for share in dense_shares
    ]


def text_folds(candidates: Sequence[QueryCandidates], folds: int) -> np.ndarray:
    """Fold of each query from a hash of its text, so repeated texts share a fold (stable across runs)."""
    return np.array([int(hashlib.sha256(c.text.encode()).hexdigest(), 16) % folds for c in candidates], dtype=int)


@dataclass
class CrossValidated:
    """Out-of-fold per-query scores and the setting each fold chose (per length bucket when split)."""

    scores: np.ndarray
    chosen: list[dict[str, FusionSetting]] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return float(np.mean(self.scores)) if self.scores.size else math.nan


def cross_validate(
    candidates: Sequence[QueryCandidates],
    settings: Sequence[FusionSetting],
    matrix: np.ndarray | None = None,
    folds: int = 5,
    length_aware: bool = False,
) -> CrossValidated:
    """Choose the best setting on the other folds, score it on each held-out fold.

    ``length_aware`` chooses separately for queries shorter and longer than the training folds' median
    length (long issues and one-line questions want different weights).
    """
    matrix = setting_scores(candidates, settings) if matrix is None else matrix
    fold_of = text_folds(candidates, folds)
    lengths = np.array([c.length for c in candidates], dtype=float)
    out = np.zeros(len(candidates))
    chosen: list[dict[str, FusionSetting]] = []
    for fold in range(folds):
        test = fold_of == fold
        train = ~test
        if not test.any():
            continue
        if not train.any():
            raise ValueError("cross-validation needs queries in at least two folds")
        picks: dict[str, FusionSetting] = {}
        if length_aware:
            cut = float(np.median(lengths[train]))
            buckets = {"short": lengths <= cut, "long": lengths > cut}
        else:
            buckets = {"all": np.ones(len(candidates), dtype=bool)}
        for bucket, members in buckets.items():
            fit = train & members
            if not fit.any():
                fit = train
            best = int(np.argmax(matrix[:, fit].mean(axis=1)))
            picks[bucket] = settings[best]
            out[test & members] = matrix[best, test & members]
        chosen.append(picks)
    return CrossValidated(out, chosen)
