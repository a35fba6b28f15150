"""The ingestion API (issue 51, part 8) on a real ``rag-pipeline serve`` process: its own token and no other,
the scheduler's state per source, and a sync of one source launched over HTTP that runs the real
``rag-pipeline sync`` (the sync sensor's planner, a real Dagster run in the instance) against the Slack emulator,
after which the service finds what it synced."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rag_pipeline_tests.kit import serving_fixtures as S
from rag_pipeline_tests.kit import slack_fixtures as F
from rag_pipeline_tests.kit.data import ts
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.emulators.slack_workspace import SlackWorkspace

READERS_TOKEN = "readers-token-1234567"
INGEST_TOKEN = "ingest-token-7654321"
INGEST = {"Authorization": f"Bearer {INGEST_TOKEN}"}
READERS = {"Authorization": f"Bearer {READERS_TOKEN}"}
CHANNEL = "C0INGEST1"


@pytest.fixture(scope="module")
def emulator() -> Iterator[SlackEmulator]:
    ws = SlackWorkspace(team_id=F.CRAFTED_TEAM, domain=F.CRAFTED_DOMAIN)
    ws.users = [F._user(F.ALICE, "alice", "Alice Anders"), F._user(F.BOT_USER, "rag-bot", "RAG Bot", is_bot=True)]
    yesterday = int(time.time()) - 86400
    ws.add_channel(CHANNEL, "general", members=[F.ALICE, F.BOT_USER], created=yesterday - 86400)
    ws.post(CHANNEL, F._msg(ts(yesterday), F.ALICE, "the zeppelin hangar lease renews in april"))
    with SlackEmulator(ws) as running:
        yield running


@pytest.fixture(scope="module")
def service(emulator: SlackEmulator, tmp_path_factory: pytest.TempPathFactory) -> Iterator[S.ServiceProcess]:
    root = tmp_path_factory.mktemp("ingest_api")
    env = {"RAG_SERVE_TOKEN": READERS_TOKEN, "RAG_INGEST_TOKEN": INGEST_TOKEN, "SLACK_BOT_TOKEN": "xoxb-test-token",
           "SLACK_API_BASE_URL": emulator.base_url, "DAGSTER_HOME": str(root / "dagster_home"),
           "RAG_RERANKER": "none"}  # fmt: skip
    (root / "dagster_home").mkdir()
    process = S.ServiceProcess(root / "data", root / "serve.log", **env)
    try:
        process.wait_ready(status=503)  # no index yet: the first sync writes it
        yield process
    finally:
        process.stop()


def _wait_for_job(service: S.ServiceProcess, job_id: str, timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = httpx.get(f"{service.url}/v1/ingest/{job_id}", headers=INGEST, timeout=10).json()["job"]
        if job["state"] in ("succeeded", "failed") or time.monotonic() > deadline:
            return dict(job)
        time.sleep(0.5)


def test_only_the_ingestion_token_opens_the_ingestion_api(service: S.ServiceProcess) -> None:
    for headers in ({}, READERS, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {INGEST_TOKEN}"}):
        refused = httpx.post(f"{service.url}/v1/ingest", json={"source": "slack"}, headers=headers, timeout=10)
        assert refused.status_code == 401 and refused.json()["field"] == "Authorization", refused.text
        assert INGEST_TOKEN not in refused.text
    # ... and it opens nothing else: a reader's route still wants the readers' token.
    search = httpx.post(f"{service.url}/v1/search", json={"query": "zeppelin"}, headers=INGEST, timeout=10)
    assert search.status_code == 401
    bad = [({"source": "jira"}, "source"), ({"source": "slack", "extra": 1}, "extra"), ({"source": 7}, "source")]
    for body, field in bad:
        response = httpx.post(f"{service.url}/v1/ingest", json=body, headers=INGEST, timeout=10)
        assert response.status_code == 422 and response.json()["field"] == field, response.text
    assert httpx.get(f"{service.url}/v1/ingest/nope", headers=INGEST, timeout=10).status_code == 404


def test_a_sync_launched_over_http_runs_through_dagster_and_is_searchable(service: S.ServiceProcess) -> None:
    status = httpx.get(f"{service.url}/v1/scheduler/status", headers=INGEST, timeout=120)
    assert status.status_code == 200, status.text
    slack = status.json()["scheduler"]["sources"][0]
    assert slack["source"] == "slack" and slack["enabled"] is True

    started = httpx.post(f"{service.url}/v1/ingest", json={"source": "slack"}, headers=INGEST, timeout=10)
    assert started.status_code == 202, started.text
    job = started.json()["job"]
    assert started.headers["Location"] == f"/v1/ingest/{job['id']}" and job["sources"] == ["slack"]
    # One job at a time: a second request is told which one runs.
    again = httpx.post(f"{service.url}/v1/ingest/all", headers=INGEST, timeout=10)
    assert again.status_code == 409 and again.json()["job"]["id"] == job["id"]

    done = _wait_for_job(service, job["id"])
    assert done["state"] == "succeeded", (done, Path(done["log"]).read_text()[-3000:])
    summary = done["results"]["slack"]["summary"]
    assert done["results"]["slack"]["exit_code"] == 0 and summary["documents"] >= 1, summary
    # 90 days of initial history are one run (plus the reconciliation): the sync stops once the watermark is now.
    assert summary["runs"] == 2, summary
    # The chunks the sync wrote, per chain run and in all (issue 67 item 7): one short message, one parent and one
    # child chunk at least, as many children as parents or more.
    slack = done["results"]["slack"]
    [chain_run] = slack["chunk_runs"]
    assert chain_run["run_id"] and chain_run["parent_chunks"] >= 1 and chain_run["child_chunks"] >= 1, slack
    assert (slack["parent_chunks"], slack["child_chunks"]) == (chain_run["parent_chunks"], chain_run["child_chunks"])
    assert slack["child_chunks"] >= slack["parent_chunks"] and done["parent_chunks"] == slack["parent_chunks"]

    # The Dagster run is the sync sensor's kind: the scheduler's state now has the channel's watermark.
    after = httpx.get(f"{service.url}/v1/scheduler/status", headers=INGEST, timeout=120).json()
    containers = after["scheduler"]["sources"][0]["containers"]
    assert [c for c in containers if c["container"] == CHANNEL and c["watermark"]], containers
    assert after["jobs"][-1]["id"] == job["id"]

    # The service opens the index the sync wrote, and Alice finds the message.
    deadline = time.monotonic() + 60
    while True:
        found = httpx.post(f"{service.url}/v1/search", json={"query": "zeppelin hangar lease"}, timeout=30,
                           headers={**READERS, "X-User-Id": F.ALICE})  # fmt: skip
        if (found.status_code == 200 and found.json()["results"]) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert found.status_code == 200, found.text
    assert any("zeppelin" in (r["parent_text"] or r["child_text"]) for r in found.json()["results"])
    # RAG_RERANKER=none reaches the service: no reranker is loaded, and a reranked search says so.
    assert httpx.get(f"{service.url}/health", headers=READERS, timeout=10).json()["reranker"] is None
    reranked = httpx.post(f"{service.url}/v1/search", json={"query": "zeppelin hangar", "mode": "reranked"},
                          headers={**READERS, "X-User-Id": F.ALICE}, timeout=30).json()  # fmt: skip
    assert reranked["mode"] == "hybrid" and any("no reranker configured" in w for w in reranked["warnings"])
