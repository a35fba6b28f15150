"""An MCP server offering a few tools over Streamable HTTP on 127.0.0.1 (the official ``mcp`` SDK served by
uvicorn in a thread): what the tools source reads with ``tools/list`` in the tests of tool search."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings


def _server() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer(name="test-tools", log_level="WARNING")

    @server.tool(description="Create an invoice for a customer and email it to their billing contact.")
    def create_invoice(customer: str, amount_eur: float, due_days: int = 30) -> str:
        return f"invoice for {customer}: {amount_eur} EUR"

    @server.tool(description="Translate a text into another language (Korean, Japanese, English, ...).")
    def translate_text(text: str, target_language: str) -> str:
        return text

    @server.tool(description="Book a meeting room in the office for a time slot.")
    def book_meeting_room(room: str, start: str, minutes: int = 30) -> str:
        return f"{room} booked"

    return server


class McpToolServer:
    """Serves :func:`_server`'s tools at ``url`` until :meth:`stop`."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        mcp = _server()
        app = mcp.streamable_http_app(
            streamable_http_path="/mcp",
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="mcp-tool-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> McpToolServer:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the MCP tool server did not start within 20 s")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
