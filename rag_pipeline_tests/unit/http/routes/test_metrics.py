"""``rag_pipeline.http.routes.metrics``: ``GET /metrics`` exposes the service's own counters in Prometheus' text
format, and they move with the searches served."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from rag_pipeline.http.metrics import CONTENT_TYPE
from rag_pipeline.http.routes import metrics
from rag_pipeline_tests.unit.http.conftest import HR, reader, served


def _samples(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"] == CONTENT_TYPE
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def test_the_route_is_get_metrics() -> None:
    assert [(r.path, r.methods) for r in metrics.router.routes] == [("/metrics", {"GET"})]  # type: ignore[attr-defined]


def test_searches_move_the_result_and_cache_counters(index_folder: Path) -> None:
    with served(index_folder, service_options={"cache_entries": 10}) as client:
        before = _samples(client)
        body = {"query": "postgres upgrade", "mode": "bm25"}
        found = len(client.post("/v1/search", json=body, headers=reader("U1", HR)).json()["results"])
        client.post("/v1/search", json=body, headers=reader("U1", HR))  # the same reader and query: the cache's
        after = _samples(client)
    assert found > 0
    assert after[("rag_results_count", ())] - before.get(("rag_results_count", ()), 0) == 2
    assert after[("rag_results_sum", ())] - before.get(("rag_results_sum", ()), 0) == 2 * found
    hit = ("rag_cache_requests_total", (("cache", "search"), ("outcome", "hit")))
    miss = ("rag_cache_requests_total", (("cache", "search"), ("outcome", "miss")))
    assert after[hit] - before[hit] == 1 and after[miss] - before[miss] == 1
