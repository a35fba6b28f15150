"""``rag-pipeline serve`` with ``RAG_SERVE_AUTH=oidc`` (issue 47, part 1): a real service process trusting a local
OIDC issuer on 127.0.0.1; callers present JWTs the issuer signed, over HTTP, MCP and the OpenAI-compatible
routes. The person the token's email names reads what the directory gives them; a person the directory does not
know reads public documents only; no identity header is believed; a bad token is a 401 naming Authorization."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import openai
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from rag_pipeline_tests.kit import serving_fixtures as S
from rag_pipeline_tests.kit.emulators.oidc_issuer import AUDIENCE, OidcIssuer


@pytest.fixture(scope="module")
def issuer() -> Iterator[OidcIssuer]:
    with OidcIssuer() as running:
        yield running


@pytest.fixture(scope="module")
def service(
    serving_index: Path, tmp_path_factory: pytest.TempPathFactory, issuer: OidcIssuer
) -> Iterator[S.ServiceProcess]:
    data = S.copy_index(serving_index, tmp_path_factory.mktemp("oidc") / "data")
    with S.running_service(
        data, data.parent / "serve.log", RAG_SERVE_AUTH="oidc", RAG_OIDC_ISSUER=issuer.issuer,
        RAG_OIDC_AUDIENCE=AUDIENCE,
    ) as running:  # fmt: skip
        yield running


def _search(service: S.ServiceProcess, token: str | None, headers: dict[str, str] | None = None) -> httpx.Response:
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(
        f"{service.url}/v1/search",
        json={"query": "salary budget postgres", "top_k": 10},
        headers={**auth, **(headers or {})},
        timeout=60,
    )


def _ids(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [r["document_id"] for r in response.json()["results"]]


def test_the_token_names_the_reader_and_the_directory_gives_their_groups(
    service: S.ServiceProcess, issuer: OidcIssuer
) -> None:
    alice = _search(service, issuer.token(S.EMAILS["U1"]))
    assert S.SECRET_THREAD in _ids(alice)  # Alice is a member of the private channel
    assert alice.json()["reader"]["email"] == S.EMAILS["U1"] and alice.json()["reader"]["groups_from"] == "directory"
    bob = _search(service, issuer.token(S.EMAILS["U2"]))
    assert S.SECRET_THREAD not in _ids(bob)
    # Someone the directory does not know reads what is public to everyone, nothing else.
    stranger = _search(service, issuer.token("dave@elsewhere.test"))
    assert S.SECRET_THREAD not in _ids(stranger) and stranger.json()["reader"]["groups"] == []


def test_identity_headers_are_not_believed_and_bad_tokens_are_401(
    service: S.ServiceProcess, issuer: OidcIssuer
) -> None:
    smuggled = _search(service, issuer.token(S.EMAILS["U2"]), {"X-User-Id": "U1"})
    assert smuggled.status_code == 400 and smuggled.json()["field"] == "X-User-Id"
    for bad, message in [
        (None, "Bearer token"),
        (issuer.token(S.EMAILS["U1"], expires_in=-3600), "expired"),
        (issuer.token(S.EMAILS["U1"], aud="another-service"), "not for this service"),
        (issuer.unsigned_token(S.EMAILS["U1"]), "algorithm 'none'"),
    ]:
        refused = _search(service, bad)
        assert refused.status_code == 401 and refused.json()["field"] == "Authorization", refused.text
        assert message in refused.json()["error"] and "eyJ" not in refused.text
    # The shared-token header identity is off: headers alone name nobody.
    assert _search(service, None, {"X-User-Email": S.EMAILS["U1"]}).status_code == 400
    # /health answers the verdict only.
    assert httpx.get(f"{service.url}/health", timeout=10).json() == {"status": "ok"}
    assert "eyJ" not in service.log()


def test_mcp_and_the_openai_routes_take_the_same_token(service: S.ServiceProcess, issuer: OidcIssuer) -> None:
    async def found(token: str) -> list[str]:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
            Client(streamable_http_client(f"{service.url}/mcp", http_client=http)) as client,
        ):
            result = await client.call_tool("search_documents", {"query": "salary budget postgres", "top_k": 10})
            content: dict[str, Any] = result.structured_content or {}
            return [r["document_id"] for r in content["results"]]

    assert S.SECRET_THREAD in asyncio.run(found(issuer.token(S.EMAILS["U1"])))
    assert S.SECRET_THREAD not in asyncio.run(found(issuer.token(S.EMAILS["U2"])))
    listed = openai.OpenAI(base_url=f"{service.url}/v1", api_key=issuer.token(S.EMAILS["U1"]), max_retries=0)
    assert listed.models.list().object == "list"
    with pytest.raises(openai.AuthenticationError, match="expired"):
        openai.OpenAI(
            base_url=f"{service.url}/v1", api_key=issuer.token(S.EMAILS["U1"], expires_in=-3600), max_retries=0
        ).models.list()
