"""LRU + TTL cache of query embeddings: repeated and paginated queries skip the model."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import numpy as np
from cachetools import TTLCache

from rag_pipeline.vectors.cache import EmbeddingCache, embed_with_cache, query_side
from rag_pipeline.vectors.dense.base import DenseEncoder


class QueryEmbeddingCache:
    """Query vectors keyed by (model, text). Entries expire after ``ttl_seconds`` and the least
    recently used go first past ``maxsize`` (cachetools' TTLCache is LRU within its TTL).

    ``persistent`` (the pipeline's SQLite embedding cache) is a second level for batch work such as
    evaluation, where the same eval queries are embedded on every run; keys carry a ``query:`` model
    prefix because query and document encodings may differ.
    """

    def __init__(
        self,
        encoder: DenseEncoder,
        maxsize: int = 4096,
        ttl_seconds: float = 3600.0,
        timer: Callable[[], float] = time.monotonic,
        persistent: EmbeddingCache | None = None,
    ) -> None:
        self.encoder = encoder
        self.persistent = persistent
        self._cache: TTLCache[tuple[str, str], np.ndarray] = TTLCache(maxsize=maxsize, ttl=ttl_seconds, timer=timer)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, query: str) -> np.ndarray:
        return self.get_many([query])[0]

    def get_many(self, queries: Sequence[str]) -> list[np.ndarray]:
        """Vectors for every query, encoding only the ones not cached (in one batch)."""
        model = self.encoder.model_id
        out: list[np.ndarray | None] = []
        missing: list[int] = []
        with self._lock:
            for i, q in enumerate(queries):
                vector = self._cache.get((model, q))
                out.append(vector)
                if vector is None:
                    missing.append(i)
            self.hits += len(queries) - len(missing)
            self.misses += len(missing)
        if missing:
            vectors, _ = embed_with_cache(
                [queries[i] for i in missing], query_side(model), self.encoder.encode_queries, self.persistent
            )
            with self._lock:
                for i, vector in zip(missing, vectors, strict=True):
                    self._cache[(model, queries[i])] = vector
                    out[i] = vector
        return [v for v in out if v is not None]

    def __len__(self) -> int:
        return len(self._cache)
