"""The search service's result and document caches: recent answers kept for a few minutes, dropped whenever the
index changes.

A key always starts with the index *generation*: a number the service raises every time it (re)opens the index
after a writer had it, and whenever the index's recorded last-write time changes (a Qdrant server, which is never
reopened). So a write by any process, a Dagster step or ``rag-pipeline index``, makes every older entry
unreachable at once; the TTL bounds what a missed signal could cost.

Search entries are keyed by the reader's *access*: every account id and group the ACL filter is built from, so two
readers share an entry only when the index would show them exactly the same documents. Document entries hold the
stored parts and ACLs; the reader's access is checked on every hit, as on a miss.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Generic, TypeVar

from cachetools import TTLCache

from rag_pipeline.retrieval.principal import Principal

V = TypeVar("V")
T = TypeVar("T")


def access_key(reader: Principal) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What a reader's search results depend on: their account ids and groups, sorted (order never matters)."""
    return tuple(sorted(set(reader.all_user_ids()))), tuple(sorted(set(reader.groups)))


class LookupCounts:
    """A cache's hits and misses (what the service's metrics read), counted the same way for the per-process and
    the shared cache: a lookup that finds nothing usable is a miss."""

    def __init__(self) -> None:
        self.hits = 0
        self.misses = 0
        self._counts_lock = threading.Lock()

    def counted(self, value: T | None) -> T | None:
        """``value``, counted as a hit or (None) a miss."""
        with self._counts_lock:
            if value is None:
                self.misses += 1
            else:
                self.hits += 1
        return value


class ResultCache(LookupCounts, Generic[V]):
    """A thread-safe LRU with expiry (``cachetools.TTLCache``), counting its hits and misses; ``entries=0`` keeps
    nothing."""

    def __init__(self, entries: int, seconds: float) -> None:
        super().__init__()
        self.enabled = entries > 0 and seconds > 0
        self._cache: TTLCache[Hashable, V] = TTLCache(maxsize=max(1, entries), ttl=max(seconds, 0.001))
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        if not self.enabled:
            return None
        with self._lock:
            value = self._cache.get(key)
        return self.counted(value)

    def put(self, key: Hashable, value: V) -> None:
        if self.enabled:
            with self._lock:
                self._cache[key] = value

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)
