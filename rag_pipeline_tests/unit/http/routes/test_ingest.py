"""``rag_pipeline.http.routes.ingest``: the ingestion API behind its own token. Without ``RAG_INGEST_TOKEN`` it is
a 404 saying how to turn it on; with it, only that token gets in (not the readers'). ``POST /v1/ingest`` starts a
job (202 and its Location), a second while one runs is a 409 naming the running job, a source that is not live a
422 naming ``source``; ``GET /v1/ingest/{id}`` follows the job to its end. The real
:class:`~rag_pipeline.serving.ingest_runs.IngestLauncher` runs a stand-in command that prints JSON, not a sync."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from rag_pipeline.http.routes.ingest import is_ingest_path, refusal
from rag_pipeline.serving.ingest_runs import IngestLauncher
from rag_pipeline.settings import ServeSettings
from rag_pipeline_tests.unit.http.conftest import reader, served

INGEST = "ingest-secret-1"
READERS = "readers-secret-1"
AS_INGEST = {"Authorization": f"Bearer {INGEST}"}
# What the launcher runs instead of `rag-pipeline`: prints its arguments as the sync's JSON summary.
ECHO = [sys.executable, "-c", "import json, sys; print(json.dumps({'argv': sys.argv[1:]}))"]
# The same, after 2 s for a sync (a job that is still running); at once for `status`.
SLOW = [sys.executable, "-c", "import json, sys, time; sys.argv[1] == 'sync' and time.sleep(2); "
        "print(json.dumps({'argv': sys.argv[1:]}))"]  # fmt: skip


def _settings(ingest: bool = True) -> ServeSettings:
    return ServeSettings(token=SecretStr(READERS), trusted_proxy=True,
                         ingest_token=SecretStr(INGEST) if ingest else None)  # fmt: skip


def _finished(client: TestClient, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = client.get(f"/v1/ingest/{job_id}", headers=AS_INGEST).json()["job"]
        if job["state"] in ("succeeded", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish")


def test_the_paths_and_the_token_check() -> None:
    assert is_ingest_path("/v1/ingest") and is_ingest_path("/v1/ingest/all") and is_ingest_path("/v1/scheduler/status")
    assert not is_ingest_path("/v1/search") and not is_ingest_path("/v1/scheduler")
    assert not is_ingest_path("/v1/ingestion") and not is_ingest_path("/v1/ingest-all")  # a prefix, not a word
    off = refusal("/v1/ingest", f"Bearer {INGEST}", None)  # no token configured: off, whatever is sent
    assert off is not None and off[0] == 404 and "RAG_INGEST_TOKEN" in off[1]
    assert refusal("/v1/ingest", f"Bearer {INGEST}", INGEST.encode()) is None
    assert refusal("/v1/ingest", f"bearer {INGEST} ", INGEST.encode()) is None
    for wrong in ("", f"Bearer {READERS}", f"Basic {INGEST}", "Bearer "):
        assert refusal("/v1/ingest", wrong, INGEST.encode())[0] == 401  # type: ignore[index]


def test_without_the_ingestion_token_the_api_is_off(index_folder: Path, tmp_path: Path) -> None:
    launcher = IngestLauncher(tmp_path, ["slack"], command=ECHO)
    with served(index_folder, _settings(ingest=False), ingest=launcher) as client:
        response = client.post("/v1/ingest", json={"source": "slack"}, headers=AS_INGEST)
    assert response.status_code == 404 and "RAG_INGEST_TOKEN" in response.json()["error"]
    assert launcher.jobs() == []


def test_only_the_ingestion_token_gets_in(index_folder: Path, tmp_path: Path) -> None:
    launcher = IngestLauncher(tmp_path, ["slack"], command=ECHO)
    with served(index_folder, _settings(), ingest=launcher) as client:
        as_reader = client.post("/v1/ingest", json={"source": "slack"},
                                headers={**reader("U1"), "Authorization": f"Bearer {READERS}"})  # fmt: skip
        anonymous = client.get("/v1/scheduler/status")
    assert as_reader.status_code == anonymous.status_code == 401
    assert as_reader.json()["field"] == "Authorization" and launcher.jobs() == []


def test_a_job_runs_to_its_end_and_reports_each_sync(index_folder: Path, tmp_path: Path) -> None:
    launcher = IngestLauncher(tmp_path / "data", ["slack", "jira"], command=ECHO)
    with served(index_folder, _settings(), ingest=launcher) as client:
        started = client.post("/v1/ingest", json={"source": "jira"}, headers=AS_INGEST)
        assert started.status_code == 202, started.text
        job = started.json()["job"]
        assert started.headers["location"] == f"/v1/ingest/{job['id']}" and job["sources"] == ["jira"]
        done = _finished(client, job["id"])
        unknown = client.post("/v1/ingest", json={"source": "confluence"}, headers=AS_INGEST)
        missing = client.get("/v1/ingest/nosuchjob", headers=AS_INGEST)
    assert done["state"] == "succeeded"
    argv = done["results"]["jira"]["summary"]["argv"]
    assert argv[:4] == ["sync", "--source", "jira", "--json"] and argv[-1] == str(tmp_path / "data")
    assert (
        unknown.status_code == 422 and unknown.json()["field"] == "source" and "slack, jira" in unknown.json()["error"]
    )
    assert missing.status_code == 404 and missing.json()["field"] == "job_id"


# A sync's summary as `rag-pipeline sync --json` prints it: two chain runs' chunks (issue 67 item 7).
CHUNKS = [sys.executable, "-c", "import json, sys; source = sys.argv[3]; runs = "
          "[{'run_id': source + '-1', 'parent_chunks': 2, 'child_chunks': 5}, "
          "{'run_id': source + '-2', 'parent_chunks': 1, 'child_chunks': 3}]; "
          "print(json.dumps({'parent_chunks': 3, 'child_chunks': 8, 'chunk_runs': runs}))"]  # fmt: skip


def test_a_job_reports_the_parent_and_child_chunks_of_each_run(index_folder: Path, tmp_path: Path) -> None:
    launcher = IngestLauncher(tmp_path / "data", ["slack", "jira"], command=CHUNKS)
    with served(index_folder, _settings(), ingest=launcher) as client:
        started = client.post("/v1/ingest/all", headers=AS_INGEST)
        assert started.status_code == 202, started.text
        assert started.json()["job"]["parent_chunks"] == 0  # nothing written yet
        done = _finished(client, started.json()["job"]["id"])
    assert done["state"] == "succeeded"
    for source in ("slack", "jira"):
        result = done["results"][source]
        assert (result["parent_chunks"], result["child_chunks"]) == (3, 8)
        assert [r["run_id"] for r in result["chunk_runs"]] == [f"{source}-1", f"{source}-2"]
    assert (done["parent_chunks"], done["child_chunks"]) == (6, 16)  # the job's syncs together


def test_a_command_without_chunk_counts_reports_none(index_folder: Path, tmp_path: Path) -> None:
    launcher = IngestLauncher(tmp_path / "data", ["slack"], command=ECHO)
    with served(index_folder, _settings(), ingest=launcher) as client:
        started = client.post("/v1/ingest", json={"source": "slack"}, headers=AS_INGEST).json()["job"]
        done = _finished(client, started["id"])
    result = done["results"]["slack"]
    assert result["parent_chunks"] is None and result["child_chunks"] is None and result["chunk_runs"] == []
    assert (done["parent_chunks"], done["child_chunks"]) == (0, 0)


def test_a_second_job_while_one_runs_is_a_409_naming_it(index_folder: Path, tmp_path: Path) -> None:
    launcher = IngestLauncher(tmp_path, ["slack", "jira"], command=SLOW)
    with served(index_folder, _settings(), ingest=launcher) as client:
        first = client.post("/v1/ingest/all", headers=AS_INGEST)
        second = client.post("/v1/ingest", json={"source": "slack"}, headers=AS_INGEST)
        assert first.status_code == 202 and first.json()["job"]["sources"] == ["slack", "jira"]
        assert second.status_code == 409 and second.json()["job"]["id"] == first.json()["job"]["id"]
        listed = client.get("/v1/scheduler/status", headers=AS_INGEST)
        _finished(client, first.json()["job"]["id"])
    assert [j["id"] for j in listed.json()["jobs"]] == [first.json()["job"]["id"]]
    assert listed.json()["scheduler"]["argv"][:2] == ["status", "--json"]  # the scheduler's state as `status` says


@pytest.mark.parametrize("live", [[], ["slack"]])
def test_ingest_all_needs_a_live_source(index_folder: Path, tmp_path: Path, live: list[str]) -> None:
    launcher = IngestLauncher(tmp_path, live, command=ECHO)
    with served(index_folder, _settings(), ingest=launcher) as client:
        response = client.post("/v1/ingest/all", headers=AS_INGEST)
        if live:
            _finished(client, response.json()["job"]["id"])
    assert response.status_code == (202 if live else 422)
