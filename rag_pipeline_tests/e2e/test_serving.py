"""``rag-pipeline serve``: the search service as a real uvicorn process on a free loopback port, over a small
index the real ``rag-pipeline index`` wrote, queried with the real httpx client and the official MCP client.

One service runs with a token and without trusted-proxy mode (the default deployment), one without a token
behind a "trusted proxy" (groups from X-User-Groups), so both settings are tested on and off.
"""

from __future__ import annotations

import asyncio
import io
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from contextlib import redirect_stdout
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families

from rag_pipeline import cli
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.opening import StoreLocation
from rag_pipeline.index.store import CollectionNames
from rag_pipeline.retrieval.calibration import Calibration, ModeCalibration
from rag_pipeline.retrieval.entry import SearchModels
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.retriever import RetrieverConfig
from rag_pipeline.serving.schemas import SearchRequest
from rag_pipeline.serving.service import SearchService
from rag_pipeline.serving.shared_index import IndexUnavailable
from rag_pipeline.vectors.sparse import Bm25Encoder
from rag_pipeline_tests.kit import serving_fixtures as S

TOKEN = "serve-test-token-1234"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MODES = ("vector", "bm25", "hybrid", "reranked", "prf")
# The MCP tools the service offers (sorted), the same over HTTP and to the stdio server.
MCP_TOOLS = ["activate_tools", "ask", "deactivate_tools", "explain_access", "get_active_tools", "get_document",
             "list_containers", "rate_document", "record_tool_outcome", "reset_active_tools", "search_documents",
             "search_tools", "whoami"]  # fmt: skip


