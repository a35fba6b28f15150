"""The result and document caches shared by replicas through Redis (issue 67 item 6, ``RAG_CACHE_REDIS_URL``):
two apps (replicas A and B) over one index (one in-memory Qdrant, as two replicas behind one Qdrant server) and
one real ``redis-server``. A search cached by A is served by B; a write A sees invalidates B's view before B
has read the write itself; a reader with less access never gets another's entry; the size bound and expiry hold;
and with Redis killed mid-test every search still answers, the outage logged once."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from pydantic import TypeAdapter

from rag_pipeline.http.app import create_app
from rag_pipeline.index.client_store import ClientVectorStore
from rag_pipeline.index.index_info import claim_dense_model, record_written
from rag_pipeline.index.opening import StoreLocation
from rag_pipeline.retrieval.entry import SearchModels
from rag_pipeline.retrieval.retriever import RetrieverConfig
from rag_pipeline.serving import service as service_module
from rag_pipeline.serving.service import SearchService
from rag_pipeline.serving.shared_cache import SharedRedis, SharedResultCache, shared_redis
from rag_pipeline.settings import ServeSettings, Settings
from rag_pipeline.sources.document import Acl, Document
from rag_pipeline.stages import documents_frame, index_documents_directly
from rag_pipeline.text.chunking import Chunker
from rag_pipeline.vectors.sparse import Bm25Encoder
from rag_pipeline_tests.kit.celery_cluster import RedisServer, redis_server, redis_server_binary
from rag_pipeline_tests.kit.slack_index import UNLOADABLE_MODEL, HashEncoder
from rag_pipeline_tests.unit.http.conftest import DOCUMENTS, HR, HR_ONLY, PUBLIC, _document, reader

SEARCH = {"query": "postgres upgrade", "mode": "bm25", "top_k": 10}
NEW_DOCUMENT = "jira:site.example:OPS-7"
BASE = "http://127.0.0.1"


@pytest.fixture(scope="module")
def redis_running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if redis_server_binary() is None:
        if os.environ.get("RAG_REQUIRE_REDIS"):
            pytest.fail("RAG_REQUIRE_REDIS is set but redis-server is not installed")
        pytest.skip("redis-server is not installed (Debian package redis-server; `make test` installs it)")
    with redis_server(tmp_path_factory.mktemp("shared_cache") / "redis") as server:
        yield server


class _ServerView:
    """A replica's connection to the one index: the shared in-memory store, which a replica's close leaves open."""

    def __init__(self, store: ClientVectorStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def close(self) -> None:
        pass


def _write(store: ClientVectorStore, documents: list[Document], when: datetime) -> None:
    index_documents_directly(store, documents_frame(documents), Chunker(), HashEncoder(), Bm25Encoder())
    record_written(store, when)  # seconds are the record's precision: each write its own time


@dataclass
class Replicas:
    a: TestClient
    b: TestClient
    service_a: SearchService
    service_b: SearchService
    store: ClientVectorStore
    redis: RedisServer


@contextmanager
def _replicas(redis_running: RedisServer, monkeypatch: pytest.MonkeyPatch, db: int) -> Iterator[Replicas]:
    redis_running.client().flushall()
    store = ClientVectorStore.connect()  # one Qdrant (local, in memory) behind both replicas
    store.create_collections(HashEncoder.dimension)
    claim_dense_model(store, UNLOADABLE_MODEL)
    _write(store, DOCUMENTS, datetime(2024, 3, 1, tzinfo=UTC))
    monkeypatch.setattr(service_module, "open_vector_store", lambda location, **_: _ServerView(store))
    location = StoreLocation(path=Path("unused"), url="http://qdrant.invalid:6333")

    def replica() -> SearchService:
        models = SearchModels(UNLOADABLE_MODEL, Bm25Encoder())
        return SearchService(location, models, RetrieverConfig(), wait_seconds=5, cache_entries=100,
                             shared_cache=SharedRedis(redis_running.url(db), retry_seconds=0.5))  # fmt: skip

    service_a, service_b = replica(), replica()
    settings = ServeSettings(trusted_proxy=True)
    with ExitStack() as stack:
        a = stack.enter_context(TestClient(create_app(service_a, settings), base_url=BASE))
        b = stack.enter_context(TestClient(create_app(service_b, settings), base_url=BASE))
        yield Replicas(a, b, service_a, service_b, store, redis_running)
    store.close()


@pytest.fixture
def replicas(redis_running: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Replicas]:
    with _replicas(redis_running, monkeypatch, 0) as running:
        yield running


def _search(client: TestClient, *who: str) -> dict[str, Any]:
    response = client.post("/v1/search", json=SEARCH, headers=reader(*who))
    assert response.status_code == 200, response.text
    return dict(response.json())


def _ids(body: dict[str, Any]) -> list[str]:
    return [r["document_id"] for r in body["results"]]


def test_a_search_cached_by_one_replica_is_served_by_the_other(replicas: Replicas) -> None:
    first = _search(replicas.a, "U1", HR)
    served = _search(replicas.b, "U1", HR)
    assert first["cached"] is False and served["cached"] is True
    assert _ids(served) == _ids(first) and HR_ONLY in _ids(served)
    assert served["results"] == first["results"]  # the whole results, through JSON and back
    assert replicas.service_b.search_cache.hits == 1 and replicas.service_a.search_cache.hits == 0
    # The document cache is shared the same way, and checks the reader on every hit.
    assert replicas.a.get(f"/v1/documents/{HR_ONLY}", headers=reader("U1", HR)).status_code == 200
    assert replicas.b.get(f"/v1/documents/{HR_ONLY}", headers=reader("U1", HR)).status_code == 200
    assert replicas.service_b.document_cache.hits == 1
    assert replicas.b.get(f"/v1/documents/{HR_ONLY}", headers=reader("U2")).status_code == 404


def test_a_reader_with_less_access_never_gets_another_readers_entry(replicas: Replicas) -> None:
    assert HR_ONLY in _ids(_search(replicas.a, "U1", HR))
    less = _search(replicas.b, "U2")  # same query, no HR group: another key
    assert less["cached"] is False and HR_ONLY not in _ids(less) and PUBLIC in _ids(less)
    again = _search(replicas.a, "U2")  # U2's own entry, now shared: still without the HR document
    assert again["cached"] is True and HR_ONLY not in _ids(again)
    keys = [k.decode() for k in replicas.redis.client().keys("rag:cache:search:*")]
    assert len(keys) == 2 and not any("U1" in k or HR in k.split(":")[-1] for k in keys)  # hashed: no reader named


def test_a_write_seen_by_one_replica_invalidates_the_others_view(
    replicas: Replicas, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _search(replicas.a, "U1", HR)["cached"] is False
    assert _search(replicas.b, "U1", HR)["cached"] is True
    new = _document(NEW_DOCUMENT, "OPS", "postgres upgrade checklist for the weekend", Acl(public=True))
    _write(replicas.store, [new], datetime(2024, 3, 2, tzinfo=UTC))
    # A reads the index's last-write time now (B keeps its 30 s: it has not read the write itself).
    with monkeypatch.context() as now:
        now.setattr(service_module, "WRITTEN_REREAD_SECONDS", 0.0)
        seen = _search(replicas.a, "U1", HR)
    assert seen["cached"] is False and NEW_DOCUMENT in _ids(seen)
    after = _search(replicas.b, "U1", HR)
    assert replicas.service_b.index_written() == "2024-03-01T00:00:00+00:00"  # B's own view is still the old one
    assert after["cached"] is True and NEW_DOCUMENT in _ids(after)  # A's new entry, never the one before the write


def test_redis_killed_mid_test_degrades_to_no_cache(
    redis_running: RedisServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with redis_server(tmp_path / "redis") as doomed, ExitStack() as stack:
        running = stack.enter_context(_replicas(doomed, monkeypatch, 0))
        assert _search(running.a, "U1", HR)["cached"] is False
        assert _search(running.b, "U1", HR)["cached"] is True
        doomed.process.kill()
        doomed.process.wait(timeout=20)
        with caplog.at_level(logging.WARNING, logger="rag_pipeline.serving.shared_cache"):
            answers = [_search(client, "U1", HR) for client in (running.a, running.b, running.a, running.b)]
            time.sleep(0.6)  # past retry_seconds: Redis is asked again, and is still down
            answers.append(_search(running.b, "U1", HR))
            documents = running.b.get(f"/v1/documents/{HR_ONLY}", headers=reader("U1", HR))
        assert all(a["cached"] is False and HR_ONLY in _ids(a) for a in answers)
        assert documents.status_code == 200
        outages = [r for r in caplog.records if "did not answer" in r.getMessage()]
        assert len(outages) == 2  # once per replica, however many searches went on without Redis
        assert "redis://" not in caplog.text  # the URL (a password) never logged


def test_each_cache_is_bounded_and_its_entries_expire(redis_running: RedisServer) -> None:
    redis_running.client().flushall()
    shared = SharedRedis(redis_running.url(1))
    bounded: SharedResultCache[list[int]] = SharedResultCache(shared, "t", 3, 60, TypeAdapter(list[int]))
    for n in range(5):
        bounded.put(("g", n), [n])
    # 3 entries, their key index and its write counter.
    assert len(bounded) == 3 and redis.Redis.from_url(redis_running.url(1)).dbsize() == 5
    assert bounded.get(("g", 0)) is None and bounded.get(("g", 1)) is None and bounded.get(("g", 4)) == [4]
    brief: SharedResultCache[list[int]] = SharedResultCache(shared, "u", 10, 0.2, TypeAdapter(list[int]))
    brief.put(("g", 1), [1])
    assert brief.get(("g", 1)) == [1]
    time.sleep(0.4)
    assert brief.get(("g", 1)) is None
    off: SharedResultCache[list[int]] = SharedResultCache(shared, "v", 0, 60, TypeAdapter(list[int]))
    off.put(("g", 1), [1])
    assert off.get(("g", 1)) is None and len(off) == 0


def test_a_value_that_is_no_redis_url_leaves_the_caches_per_process(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="rag_pipeline.serving.shared_cache"):
        assert shared_redis("change-me") is None  # the Secret template's placeholder: the service still starts
    assert "RAG_CACHE_REDIS_URL" in caplog.text and "change-me" not in caplog.text
    assert isinstance(shared_redis("redis://:secret@127.0.0.1:1/0"), SharedRedis)  # connects on first use only


def test_the_setting_is_read_as_a_secret() -> None:
    assert Settings.from_env({}).serve.cache_redis_url is None  # unset: each process its own cache
    url = "redis://:hunter2@redis.internal:6379/2"
    read = Settings.from_env({"RAG_CACHE_REDIS_URL": url}).serve.cache_redis_url
    assert read is not None and read.get_secret_value() == url
    assert "hunter2" not in repr(Settings.from_env({"RAG_CACHE_REDIS_URL": url}).serve)


def test_a_value_json_cannot_hold_is_not_kept_and_never_fails_the_caller(redis_running: RedisServer) -> None:
    cache: SharedResultCache[list[Any]] = SharedResultCache(
        SharedRedis(redis_running.url(2)), "w", 10, 60, TypeAdapter(list[Any])
    )
    cache.put(("g", 1), [object()])  # not JSON: skipped, logged once
    assert cache.get(("g", 1)) is None and len(cache) == 0
