"""Embedded engine: qdrant-edge-py (Qdrant's own segment engine in-process), one shard per collection.

One opener at a time per folder, readers and writers alike (qdrant-edge locks each shard's WAL): a store
takes the folder's lock before loading its shards and keeps it until :meth:`EdgeVectorStore.close`, and an
opener that finds the folder held waits up to ``wait_seconds`` (``store_lock.py``). Open it late and
close it early: every other search and step waits while it is open. The Dagster pool ``qdrant``
serializes the steps that open it.
"""

from __future__ import annotations

import json
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from rag_pipeline.index import native_memory
from rag_pipeline.index.qdrant_base import (
    SCROLL_PAGE,
    UPSERT_BATCH,
    Nearest,
    QdrantStoreBase,
    Search,
    native_filter,
    payload_indexes,
)
from rag_pipeline.index.store import (
    ALL_PAYLOAD,
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
from rag_pipeline.index.store_lock import LOCK_FILE, ShardsBusy, acquire_folder, is_wal_locked
from rag_pipeline.vectors.sparse import SparseVector

# qdrant-edge cannot hold a shard without vectors; parents carry this never-filled sparse vector.
_PLACEHOLDER_VECTOR = "unused"
_CONFIG_FILE = "edge_config.json"
# qdrant-edge-py 0.9.0 never matches a bool (MatchValue(True) and (False) both count 0, indexed or not),
# so this engine mirrors ``acl.public`` into a keyword field and filters on that instead.
_PUBLIC_MIRROR = "acl_public"
# Every payload index a shard gets: the filtered fields, plus the mirror.
_KINDS = qe.PayloadSchemaType
_FIELD_INDEXES: tuple[tuple[str, qe.PayloadSchemaType], ...] = (
    *payload_indexes(_KINDS.Keyword, _KINDS.Bool, _KINDS.Datetime, _KINDS.Float),
    (_PUBLIC_MIRROR, _KINDS.Keyword),
)


# The largest segment the engine's optimizers build (KB of vectors): its default on 2 cores lets the merge
# optimizer fold each batch of a first index into ever larger segments and rebuild their HNSW graph, so a batch's
# time and the peak memory grew with the history written (issue 68: one 250,000-document batch 157 s instead of
# 7-22 s, ~14 KB of RSS per document written). Capped, a merge rebuilds at most this much
# (bench/engine_segments.py; docs/notes/company_scale.md). Fixed when a collection is created.
MAX_SEGMENT_KB = 65_536


def segment_optimizers(max_segment_kb: int = MAX_SEGMENT_KB) -> qe.EdgeOptimizersConfig:
    """The optimizer config new collections get: segments of at most ``max_segment_kb``."""
    return qe.EdgeOptimizersConfig(max_segment_size=max_segment_kb)


# What new shards are created with (None: the engine's defaults; the bench's control arm sets that).
SEGMENT_OPTIMIZERS: qe.EdgeOptimizersConfig | None = segment_optimizers()
# Where new shards keep their dense vectors (None: the engine's default, Cached: mapped and read in whole when a
# shard opens, so they count in the process's RSS; Cold: mapped, read on demand). bench/engine_segments.py measures
# both; the default is unchanged until the search side is measured with Cold (issue 68 item 3).
VECTOR_MEMORY: qe.Memory | None = None
# Where new shards keep the rest of what a shard holds in RAM (the BM25 inverted index, the HNSW graphs, the
# payload indexes and the id tracker); None: the engine's defaults (Pinned or Cached). Measured by
# bench/engine_segments.py's all_cold arm; not the default until the search side is measured with it.
INDEX_MEMORY: qe.Memory | None = None


class EdgeVectorStore(QdrantStoreBase):
    """VectorStore on qdrant-edge shards under ``path/<collection>`` (the shared logic: :class:`QdrantStoreBase`)."""

    engine = "qdrant-edge"

    def __init__(
        self,
        path: str | Path,
        names: CollectionNames | None = None,
        *,
        wait_seconds: float = 0.0,
        on_wait: Callable[[str], None] | None = None,
        label: str | None = None,
        dense_search: DenseSearch | None = None,
        yields: bool = False,
    ) -> None:
        """Open (or prepare) the store under ``path``, waiting up to ``wait_seconds`` while another opener
        holds the folder (``on_wait`` gets a progress line every few seconds; past the limit
        :class:`~rag_pipeline.index.store_lock.StoreBusyError`). ``label`` names this opener in other
        processes' messages (default: the program and its subcommand). ``dense_search``: HNSW (default) or
        exact, and the graph's parameters for collections this store creates. ``yields``: this opener hands the
        folder to waiting openers (the search service), so they poll it closely."""
        self.path = Path(path)
        self.names = names or CollectionNames()
        self.dense_search = dense_search or DenseSearch()
        self._shards: dict[str, qe.EdgeShard] = {}
        self._dense_names: frozenset[str] | None = None
        # Payload fields of every child kept in memory (remember_fields): what searches reading no more skip
        # reading from the engine. Built on the first such search, dropped on any write through this store.
        self._remembered_fields: frozenset[str] = frozenset()
        self._remembered: dict[Any, tuple[str, dict[str, Any]]] | None = None
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = acquire_folder(
            self.path, self._load_shards, wait_seconds=wait_seconds, label=label, on_wait=on_wait, yields=yields
        )

    def _load_shards(self) -> None:
        try:
            for name in (self.names.children, self.names.parents):
                if (self.path / name / _CONFIG_FILE).exists():
                    shard = qe.EdgeShard.load(str(self.path / name))
                    self._shards[name] = shard
                    # Shards written before a field was indexed (the ``acl.public`` mirror, ``authors``): without
                    # its index every query filtering on it reads payloads point by point (measured for the
                    # mirror: 10-50× slower).
                    indexed = shard.info().payload_schema
                    for field, kind in _FIELD_INDEXES:
                        if field not in indexed:
                            shard.update(qe.UpdateOperation.create_field_index(field, kind))
        except Exception as exc:
            # Never keep one shard of two: the next attempt (or the caller) starts from a closed store.
            self._close_shards()
            if is_wal_locked(exc):
                raise ShardsBusy(str(exc)) from exc
            raise

    # --- collections -------------------------------------------------------------------------
    def create_collections(self, dense_dimension: int) -> None:
        if self.names.children not in self._shards:
            dense = qe.EdgeVectorParams(size=dense_dimension, distance=qe.Distance.Cosine, memory=VECTOR_MEMORY)
            title = qe.EdgeVectorParams(
                size=dense_dimension,
                distance=qe.Distance.Cosine,
                memory=VECTOR_MEMORY,
                hnsw_config=qe.HnswIndexConfig(
                    m=self.dense_search.m,
                    ef_construct=self.dense_search.ef_construct,
                    full_scan_threshold=self.dense_search.title_full_scan_threshold_kb,
                    memory=INDEX_MEMORY,
                ),
            )
            config = qe.EdgeConfig(
                vectors={DENSE_VECTOR: dense, TITLE_VECTOR: title},
                sparse_vectors={
                    SPARSE_VECTOR: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf, memory=INDEX_MEMORY)
                },
                hnsw_config=qe.HnswIndexConfig(
                    m=self.dense_search.m,
                    ef_construct=self.dense_search.ef_construct,
                    full_scan_threshold=self.dense_search.full_scan_threshold_kb,
                    payload_m=self.dense_search.payload_m,
                    memory=INDEX_MEMORY,
                ),
                optimizers=SEGMENT_OPTIMIZERS,
                quantization_config=_quantization(self.dense_search),
                payload_memory=INDEX_MEMORY,
                id_tracker_memory=INDEX_MEMORY,
            )
            self._shards[self.names.children] = self._create(self.names.children, config)
        if self.names.parents not in self._shards:
            config = qe.EdgeConfig(
                sparse_vectors={_PLACEHOLDER_VECTOR: qe.EdgeSparseVectorParams()}, optimizers=SEGMENT_OPTIMIZERS
            )
            self._shards[self.names.parents] = self._create(self.names.parents, config)

    def dense_vector_names(self) -> frozenset[str]:
        if self._dense_names is None:
            config = self.path / self.names.children / _CONFIG_FILE
            # qdrant-edge's shard info has no vector config; the shard's own config file does.
            vectors = json.loads(config.read_text()).get("vectors", {}) if config.exists() else None
            if vectors is None:
                return frozenset()
            self._dense_names = frozenset(vectors)
        return self._dense_names

    @property
    def _info_path(self) -> Path:
        return self.info_file(self.path, self.names)

    @staticmethod
    def info_file(path: Path, names: CollectionNames) -> Path:
        """Where an embedded index's record sits (readable without opening the index, which admits one process):
        qdrant-edge has no collection metadata, so it is a file next to the child shard's folder."""
        return path / f"{names.children}.index.json"

    def index_info(self) -> dict[str, Any]:
        return dict(json.loads(self._info_path.read_text())) if self._info_path.exists() else {}

    def record_index_info(self, info: dict[str, Any]) -> None:
        merged = {**self.index_info(), **info}
        temporary = self._info_path.with_suffix(".tmp")
        temporary.write_text(json.dumps(merged, indent=2, sort_keys=True) + "\n")
        temporary.replace(self._info_path)

    def _create(self, name: str, config: qe.EdgeConfig) -> qe.EdgeShard:
        folder = self.path / name
        folder.mkdir(parents=True, exist_ok=True)
        shard = qe.EdgeShard.create(str(folder), config)
        for field, kind in _FIELD_INDEXES:
            shard.update(qe.UpdateOperation.create_field_index(field, kind))
        return shard

    def _shard(self, collection: str) -> qe.EdgeShard:
        try:
            return self._shards[collection]
        except KeyError:
            raise KeyError(
                f"collection {collection!r} does not exist under {self.path}; materialize the points assets first"
            ) from None

    # --- writes ------------------------------------------------------------------------------
    def upsert(self, collection: str, points: Sequence[StorePoint]) -> None:
        self._remembered = None
        shard = self._shard(collection)
        for i in range(0, len(points), UPSERT_BATCH):
            batch = [
                qe.Point(p.id, self._vectors(collection, p), _payload(p.payload)) for p in points[i : i + UPSERT_BATCH]
            ]
            shard.update(qe.UpdateOperation.upsert_points(batch))

    def _native_sparse(self, vector: SparseVector) -> qe.SparseVector:
        return qe.SparseVector(indices=vector.indices, values=vector.values)

    def _native_search_params(self, **params: Any) -> qe.SearchParams:
        return qe.SearchParams(**params)

    def optimize(self) -> bool:
        """Build the HNSW graph over what was written and drop deleted points (which otherwise still count
        in BM25's IDF); blocks until done. Segments below the indexing threshold stay plain (scanned exactly),
        so on a small index this is quick. True when anything changed."""
        changed = False
        for shard in self._shards.values():
            changed = bool(shard.optimize()) or changed
        if changed:
            native_memory.release_freed_memory()  # what the merge and graph build freed (index/native_memory.py)
        return changed

    def delete_ids(self, collection: str, ids: Sequence[str]) -> None:
        self._remembered = None
        if ids:
            self._shard(collection).update(qe.UpdateOperation.delete_points(list(ids)))

    def delete_documents(self, collection: str, document_ids: Sequence[str]) -> None:
        self._remembered = None
        if document_ids:
            flt = _filter(SearchFilter(document_ids=tuple(document_ids)))
            assert flt is not None  # a non-empty id list always makes a filter
            self._shard(collection).update(qe.UpdateOperation.delete_points_by_filter(flt))

    def set_document_payload(self, collection: str, document_ids: Sequence[str], payload: dict[str, Any]) -> None:
        self._remembered = None
        # One operation per batch of documents: all points of a document change together. ``_payload`` keeps
        # the ``acl.public`` mirror in step with a new ``acl``.
        shard = self._shard(collection)
        for batch in id_batches(document_ids):
            flt = _filter(SearchFilter(document_ids=batch))
            assert flt is not None  # a non-empty id list always makes a filter
            shard.update(qe.UpdateOperation.set_payload_by_filter(flt, _payload(payload)))

    # --- reads -------------------------------------------------------------------------------
    def _has_collection(self, collection: str) -> bool:
        return collection in self._shards

    def _scroll(self, collection: str, flt: SearchFilter | None, fields: list[str] | None) -> Iterator[Any]:
        shard, native, offset = self._shards[collection], _filter(flt), None
        selector = fields if fields is not None else True
        while True:
            request = qe.ScrollRequest(
                offset=offset, limit=SCROLL_PAGE, filter=native, with_payload=selector, with_vector=False
            )
            records, offset = shard.scroll(request)
            yield from records
            if offset is None:
                return

    def count(self, collection: str, flt: SearchFilter | None = None) -> int:
        if collection not in self._shards:
            return 0
        return int(self._shards[collection].count(qe.CountRequest(exact=True, filter=_filter(flt))))

    def remember_fields(self, fields: Sequence[str]) -> None:
        """Keep ``fields`` of every child's payload in memory (read once, in one scroll), so a search that reads no
        other field skips the engine's payload reads: at depth 400 they are ~90 % of a search's time (a BM25
        search of 416 hits: 0.25 ms without payload, 2.9 ms reading three short fields). For many deep searches
        over one open store (an evaluation); the memory is that of the fields, ~300 bytes a child for ids.
        :data:`~rag_pipeline.index.store.ALL_PAYLOAD` keeps whole payloads (~40 MB for the bundled index's 21,600
        children), so reads of whole payloads by id (a reranker's candidates) skip the engine too."""
        wanted = frozenset(fields) | self._remembered_fields
        if wanted != self._remembered_fields:
            self._remembered_fields, self._remembered = wanted, None

    def _from_memory(self, fields: Sequence[str] | None) -> bool:
        if ALL_PAYLOAD in self._remembered_fields:
            return True
        return bool(fields) and bool(self._remembered_fields) and set(fields or ()) <= self._remembered_fields

    def _selector(self, fields: Sequence[str] | None) -> Any:
        """What a query reads of each hit's payload: nothing when memory holds ``fields``, else those fields (all
        when None: a hit's payload becomes a Python dict field by field)."""
        if self._from_memory(fields):
            return False
        return qe.PayloadSelector.Include(list(fields)) if fields else True

    def _native_query(self, query: Nearest) -> Any:
        return qe.Query.Nearest(self._native_vector(query.vector), using=query.using)

    def _run(self, search: Search) -> list[Hit]:
        edge_filter = _filter(search.flt)
        if search.fused:
            prefetches = [
                qe.Prefetch(
                    limit=search.prefetch_limit,
                    query=self._native_query(q),
                    filter=edge_filter,
                    params=self._search_params(q),
                )
                for q in search.lists
            ]
            asked: dict[str, Any] = {"prefetches": prefetches, "query": _fusion(search.fusion)}
        else:
            (only,) = search.lists
            asked = {"query": self._native_query(only), "params": self._search_params(only)}
        request = qe.QueryRequest(
            limit=search.limit, filter=edge_filter, with_payload=self._selector(search.fields), **asked
        )
        return self._hits(request, search.fields)

    def _hits(self, request: qe.QueryRequest, fields: Sequence[str] | None) -> list[Hit]:
        if self.names.children not in self._shards:
            return []
        points = self._shards[self.names.children].query(request)
        if not self._from_memory(fields):
            return [Hit(str(p.id), float(p.score), dict(p.payload or {})) for p in points]
        kept = self._entries([p.id for p in points])
        # The kept payload itself (read-only by contract): it may hold more of the remembered fields than asked for.
        return [Hit(entry[0], float(p.score), entry[1]) for entry, p in zip(kept, points, strict=True) if entry]

    def retrieve(self, collection: str, ids: Sequence[str], fields: Sequence[str] | None = None) -> list[Hit]:
        if collection == self.names.children and self._from_memory(fields):
            return [Hit(entry[0], 1.0, entry[1]) for entry in self._entries(list(ids)) if entry]
        selector = list(fields) if fields else True
        records = self._shard(collection).retrieve(list(ids), selector, False)
        return [Hit(str(r.id), 1.0, dict(r.payload or {})) for r in records]

    def _entries(self, ids: list[Any]) -> list[tuple[str, dict[str, Any]] | None]:
        """The kept entry of each child id (a UUID from the engine or its text); one not kept (not expected: writes
        drop the memory) is read from the engine and kept, and one that does not exist is None."""
        memory = self._memory()
        try:  # the engine's ids: UUIDs, looked up by their 128-bit integer (hashing a UUID runs Python code)
            kept = [memory.get(i.int) for i in ids]
        except AttributeError:  # the caller's text ids (or integer ids)
            kept = [memory.get(_memory_key(i)) for i in ids]
        unknown = [i for i, entry in zip(ids, kept, strict=True) if entry is None]
        if not unknown:
            return kept
        for record in self._shard(self.names.children).retrieve(unknown, True, False):
            self._remember(memory, record)
        return [memory.get(_memory_key(i)) for i in ids]

    def _memory(self) -> dict[Any, tuple[str, dict[str, Any]]]:
        """Point id → (id as text, kept fields), under both the id the engine hands back (for the UUIDs this project
        writes: its integer) and its text (what callers pass)."""
        if self._remembered is None:
            memory: dict[Any, tuple[str, dict[str, Any]]] = {}
            whole = ALL_PAYLOAD in self._remembered_fields
            for record in self._scroll(self.names.children, None, None if whole else sorted(self._remembered_fields)):
                self._remember(memory, record)
            self._remembered = memory
        return self._remembered

    def _remember(self, memory: dict[Any, tuple[str, dict[str, Any]]], record: Any) -> tuple[str, dict[str, Any]]:
        entry = (str(record.id), self._kept(dict(record.payload or {})))
        memory[_memory_key(record.id)] = memory[entry[0]] = entry
        return entry

    def _kept(self, payload: dict[str, Any]) -> dict[str, Any]:
        # Short texts interned: a document's children share one id string, and sources are a handful of names.
        whole = ALL_PAYLOAD in self._remembered_fields
        return {
            f: sys.intern(v) if isinstance(v, str) and len(v) <= _INTERNED else v
            for f, v in payload.items()
            if whole or f in self._remembered_fields
        }

    def disk_bytes(self) -> int:
        """What this index's files take on disk: a reader copy needs as much room."""
        return sum(f.stat().st_blocks * 512 for f in self.path.rglob("*") if f.is_file())

    def reader_copy(self, target: Path) -> EdgeReaderCopy:
        """This index flushed and copied under ``target`` (without the folder's lock), for another process to open
        and search (:mod:`rag_pipeline.evaluation.parallel`): one opener per folder, and a search holds the GIL, so
        a second process searching needs its own copy. Copying the bundled index (677 MB) took 0.7 s."""
        for shard in self._shards.values():
            shard.flush()
        copy = Path(target) / "qdrant"
        shutil.copytree(self.path, copy, ignore=shutil.ignore_patterns(LOCK_FILE))
        return EdgeReaderCopy(copy, self.names, self.dense_search)

    def _close_shards(self) -> None:
        shards = list(self._shards.values())
        self._shards.clear()
        for shard in shards:
            shard.flush()
            shard.close()

    def close(self) -> None:
        """Flush and close the shards, then hand the folder to the next waiting opener (idempotent)."""
        try:
            self._close_shards()
        finally:
            self._lock.release()
        native_memory.release_freed_memory()  # the closed shards' pages, else held free by malloc


