"""The vector store interface every engine implements, and the types it speaks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rag_pipeline.vectors.sparse import SparseVector

DENSE_VECTOR = "dense"
SPARSE_VECTOR = "bm25"
# Qdrant's default RRF constant is 2; the literature (and our evaluation) uses 60.
RRF_K = 60

# Payload fields that filters use; engines that support payload indexes create these.
KEYWORD_FIELDS = ("document_id", "source", "container", "parent_id", "acl.users", "acl.groups")
BOOL_FIELDS = ("acl.public",)
DATETIME_FIELDS = ("created", "updated")
FLOAT_FIELDS = ("version",)


@dataclass(frozen=True)
class CollectionNames:
    """Names of the child (searchable) and parent (text) collections."""

    children: str = "rag_children"
    parents: str = "rag_parents"

    @classmethod
    def with_prefix(cls, prefix: str) -> CollectionNames:
        return cls(children=f"{prefix}_children", parents=f"{prefix}_parents")


@dataclass
class StorePoint:
    """One point: id, payload and (for children) dense and sparse vectors."""

    id: str
    payload: dict[str, Any]
    dense: Sequence[float] | None = None
    sparse: SparseVector | None = None


@dataclass(frozen=True)
class Hit:
    """A scored search result."""

    id: str
    score: float
    payload: dict[str, Any]


@dataclass(frozen=True)
class PointRef:
    """Where a document's point is, and which version of the document wrote it."""

    id: str
    document_id: str
    version: float


@dataclass(frozen=True)
class SearchFilter:
    """Engine-neutral filter: every given condition must hold."""

    document_ids: tuple[str, ...] | None = None
    sources: tuple[str, ...] | None = None
    containers: tuple[str, ...] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def filter_conditions(flt: SearchFilter | None) -> list[tuple[str, Any, bool]]:
    """``(payload key, value(s), match-any?)`` for each condition; each engine builds its own types."""
    if flt is None:
        return []
    conditions: list[tuple[str, Any, bool]] = [
        (key, list(values), True)
        for key, values in (("document_id", flt.document_ids), ("source", flt.sources), ("container", flt.containers))
        if values is not None
    ]
    conditions.extend((key, value, False) for key, value in flt.extra.items())
    return conditions


class VectorStore(Protocol):
    """What the pipeline needs from a Qdrant engine. Implemented by the embedded qdrant-edge engine
    and by qdrant-client (server, or its local mode as the server-API test double)."""

    engine: str
    names: CollectionNames

    def create_collections(self, dense_dimension: int) -> None: ...

    def upsert(self, collection: str, points: Sequence[StorePoint]) -> None: ...

    def delete_ids(self, collection: str, ids: Sequence[str]) -> None: ...

    def delete_documents(self, collection: str, document_ids: Sequence[str]) -> None: ...

    def document_points(self, collection: str, document_ids: Sequence[str]) -> list[PointRef]: ...

    def count(self, collection: str, flt: SearchFilter | None = None) -> int: ...

    def retrieve(self, collection: str, ids: Sequence[str]) -> list[Hit]: ...

    def search_dense(self, vector: Sequence[float], limit: int, flt: SearchFilter | None = None) -> list[Hit]: ...

    def search_sparse(self, vector: SparseVector, limit: int, flt: SearchFilter | None = None) -> list[Hit]: ...

    def search_hybrid(
        self,
        dense: Sequence[float],
        sparse: SparseVector,
        limit: int,
        prefetch_limit: int = 50,
        flt: SearchFilter | None = None,
        rrf_k: int = RRF_K,
    ) -> list[Hit]: ...

    def close(self) -> None: ...
