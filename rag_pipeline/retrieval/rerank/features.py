"""Features of a (query, candidate) pair for the learned reranker.

Signals come from the retriever (hybrid, dense and BM25 score and rank of the document's best
child), plus field matches computed here with the same analyzer as the BM25 index (Qdrant's Bm25:
lowercase, English stopwords, Snowball stems): how much of the query the title, the parent chunk
and the best child cover, how much the query's own title line shares with the candidate's title,
document length, recency within the candidate list, and the registered sources' own columns (Jira's resolution
classes: one closed as a duplicate is rarely the report a searcher wants; a fixed one usually is the canonical one)
and source indicators (``Source.retrieval``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any

import numpy as np

from rag_pipeline.retrieval.query_text import split_query
from rag_pipeline.retrieval.results import SearchResult
from rag_pipeline.retrieval.reuse_ledger import note_reused
from rag_pipeline.sources.registry import RerankFeature, registered_sources
from rag_pipeline.vectors.sparse import Bm25Encoder

FEATURES_VERSION = "3"
SHARED_FEATURE_NAMES: tuple[str, ...] = (
    "hybrid_score",
    "hybrid_score_rel",
    "log_hybrid_rank",
    "dense_score",
    "dense_score_gap",
    "log_dense_rank",
    "bm25_score",
    "bm25_score_rel",
    "log_bm25_rank",
    "title_coverage",
    "parent_coverage",
    "child_coverage",
    "title_bm25_share",
    "query_title_coverage",
    "query_title_jaccard",
    "title_dense_score",
    "title_dense_score_gap",
    "log_title_dense_rank",
    "title_bm25_score_rel",
    "log_title_bm25_rank",
    "log_matching_children",
    "log_parent_words",
    "log_age_days",
)


def _source_features() -> tuple[RerankFeature, ...]:
    """The sources' own columns (registration order), then one ``is_<name>`` column per source that asks for an
    indicator: with Slack and Jira registered, the columns every shipped model was trained on."""
    sources = list(registered_sources().values())
    own = [feature for source in sources for feature in source.retrieval.rerank_features]
    indicators = [
        RerankFeature(f"is_{source.name}", _indicator(source.name))
        for source in sources
        if source.retrieval.rerank_indicator
    ]
    return (*own, *indicators)


def _indicator(name: str) -> Callable[[Any], float]:
    def value(candidate: Any) -> float:
        return 1.0 if candidate.source == name else 0.0

    return value


SOURCE_FEATURES = _source_features()
FEATURE_NAMES: tuple[str, ...] = (*SHARED_FEATURE_NAMES, *(f.name for f in SOURCE_FEATURES))


def _terms(encoder: Bm25Encoder, text: str) -> frozenset[int]:
    """The text's terms; within :func:`features_kept`, counted once per text (an eval set's candidates share their
    titles and parent texts across queries: tokenizing them again was ~4 s of a 75 s evaluation)."""
    known = _TERMS.get()
    if known is None:
        return _count_terms(encoder, text)
    key = (encoder.terms_id, text)
    found = known.get(key)
    if found is None:
        found = known[key] = _count_terms(encoder, text)
    return found


def _count_terms(encoder: Bm25Encoder, text: str) -> frozenset[int]:
    return frozenset(encoder.encode_query(text).indices) if text.strip() else frozenset()


def _epoch(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


# Within features_kept(): feature matrices by everything they are computed from.
_KEPT: ContextVar[dict[tuple[Any, ...], tuple[np.ndarray, float]] | None] = ContextVar(
    "kept_rerank_features", default=None
)
# Within features_kept(): each text's terms by (terms id, text).
_TERMS: ContextVar[dict[tuple[str, str], frozenset[int]] | None] = ContextVar("kept_rerank_terms", default=None)


@contextmanager
def features_kept() -> Iterator[None]:
    """Within the block, a (query, candidates) pair's feature matrix is computed once: an evaluation featurizes the
    reranked arm's training candidates, then scores the very same candidates (a block inside another shares its)."""
    token = _KEPT.set(_KEPT.get() if _KEPT.get() is not None else {})
    terms_token = _TERMS.set(_TERMS.get() if _TERMS.get() is not None else {})
    try:
        yield
    finally:
        _TERMS.reset(terms_token)
        _KEPT.reset(token)


