"""Restricted Jira comments kept under their own ACL (issue 47, part 5), end to end: a dump whose issue carries a
comment restricted to the role Developers of OPS, indexed by the real ``rag-pipeline index`` with a directory file
granting the role; then searched over the CLI, HTTP and MCP. A reader who may browse OPS *and* holds the role finds
the comment; one who browses OPS without the role, or holds the role without browsing OPS, finds only what else they
may read; ``explain`` names the restriction; the issue's own text never holds the comment."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from rag_pipeline.connectors.jira.dump import comment_document_id, issue_document_id
from rag_pipeline_tests.kit import serving_fixtures as S
from rag_pipeline_tests.kit.data import jira_issue, write_jira_dump

SITE = "jira.restricted.test"
ISSUE = issue_document_id(SITE, "1")
COMMENT = comment_document_id(ISSUE, "501")
TOKEN = "restricted-comments-token-5521"
QUERY = "vendor invoice dispute quokka"
# dave: browses OPS and holds the role; alice: browses OPS only; erin: the role only; admin: an admin, nothing else.
DIRECTORY = (
    "account_id,email,groups\n"
    "acc-dave,dave@restricted.test,project:OPS;role:OPS:Developers\n"
    "acc-alice,alice@restricted.test,project:OPS\n"
    "acc-erin,erin@restricted.test,role:OPS:Developers\n"
    "acc-admin,admin@restricted.test,\n"
)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("restricted")
    comments = [
        {"id": "500", "author": {"displayName": "Pat"}, "created": "2024-03-02T09:30:00.000+0000",
         "body": "Scheduled the upgrade window for Sunday."},
        {"id": "501", "author": {"displayName": "Lee"}, "created": "2024-03-02T09:40:00.000+0000",
         "body": "Vendor invoice dispute: quokka holdings owes the deposit.",
         "visibility": {"type": "role", "value": "Developers"}},
    ]  # fmt: skip
    issue = jira_issue("1", "OPS-1", "2024-03-02T10:00:00.000+0000", description="Upgrade the cluster.",
                       summary="Cluster upgrade", comments=comments)  # fmt: skip
    dump = write_jira_dump(root / "issues.jsonl.gz", [issue])
    (root / "jira_users.csv").write_text(DIRECTORY)
    data = root / "data"
    command = ["index", "--source", "jira", "--jira-dump", str(dump), "--jira-site", SITE, "--jira-directory",
               str(root / "jira_users.csv")]  # fmt: skip
    done = subprocess.run(S.rag_pipeline_command(*command), env=S.service_env(data), capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return data


def _cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(S.rag_pipeline_command(*args), env=S.service_env(data), capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def test_the_cli_finds_the_comment_only_for_readers_of_both_and_explains_why(data_dir: Path) -> None:
    found = {}
    for who in ("dave@restricted.test", "alice@restricted.test", "erin@restricted.test"):
        done = _cli(data_dir, "search", "--user", who, QUERY, "--json", "--mode", "bm25")
        assert done.returncode == 0, done.stderr
        found[who] = [r["document_id"] for r in json.loads(done.stdout)["results"]]
    assert found["dave@restricted.test"] == [COMMENT]  # the words are the comment's alone, not the issue's
    assert found["alice@restricted.test"] == []  # browses OPS, lacks the role
    assert found["erin@restricted.test"] == []  # holds the role, does not browse OPS
    upgrade = _cli(data_dir, "search", "--user", "alice@restricted.test", "cluster upgrade", "--json", "--mode", "bm25")
    assert [r["document_id"] for r in json.loads(upgrade.stdout)["results"]] == [ISSUE]

    alice = json.loads(_cli(data_dir, "explain", "--user", "alice@restricted.test", COMMENT, "--json").stdout)
    assert alice["visible"] is False
    assert any("a restricted Jira comment" in b and "project role Developers in Jira project OPS" in b
               for b in alice["because"])  # fmt: skip
    dave = json.loads(_cli(data_dir, "explain", "--user", "dave@restricted.test", COMMENT, "--json").stdout)
    assert dave["visible"] is True and any("the comment is restricted to it" in b for b in dave["because"])
    erin = json.loads(_cli(data_dir, "explain", "--user", "erin@restricted.test", COMMENT, "--json").stdout)
    assert erin["visible"] is False and any("people who may browse Jira project OPS" in b for b in erin["because"])


@pytest.fixture(scope="module")
def service(data_dir: Path) -> Iterator[S.ServiceProcess]:
    with S.running_service(data_dir, data_dir.parent / "serve.log", RAG_SERVE_TOKEN=TOKEN,
                           RAG_SERVE_ADMINS="admin@restricted.test") as running:  # fmt: skip
        yield running


def _as(email: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}", "X-User-Email": email}


def test_http_and_mcp_return_the_comment_only_to_readers_of_both(service: S.ServiceProcess) -> None:
    def search(email: str) -> list[str]:
        response = httpx.post(f"{service.url}/v1/search", json={"query": QUERY, "top_k": 10, "mode": "bm25"},
                              headers=_as(email), timeout=60)  # fmt: skip
        assert response.status_code == 200, response.text
        return [r["document_id"] for r in response.json()["results"]]

    assert COMMENT in search("dave@restricted.test")
    assert COMMENT not in search("alice@restricted.test") and COMMENT not in search("erin@restricted.test")
    assert httpx.get(f"{service.url}/v1/documents/{COMMENT}", headers=_as("dave@restricted.test"),
                     timeout=60).status_code == 200  # fmt: skip
    hidden = httpx.get(f"{service.url}/v1/documents/{COMMENT}", headers=_as("alice@restricted.test"), timeout=60)
    assert hidden.status_code == 404
    issue = httpx.get(f"{service.url}/v1/documents/{ISSUE}", headers=_as("alice@restricted.test"), timeout=60)
    assert issue.status_code == 200 and "quokka" not in issue.json()["text"]
    # An admin is told the restriction that hides it from alice.
    explained = httpx.get(f"{service.url}/v1/explain/{COMMENT}", params={"person": "alice@restricted.test"},
                          headers=_as("admin@restricted.test"), timeout=60)  # fmt: skip
    assert explained.status_code == 200 and explained.json()["visible"] is False
    assert any("a restricted Jira comment" in b for b in explained.json()["because"])

    async def mcp_search(email: str) -> list[str]:
        async with (
            httpx2.AsyncClient(headers=_as(email), timeout=60) as http,
            Client(streamable_http_client(f"{service.url}/mcp", http_client=http)) as client,
        ):
            result = await client.call_tool("search_documents", {"query": QUERY, "top_k": 10, "mode": "bm25"})
            content: dict[str, Any] = result.structured_content or {}
            return [r["document_id"] for r in content.get("results", [])]

    assert COMMENT in asyncio.run(mcp_search("dave@restricted.test"))
    assert COMMENT not in asyncio.run(mcp_search("alice@restricted.test"))
