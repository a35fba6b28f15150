"""Server engine: qdrant-client against a Qdrant server (``QDRANT_URL``) or its local mode.

Local mode (``:memory:`` or a path) speaks the server's API exactly and is the test double for the
server path; it is pure Python and slow past a few thousand points.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from qdrant_client import QdrantClient, models

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
    id_batches,
    scroll_containers,
    scroll_indexed_documents,
    scroll_point_refs,
)
from rag_pipeline.vectors.sparse import SparseVector

_PAGE = 1024


class ClientVectorStore:
    """VectorStore on qdrant-client."""

    def __init__(
        self,
        client: QdrantClient,
        names: CollectionNames | None = None,
        shard_number: int | None = None,
        replication_factor: int | None = None,
        dense_search: DenseSearch | None = None,
    ) -> None:
        self.client = client
        self.names = names or CollectionNames()
        self.dense_search = dense_search or DenseSearch()
        self.shard_number = shard_number
        self.replication_factor = replication_factor
        self.engine = "qdrant-client:local" if _is_local(client) else "qdrant-client:server"
        # Looked up once: a search asks on every query, and a collection's vectors never change.
        self._dense_names: frozenset[str] | None = None

    @classmethod
    def connect(
        cls, url: str | None = None, api_key: str | None = None, path: str | None = None, **kwargs: Any
    ) -> ClientVectorStore:
        """Server when ``url`` is given, else local mode on ``path`` (``:memory:`` by default)."""
        if url:
            client = QdrantClient(url=url, api_key=api_key)
        else:
            client = QdrantClient(location=":memory:") if path in (None, ":memory:") else QdrantClient(path=path)
        return cls(client, **kwargs)

    def create_collections(self, dense_dimension: int) -> None:
        for existing in (self.names.children, self.names.parents):
            if self.client.collection_exists(existing):
                # A collection created before a field was indexed (``authors``) gets the index it lacks.
                self._create_indexes(existing, skip=set(self.client.get_collection(existing).payload_schema))
        if not self.client.collection_exists(self.names.children):
            self.client.create_collection(
                self.names.children,
                vectors_config={
                    DENSE_VECTOR: models.VectorParams(size=dense_dimension, distance=models.Distance.COSINE),
                    TITLE_VECTOR: models.VectorParams(
                        size=dense_dimension,
                        distance=models.Distance.COSINE,
                        hnsw_config=models.HnswConfigDiff(
                            full_scan_threshold=self.dense_search.title_full_scan_threshold_kb
                        ),
                    ),
                },
                sparse_vectors_config={SPARSE_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)},
                hnsw_config=models.HnswConfigDiff(
                    m=self.dense_search.m,
                    ef_construct=self.dense_search.ef_construct,
                    full_scan_threshold=self.dense_search.full_scan_threshold_kb,
                ),
                shard_number=self.shard_number,
                replication_factor=self.replication_factor,
            )
            self._create_indexes(self.names.children)
        if not self.client.collection_exists(self.names.parents):
            self.client.create_collection(
                self.names.parents,
                vectors_config={},
                shard_number=self.shard_number,
                replication_factor=self.replication_factor,
            )
            self._create_indexes(self.names.parents)

    def index_info(self) -> dict[str, Any]:
        # Qdrant keeps arbitrary JSON per collection; the child collection holds the index's record.
        if not self.client.collection_exists(self.names.children):
            return {}
        return dict(self.client.get_collection(self.names.children).config.metadata or {})

    def record_index_info(self, info: dict[str, Any]) -> None:
        self.client.update_collection(self.names.children, metadata=info)

    def _create_indexes(self, collection: str, skip: set[str] | None = None) -> None:
        schema = (
            [(f, models.PayloadSchemaType.KEYWORD) for f in KEYWORD_FIELDS]
            + [(f, models.PayloadSchemaType.BOOL) for f in BOOL_FIELDS]
            + [(f, models.PayloadSchemaType.DATETIME) for f in DATETIME_FIELDS]
            + [(f, models.PayloadSchemaType.FLOAT) for f in FLOAT_FIELDS]
        )
        missing = [(field, kind) for field, kind in schema if field not in (skip or set())]
        if not missing or (skip is not None and _is_local(self.client)):
            return  # local mode keeps no indexes (so never lists any): asking again on every write is pointless
        with warnings.catch_warnings():
            # Local mode accepts payload indexes but ignores them (and warns); servers build them.
            warnings.simplefilter("ignore", UserWarning)
            for field, kind in missing:
                self.client.create_payload_index(collection, field, field_schema=kind)

    def upsert(self, collection: str, points: Sequence[StorePoint]) -> None:
        for i in range(0, len(points), 256):
            batch = [
                models.PointStruct(id=p.id, vector=self._vectors(collection, p), payload=p.payload)
                for p in points[i : i + 256]
            ]
            self.client.upsert(collection, batch, wait=True)

    def _vectors(self, collection: str, point: StorePoint) -> dict[str, Any]:
        if collection == self.names.parents:
            return {}
        vectors: dict[str, Any] = {}
        if point.dense is not None:
            vectors[DENSE_VECTOR] = [float(x) for x in point.dense]
        if point.sparse is not None:
            vectors[SPARSE_VECTOR] = models.SparseVector(indices=point.sparse.indices, values=point.sparse.values)
        if point.title is not None and TITLE_VECTOR in self.dense_vector_names():
            vectors[TITLE_VECTOR] = [float(x) for x in point.title]
        return vectors

    def dense_vector_names(self) -> frozenset[str]:
        if self._dense_names is None:
            if not self.client.collection_exists(self.names.children):
                return frozenset()
            vectors = self.client.get_collection(self.names.children).config.params.vectors
            self._dense_names = frozenset(vectors) if isinstance(vectors, dict) else frozenset({DENSE_VECTOR})
        return self._dense_names

    def delete_ids(self, collection: str, ids: Sequence[str]) -> None:
        if ids:
            self.client.delete(collection, models.PointIdsList(points=list(ids)), wait=True)

    def delete_documents(self, collection: str, document_ids: Sequence[str]) -> None:
        if document_ids:
            flt = _filter(SearchFilter(document_ids=tuple(document_ids)))
            self.client.delete(collection, models.FilterSelector(filter=flt), wait=True)

    def set_document_payload(self, collection: str, document_ids: Sequence[str], payload: dict[str, Any]) -> None:
        # set_payload replaces the given top-level keys (a new ``acl`` replaces the old object whole).
        for batch in id_batches(document_ids):
            selector = models.FilterSelector(filter=_filter(SearchFilter(document_ids=batch)))
            self.client.set_payload(collection, payload, points=selector, wait=True)

    def document_points(self, collection: str, document_ids: Sequence[str]) -> list[PointRef]:
        if not document_ids or not self.client.collection_exists(collection):
            return []
        return scroll_point_refs(self._scroll, collection, document_ids)

    def containers(self, flt: SearchFilter | None = None) -> list[ContainerSummary]:
        if not self.client.collection_exists(self.names.parents):
            return []
        return scroll_containers(self._scroll, self.names.parents, flt)

    def parent_payloads(self, flt: SearchFilter | None, fields: Sequence[str]) -> list[dict[str, Any]]:
        if not self.client.collection_exists(self.names.parents):
            return []
        return [dict(r.payload or {}) for r in self._scroll(self.names.parents, flt, list(fields))]

    def indexed_documents(self, flt: SearchFilter | None = None) -> dict[str, IndexedDocument]:
        if not self.client.collection_exists(self.names.parents):
            return {}
        return scroll_indexed_documents(self._scroll, self.names.parents, flt)

    def _scroll(self, collection: str, flt: SearchFilter | None, fields: list[str]) -> Iterator[Any]:
        """Every point of a collection matching ``flt``, page by page, with only ``fields`` of its payload."""
        native, offset = _filter(flt), None
        while True:
            records, offset = self.client.scroll(
                collection,
                scroll_filter=native,
                limit=_PAGE,
                offset=offset,
                with_payload=fields,
                with_vectors=False,
            )
            yield from records
            if offset is None:
                return

    def count(self, collection: str, flt: SearchFilter | None = None) -> int:
        if not self.client.collection_exists(collection):
            return 0
        return int(self.client.count(collection, count_filter=_filter(flt), exact=True).count)

    def retrieve(self, collection: str, ids: Sequence[str], fields: Sequence[str] | None = None) -> list[Hit]:
        return [
            Hit(str(r.id), 1.0, dict(r.payload or {}))
            for r in self.client.retrieve(collection, list(ids), with_payload=list(fields) if fields else True)
        ]

    def optimize(self) -> bool:
        """Nothing to do: a server builds its HNSW graphs in the background (and local mode has none)."""
        return False

    def _dense_params(self) -> models.SearchParams:
        if self.dense_search.exact:
            return models.SearchParams(exact=True)
        return models.SearchParams(hnsw_ef=self.dense_search.hnsw_ef)

    def search_dense(
        self, vector: Sequence[float], limit: int, flt: SearchFilter | None = None, fields: Sequence[str] | None = None
    ) -> list[Hit]:
        response = self.client.query_points(
            self.names.children,
            query=[float(x) for x in vector],
            using=DENSE_VECTOR,
            limit=limit,
            query_filter=_filter(flt),
            with_payload=list(fields) if fields else True,
            search_params=self._dense_params(),
        )
        return _hits(response.points)

    def search_sparse(
        self, vector: SparseVector, limit: int, flt: SearchFilter | None = None, fields: Sequence[str] | None = None
    ) -> list[Hit]:
        response = self.client.query_points(
            self.names.children,
            query=models.SparseVector(indices=vector.indices, values=vector.values),
            using=SPARSE_VECTOR,
            limit=limit,
            query_filter=_filter(flt),
            with_payload=list(fields) if fields else True,
        )
        return _hits(response.points)

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
        qfilter = _filter(flt)

        def dense_prefetch(vector: Sequence[float], using: str = DENSE_VECTOR) -> models.Prefetch:
            return models.Prefetch(
                query=[float(x) for x in vector],
                using=using,
                limit=prefetch_limit,
                filter=qfilter,
                params=self._dense_params(),
            )

        response = self.client.query_points(
            self.names.children,
            prefetch=[
                dense_prefetch(dense),
                models.Prefetch(
                    query=models.SparseVector(indices=sparse.indices, values=sparse.values),
                    using=SPARSE_VECTOR,
                    limit=prefetch_limit,
                    filter=qfilter,
                ),
                *(dense_prefetch(p.vector, p.using) for p in extra),
            ],
            query=_fusion(fusion),
            query_filter=qfilter,
            limit=limit,
            with_payload=list(fields) if fields else True,
        )
        return _hits(response.points)

    def remember_fields(self, fields: Sequence[str]) -> None:
        """Nothing kept: a server is shared with writers this process does not see, and sends only the fields asked
        for."""

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> ClientVectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _hits(points: Sequence[models.ScoredPoint]) -> list[Hit]:
    return [Hit(str(p.id), float(p.score), dict(p.payload or {})) for p in points]


def _is_local(client: QdrantClient) -> bool:
    return type(client._client).__name__ == "QdrantLocal"


def _fusion(fusion: Fusion) -> models.Query:
    if fusion.method == "dbsf":
        return models.FusionQuery(fusion=models.Fusion.DBSF)
    return models.RrfQuery(rrf=models.Rrf(k=fusion.k, weights=list(fusion.weights) if fusion.weights else None))


def _condition(c: Condition) -> models.FieldCondition | models.IsEmptyCondition:
    if c.is_empty:
        return models.IsEmptyCondition(is_empty=models.PayloadField(key=c.key))
    if c.any_of is not None:
        return models.FieldCondition(key=c.key, match=models.MatchAny(any=list(c.any_of)))
    if c.gte is not None or c.lt is not None:
        return models.FieldCondition(key=c.key, range=models.DatetimeRange(gte=c.gte, lt=c.lt))
    return models.FieldCondition(key=c.key, match=models.MatchValue(value=c.value))


def _filter(flt: SearchFilter | None) -> models.Filter | None:
    spec = filter_spec(flt)
    if spec.empty:
        return None
    must: list[Any] = [_condition(c) for c in spec.must]
    if spec.also:
        must.append(models.Filter(should=[_condition(c) for c in spec.also]))
    return models.Filter(
        must=must or None,
        should=[_condition(c) for c in spec.should] or None,
        must_not=[_condition(c) for c in spec.must_not] or None,
    )
