"""``rag_pipeline.http.metrics``: one registry per service (two services never share counters), searches served
by a lesser mode counted by both modes, answers by outcome and route with their tokens, the index's age and
freshness read from the service when scraped, and the result caches' hits and misses."""

from __future__ import annotations

import math
import time

from prometheus_client.parser import text_string_to_metric_families

from rag_pipeline.http.metrics import ServiceMetrics


def _samples(metrics: ServiceMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for s in family.samples
    }


def _metrics(**kw: object) -> ServiceMetrics:
    return ServiceMetrics(lambda: None, lambda: 0, lambda: 0.0, **kw)  # type: ignore[arg-type]


def test_two_services_never_share_a_counter() -> None:
    first, second = _metrics(), _metrics()
    first.requests.labels(route="/v1/search", status="200").inc(3)
    key = ("rag_requests_total", (("route", "/v1/search"), ("status", "200")))
    assert _samples(first)[key] == 3 and key not in _samples(second)


def test_a_search_served_by_a_lesser_mode_is_counted_by_both_modes() -> None:
    metrics = _metrics()
    metrics.observe_search("bm25", {"embed": 0.0, "retrieve": 0.004}, 0.01, 7, requested="hybrid")
    metrics.observe_search("hybrid", {"retrieve": 0.002}, 0.0, 3, requested="hybrid")
    samples = _samples(metrics)
    assert samples[("rag_degraded_searches_total", (("requested", "hybrid"), ("served", "bm25")))] == 1
    assert not any(name == "rag_degraded_searches_total" and ("served", "hybrid") in labels
                   for name, labels in samples)  # fmt: skip
    assert samples[("rag_results_count", ())] == 2 and samples[("rag_results_sum", ())] == 10
    assert samples[("rag_stage_seconds_count", (("mode", "bm25"), ("stage", "retrieve")))] == 1


def test_answers_are_counted_by_outcome_and_route_with_their_tokens() -> None:
    metrics = _metrics()
    metrics.observe_answer("/v1/chat/completions", "answered", 120, 30, 0.002, 1, 0.5)
    metrics.observe_answer("/v1/search", "failed", 0, 0, None, 0, 0.1)
    samples = _samples(metrics)
    assert samples[("rag_answers_total", (("outcome", "answered"), ("route", "/v1/chat/completions")))] == 1
    assert samples[("rag_answers_total", (("outcome", "failed"), ("route", "/v1/search")))] == 1
    assert samples[("rag_answer_tokens_total", (("kind", "prompt"),))] == 120
    assert samples[("rag_answer_tokens_total", (("kind", "completion"),))] == 30
    assert math.isclose(samples[("rag_answer_cost_usd_total", ())], 0.002)
    assert samples[("rag_answer_invalid_citations_total", ())] == 1


def test_the_index_gauges_read_the_service_when_scraped() -> None:
    opened: list[float | None] = [None]
    written: list[str | None] = [None]
    hand_overs = [0]
    metrics = ServiceMetrics(
        lambda: opened[0], lambda: hand_overs[0], lambda: 1.5, lambda: written[0], caches={"search": lambda: (4, 6)}
    )
    before = _samples(metrics)
    assert math.isnan(before[("rag_index_age_seconds", ())])  # never opened
    assert math.isnan(before[("rag_index_written_timestamp_seconds", ())])
    opened[0], written[0], hand_overs[0] = time.time() - 60, "2024-03-01T00:00:00+00:00", 2
    after = _samples(metrics)
    assert 59 <= after[("rag_index_age_seconds", ())] < 120
    assert after[("rag_index_written_timestamp_seconds", ())] == 1709251200.0
    assert after[("rag_index_hand_overs_total", ())] == 2 and after[("rag_index_open_seconds", ())] == 1.5
    assert after[("rag_cache_requests_total", (("cache", "search"), ("outcome", "hit")))] == 4
    assert after[("rag_cache_requests_total", (("cache", "search"), ("outcome", "miss")))] == 6
