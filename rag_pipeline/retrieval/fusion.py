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
from rag_pipeline.sources.registry import registered_sources
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


# Searches over several sources, none named, or a source without its own setting: k=60 (one-line queries fuse
# exactly as plain RRF) plus the title prefetch at 0.5 (ACL set: 0.696 vs 0.681 without it). Each source's own
# learned setting is registered with it (``Source.retrieval.fusion`` / ``cjk_fusion``; why each was chosen is
# beside it in ``rag_pipeline/connectors/<name>/source.py``).
SHARED_FUSION = SourceFusion(k=60, title_dense_weight=0.5)
# The same in a CJK or Korean index, where the multilingual dense list is the weaker one and the documents' title
# vectors carry the question (docs/notes/korean.md, "Fusion"): a search naming no source (the service's default)
# fused as English scored hybrid 0.517 on the Korean help-desk threads against 0.706 with the CJK lists, below
# BM25 alone (0.537) (bench/router_korean.py, eval sets without a ``sources`` header).
SHARED_CJK_FUSION = SourceFusion(k=10, document_title_weight=1.0)


def learned_fusion(language: str = "english") -> dict[str, SourceFusion]:
    """The learned per-source fusions for an index built for ``language`` (english, cjk or korean): each
    registered source's own (its CJK one in a CJK index, where it has one), and the shared default."""
    cjk = language in CJK_LANGUAGES
    out: dict[str, SourceFusion] = {}
    for name, source in registered_sources().items():
        facts = source.retrieval
        chosen = (facts.cjk_fusion or facts.fusion) if cjk else facts.fusion
        if chosen is not None:
            out[name] = SourceFusion.model_validate(dict(chosen))
    out[OTHER_SOURCES] = SHARED_CJK_FUSION if cjk else SHARED_FUSION
    return out
