"""Traces of the search service: W3C ``traceparent`` accepted on every request and, when an OTLP endpoint is
configured (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, or ``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/traces``), one
OpenTelemetry span per request (the official FastAPI instrumentation, which continues the caller's trace) with a
child span per stage: ``rewrite``, ``search`` (and under it ``embed``, ``retrieve``, ``rerank``) and ``generate``.

The stage spans under ``search`` are written from the timings the retriever already measures, when the search
returns, rather than from inside the retriever: the domain code stays free of tracing, and the spans are the same
durations ``/metrics`` and ``timing_ms`` report. No span carries query text, a document's text or a token: only
modes, counts and ids. Without an endpoint every span is a no-op, and the caller's trace id still reaches the log
lines of its request (``[request-id trace=...]``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

SERVICE_NAME = "rag-pipeline"
# Spans go out in batches: at most this long after they end (a test's collector sees them within it).
EXPORT_DELAY_MILLIS = 500
# Stages the retriever times, in the order they run within one search.
SEARCH_STAGES = ("embed", "retrieve", "rerank")
CURRENT_TRACE: ContextVar[str] = ContextVar("rag_trace_id", default="-")
_PROPAGATOR = TraceContextTextMapPropagator()


def trace_id_from(headers: Mapping[str, str]) -> str | None:
    """The trace id of a valid W3C ``traceparent`` header (32 hex digits), None without one."""
    context = _PROPAGATOR.extract(carrier={k.lower(): v for k, v in headers.items()})
    span_context = trace.get_current_span(context).get_span_context()
    return f"{span_context.trace_id:032x}" if span_context.is_valid else None


class TraceIdFilter(logging.Filter):
    """Gives every record ``trace_id``: the caller's W3C trace id while its request is answered, ``-`` otherwise."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.trace_id = CURRENT_TRACE.get()
        return True


class Tracing:
    """The service's tracer: OTLP over HTTP to ``endpoint`` when one is given, no-op spans otherwise."""

    def __init__(self, endpoint: str | None, service_name: str = SERVICE_NAME) -> None:
        self.endpoint = endpoint
        self._provider: Any = None
        if endpoint:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            self._provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
            exporter = OTLPSpanExporter(endpoint=endpoint, timeout=10)
            self._provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=EXPORT_DELAY_MILLIS))
            self.tracer: trace.Tracer = self._provider.get_tracer("rag_pipeline.serving")
        else:
            self.tracer = trace.NoOpTracer()

    @property
    def enabled(self) -> bool:
        return self._provider is not None

    def instrument(self, app: Any) -> None:
        """Server spans for every request but the probes, continuing an incoming ``traceparent``."""
        if self._provider is not None:
            from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

            # One span per request: the ASGI receive/send events would add two per body chunk and tell nothing.
            FastAPIInstrumentor.instrument_app(
                app, tracer_provider=self._provider, excluded_urls="health,metrics", exclude_spans=["receive", "send"]
            )

    @contextmanager
    def stage(self, name: str, **attributes: str | int | float | bool) -> Iterator[trace.Span]:
        """A span for one stage around the block, a child of the request's span."""
        with self.tracer.start_as_current_span(name, attributes=attributes) as span:
            yield span

    def search_stages(self, timing_ms: Mapping[str, float], started_ns: int) -> None:
        """The retriever's stages as child spans of the current span, laid end to end from ``started_ns`` after the
        wait for a query slot; a stage that did not run (no rerank) has no span."""
        if self._provider is None:
            return
        at = started_ns + int(timing_ms.get("wait", 0.0) * 1e6)
        for stage in SEARCH_STAGES:
            milliseconds = timing_ms.get(stage, 0.0)
            if milliseconds <= 0:
                continue
            span = self.tracer.start_span(stage, start_time=at)
            at += int(milliseconds * 1e6)
            span.end(end_time=at)

    def ended_stage(self, name: str, seconds: float, **attributes: str | int | float | bool) -> None:
        """A stage that just ended and took ``seconds`` (timed by the code that ran it), as a child span."""
        if self._provider is None or seconds <= 0:
            return
        end = time.time_ns()
        span = self.tracer.start_span(name, start_time=end - int(seconds * 1e9), attributes=attributes)
        span.end(end_time=end)

    def shutdown(self) -> None:
        """Send what is buffered (the service is stopping)."""
        if self._provider is not None:
            self._provider.shutdown()
