"""What a search returns: one result per document, carrying the best child and its parent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from rag_pipeline.index.store import Fusion
    from rag_pipeline.retrieval.prf import Expansion

Mode = Literal["vector", "bm25", "hybrid", "reranked", "prf", "routed"]
# The arms every evaluation runs; a reader may also ask for "routed" (the search router over hybrid,
# retrieval/router.py), which `rag-pipeline bench --arms routed` measures.
MODES: tuple[Mode, ...] = ("vector", "bm25", "hybrid", "reranked", "prf")
SEARCH_MODES: tuple[Mode, ...] = (*MODES, "routed")


@dataclass
class SearchResult:
    """A document hit. ``score`` is the arm's score of the document's best child (max over children);
    ``signals`` holds per-arm scores and ranks that rerankers use as features."""

    document_id: str
    score: float
    source: str
    container: str
    title: str
    url: str | None
    child_id: str
    child_text: str
    parent_id: str
    parent_text: str = ""
    updated: str | None = None
    authors: list[str] = field(default_factory=list)
    acl: dict[str, Any] = field(default_factory=dict)
    resolution: str | None = None  # a Jira issue's resolution name ("Unresolved" when open); None elsewhere
    matching_children: int = 1
    signals: dict[str, float] = field(default_factory=dict)
    # P(relevant) for this mode and score, from the evaluation's calibration (retrieval/calibration.py); None
    # before an evaluation has run.
    relevance: float | None = None
    # False while the result carries only what grouping read of its child (ids and source): the retriever reads
    # the child's whole payload for the results it hands out (grouping.read_payload).
    hydrated: bool = field(default=True, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "document_id": self.document_id,
            "score": self.score,
            "source": self.source,
            "container": self.container,
            "title": self.title,
            "url": self.url,
            "child_id": self.child_id,
            "child_text": self.child_text,
            "parent_id": self.parent_id,
            "parent_text": self.parent_text,
            "updated": self.updated,
            "authors": self.authors,
            "resolution": self.resolution,
            "relevance": None if self.relevance is None else round(self.relevance, 4),
        }


@dataclass
class SearchResponse:
    """Results plus what actually ran: ``mode`` can differ from the request when search degraded."""

    results: list[SearchResult]
    requested_mode: Mode
    mode: Mode
    warnings: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    fusion: Fusion | None = None  # what hybrid fusion this search would use (per-source when learned)
    expansion: Expansion | None = None  # the prf arm's expanded BM25 query, its added terms and feedback documents
    route: dict[str, object] | None = None  # the routed mode's route (retrieval/router.py): what the words said
