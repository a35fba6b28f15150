"""Pushed changes on a real ``rag-pipeline serve`` process (issue 66): Slack's Events API signed by slack-sdk's own
signer (the kit's :class:`SlackEventSender`) and Jira webhooks (:class:`WebhookSender`), against the Slack Web API
emulator. The receivers' checks (signature, timestamp window, replay, body limit, handshake, Slack's retries, the
webhook secret) answer at once; the slow tests follow events through the targeted syncs they start: a burst is one
Dagster run tagged with its events, a deleted message leaves search, a member who joined a private channel reads
it, and an event naming a channel the bot cannot read indexes nothing."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import httpx
import pytest

from rag_pipeline_tests.kit import serving_fixtures as S
from rag_pipeline_tests.kit import slack_fixtures as F
from rag_pipeline_tests.kit.data import ts
from rag_pipeline_tests.kit.emulators.push_senders import SlackEventSender, WebhookSender
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.emulators.slack_workspace import SlackWorkspace

READERS_TOKEN = "readers-token-events-1"
INGEST_TOKEN = "ingest-token-events-1"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
JIRA_SECRET = "jira-webhook-secret-1234"
INGEST = {"Authorization": f"Bearer {INGEST_TOKEN}"}
GENERAL, SECRET, HIDDEN = "C0GENERAL1", "C0SECRET01", "C0HIDDEN01"


@pytest.fixture(scope="module")
def workspace() -> SlackWorkspace:
    ws = SlackWorkspace(team_id=F.CRAFTED_TEAM, domain=F.CRAFTED_DOMAIN)
    ws.users = [F._user(F.ALICE, "alice", "Alice Anders"), F._user(F.BOB, "bob", "Bob Brown"),
                F._user(F.BOT_USER, "rag-bot", "RAG Bot", is_bot=True)]  # fmt: skip
    yesterday = int(time.time()) - 86400
    ws.add_channel(GENERAL, "general", members=[F.ALICE, F.BOB, F.BOT_USER], created=yesterday - 86400)
    ws.add_channel(SECRET, "okapi", is_private=True, members=[F.ALICE, F.BOT_USER], created=yesterday - 86400)
    ws.add_channel(HIDDEN, "narwhal", is_private=True, is_member=False, members=[F.ALICE], created=yesterday - 86400)
    ws.post(GENERAL, F._msg(ts(yesterday), F.ALICE, "the zeppelin hangar lease renews in april"))
    ws.post(SECRET, F._msg(ts(yesterday + 1), F.ALICE, "the okapi budget is frozen until the audit"))
    ws.post(HIDDEN, F._msg(ts(yesterday + 2), F.ALICE, "the narwhal acquisition closes friday"))
    return ws


@pytest.fixture(scope="module")
def emulator(workspace: SlackWorkspace) -> Iterator[SlackEmulator]:
    with SlackEmulator(workspace) as running:
        yield running


@pytest.fixture(scope="module")
def service(emulator: SlackEmulator, tmp_path_factory: pytest.TempPathFactory) -> Iterator[S.ServiceProcess]:
    root = tmp_path_factory.mktemp("pushed_changes")
    (root / "dagster_home").mkdir()
    env = {"RAG_SERVE_TOKEN": READERS_TOKEN, "RAG_INGEST_TOKEN": INGEST_TOKEN, "SLACK_BOT_TOKEN": "xoxb-test-token",
           "SLACK_API_BASE_URL": emulator.base_url, "DAGSTER_HOME": str(root / "dagster_home"),
           "RAG_RERANKER": "none", "RAG_SLACK_SIGNING_SECRET": SIGNING_SECRET, "RAG_JIRA_WEBHOOK_SECRET": JIRA_SECRET,
           "RAG_EVENTS_DEBOUNCE_SECONDS": "2"}  # fmt: skip
    process = S.ServiceProcess(root / "data", root / "serve.log", **env)
    try:
        process.wait_ready(status=503)  # no index yet
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def slack(service: S.ServiceProcess) -> SlackEventSender:
    return SlackEventSender(f"{service.url}/events/slack", SIGNING_SECRET, team_id=F.CRAFTED_TEAM)


# --- the receivers' checks ----------------------------------------------------------------------------------------
def test_slack_requests_are_believed_only_when_signed_fresh_and_new(
    service: S.ServiceProcess, slack: SlackEventSender
) -> None:
    body = slack.envelope({"type": "reaction_added", "user": F.ALICE, "reaction": "tada"})
    forged = SlackEventSender(slack.url, "not-the-signing-secret")
    refused = forged.post(body)
    assert refused.status_code == 401 and refused.json()["field"] == "X-Slack-Signature", refused.text
    assert SIGNING_SECRET not in refused.text
    tampered = slack.headers(body)
    assert httpx.post(slack.url, content=body + b" ", headers=tampered, timeout=10).status_code == 401
    stale = slack.post(body, timestamp=int(time.time()) - 6 * 60)
    assert stale.status_code == 401 and stale.json()["field"] == "X-Slack-Request-Timestamp", stale.text
    assert httpx.post(slack.url, content=body, timeout=10).status_code == 401  # no signature at all

    headers = slack.headers(body)
    first = httpx.post(slack.url, content=body, headers=headers, timeout=10)
    assert first.status_code == 200 and first.json()["ok"] is True, first.text
    replayed = httpx.post(slack.url, content=body, headers=headers, timeout=10)  # the same signed request again
    assert replayed.status_code == 401 and "replay" in replayed.json()["error"], replayed.text

    too_big = slack.envelope({"type": "message", "channel": GENERAL, "text": "x" * (300 * 1024)})
    over = slack.post(too_big)
    assert over.status_code == 413 and over.json()["field"] == "body", over.text
    # The readers' token is neither needed nor enough: only the signature counts.
    with_token = httpx.post(slack.url, content=body, timeout=10,
                            headers={"Authorization": f"Bearer {READERS_TOKEN}"})  # fmt: skip
    assert with_token.status_code == 401


def test_the_url_verification_handshake(slack: SlackEventSender) -> None:
    challenge = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    body = json.dumps({"token": "x", "challenge": challenge, "type": "url_verification"}).encode()
    answer = slack.post(body)
    assert answer.status_code == 200 and answer.json() == {"challenge": challenge}
    assert slack.post(body, timestamp=int(time.time()) - 3600).status_code == 401  # signed like any request


def test_slack_retries_queue_nothing_twice(slack: SlackEventSender) -> None:
    event = {"type": "reaction_added", "user": F.ALICE, "reaction": "eyes"}
    first = slack.send(event, event_id="Ev0RETRY0001")
    assert first.status_code == 200 and "duplicate" not in first.json(), first.text
    for number in (1, 2, 3):  # Slack's retries: re-signed, X-Slack-Retry-Num, the same event_id
        again = slack.send(event, event_id="Ev0RETRY0001", retry=number)
        assert again.status_code == 200 and again.json()["duplicate"] is True, again.text


def test_jira_webhooks_need_their_secret(service: S.ServiceProcess) -> None:
    url = f"{service.url}/events/jira"
    payload = {"webhookEvent": "jira:issue_updated", "issue": {"key": "OPS-7", "fields": {"project": {"key": "OPS"}}}}
    wrong = WebhookSender(url, "not-the-secret")
    for how in ("signed", "token", "header"):
        refused = wrong.send(payload, how=how)
        assert refused.status_code == 401 and JIRA_SECRET not in refused.text, (how, refused.text)
    jira = WebhookSender(url, JIRA_SECRET)
    assert jira.send(payload, how="none").status_code == 401
    for how in ("signed", "token", "header"):
        accepted = jira.send(payload, how=how)
        # Jira has no live API on this service: the change is believed, and nothing is queued for it.
        assert accepted.status_code == 200 and accepted.json()["outcomes"] == ["ignored"], (how, accepted.text)
    jira.send(payload, delivery="delivery-1")
    retried = jira.send(payload, delivery="delivery-1", retry=1)
    assert retried.status_code == 200 and retried.json()["duplicate"] is True
    assert "token=" not in service.log()  # the access log never writes the query string (the secret)


def test_a_receiver_without_its_secret_is_off(service: S.ServiceProcess) -> None:
    off = httpx.post(f"{service.url}/events/confluence", json={"page": {"spaceKey": "ENG"}}, timeout=10)
    assert off.status_code == 404 and "RAG_CONFLUENCE_WEBHOOK_SECRET" in off.json()["error"], off.text
    unknown = httpx.post(f"{service.url}/events/github", json={}, timeout=10)
    assert unknown.status_code == 404 and unknown.json()["error"], unknown.text


# --- targeted syncs -----------------------------------------------------------------------------------------------
def _jobs(service: S.ServiceProcess) -> list[dict[str, Any]]:
    status = httpx.get(f"{service.url}/v1/scheduler/status", headers=INGEST, timeout=120)
    assert status.status_code == 200, status.text
    return list(status.json()["jobs"])


def _next_job(service: S.ServiceProcess, known: int, timeout: float = 300) -> dict[str, Any]:
    """The first job after the ``known`` ones, once it finished."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = _jobs(service)
        if len(jobs) > known and jobs[known]["state"] in ("succeeded", "failed"):
            return jobs[known]
        time.sleep(1)
    raise AssertionError(f"no finished job after {known}: {_jobs(service)}\n{service.log()[-3000:]}")


