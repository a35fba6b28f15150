"""What the API emulators share: a threaded HTTP server on a free 127.0.0.1 port, started and
stopped around a test (``with Emulator(...) as emulator:``)."""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import socket
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class LocalServer(ThreadingHTTPServer):
    """Threads per connection; keeps the open (keep-alive) connections so that stopping can close them."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # the default 5 makes concurrent clients wait for SYN retransmits (1 s)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Shut down every open connection (an idle keep-alive handler would otherwise still answer)."""
        with self._open_lock:
            connections = list(self._open)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


def send(
    request: BaseHTTPRequestHandler,
    status: int,
    payload: bytes,
    content_type: str,
    headers: Mapping[str, str] | None = None,
) -> None:
    """Write one complete response (with Content-Length, so keep-alive connections stay in sync)."""
    request.send_response(status)
    request.send_header("Content-Type", content_type)
    request.send_header("Content-Length", str(len(payload)))
    for key, value in (headers or {}).items():
        request.send_header(key, value)
    request.end_headers()
    request.wfile.write(payload)


def send_json(
    request: BaseHTTPRequestHandler,
    status: int,
    body: Any,
    content_type: str = "application/json",
    headers: Mapping[str, str] | None = None,
) -> None:
    """Write ``body`` as a JSON response."""
    send(request, status, json.dumps(body).encode(), content_type, headers)


class LocalHttpService:
    """Lifecycle of an emulator; subclasses answer each request in ``_serve``."""

    thread_name = "emulator"
    server_name = "Emulator/1.0"
    http_protocol = "HTTP/1.1"
    http_methods: tuple[str, ...] = ("GET", "POST", "PUT", "DELETE")

    def __init__(self) -> None:
        self._server: LocalServer | None = None
        self._thread: threading.Thread | None = None

    def _serve(self, request: BaseHTTPRequestHandler) -> None:
        raise NotImplementedError

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = service.http_protocol
            server_version = service.server_name
            # Headers and body are written separately: without TCP_NODELAY, Nagle + delayed ACK stall each
            # keep-alive response by ~40 ms.
            disable_nagle_algorithm = True
            timeout = 60  # an idle keep-alive connection's thread ends after this

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        for method in self.http_methods:
            setattr(Handler, f"do_{method}", lambda request: service._serve(request))
        return Handler

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:PORT`` (only once started)."""
        if self._server is None:
            raise RuntimeError("the emulator is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> None:
        """Start serving on a free port (idempotent)."""
        if self._server is not None:
            return
        self._server = LocalServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name=self.thread_name, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close open connections (idempotent)."""
        server, thread = self._server, self._thread
        if server is None:
            return
        server.shutdown()
        server.close_connections()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def atlassian_caller(
    header: str | None, username: str, api_token: str, personal_access_token: str, cloud: bool
) -> tuple[str, bool]:
    """Who an Atlassian REST request says it is (``"basic:<user>"``, ``"bearer"`` or ``"none"``) and whether the
    site admits it: Cloud takes e-mail + API token (Basic) only; Server/Data Center a personal access token
    (Bearer) or the same Basic pair."""
    if not header:
        return "none", False
    scheme, _, credentials = header.partition(" ")
    if scheme.lower() == "basic":
        try:
            user, _, secret = base64.b64decode(credentials.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return "basic:", False
        return f"basic:{user}", user == username and secret == api_token
    if scheme.lower() == "bearer":
        return "bearer", not cloud and credentials.strip() == personal_access_token
    return "none", False
