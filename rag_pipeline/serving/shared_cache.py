"""The search service's result and document caches shared by every replica through Redis (``RAG_CACHE_REDIS_URL``),
with the per-process cache's rules (:mod:`~rag_pipeline.serving.result_cache`).

- **Access**: the service's keys are the same tuples as the per-process cache's, the reader's access (account ids
  and groups) included, hashed (SHA-256) into the Redis key: two readers share an entry only when the index would
  show them the same documents. Document entries hold the parts and their ACLs; the reader is checked on every hit.
- **Invalidation**: the index generation the keys start with is one counter in Redis (:class:`SharedGeneration`),
  read on every lookup. A replica that sees the index change (reopened after a writer, or its recorded last-write
  time moved) advances it, so no replica reaches an entry from before the write, whether or not it has noticed
  the write itself.
- **Bounds**: every entry expires after the cache's seconds (Redis ``PX``), and each cache keeps at most its
  entries: a sorted set of its keys by write time, the oldest dropped past the bound (one Lua script, atomic).
- **Outages**: any Redis error makes the lookup a miss and the write a no-op, logged once until Redis answers
  again; for :data:`RETRY_SECONDS` after an error Redis is not asked at all, so an unreachable server costs a
  search nothing but the first time-out. A search never fails because of the cache.

Values are JSON (pydantic's ``TypeAdapter`` over the cached dataclasses), never pickles: whoever can write to Redis
can make a replica serve wrong results, but never run code.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar, cast

import redis
from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError
from redis.backoff import NoBackoff
from redis.retry import Retry

from rag_pipeline.serving.result_cache import LookupCounts

log = logging.getLogger(__name__)

V = TypeVar("V")
T = TypeVar("T")

# After a Redis error, how long every lookup is a miss without asking (then one request tries again).
RETRY_SECONDS = 5.0
# Connect and read time-outs: Redis on the same network answers in well under a millisecond.
SOCKET_SECONDS = 0.25
NAMESPACE = "rag:cache"

# KEYS: the entry, the cache's key index, its write counter. ARGV: value, ttl ms, now ms, entries bound. An index
# score is the write's millisecond times 1000 plus a counter, so writes within one millisecond keep their order.
_PUT = """
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local now = tonumber(ARGV[3])
local seq = redis.call('INCR', KEYS[3]) % 1000
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', (now - tonumber(ARGV[2])) * 1000)
redis.call('ZADD', KEYS[2], now * 1000 + seq, KEYS[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
if over > 0 then
  local oldest = redis.call('ZRANGE', KEYS[2], 0, over - 1)
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, over - 1)
  redis.call('DEL', unpack(oldest))
end
return over
"""


class SharedRedis:
    """One Redis connection pool for a service's shared caches, and what it does when Redis does not answer: the
    first error is logged (a warning, without the URL: it may carry a password), later ones are not until Redis
    answers again, and Redis is left alone for :data:`RETRY_SECONDS` after each."""

    def __init__(self, url: str, namespace: str = NAMESPACE, retry_seconds: float = RETRY_SECONDS) -> None:
        # No retries (the client's default is 10, backing off for seconds): a lookup that fails is a miss now.
        self.client = redis.Redis.from_url(
            url,
            socket_timeout=SOCKET_SECONDS,
            socket_connect_timeout=SOCKET_SECONDS,
            health_check_interval=30,
            retry=Retry(NoBackoff(), 0),
        )
        self.namespace = namespace
        self.retry_seconds = retry_seconds
        self.outages = 0  # errors met (each one a lookup or write served without the cache)
        self._down_since: float | None = None
        self._lock = threading.Lock()
        self._put = self.client.register_script(_PUT)

    def call(self, action: Callable[[redis.Redis], T]) -> T | None:
        """``action(client)``, or None when Redis is down or fails now (logged once per outage)."""
        with self._lock:
            if self._down_since is not None and time.monotonic() - self._down_since < self.retry_seconds:
                return None
        try:
            result = action(self.client)
        except (redis.RedisError, OSError) as exc:
            with self._lock:
                self.outages += 1
                first = self._down_since is None
                self._down_since = time.monotonic()
            if first:
                log.warning("the shared cache's Redis did not answer (%s): searching without it", type(exc).__name__)
            return None
        with self._lock:
            if self._down_since is not None:
                log.warning("the shared cache's Redis answers again")
            self._down_since = None
        return result

    def put(self, key: str, index: str, value: bytes, ttl_ms: int, entries: int) -> None:
        now_ms = int(time.time() * 1000)
        self.call(
            lambda _client: self._put(keys=[key, index, f"{index}:writes"], args=[value, ttl_ms, now_ms, entries])
        )


class SharedGeneration:
    """The index generation every replica's keys start with: one Redis counter, advanced by the replica that sees a
    write. ``current()`` is None while Redis is down (then nothing is cached or served from the cache)."""

    def __init__(self, shared: SharedRedis) -> None:
        self.shared = shared
        self.key = f"{shared.namespace}:generation"

    def current(self) -> int | None:
        value = self.shared.call(lambda client: client.get(self.key) or b"0")  # never advanced yet: 0
        return None if value is None else int(cast(bytes, value))

    def advance(self) -> None:
        self.shared.call(lambda client: client.incr(self.key))


class SharedResultCache(LookupCounts, Generic[V]):
    """A bounded, expiring cache in Redis with :class:`~rag_pipeline.serving.result_cache.ResultCache`'s surface
    (``get``, ``put``, ``enabled``, ``hits``, ``misses``): ``name`` keeps the search and document caches apart,
    ``codec`` turns a value into JSON and back. ``hits``/``misses`` count this replica's lookups; a lookup
    while Redis is down counts as a miss."""

    def __init__(self, shared: SharedRedis, name: str, entries: int, seconds: float, codec: TypeAdapter[V]) -> None:
        super().__init__()
        self.shared = shared
        self.enabled = entries > 0 and seconds > 0
        self.entries = max(1, entries)
        self.ttl_ms = max(1, int(seconds * 1000))
        self.codec = codec
        self.prefix = f"{shared.namespace}:{name}"
        self.index = f"{shared.namespace}:index:{name}"  # beside the entries' prefix, never under it
        self.name = name
        self._unstorable_logged = False

    def redis_key(self, key: Hashable) -> str:
        """The entry's Redis key: the key's text hashed (its parts are ints, texts, None and tuples of them, whose
        ``repr`` is the same in every process)."""
        return f"{self.prefix}:{hashlib.sha256(repr(key).encode()).hexdigest()}"

    def get(self, key: Hashable) -> V | None:
        if not self.enabled:
            return None
        raw = self.shared.call(lambda client: client.get(self.redis_key(key)))
        value: V | None = None
        if raw is not None:
            try:
                value = self.codec.validate_json(cast(bytes, raw))
            except ValidationError:  # written by another version of the service: a miss, overwritten on put
                value = None
        return self.counted(value)

    def put(self, key: Hashable, value: V) -> None:
        if not self.enabled:
            return
        try:
            encoded = self.codec.dump_json(value)
        except (PydanticSerializationError, ValueError, TypeError) as exc:  # a value JSON cannot hold: not kept
            if not self._unstorable_logged:
                self._unstorable_logged = True
                log.warning("a %s result could not be stored in the shared cache (%s)", self.name, type(exc).__name__)
            return
        self.shared.put(self.redis_key(key), self.index, encoded, self.ttl_ms, self.entries)

    def clear(self) -> None:
        def drop(client: redis.Redis) -> Any:
            keys = client.zrange(self.index, 0, -1)
            return client.delete(self.index, *keys)

        self.shared.call(drop)

    def __len__(self) -> int:
        """Entries this cache holds in Redis (some may have expired since they were written); 0 while it is down."""
        return int(cast(int, self.shared.call(lambda client: client.zcard(self.index))) or 0)


def search_codec() -> TypeAdapter[Any]:
    """A cached search (:class:`~rag_pipeline.serving.search.ServedSearch`) to JSON and back."""
    from rag_pipeline.index.store import Fusion
    from rag_pipeline.retrieval.prf import Expansion
    from rag_pipeline.serving.search import ServedSearch

    adapter: TypeAdapter[Any] = TypeAdapter(ServedSearch)
    # The response names these types for type checkers only (results.py): resolved here.
    adapter.rebuild(force=True, _types_namespace={"Fusion": Fusion, "Expansion": Expansion})
    return adapter


def document_codec() -> TypeAdapter[Any]:
    """A cached document's parent points (:class:`~rag_pipeline.index.store.Hit`: text, fields and ACL) to JSON and
    back."""
    from rag_pipeline.index.store import Hit

    return TypeAdapter(list[Hit])


def shared_redis(url: str) -> SharedRedis | None:
    """The shared caches' Redis at ``url`` (RAG_CACHE_REDIS_URL); None, logged, when ``url`` is no Redis URL (the
    Secret template's placeholder left in): the caches then stay per process and the service still starts."""
    try:
        return SharedRedis(url)
    except ValueError:
        log.error("RAG_CACHE_REDIS_URL is not a redis://, rediss:// or unix:// URL: each process keeps its own cache")
        return None
