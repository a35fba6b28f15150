"""What the two Qdrant engines' stores share: one :class:`QdrantStoreBase` under the embedded store
(:mod:`~rag_pipeline.index.edge_store`, qdrant-edge in-process) and the server store
(:mod:`~rag_pipeline.index.client_store`, qdrant-client against a server or its local mode).

Both hold the same two collections, the same payloads and the same named vectors, and answer the same
:class:`~rag_pipeline.index.store.VectorStore` calls; they differ only in how a request is spelled (``qdrant_edge``
types or ``qdrant_client.models``) and in how they learn whether a collection exists. The logic lives here once and
each engine supplies its spelling through a few small hooks, so a change to what a search asks for (a new prefetch,
another vector on a point) is made in one place and both engines keep answering alike.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Self

from rag_pipeline.index.store import (
    BOOL_FIELDS,
    DATETIME_FIELDS,
    DEFAULT_FUSION,
    DENSE_VECTOR,
    FLOAT_FIELDS,
    KEYWORD_FIELDS,
    SPARSE_VECTOR,
    TITLE_VECTOR,
    CollectionNames,
    Condition,
    ContainerSummary,
    DensePrefetch,
    DenseSearch,
    Fusion,
    Hit,
    IndexedDocument,
    PointRef,
    SearchFilter,
    StorePoint,
    filter_spec,
    scroll_containers,
    scroll_indexed_documents,
    scroll_point_refs,
)
from rag_pipeline.vectors.sparse import SparseVector

# Points per scroll page and per upsert request: large enough to keep round trips few, small enough that one
# request stays well under a server's request size limit with 384-dimension vectors and long payloads.
SCROLL_PAGE = 1024
UPSERT_BATCH = 256


@dataclass(frozen=True)
class Nearest:
    """One nearest-neighbour list a search asks for: ``vector`` (dense floats, or a BM25 sparse vector) against the
    named vector ``using``. A dense list follows the store's :class:`DenseSearch` (HNSW or exact); a sparse one is
    always exact."""

    vector: Sequence[float] | SparseVector
    using: str

    @property
    def dense(self) -> bool:
        return not isinstance(self.vector, SparseVector)


@dataclass(frozen=True)
class Search:
    """One search of the child collection: ``lists`` (one: a plain nearest search; several: each prefetched to
    ``prefetch_limit`` under the same filter, then fused by ``fusion``), ``limit`` hits under ``flt``, reading
    ``fields`` of each hit's payload (all when None)."""

    lists: tuple[Nearest, ...]
    limit: int
    flt: SearchFilter | None = None
    fields: Sequence[str] | None = None
    prefetch_limit: int = 50
    fusion: Fusion = DEFAULT_FUSION

    @property
    def fused(self) -> bool:
        return len(self.lists) > 1


def payload_indexes(keyword: Any, boolean: Any, datetime: Any, number: Any) -> tuple[tuple[str, Any], ...]:
    """Every (field, index kind) a collection gets, given the engine's kinds for each type of field: the fields
    filters use (:data:`~rag_pipeline.index.store.KEYWORD_FIELDS` and the others), so no filter scans payloads."""
    return (
        *((f, keyword) for f in KEYWORD_FIELDS),
        *((f, boolean) for f in BOOL_FIELDS),
        *((f, datetime) for f in DATETIME_FIELDS),
        *((f, number) for f in FLOAT_FIELDS),
    )


def native_filter(
    flt: SearchFilter | None, condition: Callable[[Condition], Any], make_filter: Callable[..., Any]
) -> Any | None:
    """``flt`` in an engine's own types (None when it filters nothing): ``condition`` spells one condition,
    ``make_filter`` is the engine's ``Filter`` (``must``/``should``/``must_not`` keywords in both clients)."""
    spec = filter_spec(flt)
    if spec.empty:
        return None
    must: list[Any] = [condition(c) for c in spec.must]
    if spec.also:
        must.append(make_filter(should=[condition(c) for c in spec.also]))
    return make_filter(
        must=must or None,
        should=[condition(c) for c in spec.should] or None,
        must_not=[condition(c) for c in spec.must_not] or None,
    )


