"""``POST /v1/ingest/documents`` (issue 66 item 4) on the real app: behind the ingestion token only, the whole batch
checked field by field (each problem named by its path, ``documents[3].acl``; hostile ids refused), ACLs required,
an unknown source refused naming ``source``, a body over the push limit a 413 JSON (declared or chunked) while a body
over the other /v1 routes' 64 KiB but under the push limit gets in, too many documents a 413. An accepted batch is a
202 job the ``GET`` route follows, running ``rag-pipeline push FILE --source NAME`` on the checked JSON lines. The
real :class:`~rag_pipeline.serving.ingest_runs.IngestLauncher` runs a stand-in that prints its arguments and the file
(the real write is ``rag_pipeline_tests/e2e/test_push_documents.py``)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from rag_pipeline.http.limits import MAX_BODY_BYTES
from rag_pipeline.serving.ingest_runs import IngestLauncher
from rag_pipeline.settings import ServeSettings
from rag_pipeline.sources.pushed_documents import PushLimits
from rag_pipeline_tests.unit.http.conftest import served

INGEST = "ingest-secret-1"
READERS = "readers-secret-1"
AS_INGEST = {"Authorization": f"Bearer {INGEST}"}
URL = "/v1/ingest/documents"
# What the launcher runs instead of `rag-pipeline`: prints its arguments and the pushed file's lines.
ECHO = [sys.executable, "-c", "import json, sys; print(json.dumps({'argv': sys.argv[1:], "
        "'lines': open(sys.argv[2]).read().splitlines()}))"]  # fmt: skip
SLOW = [sys.executable, "-c", "import time; time.sleep(2); print('{}')"]
LIMITS = PushLimits(sources=("hr_wiki", "handbook"), max_body_bytes=200_000, max_documents=5)


def _document(doc_id: str = "pto-policy", **changes: Any) -> dict[str, Any]:
    document = {
        "id": doc_id,
        "container": "HR",
        "title": "Paid time off",
        "text": "Everyone has 25 days of paid time off a year.",
        "url": "https://wiki.example.com/hr/pto",
        "updated": "2024-03-01T10:00:00Z",
        "acl": {"groups": ["hr"]},
    }
    document.update(changes)
    return {k: v for k, v in document.items() if v is not None}


@pytest.fixture
def pushing(index_folder: Path, tmp_path: Path) -> Iterator[tuple[TestClient, IngestLauncher]]:
    launcher = IngestLauncher(tmp_path / "data", ["slack"], command=ECHO, push_limits=LIMITS)
    settings = ServeSettings(token=SecretStr(READERS), trusted_proxy=True, ingest_token=SecretStr(INGEST))
    with served(index_folder, settings, ingest=launcher) as client:
        yield client, launcher


def _finished(client: TestClient, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = client.get(f"/v1/ingest/{job_id}", headers=AS_INGEST).json()["job"]
        if job["state"] in ("succeeded", "failed"):
            return dict(job)
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish")


def test_only_the_ingestion_token_may_push(pushing: tuple[TestClient, IngestLauncher]) -> None:
    client, launcher = pushing
    body = {"source": "hr_wiki", "documents": [_document()]}
    for headers in ({}, {"Authorization": f"Bearer {READERS}", "X-User-Id": "U1"}, {"Authorization": "Bearer no"}):
        refused = client.post(URL, json=body, headers=headers)
        assert refused.status_code == 401 and refused.json()["field"] == "Authorization", refused.text
    assert launcher.jobs() == []


def test_a_batch_is_a_job_running_push_on_the_checked_lines(pushing: tuple[TestClient, IngestLauncher]) -> None:
    client, launcher = pushing
    body = {"source": "hr_wiki", "documents": [_document(), _document("holidays", text="Public holidays.")],
            "deleted": ["old-page"]}  # fmt: skip
    started = client.post(URL, json=body, headers=AS_INGEST)
    assert started.status_code == 202, started.text
    answer = started.json()
    assert answer["documents"] == 2 and answer["deleted"] == 1 and answer["job"]["sources"] == ["hr_wiki"]
    assert started.headers["location"] == f"/v1/ingest/{answer['job']['id']}"
    done = _finished(client, answer["job"]["id"])
    assert done["state"] == "succeeded", done
    summary = done["results"]["hr_wiki"]["summary"]
    pushed_file = done["push_file"]
    assert summary["argv"][:5] == ["push", pushed_file, "--source", "hr_wiki", "--remove-when-written"]
    assert summary["argv"][-2:] == ["--data-dir", str(launcher.data_dir)]
    lines = [json.loads(line) for line in summary["lines"]]
    assert [line["id"] for line in lines] == ["pto-policy", "holidays", "old-page"]
    assert lines[0]["acl"] == {"groups": ["hr"]} and lines[2] == {"id": "old-page", "deleted": True}


def test_no_acl_no_write(pushing: tuple[TestClient, IngestLauncher]) -> None:
    client, launcher = pushing
    documents = [_document("a"), _document("b", acl=None), _document("c", acl={"users": [], "groups": []}),
                 _document("d", acl={"public": False}), _document("e", acl={"users": [" "]})]  # fmt: skip
    refused = client.post(URL, json={"source": "hr_wiki", "documents": documents}, headers=AS_INGEST)
    assert refused.status_code == 422, refused.text
    fields = [e["field"] for e in refused.json()["errors"]]
    # Every bad document is named, and the good one is not written either: the batch is refused whole.
    assert fields == ["documents[1].acl", "documents[2].acl", "documents[3].acl", "documents[4].acl.users"]
    assert refused.json()["field"] == "documents[1].acl" and "no ACL, no write" in refused.text
    assert launcher.jobs() == [] and not (launcher.logs / "pushed").exists()


def test_every_bad_document_of_a_batch_is_named(pushing: tuple[TestClient, IngestLauncher]) -> None:
    client, launcher = pushing
    documents = [_document("../x"), _document("fine"), _document("/etc/passwd", container="../HR"),
                 _document("ok2", updated="2024-03-01T10:00:00"), _document("ok3", text="", colour="red")]  # fmt: skip
    refused = client.post(URL, json={"source": "hr_wiki", "documents": documents}, headers=AS_INGEST)
    assert refused.status_code == 422, refused.text
    fields = [e["field"] for e in refused.json()["errors"]]
    assert fields == ["documents[0].id", "documents[2].id", "documents[2].container", "documents[3].updated",
                      "documents[4].text", "documents[4].colour"]  # fmt: skip
    assert launcher.jobs() == []


def test_each_invalid_field_is_named(pushing: tuple[TestClient, IngestLauncher]) -> None:
    client, launcher = pushing
    cases = [
        (_document("../x"), "documents[0].id"),
        (_document("/etc/passwd"), "documents[0].id"),
        (_document("ok", container="../HR"), "documents[0].container"),
        (_document("ok", updated="2024-03-01T10:00:00"), "documents[0].updated"),
        (_document("ok", text=""), "documents[0].text"),
        (_document("ok", text=None), "documents[0].text"),
        (_document("ok", url="javascript:alert(1)"), "documents[0].url"),
        (_document("ok", authors="sam"), "documents[0].authors"),
        (_document("ok", colour="red"), "documents[0].colour"),
        (_document("ok", version=-1), "documents[0].version"),
        (_document("ok", acl={"groups": ["hr"], "admins": ["x"]}), "documents[0].acl.admins"),
    ]
    for document, field in cases:
        refused = client.post(URL, json={"source": "hr_wiki", "documents": [document]}, headers=AS_INGEST)
        assert refused.status_code == 422 and refused.json()["field"] == field, (field, refused.text)
        assert "Traceback" not in refused.text
    hostile_delete = client.post(URL, json={"source": "hr_wiki", "deleted": ["ok", "../../etc"]}, headers=AS_INGEST)
    assert hostile_delete.status_code == 422 and hostile_delete.json()["field"] == "deleted[1]"
    twice = client.post(URL, json={"source": "hr_wiki", "documents": [_document("a"), _document("a")]},
                        headers=AS_INGEST)  # fmt: skip
    assert twice.status_code == 422 and twice.json()["field"] == "documents[1].id"
    not_json = client.post(URL, content=b"{not json", headers={**AS_INGEST, "Content-Type": "application/json"})
    assert not_json.status_code == 400 and not_json.json()["field"] == "body"
    assert launcher.jobs() == []


def test_an_unknown_source_is_refused_naming_it(pushing: tuple[TestClient, IngestLauncher]) -> None:
    client, launcher = pushing
    for source in ("finance", "slack"):  # not registered; a connector's source is never pushed to
        refused = client.post(URL, json={"source": source, "documents": [_document()]}, headers=AS_INGEST)
        assert refused.status_code == 422 and refused.json()["field"] == "source", refused.text
    assert "hr_wiki, handbook" in refused.text or "connector" in refused.text
    missing = client.post(URL, json={"documents": [_document()]}, headers=AS_INGEST)
    assert missing.status_code == 422 and missing.json()["field"] == "source"
    assert launcher.jobs() == []


def test_the_push_route_has_its_own_body_limit(pushing: tuple[TestClient, IngestLauncher]) -> None:
    client, launcher = pushing
    # Over the other routes' 64 KiB, under the push limit (200,000 bytes): accepted.
    large = _document(text="leave policy " * ((MAX_BODY_BYTES + 10_000) // 13))
    accepted = client.post(URL, json={"source": "hr_wiki", "documents": [large]}, headers=AS_INGEST)
    assert accepted.status_code == 202, accepted.text
    _finished(client, accepted.json()["job"]["id"])
    # Over the push limit: declared (Content-Length) or counted as a chunked body arrives.
    huge = json.dumps({"source": "hr_wiki", "documents": [_document(text="x" * 250_000)]}).encode()
    declared = client.post(URL, content=huge, headers={**AS_INGEST, "Content-Type": "application/json"})
    chunked = client.post(URL, content=iter([huge[:100_000], huge[100_000:]]),
                          headers={**AS_INGEST, "Content-Type": "application/json"})  # fmt: skip
    for refused in (declared, chunked):
        assert refused.status_code == 413 and refused.json()["field"] == "body", refused.text
        assert "RAG_PUSH_MAX_BODY_BYTES" in refused.json()["error"]
    # More documents than one request may carry.
    many = [_document(f"doc-{i}") for i in range(LIMITS.max_documents + 1)]
    too_many = client.post(URL, json={"source": "hr_wiki", "documents": many}, headers=AS_INGEST)
    assert too_many.status_code == 413 and too_many.json()["field"] == "documents"
    assert len(launcher.jobs()) == 1
    # The other /v1 routes keep their 64 KiB.
    search = client.post("/v1/search", content=b" " * (MAX_BODY_BYTES + 1),
                         headers={"Authorization": f"Bearer {READERS}", "X-User-Id": "U1"})  # fmt: skip
    assert search.status_code == 413


def test_a_push_while_a_job_runs_is_a_409_naming_it(index_folder: Path, tmp_path: Path) -> None:
    launcher = IngestLauncher(tmp_path / "data", ["slack"], command=SLOW, push_limits=LIMITS)
    settings = ServeSettings(token=SecretStr(READERS), trusted_proxy=True, ingest_token=SecretStr(INGEST))
    with served(index_folder, settings, ingest=launcher) as client:
        first = client.post("/v1/ingest", json={"source": "slack"}, headers=AS_INGEST)
        pushed = client.post(URL, json={"source": "hr_wiki", "documents": [_document()]}, headers=AS_INGEST)
        assert pushed.status_code == 409 and pushed.json()["job"]["id"] == first.json()["job"]["id"]
        assert pushed.headers["retry-after"] and not (launcher.logs / "pushed").exists()
        _finished(client, first.json()["job"]["id"])
