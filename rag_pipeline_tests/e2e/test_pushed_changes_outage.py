"""Slack events lost during an outage of the real ``rag-pipeline serve`` (issue 66 item 3): while the service is
down, messages are posted, one indexed message is deleted and a member joins a private channel, and every event
Slack sends for them is lost (nothing listens). After the restart the events never come back, and nothing is
searchable that the service did not sync; the next scheduled sync (``POST /v1/ingest``: ``rag-pipeline sync``, the
planner of the daemon's sync sensor, from each channel's watermark) finds all of it. Slack's late retries of the
lost events then start one targeted sync that writes nothing new: every message is found once, and the index
holds each document once (one parent point each, read from the folder once the service stopped)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.store import CollectionNames
from rag_pipeline_tests.kit import serving_fixtures as S
from rag_pipeline_tests.kit import slack_fixtures as F
from rag_pipeline_tests.kit.data import ts
from rag_pipeline_tests.kit.emulators.push_senders import SlackEventSender
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.emulators.slack_workspace import SlackWorkspace

READERS_TOKEN = "readers-token-outage-1"
INGEST_TOKEN = "ingest-token-outage-1"
SIGNING_SECRET = "outage-signing-secret-0123456789"
INGEST = {"Authorization": f"Bearer {INGEST_TOKEN}"}
GENERAL, OPS, SECRET = "C0OUTGEN01", "C0OUTOPS01", "C0OUTSEC01"


def _workspace() -> SlackWorkspace:
    ws = SlackWorkspace(team_id=F.CRAFTED_TEAM, domain=F.CRAFTED_DOMAIN)
    ws.users = [F._user(F.ALICE, "alice", "Alice Anders"), F._user(F.BOB, "bob", "Bob Brown"),
                F._user(F.BOT_USER, "rag-bot", "RAG Bot", is_bot=True)]  # fmt: skip
    yesterday = int(time.time()) - 86400
    ws.add_channel(GENERAL, "general", members=[F.ALICE, F.BOB, F.BOT_USER], created=yesterday - 86400)
    ws.add_channel(OPS, "ops", members=[F.ALICE, F.BOB, F.BOT_USER], created=yesterday - 86400)
    ws.add_channel(SECRET, "okapi", is_private=True, members=[F.ALICE, F.BOT_USER], created=yesterday - 86400)
    ws.post(GENERAL, F._msg(ts(yesterday), F.ALICE, "the zeppelin hangar lease renews in april"))
    ws.post(OPS, F._msg(ts(yesterday + 1), F.ALICE, "the quokka migration starts monday"))
    ws.post(SECRET, F._msg(ts(yesterday + 2), F.ALICE, "the okapi budget is frozen until the audit"))
    return ws


@pytest.fixture
def emulator() -> Iterator[SlackEmulator]:
    with SlackEmulator(_workspace()) as running:
        yield running


def _start(root: Path, emulator: SlackEmulator) -> S.ServiceProcess:
    env = {"RAG_SERVE_TOKEN": READERS_TOKEN, "RAG_INGEST_TOKEN": INGEST_TOKEN, "SLACK_BOT_TOKEN": "xoxb-test-token",
           "SLACK_API_BASE_URL": emulator.base_url, "DAGSTER_HOME": str(root / "dagster_home"),
           "RAG_RERANKER": "none", "RAG_SLACK_SIGNING_SECRET": SIGNING_SECRET,
           "RAG_EVENTS_DEBOUNCE_SECONDS": "3"}  # fmt: skip
    return S.ServiceProcess(root / "data", root / f"serve-{time.monotonic_ns()}.log", **env)


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


def _scheduled_sync(service: S.ServiceProcess, index: int) -> dict[str, Any]:
    started = httpx.post(f"{service.url}/v1/ingest", json={"source": "slack"}, headers=INGEST, timeout=30)
    assert started.status_code == 202, started.text
    return _finished_job(service, index)


def _found(service: S.ServiceProcess, phrase: str, user: str, timeout: float = 0) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        answer = httpx.post(f"{service.url}/v1/search", json={"query": phrase, "mode": "bm25"}, timeout=60,
                            headers={"Authorization": f"Bearer {READERS_TOKEN}", "X-User-Id": user})  # fmt: skip
        if answer.status_code == 200:
            texts = [(r["parent_text"] or "") + (r["child_text"] or "") for r in answer.json()["results"]]
            if any(phrase in text for text in texts) or time.monotonic() >= deadline:
                return any(phrase in text for text in texts)
        elif time.monotonic() >= deadline:
            raise AssertionError(answer.text)
        time.sleep(0.5)


def _hits(service: S.ServiceProcess, phrase: str, user: str) -> int:
    """Results holding ``phrase`` (one document each): 1 unless the message was indexed twice."""
    answer = httpx.post(f"{service.url}/v1/search", json={"query": phrase, "mode": "bm25", "top_k": 20}, timeout=60,
                        headers={"Authorization": f"Bearer {READERS_TOKEN}", "X-User-Id": user})  # fmt: skip
    assert answer.status_code == 200, answer.text
    return sum(phrase in (r["parent_text"] or "") + (r["child_text"] or "") for r in answer.json()["results"])


def _parents_per_document(data_dir: Path) -> dict[str, int]:
    """Parent points per document id, read from the index folder (the service stopped: one opener at a time)."""
    with EdgeVectorStore(data_dir / "qdrant", wait_seconds=60) as store:
        parents = CollectionNames().parents
        documents = sorted(store.indexed_documents())
        return {d: len(store.document_points(parents, [d])) for d in documents}


@pytest.mark.slow
def test_events_lost_in_an_outage_are_caught_by_the_next_scheduled_sync_once(
    emulator: SlackEmulator, tmp_path: Path
) -> None:
    ws = emulator.workspace
    (tmp_path / "dagster_home").mkdir()
    service = _start(tmp_path, emulator)
    try:
        service.wait_ready(status=503)  # no index yet
        _scheduled_sync(service, 0)
        assert _found(service, "the quokka migration", F.ALICE, timeout=60)
    finally:
        service.stop()
    url = f"{service.url}/events/slack"

    # The outage: changes happen, their events go nowhere.
    now = int(time.time())
    posted = [F._msg(ts(now - 30 + i), F.BOB, f"the capybara outage note number {i} is ready") for i in range(5)]
    lost: list[tuple[dict[str, Any], str]] = []
    for i, message in enumerate(posted):
        channel = (GENERAL, OPS)[i % 2]
        ws.post(channel, message)
        lost.append((SlackEventSender.message(channel, message["ts"], F.BOB, message["text"]), f"Ev0LOST{i:05d}"))
    quokka = next(m for m in ws.channel(OPS).messages.values() if "quokka" in m["text"])
    ws.delete(OPS, quokka["ts"])
    lost.append((SlackEventSender.deleted(OPS, quokka["ts"]), "Ev0LOST00098"))
    ws.add_member(SECRET, F.BOB)
    lost.append((SlackEventSender.member_joined(SECRET, F.BOB), "Ev0LOST00099"))
    sender = SlackEventSender(url, SIGNING_SECRET, team_id=F.CRAFTED_TEAM)
    for event, event_id in lost:
        with pytest.raises(httpx.TransportError):  # nothing listens: Slack's delivery fails
            sender.send(event, event_id=event_id)

    service = _start(tmp_path, emulator)
    try:
        service.wait_ready()
        # The restarted service heard nothing: no job, nothing of the outage searchable.
        assert _jobs(service) == []
        assert not _found(service, "the capybara outage note number 3", F.ALICE)
        assert _found(service, "the quokka migration", F.ALICE) and not _found(service, "the okapi budget", F.BOB)

        # The next scheduled sync: every change of the outage.
        caught = _scheduled_sync(service, 0)
        summary = caught["results"]["slack"]["summary"]
        assert summary["documents"] >= len(posted) and summary["documents_removed"] == 1, summary
        for i in range(len(posted)):
            assert _found(service, f"the capybara outage note number {i}", F.ALICE, timeout=60), i
        assert not _found(service, "the quokka migration", F.ALICE)
        assert _found(service, "the okapi budget", F.BOB, timeout=60)

        # Slack retries the lost events once the Request URL answers again: one targeted sync, nothing new.
        sender = SlackEventSender(f"{service.url}/events/slack", SIGNING_SECRET, team_id=F.CRAFTED_TEAM)
        for event, event_id in lost:
            answer = sender.send(event, event_id=event_id, retry=1)
            assert answer.status_code == 200 and answer.json()["ok"] is True, answer.text
        retried = _finished_job(service, 1)
        assert retried["run_tags"]["rag/trigger"] == "events", retried
        assert sorted(retried["containers"]["slack"]) == sorted([GENERAL, OPS, SECRET]), retried
        assert retried["results"]["slack"]["summary"]["documents_removed"] == 0, retried
        assert len(_jobs(service)) == 2  # one coalesced job for the seven retries
        for i in range(len(posted)):
            assert _hits(service, f"the capybara outage note number {i}", F.ALICE) == 1, i
    finally:
        service.stop()
    # Every document once, with one parent point (short messages): nothing the sync or the retries wrote twice.
    after = _parents_per_document(tmp_path / "data")
    capybara = [d for d in after if any(m["ts"] in d for m in posted)]
    assert len(after) == 3 + len(posted) - 1 and set(after.values()) == {1}, after
    assert len(capybara) == len(posted) and all(after[d] == 1 for d in capybara), after
