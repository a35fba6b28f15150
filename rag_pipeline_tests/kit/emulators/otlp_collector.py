"""An OpenTelemetry collector stand-in: OTLP over HTTP (``POST /v1/traces``, protobuf) on 127.0.0.1, decoding each
export with the official ``opentelemetry-proto`` messages and keeping the spans it received, for the tests of the
search service's traces."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from rag_pipeline_tests.kit.emulators.http import LocalHttpService, send


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as the collector received it: ids as hex, times in ns, attributes as plain values."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    start_ns: int
    end_ns: int
    service: str
    attributes: dict[str, object] = field(default_factory=dict)


def _value(any_value: object) -> object:
    kind = any_value.WhichOneof("value")  # type: ignore[attr-defined]
    return getattr(any_value, kind) if kind else None


class OtlpCollector(LocalHttpService):
    """Accepts OTLP/HTTP protobuf trace exports; ``spans`` lists what arrived, in order."""

    thread_name = "otlp-collector"
    http_methods = ("POST",)

    def __init__(self) -> None:
        super().__init__()
        self.spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()

    @property
    def traces_endpoint(self) -> str:
        """What OTEL_EXPORTER_OTLP_TRACES_ENDPOINT should be."""
        return f"{self.origin}/v1/traces"

    def _serve(self, request: BaseHTTPRequestHandler) -> None:
        if request.path.split("?", 1)[0] != "/v1/traces":
            send(request, 404, b"not found", "text/plain")
            return
        body = request.rfile.read(int(request.headers.get("Content-Length", "0")))
        export = ExportTraceServiceRequest()
        export.ParseFromString(body)
        received = []
        for resource_spans in export.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(
                        ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                            service=str(resource.get("service.name", "")),
                            attributes={a.key: _value(a.value) for a in span.attributes},
                        )
                    )
        with self._lock:
            self.spans.extend(received)
        send(request, 200, ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")

    def of_trace(self, trace_id: str) -> list[ReceivedSpan]:
        with self._lock:
            return [s for s in self.spans if s.trace_id == trace_id]
