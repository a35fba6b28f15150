"""The push route (issue 66 item 4) end to end: a real ``rag-pipeline serve`` on 127.0.0.1 over a real index (built
by ``rag-pipeline index``), ``RAG_PUSH_SOURCES=hr_wiki``. A pushed document is written by the job's real
``rag-pipeline push`` child (the index handed over by the service, the chain's chunking, embedding and writer) and
becomes searchable for a reader in its ACL and invisible to one outside it; a re-push of its id replaces it (the old
text is gone: no duplicate); a deletion removes it; a document without an ACL, an unknown source, a wrong token
and a body over the limit are refused with JSON naming the field."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rag_pipeline_tests.kit import serving_fixtures as S

READERS_TOKEN = "readers-token-1234567"
INGEST_TOKEN = "ingest-token-7654321"
INGEST = {"Authorization": f"Bearer {INGEST_TOKEN}"}
READERS = {"Authorization": f"Bearer {READERS_TOKEN}"}
PAT = {"Authorization": f"Bearer {READERS_TOKEN}", "X-User-Id": "U0PAT"}  # in the document's ACL
OTHER = {"Authorization": f"Bearer {READERS_TOKEN}", "X-User-Id": "U0OTHER"}  # outside it
DOCUMENT_ID = "hr_wiki:sabbatical"
QUERY = "sabbatical leave after years of service"

pytestmark = pytest.mark.slow  # an index build, a service start and three pushes: a few minutes on 2 cores


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S.ServiceProcess]:
    root = tmp_path_factory.mktemp("push_documents")
    data = S.build_index(root)
    env = {"RAG_SERVE_TOKEN": READERS_TOKEN, "RAG_INGEST_TOKEN": INGEST_TOKEN, "RAG_PUSH_SOURCES": "hr_wiki",
           "RAG_PUSH_MAX_BODY_BYTES": "100000", "RAG_RERANKER": "none"}  # fmt: skip
    process = S.ServiceProcess(data, root / "serve.log", **env)
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


def _document(text: str, updated: str, **changes: Any) -> dict[str, Any]:
    document = {"id": "sabbatical", "container": "HR", "title": "Sabbatical leave", "text": text,
                "updated": updated, "acl": {"users": ["U0PAT"]}}  # fmt: skip
    return {**document, **changes}


def _push(service: S.ServiceProcess, body: dict[str, Any]) -> dict[str, Any]:
    started = httpx.post(f"{service.url}/v1/ingest/documents", json=body, headers=INGEST, timeout=30)
    assert started.status_code == 202, started.text
    job_id = started.json()["job"]["id"]
    deadline = time.monotonic() + 300
    while True:
        job = httpx.get(f"{service.url}/v1/ingest/{job_id}", headers=INGEST, timeout=10).json()["job"]
        if job["state"] in ("succeeded", "failed"):
            assert job["state"] == "succeeded", (job, Path(job["log"]).read_text()[-3000:])
            return dict(job["results"]["hr_wiki"]["summary"])
        assert time.monotonic() < deadline, job
        time.sleep(0.5)


def _found(service: S.ServiceProcess, headers: dict[str, str]) -> list[dict[str, Any]]:
    response = httpx.post(f"{service.url}/v1/search", json={"query": QUERY, "top_k": 10}, headers=headers, timeout=60)
    assert response.status_code == 200, response.text
    return [r for r in response.json()["results"] if r["document_id"] == DOCUMENT_ID]


def _document_text(service: S.ServiceProcess, headers: dict[str, str]) -> httpx.Response:
    return httpx.get(f"{service.url}/v1/documents/{DOCUMENT_ID}", headers=headers, timeout=60)


def test_a_pushed_document_is_searchable_in_its_acl_updated_by_a_repush_and_deleted(
    service: S.ServiceProcess,
) -> None:
    first = _document("Sabbatical leave: after five years of service anyone may take three months of leave.",
                      "2024-03-01T10:00:00Z")  # fmt: skip
    summary = _push(service, {"source": "hr_wiki", "documents": [first]})
    assert summary["documents_written"] == 1 and summary["child_chunks"] >= 1, summary

    [hit] = _found(service, PAT)
    assert hit["source"] == "hr_wiki" and hit["container"] == "HR"
    assert _found(service, OTHER) == []  # outside the ACL: invisible
    assert _document_text(service, OTHER).status_code == 404

    # The same id again, changed: it replaces the document (the old text's points are gone), never a second copy.
    second = _document("Sabbatical leave: after seven years of service anyone may take six months of leave.",
                       "2024-04-01T10:00:00Z")  # fmt: skip
    summary = _push(service, {"source": "hr_wiki", "documents": [second]})
    assert summary["documents_written"] == 1, summary
    assert len(_found(service, PAT)) == 1
    whole = _document_text(service, PAT)
    assert whole.status_code == 200 and "seven years" in whole.json()["text"], whole.text
    assert "five years" not in whole.json()["text"]

    summary = _push(service, {"source": "hr_wiki", "deleted": ["sabbatical"]})
    assert summary["deleted"] == 1, summary
    assert _found(service, PAT) == [] and _document_text(service, PAT).status_code == 404


def test_refusals_are_json_naming_the_field(service: S.ServiceProcess) -> None:
    url = f"{service.url}/v1/ingest/documents"
    good = _document("Parental leave policy.", "2024-03-01T10:00:00Z")
    no_acl = {k: v for k, v in good.items() if k != "acl"}
    cases = [
        ({"source": "hr_wiki", "documents": [good, no_acl]}, INGEST, 422, "documents[1].acl"),
        ({"source": "hr_wiki", "documents": [{**good, "acl": {"users": []}}]}, INGEST, 422, "documents[0].acl"),
        ({"source": "payroll", "documents": [good]}, INGEST, 422, "source"),
        ({"source": "hr_wiki", "documents": [{**good, "id": "../x"}]}, INGEST, 422, "documents[0].id"),
        ({"source": "hr_wiki", "documents": [good]}, READERS, 401, "Authorization"),
        ({"source": "hr_wiki", "documents": [good]}, {}, 401, "Authorization"),
        ({"source": "hr_wiki", "documents": [{**good, "text": "x" * 120_000}]}, INGEST, 413, "body"),
    ]
    for body, headers, status, field in cases:
        response = httpx.post(url, json=body, headers=headers, timeout=30)
        assert response.status_code == status and response.json()["field"] == field, (field, response.text)
        assert "Traceback" not in response.text and INGEST_TOKEN not in response.text
