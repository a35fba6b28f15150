"""Confluence read offline and served: a dump of the crafted site (the REST objects the live API returns, with its
space permission records) and a directory file of group memberships are indexed by the real ``rag-pipeline index``;
the real service then answers over HTTP and MCP with the space permissions and inherited view restrictions enforced
(a restricted ancestor hides every descendant; two restricted levels intersect), and ``explain`` tells an admin
which grant decides. The reader's groups come from the directory, never from the request."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from rag_pipeline_tests.kit import serving_fixtures as S
from rag_pipeline_tests.kit.confluence_fixtures import SITE, crafted_site
from rag_pipeline_tests.kit.emulators.confluence_api import ConfluenceEmulator, dump_lines

TOKEN = "confluence-service-token-7310"
EXPAND = (
    "body.storage,ancestors,space,version,history,metadata.labels,"
    "restrictions.read.restrictions.user,restrictions.read.restrictions.group"
)
# Group memberships (the dump holds grants, not members): as the crafted site's users.
DIRECTORY = (
    "account_id,email,groups\n"
    "acc-alice,alice@crafted.example,eng\n"
    "acc-bob,bob@crafted.example,eng;secret-team\n"
    "acc-dave,dave@crafted.example,eng;leads\n"
    "acc-carol,carol@crafted.example,hr\n"
    "acc-admin,admin@crafted.example,\n"
)
WORDS = {"2001": "deploy guide release", "2002": "launch codes", "2003": "deeper", "2004": "deepest",
         "2005": "sibling", "4001": "leave policy", "3001": "hello world"}  # fmt: skip


def _doc(page: str) -> str:
    return f"confluence:{SITE}:{page}"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("confluence")
    with ConfluenceEmulator(crafted_site()) as emulator:
        # As an export of the real site would say it: its own host in every object's links.
        lines = [line.replace(emulator.url, f"https://{SITE}") for line in dump_lines(emulator, EXPAND)]
    dump = root / "pages.jsonl"
    dump.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "confluence_users.csv").write_text(DIRECTORY)
    data = root / "data"
    command = ["index", "--source", "confluence", "--confluence-dump", str(dump),
               "--confluence-directory", str(root / "confluence_users.csv")]  # fmt: skip
    done = subprocess.run(S.rag_pipeline_command(*command), env=S.service_env(data), capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return data


@pytest.fixture(scope="module")
def service(data_dir: Path) -> Iterator[S.ServiceProcess]:
    with S.running_service(data_dir, data_dir.parent / "serve.log", RAG_SERVE_TOKEN=TOKEN,
                           RAG_SERVE_ADMINS="admin@crafted.example") as running:  # fmt: skip
        yield running


def _as(email: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}", "X-User-Email": email}


def _sees(service: S.ServiceProcess, email: str) -> set[str]:
    seen = set()
    for page, query in WORDS.items():
        response = httpx.post(f"{service.url}/v1/search", json={"query": query, "top_k": 10, "mode": "bm25"},
                              headers=_as(email), timeout=60)  # fmt: skip
        assert response.status_code == 200, response.text
        if _doc(page) in [r["document_id"] for r in response.json()["results"]]:
            seen.add(page)
    return seen


def test_http_search_enforces_space_permissions_and_inherited_restrictions(service: S.ServiceProcess) -> None:
    # PUB (3001) is an anonymous space: public to every reader.
    assert _sees(service, "alice@crafted.example") == {"2001", "3001"}
    assert _sees(service, "bob@crafted.example") == {"2001", "2002", "2005", "3001"}
    assert _sees(service, "dave@crafted.example") == {"2001", "2002", "2003", "2004", "2005", "3001"}
    assert _sees(service, "carol@crafted.example") == {"4001", "3001"}
    hidden = httpx.get(f"{service.url}/v1/documents/{_doc('2004')}", headers=_as("bob@crafted.example"), timeout=60)
    assert hidden.status_code == 404  # Deep has no restriction of its own: its restricted ancestor hides it
    shown = httpx.get(f"{service.url}/v1/documents/{_doc('2004')}", headers=_as("dave@crafted.example"), timeout=60)
    assert shown.status_code == 200 and "Secret child" in shown.json()["title"]
    # A forged group header is refused, never believed.
    forged = {**_as("alice@crafted.example"), "X-User-Groups": f"confluence:{SITE}:restricted:2002"}
    assert httpx.post(f"{service.url}/v1/search", json={"query": "launch codes"}, headers=forged,
                      timeout=60).status_code == 400  # fmt: skip


def test_explain_names_the_restriction_that_hides_a_page(service: S.ServiceProcess) -> None:
    explained = httpx.get(f"{service.url}/v1/explain/{_doc('2003')}", params={"person": "bob@crafted.example"},
                          headers=_as("admin@crafted.example"), timeout=60)  # fmt: skip
    assert explained.status_code == 200 and explained.json()["visible"] is False
    assert any("every view restriction down to Confluence page 2003" in b for b in explained.json()["because"])
    dave = httpx.get(f"{service.url}/v1/explain/{_doc('2003')}", params={"person": "dave@crafted.example"},
                     headers=_as("admin@crafted.example"), timeout=60)  # fmt: skip
    assert dave.json()["visible"] is True


def test_mcp_search_returns_a_restricted_page_only_to_its_readers(service: S.ServiceProcess) -> None:
    async def found(email: str) -> list[str]:
        async with (
            httpx2.AsyncClient(headers=_as(email), timeout=60) as http,
            Client(streamable_http_client(f"{service.url}/mcp", http_client=http)) as client,
        ):
            result = await client.call_tool("search_documents", {"query": "launch codes", "top_k": 10, "mode": "bm25"})
            content: dict[str, Any] = result.structured_content or {}
            return [r["document_id"] for r in content.get("results", [])]

    assert _doc("2002") in asyncio.run(found("bob@crafted.example"))
    assert _doc("2002") not in asyncio.run(found("alice@crafted.example"))
