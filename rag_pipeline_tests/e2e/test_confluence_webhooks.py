"""Confluence webhooks end to end on a real ``rag-pipeline serve`` (issue 66 item 2): the Confluence REST emulator
behind the live source, the kit's :class:`WebhookSender` posting signed deliveries to ``POST /events/confluence``.
A page created after the first sync becomes searchable through the targeted sync of its space (a run tagged with
the webhook's event); a page trashed, and a page given a view restriction that leaves its reader out, are gone for
that reader after their webhooks (the targeted sync's reconciliation), while the restriction's own user still
reads it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from rag_pipeline_tests.kit import serving_fixtures as S
from rag_pipeline_tests.kit.emulators.confluence_api import ConfluenceEmulator, ConfluenceSite
from rag_pipeline_tests.kit.emulators.push_senders import WebhookSender

READERS_TOKEN = "readers-token-confluence-hooks"
INGEST_TOKEN = "ingest-token-confluence-hooks"
WEBHOOK_SECRET = "confluence-webhook-secret-5678"
INGEST = {"Authorization": f"Bearer {INGEST_TOKEN}"}
SITE, SPACE, GROUP = "wiki.hooks-test.invalid", "HOOKS", "hooks-team"
READER, KEEPER = "rita@hooks.example", "kai@hooks.example"


@pytest.fixture(scope="module")
def emulator() -> Iterator[ConfluenceEmulator]:
    site = ConfluenceSite()
    site.add_user("acc-rita", "Rita Reader", email=READER, groups=[GROUP])
    site.add_user("acc-kai", "Kai Keeper", email=KEEPER, groups=[GROUP])
    site.add_space(SPACE, "Hooks test space", view_groups=[GROUP])
    yesterday = datetime.now(UTC) - timedelta(days=1)
    site.add_page(SPACE, "Wombat onboarding", "<p>the wombat onboarding checklist lives here</p>", yesterday,
                  author="acc-rita", id="90001")  # fmt: skip
    site.add_page(SPACE, "Tapir budget", "<p>the tapir budget for the next quarter</p>", yesterday,
                  author="acc-kai", id="90002")  # fmt: skip
    with ConfluenceEmulator(site) as running:
        yield running


@pytest.fixture(scope="module")
def service(emulator: ConfluenceEmulator, tmp_path_factory: pytest.TempPathFactory) -> Iterator[S.ServiceProcess]:
    root = tmp_path_factory.mktemp("confluence_webhooks")
    (root / "dagster_home").mkdir()
    env = {"RAG_SERVE_TOKEN": READERS_TOKEN, "RAG_INGEST_TOKEN": INGEST_TOKEN, "CONFLUENCE_URL": emulator.url,
           "CONFLUENCE_USERNAME": emulator.username, "CONFLUENCE_API_TOKEN": emulator.api_token,
           "CONFLUENCE_SITE": SITE, "DAGSTER_HOME": str(root / "dagster_home"), "RAG_RERANKER": "none",
           "RAG_CONFLUENCE_WEBHOOK_SECRET": WEBHOOK_SECRET, "RAG_EVENTS_DEBOUNCE_SECONDS": "3"}  # fmt: skip
    process = S.ServiceProcess(root / "data", root / "serve.log", **env)
    try:
        process.wait_ready(status=503)  # no index yet
        yield process
    finally:
        process.stop()


def _jobs(service: S.ServiceProcess) -> list[dict[str, Any]]:
    status = httpx.get(f"{service.url}/v1/scheduler/status", headers=INGEST, timeout=120)
    assert status.status_code == 200, status.text
    return list(status.json()["jobs"])


def _finished_job(service: S.ServiceProcess, index: int, timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = _jobs(service)
        if len(jobs) > index and jobs[index]["state"] in ("succeeded", "failed"):
            job = jobs[index]
            assert job["state"] == "succeeded", Path(job["log"]).read_text()[-3000:]
            return job
        time.sleep(1)
    raise AssertionError(f"no finished job {index}: {_jobs(service)}\n{service.log()[-3000:]}")


def _found(service: S.ServiceProcess, phrase: str, email: str, timeout: float = 0) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        answer = httpx.post(f"{service.url}/v1/search", json={"query": phrase, "mode": "bm25"}, timeout=60,
                            headers={"Authorization": f"Bearer {READERS_TOKEN}", "X-User-Email": email})  # fmt: skip
        if answer.status_code == 200:
            texts = [(r["parent_text"] or "") + (r["child_text"] or "") for r in answer.json()["results"]]
            if any(phrase in text for text in texts) or time.monotonic() >= deadline:
                return any(phrase in text for text in texts)
        elif time.monotonic() >= deadline:
            raise AssertionError(answer.text)
        time.sleep(0.5)


def _hook(service: S.ServiceProcess, event: str, page: str) -> str:
    """Post a signed ``event`` about ``page``; its outcome ("queued", or "coalesced" with a waiting one)."""
    sender = WebhookSender(f"{service.url}/events/confluence", WEBHOOK_SECRET)
    answer = sender.send({"webhookEvent": event, "timestamp": int(time.time() * 1000),
                          "page": {"id": page, "spaceKey": SPACE, "title": "-"}})  # fmt: skip
    assert answer.status_code == 200 and answer.json()["queued"] == 1, answer.text
    return str(answer.json()["outcomes"][0])


@pytest.mark.slow
def test_confluence_webhooks_become_targeted_syncs_of_their_space(
    service: S.ServiceProcess, emulator: ConfluenceEmulator
) -> None:
    site = emulator.site
    started = httpx.post(f"{service.url}/v1/ingest", json={"source": "confluence"}, headers=INGEST, timeout=30)
    assert started.status_code == 202, started.text
    _finished_job(service, 0)
    assert _found(service, "the wombat onboarding checklist", READER, timeout=60)
    assert _found(service, "the tapir budget", READER)

    # A page created now: its webhook's targeted sync of the space makes it searchable.
    site.add_page(SPACE, "Pangolin rota", "<p>the pangolin escalation rota for december</p>", datetime.now(UTC),
                  author="acc-kai", id="90003")  # fmt: skip
    assert not _found(service, "the pangolin escalation rota", READER)
    assert _hook(service, "page_created", "90003") == "queued"
    created = _finished_job(service, 1)
    assert created["containers"] == {"confluence": [SPACE]}, created
    assert created["run_tags"]["rag/trigger"] == "events" and created["run_tags"]["rag/events"] == "page_created x1"
    assert _found(service, "the pangolin escalation rota", READER, timeout=60)

    # A page trashed, another restricted to Kai alone: both gone for Rita after their webhooks (one coalesced job).
    site.contents["90001"].status = "trashed"
    site.contents["90002"].read_users = ["acc-kai"]
    assert _hook(service, "page_trashed", "90001") == "queued"
    assert _hook(service, "content_restrictions_updated", "90002") == "coalesced"  # within the debounce window
    changed = _finished_job(service, 2)
    assert changed["results"]["confluence"]["summary"]["documents_removed"] == 1, changed
    assert len(_jobs(service)) == 3  # the two webhooks went in one targeted sync
    deadline = time.monotonic() + 60
    while _found(service, "the tapir budget", READER) and time.monotonic() < deadline:
        time.sleep(0.5)  # the service reopens the index the sync wrote
    assert not _found(service, "the wombat onboarding checklist", READER)
    assert not _found(service, "the tapir budget", READER)
    assert _found(service, "the tapir budget", KEEPER, timeout=30)
    assert _found(service, "the pangolin escalation rota", READER)
