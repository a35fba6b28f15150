"""The freshness histogram (``rag_event_freshness_seconds`` on ``GET /metrics``): a signed Slack message event
posted to ``POST /events/slack`` of the real app becomes a targeted job of the real
:class:`~rag_pipeline.serving.ingest_runs.IngestLauncher` (a stand-in child that prints an empty summary, or fails),
and once the job succeeded the histogram counts the event under its source; a failed job's event is not counted
(the scheduled sync catches it, and it was never searchable)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from rag_pipeline.serving.event_receivers import build_event_receivers
from rag_pipeline.serving.ingest_runs import IngestLauncher
from rag_pipeline.settings import ServeSettings
from rag_pipeline_tests.kit.emulators.push_senders import SlackEventSender
from rag_pipeline_tests.unit.http.conftest import served

SIGNING_SECRET = "freshness-signing-secret-0001"
COUNT = ("rag_event_freshness_seconds_count", (("source", "slack"),))
# The child the launcher runs instead of `rag-pipeline sync`: fails when the data folder's name says so.
CHILD = "import sys; print('{}'); sys.exit(3 if any('failing' in a for a in sys.argv) else 0)"


def _samples(client: TestClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(client.get("/metrics").text)
        for s in family.samples
    }


@pytest.fixture(params=["ok", "failing"])
def app(request: pytest.FixtureRequest, index_folder: Path, tmp_path: Path) -> Iterator[tuple[TestClient, str]]:
    settings = ServeSettings(trusted_proxy=True, slack_signing_secret=SecretStr(SIGNING_SECRET),
                             events_debounce_seconds=0.1)  # fmt: skip
    launcher = IngestLauncher(tmp_path / request.param, ["slack"], command=[sys.executable, "-c", CHILD])
    events = build_event_receivers(settings, launcher)
    assert events is not None
    with served(index_folder, settings, ingest=launcher, events=events) as client:
        yield client, request.param


def _post_message(client: TestClient, text: str) -> None:
    sender = SlackEventSender("http://127.0.0.1/events/slack", SIGNING_SECRET)
    body = sender.envelope(sender.message("C0FRESH001", f"{time.time():.6f}", "U0ALICE01", text))
    answer = client.post("/events/slack", content=body, headers=sender.headers(body))
    assert answer.status_code == 200 and answer.json()["queued"] == 1, answer.text


def test_an_event_whose_sync_succeeded_is_counted_in_the_freshness_histogram(app: tuple[TestClient, str]) -> None:
    client, kind = app
    before = _samples(client).get(COUNT, 0.0)
    for i in range(3):  # one burst: one job, three events timed
        _post_message(client, f"the freshness probe number {i}")
    events = client.app.state.rag.events  # type: ignore[attr-defined]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        jobs = events.syncs.launcher.jobs()
        if jobs and jobs[0].state in ("succeeded", "failed") and (kind == "failing" or COUNT in _samples(client)):
            break
        time.sleep(0.05)
    (job,) = events.syncs.launcher.jobs()
    after = _samples(client)
    if kind == "ok":
        assert job.state == "succeeded" and after[COUNT] - before == 3, after
        total = after[("rag_event_freshness_seconds_sum", (("source", "slack"),))]
        assert total > 0 and after[("rag_event_freshness_seconds_bucket", (("le", "+Inf"), ("source", "slack")))] == 3
    else:
        time.sleep(2 * 0.2)  # the watcher's next look has passed: a failed job is never timed
        assert job.state == "failed" and _samples(client).get(COUNT, 0.0) == before