def _candidate_key(c: SearchResult) -> tuple[Any, ...]:
    # Every input of the candidate's row (texts by value: equal strings compare cheaply, the same object at once).
    return (
        c.document_id, c.child_id, c.score, c.matching_children, c.source, c.title, c.updated, c.parent_text,
        c.child_text, c.resolution, tuple(sorted(c.signals.items())),
    )  # fmt: skip


def candidate_features(query: str, candidates: Sequence[SearchResult], encoder: Bm25Encoder) -> np.ndarray:
    """A ``len(candidates) × len(FEATURE_NAMES)`` float matrix (relative features are per query)."""
    kept = _KEPT.get()
    if kept is None:
        return _features(query, candidates, encoder)
    key = (query, encoder.terms_id, tuple(_candidate_key(c) for c in candidates))
    found = kept.get(key)
    if found is not None:
        note_reused(found[1])  # a served search computes them: its latency counts them
        return found[0].copy()
    started = time.perf_counter()
    matrix = _features(query, candidates, encoder)
    kept[key] = (matrix, time.perf_counter() - started)
    return matrix.copy()


def _features(query: str, candidates: Sequence[SearchResult], encoder: Bm25Encoder) -> np.ndarray:
    if not candidates:
        return np.zeros((0, len(FEATURE_NAMES)))
    q_terms = _terms(encoder, query)
    # A Jira query is a whole issue; its summary line against the candidate's title is what a person
    # comparing two issues for duplicates looks at first.
    q_title = _terms(encoder, split_query(query).title)
    q_size = max(len(q_terms), 1)
    sig = [c.signals for c in candidates]
    max_hybrid = max(s.get("hybrid_score", c.score) for s, c in zip(sig, candidates, strict=True)) or 1.0
    max_dense = max(s.get("dense_score", 0.0) for s in sig)
    max_bm25 = max(s.get("bm25_score", 0.0) for s in sig) or 1.0
    max_title_dense = max(s.get("title_dense_score", 0.0) for s in sig)
    max_title_bm25 = max(s.get("title_bm25_score", 0.0) for s in sig) or 1.0
    times = [_epoch(c.updated) for c in candidates]
    newest = max((t for t in times if t is not None), default=None)
    rows = []
    for c, s, t in zip(candidates, sig, times, strict=True):
        title_terms = _terms(encoder, c.title)
        parent_terms = _terms(encoder, c.parent_text or c.child_text)
        child_terms = _terms(encoder, c.child_text)
        hybrid = s.get("hybrid_score", c.score)
        title_hits = len(q_terms & title_terms)
        rows.append(
            (
                hybrid,
                hybrid / max_hybrid,
                math.log1p(s.get("hybrid_rank", 0.0)),
                s.get("dense_score", 0.0),
                s.get("dense_score", 0.0) - max_dense,
                math.log1p(s.get("dense_rank", 0.0)),
                s.get("bm25_score", 0.0),
                s.get("bm25_score", 0.0) / max_bm25,
                math.log1p(s.get("bm25_rank", 0.0)),
                title_hits / q_size,
                len(q_terms & parent_terms) / q_size,
                len(q_terms & child_terms) / q_size,
                title_hits / max(len(q_terms & parent_terms | q_terms & title_terms), 1),
                len(q_title & title_terms) / max(len(q_title), 1),
                len(q_title & title_terms) / max(len(q_title | title_terms), 1) if q_title else 0.0,
                s.get("title_dense_score", 0.0),
                s.get("title_dense_score", 0.0) - max_title_dense,
                math.log1p(s.get("title_dense_rank", 0.0)),
                s.get("title_bm25_score", 0.0) / max_title_bm25,
                math.log1p(s.get("title_bm25_rank", 0.0)),
                math.log1p(c.matching_children),
                math.log1p(len((c.parent_text or c.child_text).split())),
                math.log1p(max(newest - t, 0.0) / 86400.0) if newest is not None and t is not None else 0.0,
                *(feature.value(c) for feature in SOURCE_FEATURES),
            )
        )
    return np.asarray(rows, dtype=np.float64)
