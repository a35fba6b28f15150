"""The reader's deep tree through every face: ``GET /v1/tree`` (the real app), the MCP ``list_containers`` tool (the
SDK's tool manager over this process's service, and the stdio server's remote backend over the HTTP API) and
``rag-pipeline tree``: document and page nodes, the Confluence hierarchy, only what the reader may read, the old
fields kept, and a bad depth refused naming its field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient

from rag_pipeline import cli
from rag_pipeline.mcp.app import build_mcp_server
from rag_pipeline.mcp.backends import LocalTools
from rag_pipeline.mcp.remote import RemoteTools
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.tree_view import MAX_TREE_DEPTH, TreeView
from rag_pipeline.serving.identity import Reader
from rag_pipeline.sources.document import Acl, Document, content_hash
from rag_pipeline_tests.kit.slack_index import UNLOADABLE_MODEL
from rag_pipeline_tests.unit.http.conftest import build_index, in_process_service, reader, served

SITE = "confluence:site.example"
SECRET_PAGE_TITLE = "Runbooks Vault"


def _document(document_id: str, container: str, title: str, acl: Acl, **metadata: Any) -> Document:
    when = datetime(2024, 3, 1, tzinfo=UTC)
    text = f"{title} body text about postgres"
    return Document(id=document_id, source=document_id.split(":")[0], container=container, title=title, text=text,
                    created=when, updated=when, version=when.timestamp(), content_hash=content_hash(text), acl=acl,
                    metadata=metadata)  # fmt: skip


PAGE = {"space": "ENG", "content_type": "page"}
DOCUMENTS = [
    _document("slack:T1:C1:100.1", "C1", "#general: hello", Acl(public=True)),
    _document("slack:T1:G0SECRET:300.3", "G0SECRET", "#secret: plans", Acl(users=("U1",))),
    _document(f"{SITE}:1", "ENG", "Engineering", Acl(public=True), ancestors=[], **PAGE),
    _document(f"{SITE}:2", "ENG", f"Engineering › {SECRET_PAGE_TITLE}", Acl(users=("U1",)), ancestors=["1"], **PAGE),
    _document(
        f"{SITE}:3",
        "ENG",
        f"Engineering › {SECRET_PAGE_TITLE} › Deploy",
        Acl(public=True),
        ancestors=["1", "2"],
        **PAGE,
    ),
]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree_faces")
    build_index(root / "qdrant", DOCUMENTS)
    return root


@pytest.fixture
def client(data_dir: Path) -> Iterator[TestClient]:
    with served(data_dir / "qdrant") as c:
        yield c


def _paths(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n["path"]: n for n in body["nodes"]}


def test_http_lists_pages_under_readable_parents_and_keeps_the_old_fields(client: TestClient) -> None:
    member = client.get("/v1/tree", params={"max_depth": 4}, headers=reader("U1")).json()
    assert {"reader", "prefix", "sources"} <= set(member)  # what clients read before the deeper tree
    assert {c["path"] for s in member["sources"] for c in s["containers"]} == {
        "confluence/ENG", "slack/#general", "slack/#secret"}  # fmt: skip
    nodes = _paths(member)
    assert nodes["confluence/ENG/1/2/3"]["name"] == "Deploy" and nodes["confluence/ENG/1/2/3"]["level"] == 4
    assert nodes["confluence/ENG/1/2"]["name"] == SECRET_PAGE_TITLE and nodes["confluence/ENG/1"]["kind"] == "page"
    assert nodes["slack/#secret/300.3"]["kind"] == "document"

    stranger = client.get("/v1/tree", params={"max_depth": 4}, headers=reader("U9")).text
    assert SECRET_PAGE_TITLE not in stranger and "#secret" not in stranger and "G0SECRET" not in stranger
    moved = _paths(json.loads(stranger))["confluence/ENG/1/3"]  # under Home, its nearest readable ancestor
    assert moved["name"] == "Deploy" and moved["relative_path"] == "confluence/ENG/1/3"

    rooted = client.get("/v1/tree", params={"root_path": "confluence/ENG/1", "max_depth": 1}, headers=reader("U1"))
    assert [(n["relative_path"], n["documents"], n["children"]) for n in rooted.json()["nodes"]] == [
        ("", 3, 1), ("2", 2, 1)]  # fmt: skip
    unreadable = client.get("/v1/tree", params={"root_path": "slack/#secret"}, headers=reader("U9")).json()
    assert unreadable["nodes"] == [] and unreadable["total"] == 0
    paged = client.get("/v1/tree", params={"max_depth": 4, "limit": 2, "offset": 2}, headers=reader("U1")).json()
    assert paged["nodes"] == member["nodes"][2:4] and paged["next_offset"] == 4 and paged["total"] == member["total"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"max_depth": -1}, "query.max_depth"),
        ({"max_depth": MAX_TREE_DEPTH + 1}, "query.max_depth"),
        ({"limit": 0}, "query.limit"),
        ({"offset": -5}, "query.offset"),
    ],
)
def test_http_refuses_a_bad_view_naming_the_field(client: TestClient, params: dict[str, int], field: str) -> None:
    response = client.get("/v1/tree", params=params, headers=reader("U1"))
    assert response.status_code == 422 and response.json()["field"] == field


def _tool(server: Any, **arguments: Any) -> Any:
    async def call() -> Any:
        return await server.call_tool("list_containers", arguments)

    return anyio.run(call)


def test_mcp_lists_the_callers_tree_and_refuses_a_negative_depth(data_dir: Path) -> None:
    service = in_process_service(data_dir / "qdrant")
    service.start()
    try:
        backend = LocalTools(service, access=None)  # type: ignore[arg-type]  # whois is not called here
        for user, sees_secret in (("U1", True), ("U9", False)):
            caller = Reader(principal=Principal(user_id=user), email=None, groups_from="trusted-proxy")
            server = build_mcp_server(backend, lambda _ctx, caller=caller: caller)
            result = _tool(server, root_path="confluence", max_depth=4)
            assert not result.is_error, result
            body = result.structured_content
            assert (SECRET_PAGE_TITLE in json.dumps(body)) is sees_secret
            assert "Deploy" in {n["name"] for n in body["nodes"]} and body["root_path"] == "confluence"
            assert "sources" in body and "prefix" in body
        refused = _tool(server, max_depth=-1)
        assert refused.is_error and "max_depth: Input should be greater than or equal to 0" in refused.content[0].text
    finally:
        service.close()


def test_the_stdio_servers_remote_backend_reads_the_same_tree(client: TestClient) -> None:
    remote = RemoteTools("http://127.0.0.1", "U9", None)
    remote._client = client  # the service's own API, in this process
    client.headers.update(reader("U9"))
    caller = Reader(principal=Principal(user_id="U9"), email=None, groups_from="trusted-proxy")
    body = remote.tree_view(caller, None, TreeView(max_depth=4))
    assert "reader" not in body and "confluence/ENG/1/3" in _paths(body) and SECRET_PAGE_TITLE not in json.dumps(body)


def test_the_cli_prints_the_deep_tree_and_refuses_a_negative_depth(
    data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_DENSE_MODEL", UNLOADABLE_MODEL)  # the index's own claim: BM25 reads it
    argv = ["tree", "--data-dir", str(data_dir), "--json", "--max-depth", "4"]
    assert cli.main([*argv, "--user", "U9", "--groups", "staff"]) == 0
    stranger = capsys.readouterr().out
    assert SECRET_PAGE_TITLE not in stranger and "#secret" not in stranger
    assert "confluence/ENG/1/3" in _paths(json.loads(stranger))
    assert cli.main([*argv, "--user", "U1", "--groups", "staff", "--root-path", "confluence/ENG/1/2"]) == 0
    member = json.loads(capsys.readouterr().out)
    assert [n["name"] for n in member["nodes"]] == [SECRET_PAGE_TITLE, "Deploy"]
    assert cli.main(["tree", "--data-dir", str(data_dir), "--user", "U1", "--groups", "staff", "--max-depth", "4"]) == 0
    printed = capsys.readouterr().out
    assert "Runbooks Vault" in printed and "Deploy" in printed  # the text form shows the nodes too
    assert cli.main(["tree", "--data-dir", str(data_dir), "--user", "U1", "--groups", "x", "--max-depth", "-1"]) == 2
    assert "max_depth" in capsys.readouterr().err