def _search(service: S.ServiceProcess, query: str, user: str) -> list[dict[str, Any]]:
    found = httpx.post(f"{service.url}/v1/search", json={"query": query}, timeout=60,
                       headers={"Authorization": f"Bearer {READERS_TOKEN}", "X-User-Id": user})  # fmt: skip
    assert found.status_code == 200, found.text
    return [r for r in found.json()["results"] if query.split()[1] in (r["parent_text"] or r["child_text"])]


def _searchable(service: S.ServiceProcess, query: str, user: str, timeout: float = 60) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:  # the service reopens the index the sync wrote
        with_status = httpx.get(f"{service.url}/health", timeout=10)
        if with_status.status_code == 200:
            hits = _search(service, query, user)
            if hits or time.monotonic() > deadline:
                return hits
        elif time.monotonic() > deadline:
            raise AssertionError(with_status.text)
        time.sleep(0.5)


@pytest.mark.slow
def test_events_become_targeted_syncs(
    service: S.ServiceProcess, slack: SlackEventSender, workspace: SlackWorkspace
) -> None:
    # A first sync through the ingestion API sets the watermarks (the scheduled sync's part).
    started = httpx.post(f"{service.url}/v1/ingest", json={"source": "slack"}, headers=INGEST, timeout=10)
    assert started.status_code == 202, started.text
    first = _next_job(service, 0)
    assert first["state"] == "succeeded", Path(first["log"]).read_text()[-3000:]
    assert _searchable(service, "the zeppelin hangar", F.ALICE)

    # A burst of 40 messages in #general: one targeted job, one chain run, tagged with its events.
    now = int(time.time())
    for i in range(40):
        message = F._msg(ts(now - 40 + i), F.BOB, f"the capybara release note number {i} is ready")
        workspace.post(GENERAL, message)
        assert slack.send(slack.message(GENERAL, message["ts"], F.BOB, message["text"])).json()["queued"] == 1
    burst = _next_job(service, 1)
    assert burst["state"] == "succeeded", Path(burst["log"]).read_text()[-3000:]
    assert burst["containers"] == {"slack": [GENERAL]} and burst["run_tags"]["rag/events"] == "message x40", burst
    assert burst["results"]["slack"]["summary"]["documents"] >= 40, burst
    assert _searchable(service, "the capybara release note number 17", F.ALICE)
    instance = dg.DagsterInstance.from_config(os.path.join(Path(service.log_path).parent, "dagster_home"))
    runs = instance.get_runs(filters=dg.RunsFilter(tags={"rag/trigger": "events"}))
    chain = [r for r in runs if r.tags.get("rag/event_containers") == GENERAL
             and "dagster/asset_partition_range_start" in r.tags]  # fmt: skip
    assert len(chain) == 1 and chain[0].tags["rag/events"] == "message x40", [r.tags for r in runs]

    # A deleted message leaves search: the targeted sync's reconciliation sees it gone.
    doomed = F._msg(ts(now - 100), F.ALICE, "the quokka migration starts monday")
    workspace.post(GENERAL, doomed)
    slack.send(slack.message(GENERAL, doomed["ts"], F.ALICE, doomed["text"]))
    posted = _next_job(service, 2)
    assert posted["state"] == "succeeded" and _searchable(service, "the quokka migration", F.ALICE), posted
    workspace.delete(GENERAL, doomed["ts"])
    slack.send(slack.deleted(GENERAL, doomed["ts"]))
    gone = _next_job(service, 3)
    assert gone["state"] == "succeeded" and gone["run_tags"]["rag/events"] == "message_deleted x1", gone
    assert gone["results"]["slack"]["summary"]["documents_removed"] == 1, gone
    assert _search(service, "the quokka migration", F.ALICE) == []

    # Bob joins the private #okapi: the member_joined_channel event's sync refreshes the ACL.
    assert _searchable(service, "the okapi budget", F.ALICE) and _search(service, "the okapi budget", F.BOB) == []
    workspace.add_member(SECRET, F.BOB)
    slack.send(slack.member_joined(SECRET, F.BOB))
    joined = _next_job(service, 4)
    assert joined["state"] == "succeeded" and joined["containers"] == {"slack": [SECRET]}, joined
    assert _searchable(service, "the okapi budget", F.BOB)

    # An event for a channel the bot cannot read: skipped by name, nothing of it indexed for anyone.
    slack.send(slack.message(HIDDEN, ts(now - 5), F.ALICE, "the narwhal acquisition closes friday"))
    hidden = _next_job(service, 5)
    assert hidden["results"]["slack"]["summary"]["unreadable"] == [HIDDEN], hidden
    assert hidden["results"]["slack"]["summary"]["documents"] == 0, hidden
    assert _search(service, "the narwhal acquisition", F.ALICE) == [] and _search(service, "the narwhal acquisition",
                                                                                   F.BOB) == []  # fmt: skip
