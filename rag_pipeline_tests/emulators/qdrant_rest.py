"""A recording stand-in for a Qdrant server's REST API, enough for collection setup: it answers the
calls qdrant-client makes to create collections and payload indexes and records them, so tests can
check what server mode sends (no Qdrant server binary is available offline)."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from rag_pipeline_tests.emulators.http import LocalHttpService, send_json


@dataclass(frozen=True)
class QdrantCall:
    """One request: method, path, JSON body and the api-key header."""

    method: str
    path: str
    body: Any
    api_key: str | None


class QdrantRestRecorder(LocalHttpService):
    """Serves ``/``, collection exists/create/get and payload-index creation over HTTP on 127.0.0.1."""

    thread_name = "qdrant-recorder"
    http_methods = ("GET", "PUT", "POST")

    def __init__(self, version: str = "1.15.0") -> None:
        super().__init__()
        self.version = version
        self.calls: list[QdrantCall] = []
        self.collections: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.origin

    def _answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if path == "/":
            return 200, {"title": "qdrant - vector search engine", "version": self.version}
        if match := re.fullmatch(r"/collections/([^/]+)/exists", path):
            return 200, {"result": {"exists": match.group(1) in self.collections}, "status": "ok", "time": 0}
        if match := re.fullmatch(r"/collections/([^/]+)/index", path):
            self.collections[match.group(1)].setdefault("indexes", {})[body["field_name"]] = body["field_schema"]
            return 200, {"result": {"operation_id": 1, "status": "completed"}, "status": "ok", "time": 0}
        if (match := re.fullmatch(r"/collections/([^/]+)", path)) and method == "PUT":
            self.collections[match.group(1)] = {"config": body}
            return 200, {"result": True, "status": "ok", "time": 0}
        return 404, {"status": {"error": f"not emulated: {method} {path}"}, "time": 0}

    def _serve(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        raw = request.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        path = request.path.split("?", 1)[0]
        with self._lock:
            self.calls.append(QdrantCall(request.command, path, body, request.headers.get("api-key")))
            status, payload = self._answer(request.command, path, body)
        send_json(request, status, payload)
