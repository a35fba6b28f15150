"""``rag_pipeline.http.routes.events``: ``POST /events/{source}`` on the real app — the receivers' body limit
(declared or counted as the body streams in), the 404s of a source that is off or unknown, and a signed Slack
handshake answered by the receiver itself."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from rag_pipeline.connectors.slack.events import SlackEvents
from rag_pipeline.http.routes import events
from rag_pipeline.serving.event_receivers import build_event_receivers
from rag_pipeline.serving.ingest_runs import IngestLauncher
from rag_pipeline.settings import ServeSettings
from rag_pipeline_tests.kit.emulators.push_senders import SlackEventSender
from rag_pipeline_tests.unit.http.conftest import served

SIGNING_SECRET = "events-route-signing-secret-01"
LIMIT = SlackEvents.max_body_bytes


@pytest.fixture
def client(index_folder: Path, tmp_path: Path) -> Iterator[TestClient]:
    settings = ServeSettings(trusted_proxy=True, slack_signing_secret=SecretStr(SIGNING_SECRET))
    launcher = IngestLauncher(tmp_path / "jobs", ["slack"], command=[sys.executable, "-c", "print('{}')"])
    with served(index_folder, settings, ingest=launcher, events=build_event_receivers(settings, launcher)) as c:
        yield c


def test_the_route_and_which_paths_are_its() -> None:
    assert [(r.path, r.methods) for r in events.router.routes] == [("/events/{source}", {"POST"})]  # type: ignore[attr-defined]
    assert events.is_event_path("/events/slack") and events.is_event_path("/events/jira")
    assert not events.is_event_path("/v1/events/slack") and not events.is_event_path("/eventsslack")


def test_a_signed_url_verification_is_answered_with_its_challenge(client: TestClient) -> None:
    sender = SlackEventSender("http://127.0.0.1/events/slack", SIGNING_SECRET)
    body = json.dumps({"type": "url_verification", "challenge": "c-123", "token": "x"}).encode()
    answer = client.post("/events/slack", content=body, headers=sender.headers(body))
    assert answer.status_code == 200 and answer.json()["challenge"] == "c-123"


def test_a_body_declared_over_the_receivers_limit_is_a_413_on_body(client: TestClient) -> None:
    answer = client.post("/events/slack", content=b"x" * (LIMIT + 1))
    assert answer.status_code == 413 and answer.json() == {
        "error": f"the request body is over {LIMIT} bytes",
        "field": "body",
    }


def test_a_streamed_body_without_a_length_is_counted_and_refused_past_the_limit(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(LIMIT // 4096 + 2):
            yield b"y" * 4096

    answer = client.post("/events/slack", content=chunks())
    assert answer.status_code == 413 and answer.json()["field"] == "body"


def test_a_source_whose_secret_is_not_set_names_its_variable(client: TestClient) -> None:
    answer = client.post("/events/jira", content=b"{}")
    assert answer.status_code == 404 and "set RAG_JIRA_WEBHOOK_SECRET" in answer.json()["error"]


def test_an_unknown_source_is_a_404_listing_the_sources_with_receivers(client: TestClient) -> None:
    answer = client.post("/events/" + "n" * 300, content=b"{}")
    message = answer.json()["error"]
    assert answer.status_code == 404 and "no receiver of pushed changes" in message and "slack" in message
    assert "n" * 41 not in message  # the caller's name is cut short, never echoed whole


def test_with_no_receiver_configured_every_source_is_off(index_folder: Path) -> None:
    with served(index_folder, ServeSettings(trusted_proxy=True)) as c:
        answer = c.post("/events/slack", content=b"{}")
    assert answer.status_code == 404 and "RAG_SLACK_SIGNING_SECRET" in answer.json()["error"]