@dataclass(frozen=True)
class EdgeReaderCopy:
    """A copy of an embedded index another process opens (:meth:`EdgeVectorStore.reader_copy`); it pickles."""

    path: Path
    names: CollectionNames
    dense_search: DenseSearch

    def open(self) -> EdgeVectorStore:
        return EdgeVectorStore(self.path, self.names, dense_search=self.dense_search)


# Payload texts up to this long are interned in the kept memory (ids, sources, containers; not chunk texts).
_INTERNED = 128


def _memory_key(point_id: Any) -> Any:
    """A point id as the kept memory files it: a UUID by its integer, text and integers as they are."""
    return point_id.int if isinstance(point_id, uuid.UUID) else point_id


def _quantization(dense_search: DenseSearch) -> qe.ScalarQuantizationConfig | None:
    """The collection's quantization of its dense vectors (None: floats only)."""
    if dense_search.quantization == "int8":
        return qe.ScalarQuantizationConfig(type=qe.ScalarType.Int8, quantile=0.99, always_ram=True)
    return None


def _fusion(fusion: Fusion) -> Any:
    if fusion.method == "dbsf":
        return qe.Fusion.Dbsf()
    return qe.Fusion.Rrf(k=fusion.k, weights=list(fusion.weights) if fusion.weights else None)


def _payload(payload: dict[str, Any]) -> dict[str, Any]:
    acl = payload.get("acl")
    if isinstance(acl, dict):
        return {**payload, _PUBLIC_MIRROR: "true" if acl.get("public") else "false"}
    return payload


def _condition(c: Condition) -> Any:
    if c.is_empty:
        return qe.IsEmptyCondition(key=c.key)
    if c.key == "acl.public":
        return qe.FieldCondition(key=_PUBLIC_MIRROR, match=qe.MatchValue(value="true" if c.value else "false"))
    if c.any_of is not None:
        return qe.FieldCondition(key=c.key, match=qe.MatchAny(any=list(c.any_of)))
    if c.gte is not None or c.lt is not None:
        return qe.FieldCondition(key=c.key, range=qe.RangeDateTime(gte=c.gte, lt=c.lt))
    return qe.FieldCondition(key=c.key, match=qe.MatchValue(value=c.value))


def _filter(flt: SearchFilter | None) -> qe.Filter | None:
    found: qe.Filter | None = native_filter(flt, _condition, qe.Filter)
    return found
