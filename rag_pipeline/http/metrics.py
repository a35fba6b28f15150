"""The search service's Prometheus metrics (``GET /metrics``), one registry per service so tests and two
services in one process never share counters."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import partial

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
# Query stages run from under a millisecond (a cached BM25 query) to seconds (a reranked query while a write
# holds the index): buckets from 1 ms to 30 s.
_STAGE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# A pushed change is searchable after a targeted sync: seconds (a small channel, an idle machine) to minutes (a
# burst behind a running job, a loaded machine); past an hour the scheduled sync would have caught it anyway.
_FRESHNESS_BUCKETS = (1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


class ServiceMetrics:
    """Requests by route and status, latency per stage, index age and freshness, waits for the index and hand-overs."""

    def __init__(
        self,
        index_opened_at: Callable[[], float | None],
        hand_overs: Callable[[], int],
        open_seconds: Callable[[], float],
        index_written: Callable[[], str | None] = lambda: None,
        caches: dict[str, Callable[[], tuple[int, int]]] | None = None,
    ) -> None:
        self.registry = CollectorRegistry()
        if caches:
            self.registry.register(_CacheRequests(caches))
        # Every metric lives in this service's registry; stage-like timings share the stage buckets.
        counter = partial(Counter, registry=self.registry)
        gauge = partial(Gauge, registry=self.registry)
        timing = partial(Histogram, registry=self.registry, buckets=_STAGE_BUCKETS)
        self.requests = counter("rag_requests", "Requests answered, by route and HTTP status", ["route", "status"])
        self.stage_seconds = timing(
            "rag_stage_seconds",
            "Seconds per query stage (embed, retrieve, rerank, total) by search mode",
            ["stage", "mode"],
        )
        self.store_wait_seconds = timing(
            "rag_store_wait_seconds",
            "Seconds a query waited before it ran: for a free slot (one per core), or for the index a writer held",
        )
        self.results = Histogram(
            "rag_results",
            "Documents returned per search",
            buckets=(0, 1, 3, 5, 10, 20, 50, 100),
            registry=self.registry,
        )
        index_age = gauge(
            "rag_index_age_seconds", "Seconds since the service last opened the index (it reopens after every write)"
        )
        index_age.set_function(lambda: _age(index_opened_at()))
        # Index freshness: when the pipeline last wrote documents (the index records it with every write).
        written = gauge(
            "rag_index_written_timestamp_seconds",
            "Unix time of the pipeline's last write to the index (read again at most every 30 s)",
        )
        written.set_function(lambda: _epoch(index_written()))
        self.registry.register(
            _Counted("rag_index_hand_overs", "Times the service handed the index to a writer", hand_overs)
        )
        opening = gauge(
            "rag_index_open_seconds",
            "Seconds the last (re)opening of the index took (shards loaded, retriever prepared)",
        )
        opening.set_function(open_seconds)
        self.answers = counter(
            "rag_answers",
            "Answers written, by outcome (answered, no_documents, failed) and route",
            ["outcome", "route"],
        )
        self.answer_tokens = counter(
            "rag_answer_tokens", "LLM tokens answers used, by kind (prompt, completion)", ["kind"]
        )
        self.answer_cost = counter("rag_answer_cost_usd", "What answers cost in USD (models with a known price)")
        self.invalid_citations = counter(
            "rag_answer_invalid_citations", "Citations to a number the context did not hold (dropped from the sources)"
        )
        self.rewrites = counter("rag_rewrites", "Query rewrites, by outcome (planned, cached, fallback)", ["outcome"])
        self.rewrite_seconds = timing(
            "rag_rewrite_seconds",
            "Seconds to plan a query rewrite (the LLM call, or the plan cache), by outcome (planned, cached, fallback)",
            ["outcome"],
        )
        self.degraded = counter(
            "rag_degraded_searches",
            "Searches served by a lesser mode than asked (the dense model or the reranker failed), by both modes",
            ["requested", "served"],
        )
        self.answer_seconds = timing("rag_answer_seconds", "Seconds to write an answer (LLM calls only)")
        self.event_freshness_seconds = Histogram(
            "rag_event_freshness_seconds",
            "Seconds from a pushed change's arrival (Slack event, Jira/Confluence webhook) to the end of the "
            "targeted sync that wrote it to the index, by source",
            ["source"],
            buckets=_FRESHNESS_BUCKETS,
            registry=self.registry,
        )

    def observe_event_freshness(self, source: str, seconds: float) -> None:
        """One pushed change of ``source`` searchable ``seconds`` after it arrived."""
        self.event_freshness_seconds.labels(source=source).observe(seconds)

    def observe_rewrite(self, outcome: str, seconds: float | None = None) -> None:
        self.rewrites.labels(outcome=outcome).inc()
        if seconds is not None:
            self.rewrite_seconds.labels(outcome=outcome).observe(seconds)

    def observe_answer(
        self, route: str, outcome: str, prompt_tokens: int, completion_tokens: int, cost: float | None,
        invalid_citations: int, seconds: float,
    ) -> None:  # fmt: skip
        self.answers.labels(outcome=outcome, route=route).inc()
        self.answer_tokens.labels(kind="prompt").inc(prompt_tokens)
        self.answer_tokens.labels(kind="completion").inc(completion_tokens)
        if cost:
            self.answer_cost.inc(cost)
        self.invalid_citations.inc(invalid_citations)
        self.answer_seconds.observe(seconds)

    def observe_search(
        self, mode: str, seconds: dict[str, float], waited: float, results: int, requested: str | None = None
    ) -> None:
        if requested is not None and requested != mode:
            self.degraded.labels(requested=requested, served=mode).inc()
        for stage, value in seconds.items():
            self.stage_seconds.labels(stage=stage, mode=mode).observe(value)
        self.store_wait_seconds.observe(waited)
        self.results.observe(results)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class _CacheRequests(Collector):
    """``rag_cache_requests_total{cache, outcome}``: lookups of the service's result caches, hits and misses."""

    def __init__(self, caches: dict[str, Callable[[], tuple[int, int]]]) -> None:
        self._caches = caches

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "rag_cache_requests",
            "Result cache lookups, by cache (search, document) and outcome",
            labels=["cache", "outcome"],
        )
        for name, counts in self._caches.items():
            hits, misses = counts()
            family.add_metric([name, "hit"], float(hits))
            family.add_metric([name, "miss"], float(misses))
        yield family


class _Counted(Collector):
    """A counter whose value another object keeps (the shared index counts its own hand-overs)."""

    def __init__(self, name: str, documentation: str, value: Callable[[], int]) -> None:
        self._name, self._documentation, self._value = name, documentation, value

    def collect(self) -> Iterator[CounterMetricFamily]:
        yield CounterMetricFamily(self._name, self._documentation, value=float(self._value()))


def _epoch(instant: str | None) -> float:
    if not instant:
        return float("nan")
    try:
        return datetime.fromisoformat(instant).timestamp()
    except ValueError:
        return float("nan")


def _age(opened_at: float | None) -> float:
    return float("nan") if opened_at is None else max(0.0, time.time() - opened_at)
