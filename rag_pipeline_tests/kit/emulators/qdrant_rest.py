"""A recording stand-in for a Qdrant server's REST API, enough for collection setup: it answers the
calls qdrant-client makes to create and describe collections and to create payload indexes and records
them, so tests can check what server mode sends (no Qdrant server binary is available offline)."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from rag_pipeline_tests.kit.emulators.http import LocalHttpService, send_json


@dataclass(frozen=True)
class QdrantCall:
    """One request: method, path, JSON body and the api-key header."""

    method: str
    path: str
    body: Any
    api_key: str | None


class QdrantRestRecorder(LocalHttpService):
    """Serves ``/``, collection exists/create/info and payload-index creation over HTTP on 127.0.0.1."""

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
        if (match := re.fullmatch(r"/collections/([^/]+)", path)) and method == "GET":
            if match.group(1) not in self.collections:
                return 404, {"status": {"error": f"Collection `{match.group(1)}` doesn't exist!"}, "time": 0}
            return 200, {"result": self._info(self.collections[match.group(1)]), "status": "ok", "time": 0}
        return 404, {"status": {"error": f"not emulated: {method} {path}"}, "time": 0}

    @staticmethod
    def _info(collection: dict[str, Any]) -> dict[str, Any]:
        """The least of a collection's info qdrant-client accepts, with the payload indexes recorded so far."""
        config = collection["config"] or {}
        return {
            "status": "green",
            "optimizer_status": "ok",
            "segments_count": 1,
            "points_count": 0,
            "config": {
                "params": {k: config[k] for k in ("vectors", "sparse_vectors", "shard_number") if k in config},
                "hnsw_config": {"m": 16, "ef_construct": 100, "full_scan_threshold": 10000},
                "optimizer_config": {"default_segment_number": 0, "flush_interval_sec": 5},
                "metadata": config.get("metadata"),
            },
            "payload_schema": {
                field: {"data_type": kind, "points": 0} for field, kind in collection.get("indexes", {}).items()
            },
        }

    def _serve(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        raw = request.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        path = request.path.split("?", 1)[0]
        with self._lock:
            self.calls.append(QdrantCall(request.command, path, body, request.headers.get("api-key")))
            status, payload = self._answer(request.command, path, body)
        send_json(request, status, payload)
