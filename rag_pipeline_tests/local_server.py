"""What the API emulators share: a threaded HTTP server on a free 127.0.0.1 port, started and
stopped around a test (``with Emulator(...) as emulator:``)."""

from __future__ import annotations

import contextlib
import socket
import threading
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


class LocalHttpService:
    """Lifecycle of an emulator; subclasses provide the request handler class."""

    thread_name = "emulator"

    def __init__(self) -> None:
        self._server: LocalServer | None = None
        self._thread: threading.Thread | None = None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

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
