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
    """Weighted RRF (Qdrant's: a weight divides its list's 1-based ranks) for one source."""

    k: int = Field(60, ge=1)
    dense_weight: float = Field(1.0, gt=0)
    sparse_weight: float = Field(1.0, gt=0)

    @property
    def fusion(self) -> Fusion:
        weights = None if self.dense_weight == self.sparse_weight == 1.0 else (self.dense_weight, self.sparse_weight)
        return Fusion(method="rrf", k=self.k, weights=weights)


# Slack: k=10 with dense 1.6 / BM25 0.4 was chosen in 4 of 5 folds (out-of-fold nDCG@10 0.672 vs 0.648 for
# plain RRF, p = 0.03). Jira: once the query is fielded, no learned setting beat plain RRF out of fold (0.611
# vs 0.610), so Jira keeps the global fusion.
LEARNED_FUSION: dict[str, SourceFusion] = {
    "slack": SourceFusion(k=10, dense_weight=1.6, sparse_weight=0.4),
}
