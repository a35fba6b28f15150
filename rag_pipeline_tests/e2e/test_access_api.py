"""``whois`` and ``explain`` over the service's HTTP API and its MCP tools (issue 47, part 3), against a real
``rag-pipeline serve`` process on the small serving index: a caller asks about themselves; only an admin (an
``admin``-scoped personal token, or an identity in RAG_SERVE_ADMINS) names another person; a document the caller
may not read is a 404 like a missing one, while an admin is told the restriction that hides it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from rag_pipeline.serving.tokens import TokenStore
from rag_pipeline_tests.kit import serving_fixtures as S

TOKEN = "access-api-token-4417"
ADMIN_EMAIL = S.EMAILS["U3"]  # carol: an admin by RAG_SERVE_ADMINS
MISSING = "slack:T0SERVE:C0NONE:1700000000.000000"


@pytest.fixture(scope="module")
def tokens(serving_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    data = S.copy_index(serving_index, tmp_path_factory.mktemp("access") / "data")
    store = TokenStore(data / "tokens.sqlite")
    made = {
        "bob_admin": store.create("U2", ["search", "admin"], timedelta(days=1))[0],
        "bob_search": store.create("U2", ["search"], timedelta(days=1))[0],
    }
    yield data, made


@pytest.fixture(scope="module")
def service(tokens: tuple[Path, dict[str, str]]) -> Iterator[S.ServiceProcess]:
    data, _ = tokens
    with S.running_service(data, data.parent / "serve.log", RAG_SERVE_TOKEN=TOKEN, RAG_SERVE_AUDIT_DAYS="7",
                           RAG_SERVE_ADMINS=f"{ADMIN_EMAIL.upper()},U9") as running:  # fmt: skip
        yield running


def _get(service: S.ServiceProcess, path: str, user: str | None = None, bearer: str = TOKEN, **headers: str) -> Any:
    sent = {"Authorization": f"Bearer {bearer}", **headers}
    if user is not None:
        sent["X-User-Id"] = user
    return httpx.get(f"{service.url}{path}", headers=sent, timeout=60)


def test_whois_about_oneself_and_about_others_for_admins_only(service: S.ServiceProcess) -> None:
    me = _get(service, "/v1/whois", "U1")
    assert me.status_code == 200, me.text
    body = me.json()
    assert S.EMAILS["U1"] in body["emails"]
    assert any(c["id"] == "G0PRIV" and c["private"] for c in body["channels"])
    assert f"slack:{S.TEAM}:members" in body["groups"]

    refused = _get(service, "/v1/whois?person=U1", "U2")
    assert refused.status_code == 403 and refused.json()["field"] == "person"
    # A client cannot make itself an admin with the service's internal header.
    forged = _get(service, "/v1/whois?person=U1", "U2", **{"X-Rag-Admin": "1"})
    assert forged.status_code == 403

    as_admin = {"Authorization": f"Bearer {TOKEN}", "X-User-Email": ADMIN_EMAIL}
    admin = httpx.get(f"{service.url}/v1/whois", params={"person": "U1"}, headers=as_admin, timeout=60)
    assert admin.status_code == 200 and S.EMAILS["U1"] in admin.json()["emails"]
    unknown = httpx.get(f"{service.url}/v1/whois", params={"person": "nobody@else.test"}, headers=as_admin, timeout=60)
    assert unknown.status_code == 404 and unknown.json()["field"] == "person"


def test_explain_about_oneself_hides_what_one_may_not_read(service: S.ServiceProcess) -> None:
    mine = _get(service, f"/v1/explain/{S.SECRET_THREAD}", "U1")
    assert mine.status_code == 200, mine.text
    assert mine.json()["visible"] is True
    assert any("private channel" in reason for reason in mine.json()["because"])

    hidden = _get(service, f"/v1/explain/{S.SECRET_THREAD}", "U2")
    missing = _get(service, f"/v1/explain/{MISSING}", "U2")
    assert hidden.status_code == missing.status_code == 404
    # Hidden and missing read the same but for the id they name: nothing says the hidden one exists.
    assert hidden.json()["error"].replace(S.SECRET_THREAD, "ID") == missing.json()["error"].replace(MISSING, "ID")
    assert hidden.json()["field"] == "document_id"


def test_an_admin_is_told_why_a_document_is_hidden_from_someone(service: S.ServiceProcess) -> None:
    answer = httpx.get(
        f"{service.url}/v1/explain/{S.SECRET_THREAD}",
        params={"person": "U2"},
        headers={"Authorization": f"Bearer {TOKEN}", "X-User-Email": ADMIN_EMAIL},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["visible"] is False
    assert any("restricted to" in reason for reason in answer.json()["because"])


def test_personal_tokens_need_the_admin_scope_to_ask_about_others(
    service: S.ServiceProcess, tokens: tuple[Path, dict[str, str]]
) -> None:
    _, made = tokens
    own = _get(service, "/v1/whois", bearer=made["bob_search"])
    assert own.status_code == 200 and S.EMAILS["U2"] in own.json()["emails"]
    refused = _get(service, "/v1/whois?person=U1", bearer=made["bob_search"])
    assert refused.status_code == 403 and refused.json()["field"] == "person"
    allowed = _get(service, f"/v1/explain/{S.SECRET_THREAD}?person=U1", bearer=made["bob_admin"])
    assert allowed.status_code == 200 and allowed.json()["visible"] is True


def test_the_mcp_tools_answer_whoami_and_explain_access_as_the_caller(service: S.ServiceProcess) -> None:
    async def calls(user: str) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {TOKEN}", "X-User-Id": user}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(f"{service.url}/mcp", http_client=http)) as client,
        ):
            me = await client.call_tool("whoami", {})
            explained = await client.call_tool("explain_access", {"document_id": S.SECRET_THREAD})
            other = await client.call_tool("whoami", {"person": "U3"})
            return {
                "me": me.structured_content or {},
                "explained": explained.structured_content if not explained.is_error else None,
                "explained_error": explained.content[0].text if explained.is_error and explained.content else "",
                "other_error": other.content[0].text if other.is_error and other.content else "",
            }

    alice = asyncio.run(calls("U1"))
    assert S.EMAILS["U1"] in alice["me"]["emails"]
    assert alice["explained"] is not None and alice["explained"]["visible"] is True
    assert "person: asking about another person needs the admin scope" in alice["other_error"]
    bob = asyncio.run(calls("U2"))
    assert bob["explained"] is None and "not found" in bob["explained_error"]


def test_the_request_audit_records_documents_given_never_the_query(
    service: S.ServiceProcess, tokens: tuple[Path, dict[str, str]]
) -> None:
    data, _ = tokens
    query = "salary budget postgres audit-marker-7731"
    found = httpx.post(f"{service.url}/v1/search", json={"query": query, "top_k": 10},
                       headers={"Authorization": f"Bearer {TOKEN}", "X-User-Id": "U1"}, timeout=60)  # fmt: skip
    assert found.status_code == 200
    given = [r["document_id"] for r in found.json()["results"]]
    assert _get(service, f"/v1/documents/{S.SECRET_THREAD}", "U1").status_code == 200
    lines = [json.loads(line) for path in sorted((data / "request_audit").glob("*.jsonl"))
             for line in path.read_text().splitlines()]  # fmt: skip
    searches = [line for line in lines if line["kind"] == "search" and line["documents"] == given]
    assert searches and "U1" in searches[-1]["reader"]
    assert any(line["kind"] == "document" and line["documents"] == [S.SECRET_THREAD] for line in lines)
    assert not any("audit-marker-7731" in path.read_text() for path in (data / "request_audit").glob("*"))


def test_every_response_carries_a_request_id_and_the_mcp_result_its_shape(service: S.ServiceProcess) -> None:
    """Issue 51 (part): X-Request-Id taken when plain, made otherwise, on answers and errors alike; the MCP search
    result carries the query, mode, count and time beside its results."""
    made = _get(service, "/v1/whois", "U1")
    assert made.status_code == 200 and len(made.headers["X-Request-Id"]) == 32
    kept = _get(service, "/v1/whois", "U1", **{"X-Request-Id": "trace-42.a:b"})
    assert kept.headers["X-Request-Id"] == "trace-42.a:b"
    forged = _get(service, "/v1/whois", "U1", **{"X-Request-Id": "x\tinjected log line"})
    assert forged.headers["X-Request-Id"] != "x\tinjected log line" and len(forged.headers["X-Request-Id"]) == 32
    refused = _get(service, "/v1/whois", "U1", bearer="wrong-token", **{"X-Request-Id": "err-7"})
    assert refused.status_code == 401 and refused.headers["X-Request-Id"] == "err-7"

    async def search() -> tuple[dict[str, Any], str]:
        headers = {"Authorization": f"Bearer {TOKEN}", "X-User-Id": "U1", "X-Request-Id": "mcp-9"}
        seen: list[str] = []

        async def remember(response: httpx2.Response) -> None:
            seen.append(response.headers.get("x-request-id", ""))

        async with (
            httpx2.AsyncClient(headers=headers, timeout=60, event_hooks={"response": [remember]}) as http,
            Client(streamable_http_client(f"{service.url}/mcp", http_client=http)) as client,
        ):
            found = await client.call_tool("search_documents", {"query": "salary budget postgres", "top_k": 5})
            return found.structured_content or {}, seen[-1]

    content, request_id = asyncio.run(search())
    assert request_id == "mcp-9"
    assert content["query"] == "salary budget postgres" and content["mode"] == "routed"
    assert content["count"] == len(content["results"]) > 0 and content["execution_time_ms"] > 0
    assert content["warnings"] == []
