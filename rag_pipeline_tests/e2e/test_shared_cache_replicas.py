"""Two real ``rag-pipeline serve`` replicas sharing their caches through a real ``redis-server``
(``RAG_CACHE_REDIS_URL``, issue 67 item 6), each on its own copy of the small index (as two replicas behind one
Qdrant server): the settings and the composition wire the shared caches, a search one replica answered is served by
the other, a non-member never gets a member's entry, and with Redis stopped both still answer."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rag_pipeline_tests.kit import serving_fixtures as S
from rag_pipeline_tests.kit.celery_cluster import RedisServer, redis_server, redis_server_binary

QUERY = {"query": "salary budget postgres", "mode": "hybrid", "top_k": 5}


@pytest.fixture(scope="module")
def redis_running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if redis_server_binary() is None:
        if os.environ.get("RAG_REQUIRE_REDIS"):
            pytest.fail("RAG_REQUIRE_REDIS is set but redis-server is not installed")
        pytest.skip("redis-server is not installed (Debian package redis-server; `make test` installs it)")
    with redis_server(tmp_path_factory.mktemp("replicas") / "redis") as server:
        yield server


def _search(service: S.ServiceProcess, user: str) -> dict[str, Any]:
    response = httpx.post(f"{service.url}/v1/search", json=QUERY, headers={"X-User-Id": user}, timeout=120)
    assert response.status_code == 200, response.text
    return dict(response.json())


@pytest.mark.slow  # two services loading the dense model
def test_two_served_replicas_share_their_caches_through_redis(
    serving_index: Path, redis_running: RedisServer, tmp_path: Path
) -> None:
    env = {"RAG_SERVE_TRUSTED_PROXY": "1", "RAG_CACHE_REDIS_URL": redis_running.url(3)}
    copies = [S.copy_index(serving_index, tmp_path / name / "data") for name in ("a", "b")]
    with (
        S.running_service(copies[0], tmp_path / "a.log", **env) as a,
        S.running_service(copies[1], tmp_path / "b.log", **env) as b,
    ):
        first = _search(a, "U1")  # a member of #secret
        served = _search(b, "U1")
        assert first["cached"] is False and served["cached"] is True
        assert [r["document_id"] for r in served["results"]] == [r["document_id"] for r in first["results"]]
        assert S.SECRET_THREAD in [r["document_id"] for r in served["results"]]
        stranger = _search(b, "U2")  # not a member: another key, never the member's entry
        assert stranger["cached"] is False and S.SECRET_THREAD not in [r["document_id"] for r in stranger["results"]]
        redis_running.process.terminate()
        redis_running.process.wait(timeout=20)
        down = [_search(replica, "U1") for replica in (a, b, a)]
        assert all(d["cached"] is False and S.SECRET_THREAD in [r["document_id"] for r in d["results"]] for d in down)
    logs = [(tmp_path / name).read_text() for name in ("a.log", "b.log")]
    assert [log.count("the shared cache's Redis did not answer") for log in logs] == [1, 1]  # once per replica
    assert not any("redis://" in log for log in logs)
