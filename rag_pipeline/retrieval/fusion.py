"""Per-source hybrid fusion: weighted RRF settings learned for one source's queries.

Slack questions are one line; Jira queries are whole issues. Which list deserves more trust, and how
steeply rank should discount, differs between them, so a search limited to one source fuses with that
source's setting. The shipped settings were chosen by ``bench/hybrid_levers.py`` on the bundled dev sets;
the figures it reports for them are out-of-fold (settings chosen on the other folds), see
``docs/notes/hybrid_quality.md``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from rag_pipeline.index.store import Fusion


class SourceFusion(BaseModel):
    """Weighted RRF (Qdrant's: a weight divides its list's 1-based ranks) for one source.

    ``title_dense_weight`` adds a third prefetch when the query has a title line: the title embedded on its
    own and searched against the child vectors (field-aware dense retrieval from the query side).
    """

    k: int = Field(60, ge=1)
    dense_weight: float = Field(1.0, gt=0)
    sparse_weight: float = Field(1.0, gt=0)
    title_dense_weight: float | None = Field(None, gt=0)

    @property
    def fusion(self) -> Fusion:
        if self.title_dense_weight is not None:
            return Fusion(k=self.k, weights=(self.dense_weight, self.sparse_weight, self.title_dense_weight))
        return _two_lists(Fusion(k=self.k), self.dense_weight, self.sparse_weight)


def without_title(fusion: Fusion) -> Fusion:
    """The fusion of a query without a title line: the title prefetch's weight dropped."""
    if fusion.weights is None or len(fusion.weights) < 3:
        return fusion
    return _two_lists(fusion, *fusion.weights[:2])


def _two_lists(fusion: Fusion, dense: float, sparse: float) -> Fusion:
    """``fusion`` over dense and sparse only; equal unit weights are plain RRF, not a weighted request."""
    return Fusion(method=fusion.method, k=fusion.k, weights=None if dense == sparse == 1.0 else (dense, sparse))


# Searches over several sources, none named, or a source without its own setting.
OTHER_SOURCES = "*"


# Chosen by bench/hybrid_levers.py and the follow-up grid in docs/notes/hybrid_quality.md, out of fold:
# - Slack: k=10 with dense 1.6 / BM25 0.4, chosen in 4 of 5 folds (0.672 vs 0.648 for plain RRF, p = 0.03).
# - Jira: k=10 plus the title-line dense prefetch at 0.5, chosen in 5 of 5 folds (0.629 vs 0.610 without it).
# - Anything else: k=60 (one-line queries fuse exactly as before) plus the title prefetch at 0.5 (ACL set:
#   0.696 vs 0.681 without it).
LEARNED_FUSION: dict[str, SourceFusion] = {
    "slack": SourceFusion(k=10, dense_weight=1.6, sparse_weight=0.4),
    "jira": SourceFusion(k=10, title_dense_weight=0.5),
    OTHER_SOURCES: SourceFusion(k=60, title_dense_weight=0.5),
}