@pytest.fixture(scope="module")
def indexes(serving_index: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Copies of the session's small index: one per service (one folder admits one holder at a time), and a
    spare copy that no service ever opens (tests copy it while the services hold the other two)."""
    copies = []
    for name in ("guarded", "proxied", "spare"):
        copy = tmp_path_factory.mktemp(name) / "data"
        S.copy_index(serving_index, copy)
        copies.append(copy)
    return copies[0], copies[1], copies[2]


@pytest.fixture(scope="module")
def data_dir(indexes: tuple[Path, Path, Path]) -> Path:
    return indexes[0]


@pytest.fixture(scope="module")
def guarded(data_dir: Path):
    """The default deployment: a token, no trusted proxy."""
    with S.running_service(data_dir, data_dir.parent / "serve.log", RAG_SERVE_TOKEN=TOKEN) as service:
        yield service


@pytest.fixture(scope="module")
def proxied(indexes: tuple[Path, Path, Path]):
    """Behind a trusted proxy that sets X-User-Groups; no token."""
    data = indexes[1]
    with S.running_service(data, data.parent / "serve.log", RAG_SERVE_TRUSTED_PROXY="1") as service:
        yield service


def _search(service: S.ServiceProcess, body: Any, headers: dict[str, str] | None = None, **kw: Any) -> httpx.Response:
    return httpx.post(f"{service.url}/v1/search", json=body, headers=headers or {}, timeout=60, **kw)


def _ids(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [r["document_id"] for r in response.json()["results"]]


# --- the guarded service: token on, trusted proxy off -----------------------------------------------------
def test_health_needs_no_token_and_says_what_is_served(guarded: S.ServiceProcess) -> None:
    response = httpx.get(f"{guarded.url}/health", headers=AUTH, timeout=10)
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and body["documents"] == len(S.ALL_DOCUMENTS)
    assert body["dense_model"] == "all-MiniLM-L6-v2" and body["engine"] == "qdrant-edge"
    assert body["index_updated"] and body["index_updated"].startswith("20")


def test_every_route_but_health_needs_the_token(guarded: S.ServiceProcess) -> None:
    who = {"X-User-Id": "U1"}
    for headers in (who, {**who, "Authorization": "Bearer wrong"}, {**who, "Authorization": TOKEN}):
        response = _search(guarded, {"query": "postgres"}, headers)
        assert response.status_code == 401 and response.json()["field"] == "Authorization"
        assert response.headers["www-authenticate"] == "Bearer"
    assert httpx.get(f"{guarded.url}/metrics", timeout=10).status_code == 401
    assert httpx.post(f"{guarded.url}/mcp", json={}, headers=who, timeout=10).status_code == 401
    assert _search(guarded, {"query": "postgres"}, {**who, **AUTH}).status_code == 200


def test_a_caller_without_identity_is_refused_and_a_forged_group_header_widens_nothing(
    guarded: S.ServiceProcess,
) -> None:
    response = _search(guarded, {"query": "postgres"}, AUTH)
    assert response.status_code == 401 and response.json()["field"] == "X-User-Id"
    forged = {**AUTH, "X-User-Id": "U2", "X-User-Groups": f"{S.MEMBERS},{S.OPS},{S.SECURE},{S.HR}"}
    response = _search(guarded, {"query": "postgres"}, forged)
    assert response.status_code == 400
    assert response.json()["field"] == "X-User-Groups" and "RAG_SERVE_TRUSTED_PROXY" in response.json()["error"]
    # The same caller without the forged header: a user id alone reads what names it (U2 is no member of #secret).
    assert S.SECRET_THREAD not in _ids(
        _search(guarded, {"query": "salary budget", "top_k": 20}, {**AUTH, "X-User-Id": "U2"})
    )
    # U1 is a member of the private channel: its ACL names U1.
    assert S.SECRET_THREAD in _ids(_search(guarded, {"query": "salary budget"}, {**AUTH, "X-User-Id": "U1"}))


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"query": "xy", "top_k": 0}, 422, "top_k"),
        ({"query": "xy", "top_k": 101}, 422, "top_k"),
        ({"query": "xy", "mode": "magic"}, 422, "mode"),
        ({"query": "x" * 8001}, 422, "query"),
        ({"query": "   "}, 422, "query"),
        ({"query": " x "}, 422, "query"),  # the design's minimum: 2 characters
        ({"query": "xy", "unknown": 1}, 422, "unknown"),
        ({"query": "xy", "since": "notadate"}, 422, "since"),
        ({"query": "xy", "until": "2024-13-01"}, 422, "until"),
        ({"top_k": 3}, 422, "query"),
        ([1, 2], 422, "body"),
    ],
)
def test_bad_requests_get_a_json_error_naming_the_field(
    guarded: S.ServiceProcess, body: Any, status: int, field: str
) -> None:
    response = _search(guarded, body, {**AUTH, "X-User-Id": "U1"})
    assert response.status_code == status, response.text
    error = response.json()
    assert (error["field"] == field and field in error["error"]) or field == "body"
    assert "Traceback" not in response.text


def test_malformed_json_is_a_400_on_the_body(guarded: S.ServiceProcess) -> None:
    response = httpx.post(
        f"{guarded.url}/v1/search",
        content=b'{"query": "x"',
        headers={**AUTH, "X-User-Id": "U1", "Content-Type": "application/json"},
        timeout=10,
    )
    assert response.status_code == 400 and response.json() == {
        "error": "the request body is not valid JSON",
        "field": "body",
    }


def test_requests_a_browser_page_or_a_sloppy_proxy_could_forge_are_refused(guarded: S.ServiceProcess) -> None:
    who = {**AUTH, "X-User-Id": "U1"}
    # A DNS-rebinding page reaches 127.0.0.1 under its own name.
    rebinding = _search(guarded, {"query": "postgres"}, {**who, "Host": "evil.example:8000"})
    assert rebinding.status_code == 400 and rebinding.json()["field"] == "Host"
    assert httpx.post(f"{guarded.url}/mcp", json={}, headers={**who, "Host": "evil.example"}).status_code == 400
    # Two copies of an identity header: neither is believed.
    doubled = httpx.post(
        f"{guarded.url}/v1/search",
        json={"query": "postgres"},
        headers=[("Authorization", AUTH["Authorization"]), ("X-User-Id", "U2"), ("X-User-Id", "U1")],
        timeout=10,
    )
    assert doubled.status_code == 400 and doubled.json()["field"] == "X-User-Id"
    huge = httpx.post(
        f"{guarded.url}/v1/search",
        content=b'{"query": "' + b"x" * 70_000 + b'"}',
        headers={**who, "Content-Type": "application/json"},
        timeout=10,
    )
    assert huge.status_code == 413 and huge.json()["field"] == "body"
    surrogate = httpx.post(
        f"{guarded.url}/v1/search",
        content=b'{"query": "a\\ud800b"}',
        headers={**who, "Content-Type": "application/json"},
        timeout=10,
    )
    assert surrogate.status_code == 422 and surrogate.json()["field"] == "query"


def test_min_score_filters_on_the_calibrated_relevance(guarded: S.ServiceProcess, data_dir: Path) -> None:
    headers = {**AUTH, "X-User-Id": "U1"}
    body = {"query": "postgres upgrade salary budget", "mode": "bm25", "top_k": 10}
    before = _search(guarded, body, headers).json()
    assert len(before["results"]) >= 2 and all(r["relevance"] is None for r in before["results"])
    assert "no calibration for mode bm25" in _search(guarded, {**body, "min_score": 0.5}, headers).json()["warnings"][0]
    # The evaluation writes the calibration; the service reads it on its next search, without a restart.
    scores = sorted(r["score"] for r in before["results"])
    cut = (scores[-1] + scores[-2]) / 2
    Calibration({"bm25": ModeCalibration((scores[0], cut, scores[-1]), (0.1, 0.5, 0.95), 40, 10)}).save(
        data_dir / "reports" / "calibration.json"
    )
    calibrated = _search(guarded, {**body, "min_score": 0.5, "top_k": 9}, headers).json()
    assert [r["document_id"] for r in calibrated["results"]] == [before["results"][0]["document_id"]]
    assert calibrated["results"][0]["relevance"] == pytest.approx(0.95)
    relevance = [r["relevance"] for r in _search(guarded, {**body, "top_k": 8}, headers).json()["results"]]
    assert relevance == sorted(relevance, reverse=True) and all(0.0 <= p <= 1.0 for p in relevance)
    for bad in (1.5, -0.1, "0.5"):
        refused = _search(guarded, {**body, "min_score": bad}, headers)
        assert refused.status_code == 422 and refused.json()["field"] == "min_score", refused.text


def test_the_readers_tree_lists_only_what_they_may_read_and_a_path_scopes_a_search(
    guarded: S.ServiceProcess, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def tree(user: str, prefix: str | None = None) -> dict[str, Any]:
        params = {"prefix": prefix} if prefix else None
        response = httpx.get(f"{guarded.url}/v1/tree", params=params, headers={**AUTH, "X-User-Id": user}, timeout=30)
        assert response.status_code == 200, response.text
        return dict(response.json())

    def containers(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {c["container"]: c for s in body["sources"] for c in s["containers"]}

    # Who asks is the caller's identity, never a forged group header; no identity, no tree.
    nobody = httpx.get(f"{guarded.url}/v1/tree", headers=AUTH, timeout=30)
    assert nobody.status_code in (400, 401) and "X-User" in nobody.json()["error"], nobody.text
    forged = httpx.get(f"{guarded.url}/v1/tree", headers={**AUTH, "X-User-Id": "U2", "X-User-Groups": S.OPS},
                       timeout=30)  # fmt: skip
    assert forged.status_code == 400 and forged.json()["field"] == "X-User-Groups"
    too_long = httpx.get(f"{guarded.url}/v1/tree", params={"prefix": "x" * 201}, headers={**AUTH, "X-User-Id": "U2"},
                         timeout=30)  # fmt: skip
    assert too_long.status_code == 422 and too_long.json()["field"] == "query.prefix"
    alice, bob = containers(tree("U1")), containers(tree("U2"))
    assert {"C0PUB", "G0PRIV", "OPS"} <= set(alice) and "HR" not in alice
    assert set(bob) == {"C0PUB"}  # the private channel (and its name) and the projects never show to Bob
    private = alice["G0PRIV"]
    assert private["path"].startswith("slack/#") and private["documents"] >= 1 and private["latest"]
    assert private["name"] not in json.dumps(tree("U2"))
    assert {c["source"] for c in containers(tree("U1", "JIRA/")).values()} == {"jira"}  # any case, a prefix
    # The same path scopes a search: only that channel's documents, and nothing for a reader who cannot see it.
    body = {"query": "salary budget postgres", "path": private["path"], "top_k": 10}
    scoped = _search(guarded, body, {**AUTH, "X-User-Id": "U1"}).json()
    assert scoped["results"] and {r["container"] for r in scoped["results"]} == {"G0PRIV"}
    refused = _search(guarded, body, {**AUTH, "X-User-Id": "U2"}).json()
    assert refused["results"] == [] and "no container you may read" in refused["warnings"][0]
    # A path narrows the caller's own filters, never replaces them.
    outside = _search(guarded, {**body, "container": ["C0PUB"]}, {**AUTH, "X-User-Id": "U1"}).json()
    assert outside["results"] == [] and "no container you may read" in outside["warnings"][0]
    assert _search(guarded, body, {**AUTH, "X-User-Id": "U1"}).json()["cached"] is True  # a hit skips the tree

    async def listed() -> dict[str, Any]:
        async with (
            httpx2.AsyncClient(headers={**AUTH, "X-User-Id": "U2"}, timeout=60) as http,
            Client(streamable_http_client(f"{guarded.url}/mcp", http_client=http)) as client,
        ):
            result = await client.call_tool("list_containers", {"prefix": "slack"})
            bad = await client.call_tool("list_containers", {"prefix": "x" * 201})
            return {**(result.structured_content or {}), "bad": bad.content[0].text if bad.is_error else ""}

    mcp = asyncio.run(listed())
    assert "prefix" in mcp["bad"]
    assert [c["container"] for s in mcp["sources"] for c in s["containers"]] == ["C0PUB"]
    # The CLI reads the same tree (the service hands it the index for the call).
    assert cli.main(["tree", "--groups", S.MEMBERS, "--json", "--data-dir", str(data_dir)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [c["container"] for s in printed["sources"] for c in s["containers"]] == ["C0PUB"]
    assert cli.main(["tree", "--data-dir", str(data_dir)]) == 2 and "--user" in capsys.readouterr().err
    # `search --path` narrows --container as the service does.
    argv = ["search", "salary", "--user", "U1", "--path", private["path"], "--data-dir", str(data_dir)]
    assert cli.main([*argv, "--container", "C0PUB"]) == 2 and "no container" in capsys.readouterr().err
    assert cli.main([*argv, "--json"]) == 0
    assert {r["container"] for r in json.loads(capsys.readouterr().out)["results"]} == {"G0PRIV"}


def test_the_ingestion_api_is_off_without_its_own_token(guarded: S.ServiceProcess) -> None:
    # RAG_INGEST_TOKEN is not set: the readers' token opens nothing there, and the answer says how to turn it on.
    for method, path in (("GET", "/v1/scheduler/status"), ("POST", "/v1/ingest"), ("POST", "/v1/ingest/all")):
        response = httpx.request(method, f"{guarded.url}{path}", headers=AUTH, json={"source": "slack"}, timeout=10)
        assert response.status_code == 404 and "RAG_INGEST_TOKEN" in response.json()["error"], response.text


def test_health_tells_only_the_verdict_without_the_token(guarded: S.ServiceProcess) -> None:
    bare = httpx.get(f"{guarded.url}/health", timeout=10)
    assert bare.status_code == 200 and bare.json() == {"status": "ok"}
    assert httpx.head(f"{guarded.url}/health", timeout=10).status_code == 200
    full = httpx.get(f"{guarded.url}/health", headers=AUTH, timeout=10).json()
    assert full["documents"] == len(S.ALL_DOCUMENTS) and full["index"] == "open"
    wrong_method = httpx.delete(f"{guarded.url}/v1/search", headers={**AUTH, "X-User-Id": "U1"}, timeout=10)
    assert wrong_method.status_code == 405 and "POST" in wrong_method.headers["allow"]


def test_the_query_text_never_reaches_the_log(guarded: S.ServiceProcess) -> None:
    marker = "zebracornflakes-postgres"
    assert _search(guarded, {"query": marker}, {**AUTH, "X-User-Id": "U1"}).status_code == 200
    assert _search(guarded, {"query": marker, "mode": "nope"}, {**AUTH, "X-User-Id": "U1"}).status_code == 422
    log = guarded.log()
    assert "POST /v1/search" in log  # the access log is on
    assert marker not in log and TOKEN not in log


def test_metrics_parse_and_count_requests_by_route_status_and_stage(guarded: S.ServiceProcess) -> None:
    _search(guarded, {"query": "postgres upgrade", "mode": "reranked"}, {**AUTH, "X-User-Id": "U1"})
    assert _search(guarded, {"query": "postgres"}, {"X-User-Id": "U1"}).status_code == 401
    text = httpx.get(f"{guarded.url}/metrics", headers=AUTH, timeout=10).text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    requests = {
        (s.labels["route"], s.labels["status"]): s.value
        for s in families["rag_requests"].samples
        if s.name == "rag_requests_total"
    }
    assert requests[("/v1/search", "200")] >= 1 and requests[("/v1/search", "401")] >= 1
    stages = {
        (s.labels["stage"], s.labels["mode"])
        for s in families["rag_stage_seconds"].samples
        if s.name == "rag_stage_seconds_count"
    }
    assert {("embed", "reranked"), ("retrieve", "reranked"), ("rerank", "reranked"), ("total", "reranked")} <= stages
    age = next(s.value for s in families["rag_index_age_seconds"].samples)
    assert not math.isnan(age) and 0 <= age < 3600
    # Index freshness: the time of the pipeline's last write, as /health reports it.
    written = next(s.value for s in families["rag_index_written_timestamp_seconds"].samples)
    updated = httpx.get(f"{guarded.url}/health", headers=AUTH, timeout=10).json()["index_updated"]
    assert written == datetime.fromisoformat(updated).timestamp() and written <= time.time()
    assert "rag_store_wait_seconds" in families and "rag_index_hand_overs" in families


@pytest.mark.slow
def test_status_names_the_service_as_the_index_holder(guarded: S.ServiceProcess, data_dir: Path) -> None:
    result = subprocess.run(
        S.rag_pipeline_command("status", "--json"), env=S.service_env(data_dir), capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    holder = json.loads(result.stdout)["index_holder"]
    assert holder["pid"] == guarded.process.pid and holder["yields"] and "rag-pipeline serve" in holder["label"]


def test_get_document_reads_only_what_the_reader_may_read(guarded: S.ServiceProcess) -> None:
    url = f"{guarded.url}/v1/documents/{S.SECRET_THREAD}"
    member = httpx.get(url, headers={**AUTH, "X-User-Id": "U3"}, timeout=10)
    assert member.status_code == 200 and "salary budget" in member.json()["text"]
    outsider = httpx.get(url, headers={**AUTH, "X-User-Id": "U2"}, timeout=10)
    missing = httpx.get(f"{guarded.url}/v1/documents/slack:nope", headers={**AUTH, "X-User-Id": "U2"}, timeout=10)
    # Forbidden and missing read the same.
    assert outsider.status_code == missing.status_code == 404
    assert "salary" not in outsider.text


def test_the_directory_resolves_callers_by_email_or_id(guarded: S.ServiceProcess) -> None:
    """`rag-pipeline index` wrote the principal directory: callers get their accounts and groups from it."""
    body = {"query": "postgres", "top_k": 20}
    carol = _search(guarded, body, {**AUTH, "X-User-Email": "CAROL@serve.test"})
    # Her Slack id (a member of #secret) and the workspace group; no Jira account, so no issue.
    assert set(_ids(carol)) == {S.SECRET_THREAD, S.GENERAL_THREAD}
    assert carol.json()["reader"]["groups_from"] == "directory" and S.MEMBERS in carol.json()["reader"]["groups"]
    # Alice's Jira account (the directory file) joins her Slack account by email: OPS, its secured issue, no HR.
    alice = set(_ids(_search(guarded, body, {**AUTH, "X-User-Id": "U1"})))
    assert alice == {S.GENERAL_THREAD, S.SECRET_THREAD, S.OPS_ISSUE, S.OPS_SECRET_ISSUE}
    bob = set(_ids(_search(guarded, body, {**AUTH, "X-User-Id": "U2"})))
    assert bob == {S.GENERAL_THREAD}
    # Two headers naming two people are refused, naming the header; a stranger reads what is public (nothing).
    both = _search(guarded, body, {**AUTH, "X-User-Id": "U2", "X-User-Email": "alice@serve.test"})
    assert both.status_code == 400 and both.json()["field"] == "X-User-Id"
    assert _ids(_search(guarded, body, {**AUTH, "X-User-Id": "U0STRANGER"})) == []


def test_mcp_over_http_uses_the_callers_headers_and_no_argument_widens_the_reader(guarded: S.ServiceProcess) -> None:
    async def session(headers: dict[str, str]) -> dict[str, Any]:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(f"{guarded.url}/mcp", http_client=http)) as client,
        ):
            tools = await client.list_tools()
            found = await client.call_tool("search_documents", {"query": "salary budget postgres", "top_k": 10})
            widened = await client.call_tool(
                "search_documents", {"query": "salary budget postgres", "user_id": "U3", "groups": [S.MEMBERS]}
            )
            document = await client.call_tool("get_document", {"document_id": S.SECRET_THREAD})
            bad = await client.call_tool("search_documents", {"query": "xy", "top_k": 0})
            threshold = await client.call_tool("search_documents", {"query": "xy", "min_score": 1.5})
            short = await client.call_tool("search_documents", {"query": "x"})
            nothing = await client.call_tool("search_documents", {"query": "salary budget", "source": "jira"})
            return {
                "threshold": threshold.content[0].text if threshold.is_error else "",
                "short": short.content[0].text if short.is_error else "",
                "tools": sorted(t.name for t in tools.tools),
                "found": [r["document_id"] for r in (found.structured_content or {})["results"]],
                "widened_error": widened.is_error,
                "widened": [r["document_id"] for r in (widened.structured_content or {}).get("results", [])],
                "document_error": document.is_error,
                "document": document.content[0].text if document.content else "",
                "bad": bad.content[0].text if bad.is_error else "",
                "bad_details": (bad.structured_content or {}).get("error_details"),
                "document_details": (document.structured_content or {}).get("error_details"),
                "envelope": {k: (found.structured_content or {}).get(k) for k in ("status", "results_count", "count")},
                "nothing": {k: (nothing.structured_content or {}).get(k) for k in ("status", "results_count")},
            }

    member = asyncio.run(session({**AUTH, "X-User-Id": "U1"}))
    assert member["tools"] == MCP_TOOLS
    assert S.SECRET_THREAD in member["found"] and not member["document_error"]
    outsider = asyncio.run(session({**AUTH, "X-User-Id": "U2"}))
    assert S.SECRET_THREAD not in outsider["found"]
    # The extra arguments are ignored, not an error that would hide a widening: the same answer as without them.
    assert not outsider["widened_error"] and outsider["widened"] == outsider["found"]
    assert outsider["document_error"] and "not found" in outsider["document"]
    assert "top_k" in outsider["bad"]
    assert "min_score" in outsider["threshold"] and "at least 2 characters" in outsider["short"]
    # Issue 67: a failed call carries the exception's type beside the MCP error flag; the search envelope its
    # status and results_count, over MCP and HTTP alike.
    assert outsider["bad_details"] == {"type": "ValidationError", "tool": "search_documents", "field": "top_k"}
    assert outsider["document_details"] == {"type": "ToolError", "tool": "get_document", "field": None}
    count = len(outsider["found"])
    assert count and outsider["envelope"] == {"status": "success", "results_count": count, "count": count}
    assert outsider["nothing"] == {"status": "no_results", "results_count": 0}  # Bob reads no Jira project
    for query, source, status in (("salary budget postgres", None, "success"), ("salary budget", "jira", "no_results")):
        body = {"query": query, "top_k": 10, **({"source": [source]} if source else {})}
        found = _search(guarded, body, {**AUTH, "X-User-Id": "U2"}).json()
        assert found["status"] == status and found["results_count"] == len(found["results"]), found


def test_a_write_gets_the_index_within_a_second_and_queries_wait_for_it_without_failing(
    guarded: S.ServiceProcess, data_dir: Path, tmp_path: Path
) -> None:
    """A points write in another process (the same opener the Dagster step uses), holding the index 3 s,
    while 4 clients query: none fails, the writer gets the folder within 1 s, no query waits longer than the
    write plus 1 s."""
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import json, sys, time\n"
            "from pathlib import Path\n"
            "from rag_pipeline.index.opening import StoreLocation, open_vector_store\n"
            "location = StoreLocation(path=Path(sys.argv[1]), wait_seconds=60)\n"
            "time.sleep(1.0)  # queries are running by now\n"
            "asked = time.time()\n"
            "store = open_vector_store(location, label='test writer', on_wait=lambda m: print(m, file=sys.stderr))\n"
            "got = time.time()\n"
            "store.set_document_payload(store.names.children, [sys.argv[2]], {'serve_test': got})\n"
            "time.sleep(3.0); store.close(); released = time.time()\n"
            "print(json.dumps({'asked': asked, 'got': got, 'released': released}))\n",
            str(data_dir / "qdrant"),
            S.GENERAL_THREAD,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    outcomes: list[tuple[float, float, int]] = []
    stop = threading.Event()

    def client(query: str) -> None:
        with httpx.Client(timeout=60) as http:
            while not stop.is_set():
                started = time.time()
                try:
                    status = http.post(
                        f"{guarded.url}/v1/search",
                        json={"query": query, "mode": "hybrid"},
                        headers={**AUTH, "X-User-Id": "U1"},
                    ).status_code
                except httpx.HTTPError:
                    status = -1
                outcomes.append((started, time.time(), status))

    threads = [threading.Thread(target=client, args=(q,)) for q in ("postgres", "salary", "upgrade", "hiring")]
    for t in threads:
        t.start()
    health: list[tuple[int, str]] = []
    while writer.poll() is None:
        response = httpx.get(f"{guarded.url}/health", headers=AUTH, timeout=30)
        health.append((response.status_code, response.json().get("index", "")))
        time.sleep(0.05)
    out, err = writer.communicate(timeout=120)
    time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join()
    assert writer.returncode == 0, err
    # The writer's log names the service it got the index from (as a Dagster step's log does).
    assert "from pid" in err and "rag-pipeline serve" in err, err
    times = json.loads(out)
    # The write as the pipeline sees it: from asking for the index (the service then hands it over) to
    # giving it back. A query waits at most that, plus the service's reopening and its own run.
    write_seconds = times["released"] - times["asked"]
    # The service let go of the folder within 1 s of the writer asking (its own load of the shards comes after).
    handed = re.search(r"after ([0-9.]+) s, then loaded it in ([0-9.]+) s", err)
    assert handed is not None and float(handed.group(1)) <= 1.0, err
    assert outcomes and all(status == 200 for _, _, status in outcomes), {s for *_, s in outcomes}
    longest = max(end - start for start, end, _ in outcomes)
    assert longest <= write_seconds + 1.0, (longest, write_seconds)
    # A write is no outage: health stays 200 and says where the index is.
    assert {status for status, _ in health} == {200}, health
    assert "lent to a writer" in {index for _, index in health}, health
    # Queries ran before, during (waiting) and after the write.
    assert any(start > times["released"] for start, _, _ in outcomes)
    hand_overs = [
        s.value
        for f in text_string_to_metric_families(httpx.get(f"{guarded.url}/metrics", headers=AUTH, timeout=10).text)
        for s in f.samples
        if s.name == "rag_index_hand_overs_total"
    ]
    assert hand_overs and hand_overs[0] >= 1


# --- the proxied service: no token, groups from a trusted proxy ------------------------------------------
def _cli_ids(data_dir: Path, query: str, mode: str, user: str | None, groups: list[str], top_k: int) -> list[str]:
    """The real CLI's ``search --json`` (in this process: its start-up costs seconds per call)."""
    args = ["search", query, "--mode", mode, "--top-k", str(top_k), "--json", "--data-dir", str(data_dir)]
    args += ["--user", user] if user else []
    args += ["--groups", ",".join(groups)] if groups else []
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        assert cli.main(args) == 0
    return [r["document_id"] for r in json.loads(buffer.getvalue())["results"]]


READERS: dict[str, tuple[str | None, list[str], set[str]]] = {
    # name: (user id, groups, the documents this reader may read)
    "slack member in #secret": ("U1", [S.MEMBERS], {S.GENERAL_THREAD, S.SECRET_THREAD}),
    "slack member": ("U2", [S.MEMBERS], {S.GENERAL_THREAD}),
    "ops browser": ("acct-ops", [S.OPS], {S.OPS_ISSUE}),
    "ops with the security level": ("acct-sec", [S.OPS, S.SECURE], {S.OPS_ISSUE, S.OPS_SECRET_ISSUE}),
    "hr": ("acct-hr", [S.HR], {S.HR_ISSUE}),
    "nobody": ("acct-none", [], set()),
}
QUERIES = ("postgres upgrade", "salary budget", "credentials rotation", "hiring plan")


def _compare_with_the_cli(
    proxied: S.ServiceProcess,
    monkeypatch: pytest.MonkeyPatch,
    queries: tuple[str, ...],
    modes: tuple[str, ...],
    cli_readers: int,
) -> int:
    """Every reader × query × mode through the API: nothing it may not read; for the first ``cli_readers``
    readers also exactly the CLI's ids (a CLI search costs seconds: it opens the index, which the service
    hands over). Returns how many were compared with the CLI."""
    for name in list(os.environ):  # the in-process CLI reads this environment; the service had a clean one
        if name.startswith(("RAG_", "QDRANT_", "SLACK_", "JIRA_")):
            monkeypatch.delenv(name)
    data_dir = proxied.log_path.parent / "data"
    compared = 0
    for number, (user, groups, allowed) in enumerate(READERS.values()):
        headers = {"X-User-Id": user or "", "X-User-Groups": ",".join(groups)}
        for query in queries:
            for mode in modes:
                api = _ids(_search(proxied, {"query": query, "mode": mode, "top_k": 5}, headers))
                assert set(api) <= allowed, (user, query, api)
                if number < cli_readers:
                    assert api == _cli_ids(data_dir, query, mode, user, groups, 5), (user, query, mode)
                    compared += 1
        # Each reader finds what it may read when it asks for everything.
        everything = _ids(_search(proxied, {"query": "postgres", "top_k": 20}, headers))
        assert set(everything) == allowed, (user, everything)
    return compared


@pytest.mark.slow
def test_behind_a_trusted_proxy_the_api_returns_exactly_the_clis_documents_and_never_leaks(
    proxied: S.ServiceProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every reader, query and mode through the API for leaks; the CLI's ids for every reader in the two
    # default-facing modes of one query (a CLI search costs seconds). The bench compares the 180 lines of
    # acl_bundled_dev on the demo's index (bench/serve_load.py).
    assert _compare_with_the_cli(proxied, monkeypatch, QUERIES, MODES, cli_readers=0) == 0
    compared = _compare_with_the_cli(proxied, monkeypatch, QUERIES[:1], ("hybrid", "reranked"), cli_readers=6)
    assert compared == len(READERS) * 2


@pytest.mark.slow
def test_every_mode_and_filter_through_the_api(proxied: S.ServiceProcess) -> None:
    everyone = {"X-User-Id": "U1", "X-User-Groups": f"{S.MEMBERS},{S.OPS},{S.SECURE},{S.HR}"}
    for mode in MODES:
        response = _search(proxied, {"query": "postgres upgrade", "mode": mode, "top_k": 10}, everyone)
        body = response.json()
        assert response.status_code == 200 and body["mode"] == mode, body
        assert set(_ids(response)) == set(S.ALL_DOCUMENTS)
        assert set(body["timing_ms"]) == {"wait", "embed", "retrieve", "rerank", "total"}
        first = body["results"][0]
        assert set(first) >= {"document_id", "url", "title", "authors", "score", "child_text", "parent_text"}
    jira = _ids(_search(proxied, {"query": "postgres", "source": "jira"}, everyone))
    assert set(jira) == {S.OPS_ISSUE, S.OPS_SECRET_ISSUE, S.HR_ISSUE}
    ops = _ids(_search(proxied, {"query": "postgres", "container": ["OPS"]}, everyone))
    assert set(ops) == {S.OPS_ISSUE, S.OPS_SECRET_ISSUE}
    recent = _ids(_search(proxied, {"query": "postgres", "since": "2024-03-03"}, everyone))
    assert recent == [S.HR_ISSUE]
    early = _ids(_search(proxied, {"query": "postgres", "until": "2024-03-02"}, everyone))
    assert set(early) == {S.GENERAL_THREAD, S.SECRET_THREAD}
    by_carol = _ids(_search(proxied, {"query": "postgres", "author": "Carol C"}, everyone))
    assert by_carol == [S.SECRET_THREAD]


@pytest.mark.slow
def test_the_cli_can_send_its_search_to_the_service(proxied: S.ServiceProcess) -> None:
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        code = cli.main(
            ["search", "salary budget", "--server", proxied.url, "--user", "U1", "--groups", S.MEMBERS, "--json"]
        )
    assert code == 0
    assert S.SECRET_THREAD in [r["document_id"] for r in json.loads(buffer.getvalue())["results"]]


@pytest.mark.slow
def test_a_killed_service_leaves_the_index_free_for_the_next_opener(proxied: S.ServiceProcess) -> None:
    folder = proxied.log_path.parent / "data" / "qdrant"
    proxied.stop(signal.SIGKILL)
    store = EdgeVectorStore(folder, CollectionNames(), wait_seconds=0)  # fails at once if anything held it
    try:
        assert store.count(store.names.parents) == len(S.ALL_DOCUMENTS)
    finally:
        store.close()


# --- starting ---------------------------------------------------------------------------------------------
def test_listening_beyond_loopback_without_a_token_refuses_to_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAG_SERVE_TOKEN", raising=False)
    assert cli.main(["serve", "--host", "0.0.0.0", "--port", str(S.free_port()), "--data-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: refusing to listen on 0.0.0.0 without RAG_SERVE_TOKEN: set it to a secret that callers send as "
        "'Authorization: Bearer <token>', or listen on 127.0.0.1"
    ]


def _in_process_service(folder: Path, dense_model: str = "all-MiniLM-L6-v2") -> SearchService:
    """The service's logic without HTTP and without loading a model (BM25 only): enough for its states."""
    models = SearchModels(dense_model=dense_model, bm25=Bm25Encoder())
    return SearchService(StoreLocation(path=folder), models, RetrieverConfig(), wait_seconds=0.5)


def test_without_an_index_health_and_queries_say_why(tmp_path: Path) -> None:
    service = _in_process_service(tmp_path / "qdrant")
    service.start()
    try:
        ready, body = service.health()
        assert not ready and body["status"] == "unavailable"
        assert "no index" in body["reason"] and "rag-pipeline demo" in body["reason"]
        with pytest.raises(IndexUnavailable, match="no index"):
            service.search(SearchRequest(query="xy"), Principal(user_id="U1"))
    finally:
        service.close()


def test_an_index_of_another_dense_model_is_refused_with_the_reason(
    indexes: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    copy = tmp_path / "data"
    S.copy_index(indexes[2], copy)
    service = _in_process_service(copy / "qdrant", dense_model="another-model")
    service.start()
    try:
        ready, body = service.health()
        assert not ready and "RAG_DENSE_MODEL" in body["reason"] and "all-MiniLM-L6-v2" in body["reason"]
        # The folder is not kept while the index cannot be used: a writer gets it at once.
        EdgeVectorStore(copy / "qdrant", CollectionNames(), wait_seconds=0).close()
    finally:
        service.close()


@pytest.mark.slow
def test_mcp_over_stdio_searches_as_the_configured_reader_only(
    indexes: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    copy = tmp_path / "data"
    S.copy_index(indexes[2], copy)

    async def session() -> dict[str, Any]:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "rag_pipeline.cli", "mcp", "--user", "U2", "--groups", S.MEMBERS],
            env=S.service_env(copy),
        )
        async with Client(params, read_timeout_seconds=120) as client:
            tools = await client.list_tools()
            found = await client.call_tool("search_documents", {"query": "postgres salary budget upgrade"})
            widened = await client.call_tool(
                "search_documents", {"query": "salary budget", "user_id": "U3", "groups": "slack:x"}
            )
            secret = await client.call_tool("get_document", {"document_id": S.SECRET_THREAD})
            general = await client.call_tool("get_document", {"document_id": S.GENERAL_THREAD})
            return {
                "tools": sorted(t.name for t in tools.tools),
                "schema": {t.name: sorted(t.input_schema.get("properties", {})) for t in tools.tools},
                "found": [r["document_id"] for r in (found.structured_content or {})["results"]],
                "widened": [r["document_id"] for r in (widened.structured_content or {}).get("results", [])],
                "widened_error": widened.is_error,
                "secret": (secret.is_error, secret.content[0].text if secret.content else ""),
                "general": (general.structured_content or {}).get("text", ""),
            }

    result = asyncio.run(session())
    assert result["tools"] == MCP_TOOLS
    # No tool takes a reader: the model cannot name one.
    for properties in result["schema"].values():
        assert not {"user", "user_id", "groups", "principal", "email"} & set(properties)
    assert S.GENERAL_THREAD in result["found"] and S.SECRET_THREAD not in result["found"]
    assert not result["widened_error"] and S.SECRET_THREAD not in result["widened"]
    assert result["secret"][0] and "not found" in result["secret"][1]
    assert "postgres upgrade" in result["general"]


def test_mcp_over_stdio_needs_a_reader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("RAG_MCP_USER", "RAG_MCP_EMAIL"):
        monkeypatch.delenv(name, raising=False)
    assert cli.main(["mcp", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--user" in err and "RAG_MCP_USER" in err


@pytest.mark.slow
def test_a_real_index_run_writes_while_the_service_serves_and_the_service_then_finds_the_new_thread(
    tmp_path: Path,
) -> None:
    """The Dagster points step (through the real `rag-pipeline index`) asks for the index the service holds:
    it gets it, writes, gives it back; queries during the run all succeed and afterwards find the new thread."""
    data_dir = S.build_index(tmp_path)
    new_day = tmp_path / "export" / "general" / "2024-03-05.json"
    new_day.write_text(
        json.dumps(
            [
                {
                    "type": "message",
                    "user": "U2",
                    "text": "kubernetes migration of the ingress",
                    "ts": "1709640000.000000",
                }
            ]
        )
    )
    new_thread = f"slack:{S.TEAM}:C0PUB:1709640000.000000"
    reader = {"X-User-Id": "U1", "X-User-Groups": S.MEMBERS}
    with S.running_service(data_dir, tmp_path / "serve.log", RAG_SERVE_TRUSTED_PROXY="1") as service:
        assert new_thread not in _ids(_search(service, {"query": "kubernetes ingress migration"}, reader))
        run = subprocess.Popen(
            S.rag_pipeline_command(
                "index",
                "--slack-export",
                str(tmp_path / "export"),
                "--slack-team",
                S.TEAM,
                "--slack-domain",
                "serve.slack.com",
                "--source",
                "slack",
            ),
            env=S.service_env(data_dir),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        statuses = []
        while run.poll() is None:
            statuses.append(_search(service, {"query": "postgres upgrade"}, reader).status_code)
            time.sleep(0.2)
        _, err = run.communicate()
        assert run.returncode == 0, err
        assert statuses and set(statuses) == {200}
        deadline = time.monotonic() + 10
        while new_thread not in _ids(_search(service, {"query": "kubernetes ingress migration"}, reader)):
            assert time.monotonic() < deadline, "the service never saw the new thread"
            time.sleep(0.2)
        metrics = httpx.get(f"{service.url}/metrics", timeout=10).text
        assert any(
            s.value >= 1
            for f in text_string_to_metric_families(metrics)
            for s in f.samples
            if s.name == "rag_index_hand_overs_total"
        )
