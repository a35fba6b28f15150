"""Server engine: qdrant-client against a Qdrant server (``QDRANT_URL``) or its local mode.

Local mode (``:memory:`` or a path) speaks the server's API exactly and is the test double for the
server path; it is pure Python and slow past a few thousand points.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from qdrant_client import QdrantClient, models

from rag_pipeline.index.qdrant_base import (
    SCROLL_PAGE,
    UPSERT_BATCH,
    QdrantStoreBase,
    Search,
    native_filter,
    payload_indexes,
)
from rag_pipeline.index.store import (
    DENSE_VECTOR,
    SPARSE_VECTOR,
    TITLE_VECTOR,
    CollectionNames,
    Condition,
    DenseSearch,
    Fusion,
    Hit,
    SearchFilter,
    StorePoint,
    id_batches,
)
from rag_pipeline.vectors.sparse import SparseVector


class ClientVectorStore(QdrantStoreBase):
    """VectorStore on qdrant-client (the shared logic: :class:`QdrantStoreBase`)."""

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
        kinds = models.PayloadSchemaType
        schema = payload_indexes(kinds.KEYWORD, kinds.BOOL, kinds.DATETIME, kinds.FLOAT)
        missing = [(field, kind) for field, kind in schema if field not in (skip or set())]
        if not missing or (skip is not None and _is_local(self.client)):
            return  # local mode keeps no indexes (so never lists any): asking again on every write is pointless
        with warnings.catch_warnings():
            # Local mode accepts payload indexes but ignores them (and warns); servers build them.
            warnings.simplefilter("ignore", UserWarning)
            for field, kind in missing:
                self.client.create_payload_index(collection, field, field_schema=kind)

    def upsert(self, collection: str, points: Sequence[StorePoint]) -> None:
        for i in range(0, len(points), UPSERT_BATCH):
            batch = [
                models.PointStruct(id=p.id, vector=self._vectors(collection, p), payload=p.payload)
                for p in points[i : i + UPSERT_BATCH]
            ]
            self.client.upsert(collection, batch, wait=True)

    def _native_sparse(self, vector: SparseVector) -> models.SparseVector:
        return models.SparseVector(indices=vector.indices, values=vector.values)

    def _native_search_params(self, **params: Any) -> models.SearchParams:
        return models.SearchParams(**params)

    def _has_collection(self, collection: str) -> bool:
        return bool(self.client.collection_exists(collection))

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

    def _scroll(self, collection: str, flt: SearchFilter | None, fields: list[str] | None) -> Iterator[Any]:
        native, offset = _filter(flt), None
        while True:
            records, offset = self.client.scroll(
                collection,
                scroll_filter=native,
                limit=SCROLL_PAGE,
                offset=offset,
                with_payload=fields if fields is not None else True,
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

    def _run(self, search: Search) -> list[Hit]:
        qfilter, with_payload = _filter(search.flt), list(search.fields) if search.fields else True
        if search.fused:
            response = self.client.query_points(
                self.names.children,
                prefetch=[
                    models.Prefetch(
                        query=self._native_vector(q.vector),
                        using=q.using,
                        limit=search.prefetch_limit,
                        filter=qfilter,
                        params=self._search_params(q),
                    )
                    for q in search.lists
                ],
                query=_fusion(search.fusion),
                query_filter=qfilter,
                limit=search.limit,
                with_payload=with_payload,
            )
        else:
            (only,) = search.lists
            response = self.client.query_points(
                self.names.children,
                query=self._native_vector(only.vector),
                using=only.using,
                limit=search.limit,
                query_filter=qfilter,
                with_payload=with_payload,
                search_params=self._search_params(only),
            )
        return _hits(response.points)

    def remember_fields(self, fields: Sequence[str]) -> None:
        """Nothing kept: a server is shared with writers this process does not see, and sends only the fields asked
        for."""

    def close(self) -> None:
        self.client.close()


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
    found: models.Filter | None = native_filter(flt, _condition, models.Filter)
    return found
