"""Tool search end to end: tool definitions from a catalog file and from a real MCP server's ``tools/list`` (the
official SDK on 127.0.0.1) indexed by ``rag-pipeline index`` through the Dagster chain beside a Jira issue, then
searched over HTTP and over MCP as a directory user — the design's multi-signal score, the critical set, prompt
tokens saved, outcomes recorded changing the ranking — and never returned by a document search. The keyword
fallback is checked on the same index with a dense model that fails to load."""

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

from rag_pipeline.composition import bm25_encoder, open_index
from rag_pipeline.connectors.tools.catalog import server_container
from rag_pipeline.retrieval.entry import SearchModels, build_retriever
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.tool_search import ToolSearch, ToolSearchConfig
from rag_pipeline.settings import Settings
from rag_pipeline_tests.kit import serving_fixtures as S
from rag_pipeline_tests.kit.data import jira_issue, write_jira_dump
from rag_pipeline_tests.kit.emulators.mcp_tool_server import McpToolServer

SITE = "jira.tools.test"
TOKEN = "tool-search-token-8812"
DIRECTORY = "account_id,email,groups\nacc-kim,kim@tools.test,project:OPS\n"
CATALOG = {
    "tools": [
        {"name": "search_documents", "description": "Search Slack threads and Jira issues the caller may read.",
         "critical": True},
        {"name": "get_weather", "description": "Current weather and the forecast for a city.",
         "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
        {"type": "function", "function": {"name": "create_jira_issue", "description": "Open a new Jira issue.",
                                          "parameters": {"type": "object", "properties": {"summary": {}}}}},
        {"name": "convert_currency", "description": "Convert an amount of money from one currency to another.",
         "tags": ["finance"]},
        {"description": "a tool without a name"},
    ]
}  # fmt: skip


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[McpToolServer]:
    server = McpToolServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, mcp_server: McpToolServer) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("tools")
    catalog = root / "tools.json"
    catalog.write_text(json.dumps(CATALOG))
    issue = jira_issue("1", "OPS-1", "2024-03-02T10:00:00.000+0000", description="The invoice run failed overnight.",
                       summary="Invoice run failed")  # fmt: skip
    dump = write_jira_dump(root / "issues.jsonl.gz", [issue])
    (root / "jira_users.csv").write_text(DIRECTORY)
    data = root / "data"
    command = ["index", "--source", "jira", "--source", "tools", "--jira-dump", str(dump), "--jira-site", SITE,
               "--jira-directory", str(root / "jira_users.csv"), "--tools-catalog", str(catalog)]  # fmt: skip
    env = S.service_env(data, RAG_TOOLS_MCP_SERVERS=mcp_server.url, RAG_TOOLS_CRITICAL="search_documents")
    done = subprocess.run(S.rag_pipeline_command(*command), env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return {"data": data, "index": done, "env": env}


def test_index_reads_the_catalog_and_the_mcp_server_and_names_the_bad_entry(indexed: dict[str, Any]) -> None:
    done: subprocess.CompletedProcess[str] = indexed["index"]
    report = done.stdout + done.stderr
    assert "tools.json tool 5: a tool needs a non-empty string 'name'" in report
    assert "documents: 7" in report  # 4 catalog tools + 3 from the MCP server


def test_without_the_dense_model_tools_are_found_by_keywords(indexed: dict[str, Any]) -> None:
    settings = Settings.from_env({"RAG_DATA_DIR": str(indexed["data"])})

    def unavailable() -> Any:
        raise RuntimeError("model weights missing")

    with open_index(settings) as store:
        retriever = build_retriever(
            store, SearchModels(settings.dense_model, bm25_encoder(settings), dense=unavailable)
        )
        found = ToolSearch(ToolSearchConfig(top_k=2)).search(
            retriever, Principal(user_id="acc-kim", groups=("jira:jira.tools.test:project:OPS",)),
            "convert an amount of money to another currency", {},
        )  # fmt: skip
    assert found.semantic == "keyword"
    assert any("dense model is unavailable" in w for w in found.warnings)
    assert found.tools[0].entry.name == "convert_currency"


def test_the_cli_searches_tools_and_records_outcomes(indexed: dict[str, Any]) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(S.rag_pipeline_command("tools", *args), env=indexed["env"], capture_output=True,
                              text=True, timeout=300)  # fmt: skip

    found = cli("convert an amount of money to another currency", "--top-k", "1", "--json")
    assert found.returncode == 0, found.stderr
    tools = json.loads(found.stdout)["tools"]
    assert [t["name"] for t in tools] == ["convert_currency", "search_documents"]  # the critical one too
    recorded = cli("--outcome", "create_jira_issue=failed", "--json")
    assert recorded.returncode == 0, recorded.stderr
    assert json.loads(recorded.stdout) == {"name": "create_jira_issue", "calls": 1, "successes": 0,
                                           "success_rate": 0.3333}  # fmt: skip
    assert cli("--outcome", "create_jira_issue").returncode == 2
    unknown = cli("--outcome", "nope=ok")
    assert unknown.returncode == 2 and "no indexed tool is named 'nope'" in unknown.stderr
    assert cli().returncode == 2  # neither a query nor an outcome


@pytest.fixture(scope="module")
def service(indexed: dict[str, Any]) -> Iterator[S.ServiceProcess]:
    data: Path = indexed["data"]
    with S.running_service(data, data.parent / "serve.log", RAG_SERVE_TOKEN=TOKEN,
                           RAG_TOOLS_CRITICAL="search_documents") as running:  # fmt: skip
        yield running


HEADERS = {"Authorization": f"Bearer {TOKEN}", "X-User-Email": "kim@tools.test"}


def _tools(service: S.ServiceProcess, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{service.url}/v1/tools/search", json=body, headers=HEADERS, timeout=60)


def test_http_tool_search_returns_the_mcp_servers_tool_the_critical_set_and_the_tokens_saved(
    service: S.ServiceProcess, mcp_server: McpToolServer
) -> None:
    response = _tools(service, {"query": "bill a customer and send them an invoice", "top_k": 2})
    assert response.status_code == 200, response.text
    found = response.json()
    first = found["tools"][0]
    assert first["name"] == "create_invoice" and first["server"] == mcp_server.url
    assert first["document_id"] == f"tools:{server_container(mcp_server.url)}:create_invoice"
    assert set(first["input_schema"]["required"]) == {"customer", "amount_eur"}
    assert 0 < first["signals"]["semantic"] <= 1 and first["signals"]["usage"] == 0
    names = [t["name"] for t in found["tools"]]
    assert len(names) == 3 and names[-1] == "search_documents" and found["tools"][-1]["critical"] is True
    tokens = found["prompt_tokens"]
    assert found["catalog_tools"] == 7 and 0 < tokens["loaded"] < tokens["all_tools"]
    assert tokens["saved"] == tokens["all_tools"] - tokens["loaded"]


def test_recorded_outcomes_change_the_ranking(service: S.ServiceProcess) -> None:
    query = {"query": "what should I do about the weather and money", "top_k": 7}
    before = _tools(service, query).json()
    ranked = [t for t in before["tools"] if not t["critical"]]
    # The runner-up: close enough in meaning (semantic is relative to the best, 1.0) for 40 good calls to lift it.
    runner_up = ranked[1]["name"]
    assert ranked[1]["signals"]["semantic"] >= 0.3 and ranked[0]["signals"]["usage"] == 0
    recorded = httpx.post(f"{service.url}/v1/tools/{runner_up}/outcome", json={"success": True, "calls": 40},
                          headers=HEADERS, timeout=60)  # fmt: skip
    assert recorded.status_code == 200, recorded.text
    assert recorded.json()["calls"] == 40 and recorded.json()["successes"] == 40
    after = _tools(service, query).json()
    assert after["cached"] is True  # the query's candidates come from the cache; the new outcome still counts
    assert next(t["name"] for t in after["tools"]) == runner_up
    assert after["tools"][0]["signals"]["usage"] == 1.0


def test_bad_tool_requests_are_4xx_naming_the_field(service: S.ServiceProcess) -> None:
    unknown = httpx.post(f"{service.url}/v1/tools/no_such_tool/outcome", json={"success": True}, headers=HEADERS,
                         timeout=60)  # fmt: skip
    assert unknown.status_code == 404 and unknown.json()["field"] == "name"
    wrong = httpx.post(f"{service.url}/v1/tools/get_weather/outcome", json={"success": "yes"}, headers=HEADERS,
                       timeout=60)  # fmt: skip
    assert wrong.status_code in (400, 422) and wrong.json()["field"] == "success"
    for body, field in (({"query": "x"}, "query"), ({"query": "weather", "top_k": 0}, "top_k"),
                        ({"query": "weather", "mode": "magic"}, "mode")):  # fmt: skip
        refused = _tools(service, body)
        assert refused.status_code in (400, 422) and refused.json()["field"] == field, refused.text
    anonymous = httpx.post(f"{service.url}/v1/tools/search", json={"query": "weather"}, timeout=60)
    assert anonymous.status_code == 401
    # The token but no person: refused, naming the identity header; a group header (no trusted proxy): refused.
    nobody = {"Authorization": f"Bearer {TOKEN}"}
    for route in ("/v1/tools/search", "/v1/tools/get_weather/outcome"):
        body = {"query": "weather"} if route.endswith("search") else {"success": True}
        refused = httpx.post(f"{service.url}{route}", json=body, headers=nobody, timeout=60)
        assert refused.status_code == 401 and refused.json()["field"] == "X-User-Id", refused.text
        forged = httpx.post(f"{service.url}{route}", json=body, headers={**HEADERS, "X-User-Groups": "admins"},
                            timeout=60)  # fmt: skip
        assert forged.status_code == 400, forged.text


def test_document_search_never_returns_tools(service: S.ServiceProcess) -> None:
    response = httpx.post(f"{service.url}/v1/search", json={"query": "invoice customer weather currency",
                          "mode": "bm25", "top_k": 20}, headers=HEADERS, timeout=60)  # fmt: skip
    assert response.status_code == 200, response.text
    sources = {r["source"] for r in response.json()["results"]}
    assert sources == {"jira"}  # the failed invoice run, not the invoice tool
    tree = httpx.get(f"{service.url}/v1/tree", headers=HEADERS, timeout=60).json()
    assert [s["source"] for s in tree["sources"]] == ["jira"]


def test_mcp_search_tools_and_record_tool_outcome(service: S.ServiceProcess) -> None:
    async def call() -> tuple[dict[str, Any], list[dict[str, Any]], bool]:
        async with (
            httpx2.AsyncClient(headers=HEADERS, timeout=60) as http,
            Client(streamable_http_client(f"{service.url}/mcp", http_client=http)) as client,
        ):
            listed = {tool.name for tool in (await client.list_tools()).tools}
            assert {"search_tools", "record_tool_outcome"} <= listed
            found = await client.call_tool(
                "search_tools", {"query": "translate this text into Korean", "top_k": 1, "mode": "vector"}
            )  # vector: the outcomes recorded by the tests before do not move it
            recorded = [
                (await client.call_tool("record_tool_outcome", {"name": "translate_text", "success": False}))
                for _ in range(2)
            ]
            refused = await client.call_tool("record_tool_outcome", {"name": "no_such_tool", "success": True})
            return (
                found.structured_content or {},
                [r.structured_content or {} for r in recorded],
                bool(refused.is_error),
            )

    found, recorded, refused = asyncio.run(call())
    assert found["tools"][0]["name"] == "translate_text"
    first, second = recorded  # (another test may have recorded calls of it before)
    assert second["calls"] == first["calls"] + 1 and second["successes"] == first["successes"]
    assert second["success_rate"] == pytest.approx((second["successes"] + 1) / (second["calls"] + 2), abs=1e-4)
    assert refused


def test_http_min_similarity_keeps_only_tools_that_close_in_meaning(service: S.ServiceProcess) -> None:
    query = {"query": "translate this text into Korean", "mode": "vector", "top_k": 3}
    loose = _tools(service, {**query, "min_similarity": 0.05}).json()
    strict = _tools(service, {**query, "min_similarity": 0.99}).json()
    assert loose["tools"][0]["name"] == "translate_text"
    assert all(t["similarity"] >= 0.05 for t in loose["tools"] if not t["critical"])
    assert not any("not applied" in w for w in loose["warnings"])
    # No tool is that similar: only the critical one, which every response lists, is left.
    assert [t["name"] for t in strict["tools"]] == ["search_documents"]


def test_mcp_active_tools_are_kept_per_session_and_left_out_of_its_searches(service: S.ServiceProcess) -> None:
    task = {"query": "translate this text into Korean", "top_k": 1, "mode": "vector"}

    async def session(calls: list[tuple[str, dict[str, Any]]], sid: str) -> list[tuple[bool, dict[str, Any]]]:
        # The service's MCP endpoint is stateless: the client names its session in X-Session-Id.
        async with (
            httpx2.AsyncClient(headers={**HEADERS, "X-Session-Id": sid}, timeout=60) as http,
            Client(streamable_http_client(f"{service.url}/mcp", http_client=http)) as client,
        ):
            done = []
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                done.append((bool(result.is_error), result.structured_content or {}))
            return done

    first = asyncio.run(session([
        ("activate_tools", {"names": ["translate_text"]}),
        ("search_tools", task),
        ("get_active_tools", {}),
        ("activate_tools", {"names": ["no_such_tool"]}),
        ("search_tools", {**task, "min_similarity": 2}),
    ], "mcp-1"))  # fmt: skip
    second = asyncio.run(session([("get_active_tools", {}), ("search_tools", task)], "mcp-2"))
    (failed, activated), (_, found), (_, active), (unknown, refused), (bad, threshold) = first
    assert not failed and activated["active_tools"] == ["search_documents", "translate_text"]
    assert "translate_text" not in [t["name"] for t in found["tools"]]
    assert found["excluded_active"] == ["translate_text"]
    assert active["active_tools"] == ["search_documents", "translate_text"]
    assert unknown and refused["error_details"]["field"] == "names" and "no_such_tool" in refused["error"]
    assert bad and threshold["error_details"]["field"] == "min_similarity"
    # Another session of the same reader starts from the critical set.
    (_, fresh), (_, found_again) = second
    assert fresh["active_tools"] == ["search_documents"] and found_again["tools"][0]["name"] == "translate_text"


def test_the_cli_filters_shapes_and_keeps_an_active_set_per_session(indexed: dict[str, Any]) -> None:
    def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(S.rag_pipeline_command("tools", *args), env={**indexed["env"], **env},
                              capture_output=True, text=True, timeout=300)  # fmt: skip

    money = "convert an amount of money to another currency"
    shaped = cli("money and the weather", "--category", "finance", "--no-params", "--max-description-length", "20",
                 "--json")  # fmt: skip
    assert shaped.returncode == 0, shaped.stderr
    tools = json.loads(shaped.stdout)["tools"]
    assert [t["name"] for t in tools] == ["convert_currency", "search_documents"]
    assert all("input_schema" not in t and len(t["description"]) <= 20 for t in tools)
    refused = cli(money, "--min-similarity", "2")
    assert refused.returncode == 2 and "--min-similarity" in refused.stderr
    activated = cli("--activate", "convert_currency", "--session", "s1", "--json")
    assert activated.returncode == 0, activated.stderr
    assert json.loads(activated.stdout)["active_tools"] == ["search_documents", "convert_currency"]
    mine = json.loads(cli(money, "--session", "s1", "--top-k", "1", "--json").stdout)
    assert "convert_currency" not in [t["name"] for t in mine["tools"]]
    assert mine["excluded_active"] == ["convert_currency"]
    other = json.loads(cli(money, "--session", "s2", "--top-k", "1", "--json").stdout)
    assert other["tools"][0]["name"] == "convert_currency"
    unknown = cli("--activate", "nope", "--session", "s1")
    assert unknown.returncode == 2 and "'nope'" in unknown.stderr
    full = cli("--activate", "get_weather,create_jira_issue", "--session", "s1", RAG_TOOL_ACTIVE_MAX_TOOLS="3")
    assert full.returncode == 2 and "at most 3" in full.stderr
    reset = cli("--reset-active", "--session", "s1", "--json")
    assert json.loads(reset.stdout)["active_tools"] == ["search_documents"]
