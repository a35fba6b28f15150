"""Readers' judgements: ``POST /v1/feedback`` and the MCP ``rate_document`` tool on a real ``rag-pipeline serve``
(uvicorn on loopback, the real httpx and MCP clients), refusing what the reader may not read exactly as a missing
document, 4xx JSON naming the field, off unless RAG_FEEDBACK_DAYS; then the judgements as the readers_feedback
eval set that ``rag-pipeline evaluate`` mines, each question run as its reader."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from rag_pipeline.cli import main
from rag_pipeline.directory.lookup import DirectoryLookup
from rag_pipeline.evaluation.eval_set import load_eval_set
from rag_pipeline.serving.feedback import read_feedback
from rag_pipeline_tests.kit import serving_fixtures as S

TOKEN = "feedback-test-token-1234"
CAROL = {"Authorization": f"Bearer {TOKEN}", "X-User-Id": "U3"}  # a member of the private channel
BOB = {"Authorization": f"Bearer {TOKEN}", "X-User-Id": "U2"}  # not a member
QUESTION = "what is the salary budget for the postgres team"


@pytest.fixture(scope="module")
def data_dir(serving_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return S.copy_index(serving_index, tmp_path_factory.mktemp("feedback") / "data")


@pytest.fixture(scope="module")
def service(data_dir: Path):
    with S.running_service(data_dir, data_dir.parent / "serve.log", RAG_SERVE_TOKEN=TOKEN, RAG_FEEDBACK_DAYS="30") as s:
        yield s


def _feedback(service: S.ServiceProcess, body: Any, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{service.url}/v1/feedback", json=body, headers=headers, timeout=60)


def test_a_reader_rates_what_they_may_read_and_nothing_else(service: S.ServiceProcess, data_dir: Path) -> None:
    kept = _feedback(service, {"query": QUESTION, "document_id": S.SECRET_THREAD, "grade": 2}, CAROL)
    assert kept.status_code == 200, kept.text
    assert kept.json()["recorded"] is True and kept.json()["grade"] == 2
    # Bob may not read the private thread: told exactly what a missing document is told.
    refused = _feedback(service, {"query": QUESTION, "document_id": S.SECRET_THREAD, "grade": 2}, BOB)
    missing = _feedback(service, {"query": QUESTION, "document_id": "slack:T0SERVE:C0PUB:1.0", "grade": 1}, BOB)
    assert refused.status_code == missing.status_code == 404
    assert refused.json()["field"] == missing.json()["field"] == "document_id"
    assert S.SECRET_THREAD not in json.dumps(missing.json())
    entries = list(read_feedback(data_dir / "feedback"))
    assert [(e["query"], e["document"], e["grade"]) for e in entries] == [(QUESTION, S.SECRET_THREAD, 2)]
    assert "U3" in entries[0]["reader"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": QUESTION, "document_id": S.GENERAL_THREAD, "grade": 5}, "grade"),
        ({"query": QUESTION, "document_id": S.GENERAL_THREAD, "grade": "2"}, "grade"),
        ({"query": "   ", "document_id": S.GENERAL_THREAD, "grade": 1}, "query"),
        ({"document_id": S.GENERAL_THREAD, "grade": 1}, "query"),
        ({"query": QUESTION, "document_id": S.GENERAL_THREAD, "grade": 1, "reader": "U1"}, "reader"),
    ],
)
def test_bad_feedback_is_a_4xx_naming_the_field(service: S.ServiceProcess, body: dict, field: str) -> None:
    response = _feedback(service, body, CAROL)
    assert response.status_code == 422 and field in str(response.json()["field"]), response.text
    assert "Traceback" not in response.text


def test_the_mcp_tool_rates_as_the_caller(service: S.ServiceProcess) -> None:
    async def call(headers: dict[str, str], document_id: str) -> tuple[bool, dict[str, Any], str]:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(f"{service.url}/mcp", http_client=http)) as client,
        ):
            result = await client.call_tool(
                "rate_document", {"query": "postgres upgrade plan", "document_id": document_id, "grade": 1}
            )
            text = " ".join(getattr(c, "text", "") for c in result.content)
            return bool(result.is_error), result.structured_content or {}, text

    error, recorded, _ = asyncio.run(call(CAROL, S.GENERAL_THREAD))
    assert not error and recorded["document_id"] == S.GENERAL_THREAD
    error, _, text = asyncio.run(call(BOB, S.SECRET_THREAD))
    assert error and "not found" in text


def test_feedback_is_off_unless_the_operator_keeps_it(serving_index: Path, tmp_path: Path) -> None:
    data = S.copy_index(serving_index, tmp_path / "data")
    with S.running_service(data, tmp_path / "serve.log", RAG_SERVE_TOKEN=TOKEN) as off:
        response = _feedback(off, {"query": QUESTION, "document_id": S.SECRET_THREAD, "grade": 2}, CAROL)
    assert response.status_code == 404 and "RAG_FEEDBACK_DAYS" in response.json()["error"]
    assert not (data / "feedback").exists()


def test_feedback_becomes_an_eval_set_run_as_its_reader(
    service: S.ServiceProcess, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # (After the tests above: carol's judgements are kept.) Mining reads the folder while the service holds the
    # index, so it runs on a copy.
    copy = S.copy_index(data_dir, tmp_path / "copy")
    assert main(["evaluate", "--data-dir", str(copy), "--miners", "feedback", "--no-eval", "--json"]) == 0
    mining = json.loads(capsys.readouterr().out)["mining"]
    assert mining["queries"]["readers_feedback"] == 2
    (path,) = (copy / "reports" / "mined" / "sets").glob("readers_feedback.jsonl")
    queries = {q.query: q for q in load_eval_set(path, DirectoryLookup(copy / "directory.sqlite"))}
    salary = queries[QUESTION]
    assert salary.relevant == {S.SECRET_THREAD: 2} and salary.principal.user_id == "U3"
    assert "feedback" in salary.tags and any(t.startswith("week:") for t in salary.tags)


def test_no_identity_is_refused_and_a_forged_group_widens_nothing(service: S.ServiceProcess) -> None:
    body = {"query": QUESTION, "document_id": S.SECRET_THREAD, "grade": 2}
    anonymous = _feedback(service, body, {"Authorization": f"Bearer {TOKEN}"})
    assert anonymous.status_code == 401 and anonymous.json()["field"] == "X-User-Id"
    # Groups come from the directory, never from a header (no trusted proxy here): the header is refused.
    forged = _feedback(service, body, {**BOB, "X-User-Groups": "slack:T0SERVE:members,G0PRIV"})
    assert forged.json()["field"] == "X-User-Groups" and "RAG_SERVE_TRUSTED_PROXY" in forged.json()["error"]
    assert forged.status_code == 400
