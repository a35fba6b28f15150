"""Per-source hybrid fusion: weighted RRF settings learned for one source's queries.

Slack questions are one line; Jira queries are whole issues. Which list deserves more trust, and how
steeply rank should discount, differs between them, so a search limited to one source fuses with that
source's setting. The shipped settings were chosen by ``bench/experiments/hybrid_levers.py`` on the bundled dev sets;
the figures it reports for them are out-of-fold (settings chosen on the other folds), see
``docs/notes/hybrid_quality.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field

from rag_pipeline.index.store import Fusion
from rag_pipeline.text.language import CJK_LANGUAGES

# The lists a hybrid search may fuse after dense (the whole query against the child chunks) and BM25.
TITLE_LINE_ON_CHUNKS = "title_line:chunks"  # the query's title line embedded, against the child chunks
QUERY_ON_TITLES = "query:titles"  # the whole query against the documents' title vectors
TITLE_LINE_ON_TITLES = "title_line:titles"  # the query's title line against the documents' title vectors


@dataclass(frozen=True)
class HybridPlan:
    """What one hybrid search fuses: ``extra`` names the lists after dense and BM25, in order, and
    ``fusion.weights`` (when set) has an entry for dense, BM25 and each of them."""

    fusion: Fusion
    extra: tuple[str, ...] = ()


class SourceFusion(BaseModel):
    """Weighted RRF (Qdrant's: a weight divides its list's 1-based ranks) for one source.

    ``title_dense_weight`` adds a prefetch when the query has a title line: the title embedded on its own and
    searched against the child vectors (field-aware dense retrieval from the query side).
    ``document_title_weight`` adds the documents' title vectors (field-aware from the index side): the whole
    query searched against them, and the title line too when the query has one.
    """

    k: int = Field(60, ge=1)
    dense_weight: float = Field(1.0, gt=0)
    sparse_weight: float = Field(1.0, gt=0)
    title_dense_weight: float | None = Field(None, gt=0)
    document_title_weight: float | None = Field(None, gt=0)

    @property
    def fusion(self) -> Fusion:
        """The fusion of a query with a title line over an index with title vectors (every list)."""
        return self.plan(title_line=True, title_vectors=True).fusion

    def plan(self, title_line: bool, title_vectors: bool) -> HybridPlan:
        """The lists and weights for a query with or without a title line, over an index with or without
        document title vectors (one created before them)."""
        lists: list[tuple[str, float]] = []
        if title_line and self.title_dense_weight is not None:
            lists.append((TITLE_LINE_ON_CHUNKS, self.title_dense_weight))
        if title_vectors and self.document_title_weight is not None:
            lists.append((QUERY_ON_TITLES, self.document_title_weight))
            if title_line:
                lists.append((TITLE_LINE_ON_TITLES, self.document_title_weight))
        if not lists:
            return HybridPlan(_two_lists(Fusion(k=self.k), self.dense_weight, self.sparse_weight))
        weights = (self.dense_weight, self.sparse_weight, *(w for _, w in lists))
        return HybridPlan(Fusion(k=self.k, weights=weights), tuple(name for name, _ in lists))


def _two_lists(fusion: Fusion, dense: float, sparse: float) -> Fusion:
    """``fusion`` over dense and sparse only; equal unit weights are plain RRF, not a weighted request."""
    return Fusion(method=fusion.method, k=fusion.k, weights=None if dense == sparse == 1.0 else (dense, sparse))


# Searches over several sources, none named, or a source without its own setting.
OTHER_SOURCES = "*"


# Chosen by bench/experiments/hybrid_levers.py and the follow-up grid in docs/notes/hybrid_quality.md, out of fold:
# - Slack: k=10 with dense 1.6 / BM25 0.4, chosen in 4 of 5 folds (0.672 vs 0.648 for plain RRF, p = 0.03).
# - Jira: k=10 plus the title-line dense prefetch at 0.5, chosen in 5 of 5 folds (0.629 vs 0.610 without it),
#   plus the document title vectors at 0.5 (bench/experiments/title_vector_lever.py: chosen in 5 of 5 folds,
#   0.638 vs 0.629).
#   Not for other searches: Slack thread roots are not summaries (0.674 vs 0.676), and one-line queries
#   (SciFact's included) keep exactly the fusion measured for them.
# - Anything else: k=60 (one-line queries fuse exactly as before) plus the title prefetch at 0.5 (ACL set:
#   0.696 vs 0.681 without it).
LEARNED_FUSION: dict[str, SourceFusion] = {
    "slack": SourceFusion(k=10, dense_weight=1.6, sparse_weight=0.4),
    "jira": SourceFusion(k=10, title_dense_weight=0.5, document_title_weight=0.5),
    OTHER_SOURCES: SourceFusion(k=60, title_dense_weight=0.5),
}

# An index built for Japanese, Chinese or Korean (issue 53, bench/cjk_chat.py, docs/notes/korean.md): on the
# Korean help-desk and Chinese KdConv threads the English Slack fusion leaves hybrid at BM25's level (the weak
# multilingual dense list gets 4x BM25's weight), while the documents' title vectors (a thread's first remaining
# message, embedded alone) find the thread whose first answer matches the question: hybrid 0.522 -> 0.703 (Korean)
# and 0.334 -> 0.377 (Chinese) nDCG@10 with k=10, equal dense and BM25 weights and the title list at 1.0. On the
# English #ubuntu threads the same lists cost 0.04, so English keeps its fusion.
CJK_LEARNED_FUSION: dict[str, SourceFusion] = {
    **LEARNED_FUSION,
    "slack": SourceFusion(k=10, document_title_weight=1.0),
}


def learned_fusion(language: str) -> dict[str, SourceFusion]:
    """The learned per-source fusions for an index built for ``language`` (english, cjk or korean)."""
    return dict(CJK_LEARNED_FUSION if language in CJK_LANGUAGES else LEARNED_FUSION)
