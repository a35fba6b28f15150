"""A persistent embedding cache keyed by (model id, sha256 of text)."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


def text_key(text: str) -> str:
    """Cache key of a text: sha256 hex digest."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class CacheStats:
    """How many vectors came from the cache and how many were computed."""

    cached: int = 0
    computed: int = 0


class EmbeddingCache:
    """SQLite-backed vector cache, so re-materializing unchanged text computes nothing.

    SQLite gives atomic batched writes and concurrent readers without a server; vectors are stored
    as raw float32 bytes.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=60)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS embeddings (model TEXT NOT NULL, text_sha256 TEXT NOT NULL, "
            "dim INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model, text_sha256))"
        )
        self._lock = threading.Lock()

    def get_many(self, model: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        with self._lock:
            for i in range(0, len(unique), 500):
                part = unique[i : i + 500]
                marks = ",".join("?" * len(part))
                rows = self._conn.execute(
                    f"SELECT text_sha256, vector FROM embeddings WHERE model = ? AND text_sha256 IN ({marks})",
                    [model, *part],
                )
                for key, blob in rows:
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        with self._lock, self._conn:
            self._conn.executemany(
                "INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?)",
                [(model, k, int(v.shape[0]), np.asarray(v, dtype=np.float32).tobytes()) for k, v in items.items()],
            )

    def count(self, model: str | None = None) -> int:
        with self._lock:
            if model is None:
                return int(self._conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])
            return int(self._conn.execute("SELECT COUNT(*) FROM embeddings WHERE model = ?", [model]).fetchone()[0])

    def close(self) -> None:
        self._conn.close()


def query_side(model_id: str) -> str:
    """The cache's model key for query-side encodings (query and document encodings may differ)."""
    return f"query:{model_id}"


def embed_with_cache(
    texts: Sequence[str],
    model_id: str,
    encode: Callable[[Sequence[str]], np.ndarray],
    cache: EmbeddingCache | None,
    batch_size: int = 256,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, CacheStats]:
    """Vectors for ``texts`` in order: cached ones are read, the rest encoded in batches and stored.

    Identical texts are encoded once. ``on_progress(done, total)`` reports encoded texts, ``(0, total)``
    first, when encoding starts (after the cache lookup), so a rate is measured from there.
    """
    stats = CacheStats()
    keys = [text_key(t) for t in texts]
    known = cache.get_many(model_id, keys) if cache else {}
    missing: dict[str, str] = {}
    for key, text in zip(keys, texts, strict=True):
        if key not in known and key not in missing:
            missing[key] = text
    stats.cached = sum(1 for k in keys if k in known)
    todo = list(missing.items())
    if on_progress and todo:
        on_progress(0, len(todo))
    for i in range(0, len(todo), batch_size):
        batch = todo[i : i + batch_size]
        vectors = encode([t for _, t in batch])
        fresh = {k: v for (k, _), v in zip(batch, vectors, strict=True)}
        if cache:
            cache.put_many(model_id, fresh)
        known.update(fresh)
        if on_progress:
            on_progress(min(i + batch_size, len(todo)), len(todo))
    stats.computed = len(texts) - stats.cached
    if not texts:
        return np.zeros((0, 0), dtype=np.float32), stats
    return np.stack([known[k] for k in keys]), stats