class QdrantStoreBase(ABC):
    """The :class:`~rag_pipeline.index.store.VectorStore` logic both Qdrant engines share; a subclass sets ``names``
    and ``dense_search`` and spells requests in its client's types through the abstract hooks."""

    names: CollectionNames
    dense_search: DenseSearch

    # --- hooks: what each engine spells its own way ----------------------------------------------------
    @abstractmethod
    def _has_collection(self, collection: str) -> bool:
        """Whether ``collection`` exists (a read of a missing one answers empty, not an error)."""

    @abstractmethod
    def _scroll(self, collection: str, flt: SearchFilter | None, fields: list[str] | None) -> Iterator[Any]:
        """Every point of a collection matching ``flt``, page by page, with only ``fields`` of its payload (None:
        all of it)."""

    @abstractmethod
    def _native_sparse(self, vector: SparseVector) -> Any:
        """A sparse vector in the engine's type."""

    @abstractmethod
    def _native_search_params(self, **params: Any) -> Any:
        """The engine's ``SearchParams`` with ``params`` (``exact`` or ``hnsw_ef``)."""

    @abstractmethod
    def _run(self, search: Search) -> list[Hit]:
        """The children a search finds in the engine's types: one list searched, or several prefetched and fused."""

    @abstractmethod
    def dense_vector_names(self) -> frozenset[str]:
        """The dense vectors the child collection holds (empty before it exists)."""

    @abstractmethod
    def close(self) -> None: ...

    # --- shared translation ------------------------------------------------------------------------
    def _native_vector(self, vector: Sequence[float] | SparseVector) -> Any:
        """A query or point vector as the engine takes it: plain floats (numpy's would not serialize) or the
        engine's sparse type."""
        return self._native_sparse(vector) if isinstance(vector, SparseVector) else [float(x) for x in vector]

    def _search_params(self, query: Nearest) -> Any:
        """How the engine answers one list: dense lists as :attr:`dense_search` says, sparse ones as it defaults."""
        if not query.dense:
            return None
        if self.dense_search.exact:
            return self._native_search_params(exact=True)
        return self._native_search_params(hnsw_ef=self.dense_search.hnsw_ef)

    def _vectors(self, collection: str, point: StorePoint) -> dict[str, Any]:
        """The named vectors of a point: none in the parent collection; the title vector only where the child
        collection has one (collections created before it existed do not)."""
        if collection == self.names.parents:
            return {}
        vectors: dict[str, Any] = {}
        if point.dense is not None:
            vectors[DENSE_VECTOR] = self._native_vector(point.dense)
        if point.sparse is not None:
            vectors[SPARSE_VECTOR] = self._native_sparse(point.sparse)
        if point.title is not None and TITLE_VECTOR in self.dense_vector_names():
            vectors[TITLE_VECTOR] = self._native_vector(point.title)
        return vectors

    # --- reads ---------------------------------------------------------------------------------------
    def document_points(self, collection: str, document_ids: Sequence[str]) -> list[PointRef]:
        if not document_ids or not self._has_collection(collection):
            return []
        return scroll_point_refs(self._scroll, collection, document_ids)

    def containers(self, flt: SearchFilter | None = None) -> list[ContainerSummary]:
        if not self._has_collection(self.names.parents):
            return []
        return scroll_containers(self._scroll, self.names.parents, flt)

    def parent_payloads(self, flt: SearchFilter | None, fields: Sequence[str]) -> list[dict[str, Any]]:
        if not self._has_collection(self.names.parents):
            return []
        return [dict(r.payload or {}) for r in self._scroll(self.names.parents, flt, list(fields))]

    def indexed_documents(self, flt: SearchFilter | None = None) -> dict[str, IndexedDocument]:
        if not self._has_collection(self.names.parents):
            return {}
        return scroll_indexed_documents(self._scroll, self.names.parents, flt)

    # --- searches -------------------------------------------------------------------------------------
    def search_dense(
        self, vector: Sequence[float], limit: int, flt: SearchFilter | None = None, fields: Sequence[str] | None = None
    ) -> list[Hit]:
        return self._run(Search((Nearest(vector, DENSE_VECTOR),), limit, flt, fields))

    def search_sparse(
        self, vector: SparseVector, limit: int, flt: SearchFilter | None = None, fields: Sequence[str] | None = None
    ) -> list[Hit]:
        return self._run(Search((Nearest(vector, SPARSE_VECTOR),), limit, flt, fields))

    def search_hybrid(
        self,
        dense: Sequence[float],
        sparse: SparseVector,
        limit: int,
        prefetch_limit: int = 50,
        flt: SearchFilter | None = None,
        fusion: Fusion = DEFAULT_FUSION,
        extra: Sequence[DensePrefetch] = (),
        fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        # Fusion weights are positional: dense, sparse, then each extra list in order.
        lists = (
            Nearest(dense, DENSE_VECTOR),
            Nearest(sparse, SPARSE_VECTOR),
            *(Nearest(p.vector, p.using) for p in extra),
        )
        return self._run(Search(lists, limit, flt, fields, prefetch_limit, fusion))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
