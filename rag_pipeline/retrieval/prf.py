"""Pseudo-relevance feedback: RM3 query expansion over the BM25 arm's first results, without any model.

The arm is the hybrid arm with an expanded BM25 side (dense side and fusion unchanged; ``hybrid=False``: BM25
alone with the expanded query). The query is searched with BM25 first, as the reader who asked (same ACL and
filters, so nothing the reader may not read feeds the expansion). The best chunks of the top ``feedback_docs``
documents form a relevance model

    P(w|R) = Σ_d  s_d / Σ s  ·  tf(w, d) / |d|            (s_d: the document's BM25 score)

over the index's own BM25 terms (:meth:`Bm25Encoder.content_term_counts`: the tokenizer, stopwords and stemming
that wrote the index, so every expansion term is one the index can match; tokens too short to carry meaning
are left out). Its ``expansion_terms`` heaviest terms that the query lacks (or, with ``query_terms``, its
heaviest terms of any kind, the query's own among them, as Anserini's RM3 keeps them), renormalised, are mixed
with the query's own BM25 weights (normalised to sum 1):

    q'(w) = original_weight · q(w) + (1 − original_weight) · P(w|R)

Qdrant applies IDF at query time, as for any BM25 query. RM3 is Lavrenko and Croft's relevance model
interpolated with the query (Abdul-Jaleel et al., 2004); the defaults are Anserini's (10 documents,
10 terms, 0.5).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field

from rag_pipeline.vectors.sparse import Bm25Encoder, SparseVector


class PrfConfig(BaseModel):
    """How the ``prf`` arm expands a query (see the module docstring for the formula)."""

    feedback_docs: int = Field(10, ge=1, description="top BM25 documents the relevance model is built from")
    expansion_terms: int = Field(10, ge=0, description="terms of the relevance model added to the query")
    original_weight: float = Field(0.5, ge=0, le=1, description="share of the original query in the expanded one")
    min_term_chars: int = Field(3, ge=1, description="shortest expansion token (characters) outside CJK text")
    min_cjk_chars: int = Field(2, ge=1, description="shortest expansion token in Han, kana or Hangul (a bigram: 2)")
    query_terms: bool = Field(
        False,
        description="rank the query's own terms in the relevance model too (classic RM3: they take some of the "
        "expansion_terms places and their share reinforces them); off: only terms the query lacks are kept",
    )
    # Measured both ways (bench/experiments/prf.py, docs/notes/prf.md): hybrid with the expanded BM25 side beat
    # BM25 with the expanded query by 0.08-0.22 nDCG@10 on every dev set and SciFact.
    hybrid: bool = Field(
        True,
        description="search the expanded BM25 query fused with the unchanged dense query (the hybrid arm's fusion); "
        "off: the expanded BM25 query alone",
    )

    def describe(self) -> str:
        side = "hybrid" if self.hybrid else "bm25"
        own = ", query_terms" if self.query_terms else ""
        return (
            f"rm3({side}, docs={self.feedback_docs}, terms={self.expansion_terms}, "
            f"original={self.original_weight:g}{own})"
        )


@dataclass(frozen=True)
class FeedbackDocument:
    """One document of the feedback set: its id, retrieval score and the text the terms are read from."""

    document_id: str
    score: float
    text: str


@dataclass(frozen=True)
class Expansion:
    """An expanded query: the vector searched, the kept terms of the relevance model with their P(w|R) weight
    (renormalised over the kept terms; the query's own only with ``query_terms``) and the documents that fed
    them, in rank order."""

    query: SparseVector
    terms: dict[int, float]
    feedback: tuple[str, ...]


def relevance_model(
    encoder: Bm25Encoder, feedback: Sequence[FeedbackDocument], config: PrfConfig | None = None
) -> dict[int, float]:
    """P(w|R) over the content terms of the feedback documents, weighted by their normalised scores."""
    config = config or PrfConfig()
    if not feedback:
        return {}
    scores = [max(d.score, 0.0) for d in feedback]
    total = sum(scores)
    weights = [s / total for s in scores] if total > 0 else [1.0 / len(feedback)] * len(feedback)
    model: dict[int, float] = {}
    for document, weight in zip(feedback, weights, strict=True):
        if weight <= 0:
            continue
        # |d| counts every term the index holds for the text, short ones too; only content terms are candidates.
        length = sum(encoder.term_counts(document.text).values())
        if length <= 0:
            continue
        content = encoder.content_term_counts(document.text, config.min_term_chars, config.min_cjk_chars)
        for term, tf in content.items():
            model[term] = model.get(term, 0.0) + weight * tf / length
    return model


def rm3(
    encoder: Bm25Encoder, query: SparseVector, feedback: Sequence[FeedbackDocument], config: PrfConfig | None = None
) -> Expansion:
    """``query`` (the BM25 query vector as the arms weigh it) expanded with the feedback's relevance model."""
    config = config or PrfConfig()
    fed = tuple(d.document_id for d in feedback)
    asked = set() if config.query_terms else set(query.indices)
    model = relevance_model(encoder, feedback, config)
    # Heaviest first; equal weights by term id, so an expansion never depends on dict order.
    ranked = sorted(((t, w) for t, w in model.items() if t not in asked and w > 0), key=lambda tw: (-tw[1], tw[0]))
    kept = ranked[: config.expansion_terms]
    kept_total = sum(w for _, w in kept)
    terms = {t: w / kept_total for t, w in kept} if kept_total > 0 else {}
    query_total = sum(query.values)
    if not terms or query_total <= 0:
        return Expansion(query, {}, fed)
    alpha = config.original_weight
    weights = {t: alpha * v / query_total for t, v in zip(query.indices, query.values, strict=True)}
    for term, weight in terms.items():
        weights[term] = weights.get(term, 0.0) + (1.0 - alpha) * weight
    ordered = sorted(t for t, w in weights.items() if w > 0)
    return Expansion(SparseVector(indices=ordered, values=[weights[t] for t in ordered]), terms, fed)
