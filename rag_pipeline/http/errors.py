"""The service's error answers: ``{"error", "field"}`` (OpenAI's shape on the OpenAI-compatible routes), the
exception a route raises to refuse, and the handlers that turn exceptions into those answers."""

from __future__ import annotations

import json
import sys
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from rag_pipeline.http.limits import BodyTooLarge, body_limit_in
from rag_pipeline.serving.refusal import Refusal
from rag_pipeline.serving.shared_index import IndexUnavailable

# The OpenAI-compatible routes answer errors in OpenAI's shape, which the official clients read.
OPENAI_ROUTES = ("/v1/chat/completions", "/v1/models")


class RequestRefused(Refusal):
    """A request this service will not answer: ``status`` with a message naming ``field``."""


def llm_failure(exc: Exception) -> RequestRefused:
    """An answer model's failure as a 502/504 naming the model (the client's message, never a traceback)."""
    status = getattr(exc, "status_code", None)
    kind = type(exc).__name__
    if "Timeout" in kind:
        return RequestRefused(504, "model", f"the answer model did not answer in time ({kind})")
    detail = f"HTTP {status}" if status else kind
    return RequestRefused(502, "model", f"the answer model failed ({detail}); try again later")


def error(status: int, message: str, field: str | None = None, path: str = "", **extra: Any) -> JSONResponse:
    """``{"error": message, "field": field}``; on the OpenAI-compatible routes (``path``) OpenAI's
    ``{"error": {"message", "type", "param", "code"}}`` with the same ``field`` beside it."""
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 and field == "Authorization" else None
    if path in OPENAI_ROUTES:
        kind = "invalid_request_error" if status < 500 else "server_error"
        code = {401: "invalid_api_key", 404: "not_found", 413: "request_too_large", 429: "rate_limit_exceeded"}
        found = {"message": message, "type": kind, "param": field, "code": code.get(status)}
        return JSONResponse({"error": found, "field": field, **extra}, status_code=status, headers=headers)
    return JSONResponse({"error": message, "field": field, **extra}, status_code=status, headers=headers)


def validation_error(exc: RequestValidationError, path: str = "") -> JSONResponse:
    """Pydantic's errors as ``{"error", "field", "errors": [{"field", "message"}]}``; a body that is not JSON
    at all is a 400 on the field ``body``."""
    errors = []
    for item in exc.errors():
        loc = [str(part) for part in item.get("loc", ()) if part not in ("body",)]
        if item.get("type") == "json_invalid":
            return error(400, "the request body is not valid JSON", "body", path)
        field = ".".join(loc) if loc else "body"
        message = str(item.get("msg", "invalid value")).removeprefix("Value error, ")
        errors.append({"field": field, "message": message})
    first = errors[0] if errors else {"field": "body", "message": "invalid request"}
    return error(422, f"{first['field']}: {first['message']}", first["field"], path, errors=errors)


class _Digits(str):
    """An integer of the body, kept as its digits (the marker :func:`overlong_integer` looks for)."""


def _first_digits(value: Any, path: tuple[str, ...] = ()) -> tuple[tuple[str, ...], _Digits] | None:
    if isinstance(value, _Digits) and len(value.lstrip("-")) > sys.get_int_max_str_digits():
        return path, value
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        if (found := _first_digits(child, (*path, str(key)))) is not None:
            return found
    return None


def overlong_integer(body: bytes) -> tuple[str, int] | None:
    """The field (dotted, as validation errors name it) of the first integer in the JSON ``body`` with more digits
    than Python converts (``sys.get_int_max_str_digits``), and its number of digits; None when there is none. The
    JSON parser raises on such a number before any field is known, so the body is read again with the integers
    kept as strings."""
    try:
        parsed = json.loads(body, parse_int=_Digits)
    except ValueError:  # not JSON (or not UTF-8): the body's fault
        return None
    found = _first_digits(parsed)
    if found is None:
        return None
    path, digits = found
    field = ".".join(path) or "body"
    return field if len(field) <= 200 else field[:200] + "…", len(digits.lstrip("-"))


async def _overlong_integer_error(request: Request) -> JSONResponse | None:
    """The 422 naming the field of an integer too long to parse, where that is why the body could not be read."""
    try:
        found = overlong_integer(await request.body())  # the body FastAPI read, kept on the request
    except (RuntimeError, RecursionError):  # no body kept; nested too deep to walk
        return None
    if found is None:
        return None
    field, count = found
    message = f"a number of {count} digits is not accepted (at most {sys.get_int_max_str_digits()})"
    errors = [{"field": field, "message": message}]
    return error(422, f"{field}: {message}", field, request.url.path, errors=errors)


def install_error_handlers(app: FastAPI) -> None:
    """The handlers turning validation errors, refusals, unknown identities, an unavailable index and Starlette's
    HTTP errors into the JSON error answers."""

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_error(exc, request.url.path)

    # Every refusal alike: an identity that cannot be used (IdentityError), a route's RequestRefused, and any other
    # use case's Refusal a route lets through.
    @app.exception_handler(Refusal)
    async def refused(request: Request, exc: Refusal) -> JSONResponse:
        return error(exc.status, str(exc), exc.field, request.url.path)

    @app.exception_handler(IndexUnavailable)
    async def index_unavailable(request: Request, exc: IndexUnavailable) -> JSONResponse:
        return error(503, f"the index is not available now: {exc}", None, request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if body_limit_in(exc.__cause__):
            # BodyLimit's refusal, raised inside the middleware's task group and re-wrapped by FastAPI as "error
            # parsing the body": it is a 413.
            return error(413, str(BodyTooLarge().detail), "body", request.url.path)
        # An integer of thousands of digits: Python refuses to convert it while parsing, before any field is known.
        # The answer names the field it was given for, like any other value of the wrong kind.
        overlong = exc.status_code == 400 and isinstance(exc.__cause__, ValueError)
        if overlong and (refusal := await _overlong_integer_error(request)) is not None:
            return refusal
        # FastAPI's "error parsing the body" (invalid UTF-8, say) is the body's fault.
        field = "body" if exc.status_code in (400, 413) and request.method == "POST" else None
        response = error(exc.status_code, str(exc.detail), field, request.url.path)
        response.headers.update(exc.headers or {})  # a 405's Allow
        return response
