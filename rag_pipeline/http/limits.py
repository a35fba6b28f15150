"""Limits the service puts on a request before any route runs: the Host names it answers (DNS rebinding), the
body size (also for chunked bodies, counted as they arrive), and an access log without query strings."""

from __future__ import annotations

import copy
import logging
import re
from typing import Any

from starlette.exceptions import HTTPException as StarletteHTTPException

# Requests are small JSON objects: a query is at most 8,000 characters.
MAX_BODY_BYTES = 64 * 1024
# The one /v1 route with a body limit of its own (http/routes/ingest.py: pushed documents).
OWN_BODY_LIMIT = "/v1/ingest/documents"
# Names a browser on this machine may use for a service on loopback. Any other Host is a DNS-rebinding page
# (a site whose name now resolves to 127.0.0.1) and is refused.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def allowed_hosts(listen_host: str, configured: tuple[str, ...]) -> tuple[str, ...] | None:
    """The Host header values the service answers (without port); None: any (a token guards it)."""
    if configured:
        return tuple(h.lower() for h in configured)
    loopback = listen_host in LOOPBACK_HOSTS or listen_host.startswith("127.")
    return (*LOOPBACK_HOSTS, listen_host) if loopback else None


# A Host header is a name or address and an optional port, nothing else (RFC 9110 §7.2): no userinfo ("a@b"), path,
# spaces or second port, which a lenient split would read as another host ("127.0.0.1:80@evil.example").
_HOST_HEADER = re.compile(r"^(?P<host>\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)(?::(?P<port>[0-9]{1,5}))?$")


def host_of(header: str) -> str | None:
    """The host of a Host header (lower-cased, without the port), or None when the header is not host[:port]."""
    match = _HOST_HEADER.match(header.strip().lower())
    return match.group("host") if match else None


class AccessLogWithoutQuery(logging.Filter):
    """Uvicorn's access log with the path only: a query string can carry a token (``?token=…``) or a query, and
    neither may reach a log. Uvicorn's record args are (client, method, full path, HTTP version, status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], args[2].split("?", 1)[0], *args[3:])
        return True


def uvicorn_log_config() -> dict[str, Any]:
    """Uvicorn's logging configuration with :class:`AccessLogWithoutQuery` on the access handler."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["path_only"] = {"()": AccessLogWithoutQuery}
    config["handlers"]["access"]["filters"] = ["path_only"]
    return config


class BodyTooLarge(StarletteHTTPException):
    """A request body over :data:`MAX_BODY_BYTES`, found while reading it (chunked bodies have no Content-Length).
    An HTTPException, so FastAPI's body parsing passes it on instead of turning it into a 400."""

    def __init__(self) -> None:
        super().__init__(413, f"the request body is over {MAX_BODY_BYTES} bytes")


def body_limit_in(error: BaseException | None) -> bool:
    """Whether ``error`` is, or is a group holding, a :class:`BodyTooLarge`."""
    if error is None:
        return False
    if isinstance(error, BodyTooLarge):
        return True
    if isinstance(error, BaseExceptionGroup):
        return any(body_limit_in(e) for e in error.exceptions)
    return body_limit_in(error.__cause__)


class BodyLimit:
    """ASGI middleware counting the bytes of a /v1 request body as they arrive, and refusing past the limit: the
    Content-Length check alone let a 30 MB chunked body be read and parsed whole."""

    def __init__(self, app: Any, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = str(scope.get("path", ""))
        # The push route counts its own, larger limit (RAG_PUSH_MAX_BODY_BYTES) behind the ingestion token.
        if scope["type"] != "http" or not path.startswith("/v1/") or path == OWN_BODY_LIMIT:
            await self.app(scope, receive, send)
            return
        received = 0

        async def limited() -> dict[str, Any]:
            nonlocal received
            message: dict[str, Any] = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise BodyTooLarge()
            return message

        await self.app(scope, limited, send)
