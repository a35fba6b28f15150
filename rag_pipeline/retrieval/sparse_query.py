"""BM25 query vectors for long queries: field-aware and frequency-aware instead of one weight per term.

``plain`` is Qdrant's own query (weight 1 for every distinct term of the whole text). ``fielded``
splits a multi-line query into its title line and body (:mod:`rag_pipeline.retrieval.query_text`), optionally
drops machine text from the body, and weighs a term by

    title_weight · [term in title] + body_weight · tf·(k3+1) / (tf + k3)        (tf: count in the body)

so the summary a person wrote counts more than the identifiers of a pasted stack trace, and a term the
body repeats counts more than one it mentions once (the saturation k3 is classic BM25's query-side
parameter). Qdrant applies IDF on top, at query time, so rare terms still dominate common ones. A query
without a title line (a one-line question) is read plainly under either mode.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from rag_pipeline.retrieval.query_text import prose, split_query
from rag_pipeline.vectors.sparse import Bm25Encoder, SparseVector


class SparseQueryConfig(BaseModel):
    """How a query becomes a BM25 query vector (see the module docstring for the formula)."""

    mode: Literal["plain", "fielded"] = "plain"
    title_weight: float = Field(1.0, ge=0, description="added weight of a term in the query's title line")
    body_weight: float = Field(1.0, ge=0, description="weight of the body's terms (scaled by their saturated tf)")
    k3: float = Field(0.0, ge=0, description="query tf saturation; 0 counts every body term once")
    body: Literal["all", "prose"] = Field("all", description="prose: drop code blocks, stack frames, URLs, hex ids")

    def describe(self) -> str:
        if self.mode == "plain":
            return "plain"
        return f"fielded(title={self.title_weight:g},body={self.body_weight:g},k3={self.k3:g},body_text={self.body})"


# Named query weightings (RAG_SPARSE_QUERY, --sparse-query). "fielded" is the one
# bench/experiments/hybrid_levers.py chose.
SPARSE_QUERY_PRESETS: dict[str, SparseQueryConfig] = {
    "plain": SparseQueryConfig(),
    "fielded": SparseQueryConfig(mode="fielded", title_weight=4.0, body="prose", k3=1.2),
}
DEFAULT_SPARSE_QUERY = "fielded"


def sparse_query(encoder: Bm25Encoder, text: str, config: SparseQueryConfig | None = None) -> SparseVector:
    """The BM25 query vector of ``text`` under ``config``; never empty when ``plain`` would not be."""
    config = config or SparseQueryConfig()
    if config.mode == "plain":
        return encoder.encode_query(text)
    parts = split_query(text)
    if not parts.title:
        # A one-line question has no field to weigh: read it as Qdrant does (measured: k3 and the prose filter
        # only moved one-line sets by noise, and SciFact's claims by −0.001).
        return encoder.encode_query(text)
    body = prose(parts.body) if config.body == "prose" else parts.body
    weights: dict[int, float] = {}
    if config.body_weight > 0:
        for term, tf in encoder.term_counts(body).items():
            saturated = tf * (config.k3 + 1) / (tf + config.k3) if config.k3 > 0 else 1.0
            weights[term] = config.body_weight * saturated
    if config.title_weight > 0:
        for term in encoder.encode_query(parts.title).indices:
            weights[term] = weights.get(term, 0.0) + config.title_weight
    if not weights:
        # Everything was markup (or weights are zero): the plain query is better than none.
        return encoder.encode_query(text)
    terms = sorted(weights)
    return SparseVector(indices=terms, values=[weights[t] for t in terms])
