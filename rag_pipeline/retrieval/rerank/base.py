"""The reranker interface: score candidates for a query; higher is better."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from rag_pipeline.retrieval.results import SearchResult


class Reranker(Protocol):
    """Anything that scores (query, candidate) pairs. The LLM reranker implements this too."""

    @property
    def name(self) -> str: ...

    def score(self, query: str, candidates: Sequence[SearchResult]) -> list[float]: ...


def rerank(reranker: Reranker, query: str, candidates: Sequence[SearchResult]) -> list[SearchResult]:
    """Candidates reordered by the reranker's score (stable for ties); scores replaced."""
    if not candidates:
        return []
    scores = reranker.score(query, candidates)
    if len(scores) != len(candidates):
        raise ValueError(f"reranker {reranker.name!r} returned {len(scores)} scores for {len(candidates)} candidates")
    order = sorted(range(len(candidates)), key=lambda i: -scores[i])
    out = []
    for i in order:
        result = candidates[i]
        result.signals["before_rerank"] = result.score
        result.score = float(scores[i])
        out.append(result)
    return out
