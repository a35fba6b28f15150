"""Traces (issue 51, part 2): a real ``rag-pipeline serve`` process with ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
pointing at an OTLP collector stand-in (protobuf over HTTP, decoded with ``opentelemetry-proto``) continues the
caller's W3C ``traceparent`` and exports one span per stage (rewrite, search with embed/retrieve/rerank, generate);
no span carries the query. Without an endpoint, the caller's trace id still reaches the request's log lines."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rag_pipeline_tests.kit import serving_fixtures as S
from rag_pipeline_tests.kit.emulators.openai_api import API_KEY, OpenAIFake
from rag_pipeline_tests.kit.emulators.otlp_collector import OtlpCollector, ReceivedSpan

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_SPAN}-01"
QUERY = "postgres upgrade friday"


@pytest.fixture(scope="module")
def collector() -> Iterator[OtlpCollector]:
    with OtlpCollector() as running:
        yield running


@pytest.fixture(scope="module")
def traced(
    serving_index: Path, tmp_path_factory: pytest.TempPathFactory, collector: OtlpCollector, fake: OpenAIFake
) -> Iterator[S.ServiceProcess]:
    copy = tmp_path_factory.mktemp("traces") / "data"
    S.copy_index(serving_index, copy)
    env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.traces_endpoint, "OTEL_SERVICE_NAME": "rag-search-test",
           "RAG_ANSWER_MODEL": "gpt-4o-mini", "RAG_REWRITE_MODEL": "gpt-4o-mini", "OPENAI_API_KEY": API_KEY,
           "OPENAI_BASE_URL": fake.base_url, "RAG_SERVE_CACHE_ENTRIES": "0"}  # fmt: skip
    with S.running_service(copy, copy.parent / "serve.log", **env) as service:
        yield service


def _spans(collector: OtlpCollector, names: set[str], timeout: float = 15.0) -> list[ReceivedSpan]:
    """The caller's trace's spans, once every name in ``names`` has arrived (spans go out in batches)."""
    deadline = time.monotonic() + timeout
    while True:
        spans = collector.of_trace(TRACE_ID)
        if names <= {s.name for s in spans} or time.monotonic() > deadline:
            return spans
        time.sleep(0.2)


def test_a_search_with_rewrite_and_answer_is_one_trace_with_a_span_per_stage(
    traced: S.ServiceProcess, collector: OtlpCollector, fake: OpenAIFake
) -> None:
    plan = {"refined_query": "postgres", "sub_queries": [], "expansions": [], "filters": {}, "confidence": 0.9}
    fake.respond(lambda body: json.dumps(plan) if "refined_query" in str(body) else None)
    body = {"query": QUERY, "mode": "reranked", "rewrite": True, "answer": True, "top_k": 3}
    response = httpx.post(f"{traced.url}/v1/search", json=body, timeout=60,
                          headers={"X-User-Id": "U1", "traceparent": TRACEPARENT})  # fmt: skip
    assert response.status_code == 200, response.text
    stages = {"rewrite", "search", "embed", "retrieve", "rerank", "generate"}
    spans = _spans(collector, stages)
    by_name = {s.name: s for s in spans}
    assert stages <= set(by_name), sorted(by_name)
    # The request's server span continues the caller's trace: its parent is the caller's span.
    roots = [s for s in spans if s.parent_span_id == PARENT_SPAN]
    assert len(roots) == 1 and roots[0].name.startswith("POST /v1/search")
    root = roots[0]
    assert all(s.service == "rag-search-test" for s in spans)
    for stage in ("rewrite", "search", "generate"):
        assert by_name[stage].parent_span_id == root.span_id, stage
    search = by_name["search"]
    for stage in ("embed", "retrieve", "rerank"):
        child = by_name[stage]
        assert child.parent_span_id == search.span_id
        assert search.start_ns <= child.start_ns <= child.end_ns <= search.end_ns + 1_000_000, stage
    assert by_name["embed"].end_ns <= by_name["retrieve"].start_ns + 1  # laid end to end, in the order they ran
    assert search.attributes["served_mode"] == "reranked" and search.attributes["results"] == 3
    # Nothing a span carries holds the query's words.
    assert not any("postgres" in json.dumps(s.attributes, default=str) for s in spans)


def test_chat_and_mcp_searches_are_traced_too(traced: S.ServiceProcess, collector: OtlpCollector) -> None:
    before = {s.span_id for s in collector.of_trace(TRACE_ID)}
    response = httpx.post(
        f"{traced.url}/v1/chat/completions", timeout=60, headers={"X-User-Id": "U1", "traceparent": TRACEPARENT},
        json={"messages": [{"role": "user", "content": QUERY}]},
    )  # fmt: skip
    assert response.status_code == 200, response.text
    deadline = time.monotonic() + 15
    while True:
        new = [s for s in collector.of_trace(TRACE_ID) if s.span_id not in before]
        if {"search", "generate"} <= {s.name for s in new} or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert {"search", "generate"} <= {s.name for s in new}, sorted(s.name for s in new)


@pytest.mark.slow  # a second service process (~15 s)
def test_without_an_endpoint_the_trace_id_reaches_the_log(serving_index: Path, tmp_path: Path) -> None:
    copy = tmp_path / "data"
    S.copy_index(serving_index, copy)
    log = tmp_path / "serve.log"
    # An answer model nobody answers for: the request's warning line names the request and the caller's trace.
    env = {"RAG_ANSWER_MODEL": "gpt-4o-mini", "OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    with S.running_service(copy, log, **env) as service:
        headers = {"X-User-Id": "U1", "X-Request-Id": "req-42", "traceparent": TRACEPARENT}
        response = httpx.post(
            f"{service.url}/v1/search", json={"query": QUERY, "answer": True}, timeout=60, headers=headers
        )
        assert response.status_code == 200 and response.json()["answer_error"], response.text
    line = next(t for t in log.read_text().splitlines() if "answered without the model" in t)
    assert f"[req-42 trace={TRACE_ID}]" in line and QUERY not in line
