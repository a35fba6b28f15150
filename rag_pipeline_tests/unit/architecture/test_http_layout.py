"""The HTTP face is a package of module-level routers, and its app factory only wires them: every route lives in
``rag_pipeline/http/routes/``, none is declared inside a function, and the factory declares none itself."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from fastapi import APIRouter
from fastapi.routing import APIRoute

from rag_pipeline.http.app import ROUTERS
from rag_pipeline_tests.kit.paths import PACKAGE_DIR

HTTP = PACKAGE_DIR / "http"
EXPECTED = {"health", "search", "chat", "models", "documents", "feedback", "tools", "access", "metrics", "events"}
# Included by the factory only where the service has an ingestion token, but module-level like the others.
OPTIONAL = {"ingest"}


def _route_decorators(tree: ast.AST) -> list[ast.AST]:
    found = []
    for node in ast.walk(tree):
        for decorator in getattr(node, "decorator_list", []):
            call = decorator.func if isinstance(decorator, ast.Call) else decorator
            if isinstance(call, ast.Attribute) and call.attr in {"get", "post", "api_route", "put", "delete"}:
                found.append(node)
    return found


def test_every_route_is_in_a_module_level_router() -> None:
    assert {m.__name__.rsplit(".", 1)[1] for m in ROUTERS} == EXPECTED
    for name in EXPECTED | OPTIONAL:
        module = importlib.import_module(f"rag_pipeline.http.routes.{name}")
        assert isinstance(module.router, APIRouter) and module.router.routes, name
        tree = ast.parse(Path(module.__file__ or "").read_text(encoding="utf-8"))
        top_level = {id(n) for n in tree.body}
        assert all(id(n) in top_level for n in _route_decorators(tree)), f"{name}: a route declared in a function"
    factory = ast.parse((HTTP / "app.py").read_text(encoding="utf-8"))
    assert _route_decorators(factory) == []  # the factory wires routers; it declares no route


def test_the_app_serves_the_routers_paths() -> None:
    paths = {route.path for module in ROUTERS for route in module.router.routes if isinstance(route, APIRoute)}
    assert {"/health", "/v1/search", "/v1/chat/completions", "/v1/models", "/v1/documents/{document_id:path}",
            "/v1/tree", "/v1/tools/search", "/v1/whois", "/metrics"} <= paths  # fmt: skip
