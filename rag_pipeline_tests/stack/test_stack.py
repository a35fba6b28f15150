"""The image built and the stack started by a real container engine (issue 50), as `make stack-test` runs it.

podman builds the image (on official base images where a registry answers, Debian-built stand-ins otherwise),
Docker Compose v2 starts deploy/compose.yaml with the stack test's override against podman's API, the bundled
Slack export is indexed through the stack (a run of the code server, recorded in the stack's PostgreSQL
instance, its steps on the Celery worker), a directory user searches over HTTP, every health check and
``/metrics`` answers. Then, through the deployed stack (issue 70, item 2): the ingestion API with its own token
(the scheduler's state, a sync of the live Slack source launched over HTTP and found by a search), the pause and
resume of scheduled ingestion in a container as the daemon's sync sensor sees them, a personal token made in a
container and used against the search service, agent chat with a stand-in model, Prometheus scraping both jobs and
every metric the Grafana dashboard queries, retention (``prune``) in a container, and OIDC sign-in after the
search service is recreated with ``RAG_SERVE_AUTH=oidc``; everything is torn down. Outside the stack, on the host,
the project's emulators stand in for Slack's Web API, an OpenAI-compatible model and an OIDC issuer.

Marked ``stack``: not in the default or slow suites (it needs a container engine and root on the machine;
`make stack-test` installs and prepares them).
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import openai
import promql_parser
import pytest

from rag_pipeline.connectors.slack.settings import BUNDLED_SLACK_TEAM
from rag_pipeline.runs.ingest_metrics import METRICS as INGEST_METRICS
from rag_pipeline_tests.kit import container_stack as C
from rag_pipeline_tests.kit import slack_fixtures as F
from rag_pipeline_tests.kit.emulators.confluence_api import ConfluenceEmulator, ConfluenceSite
from rag_pipeline_tests.kit.emulators.jira_api import JiraEmulator
from rag_pipeline_tests.kit.emulators.jira_site import JiraSite
from rag_pipeline_tests.kit.emulators.oidc_issuer import AUDIENCE, OidcIssuer
from rag_pipeline_tests.kit.emulators.openai_api import API_KEY, OpenAIFake
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator

pytestmark = pytest.mark.stack
MEMBER = "UA0752CDB64"  # a member of the bundled #ubuntu export (its directory maps the id to the person)
ARTIFACTS = C.REPO / "test-artifacts"
SEARCH = "http://127.0.0.1:8000"
GRAPHQL = "http://127.0.0.1:3000/graphql"
PROMETHEUS = "http://127.0.0.1:9090"
LIVE_CHANNEL = "C0STACKT1"  # a channel of the Slack emulator's workspace, synced through the ingestion API
LIVE_TEXT = "the zeppelin hangar lease renews in april"
# The live Jira and Confluence sources, on the project's emulators: one project and one space each, readable by one
# group; a reader in it and an outsider known to the same directory but not in it.
JIRA_SITE_NAME, JIRA_PROJECT, JIRA_GROUP = "jira.stack-test.invalid", "STK", "stk-team"
JIRA_TEXT = "the quokka migration runbook needs a second reviewer"
CONFLUENCE_SITE_NAME, CONFLUENCE_SPACE, CONFLUENCE_GROUP = "wiki.stack-test.invalid", "STKS", "stk-space"
CONFLUENCE_TEXT = "the wombat onboarding checklist lives here"
# Added to the space once the stack runs: what the Confluence sensor's own scheduled run must index.
LATE_PAGE_TEXT = "the pangolin escalation rota changes on mondays"
READER, OUTSIDER = "reader@stack-test.invalid", "outsider@stack-test.invalid"
DASHBOARDS = sorted((C.DEPLOY / "grafana" / "dashboards").glob("*.json"))
PROMETHEUS_OWN = {"up"}  # series Prometheus writes itself for every target, not scraped
# Dashboard series the ingestion exporter writes only in some states (its families are made on first use, so an
# absent one has no "# TYPE" line either): why each may be missing from this stack's scrape.
ONLY_WHEN = {
    "rag_ingest_container_lag_seconds": "only channels/projects behind or failing have one; the test's channel was "
    "just synced",
}


@pytest.fixture(scope="module")
def image() -> dict[str, Any]:
    started = time.monotonic()
    bases = C.build_bases()
    built = C.build_image()
    STEPS["bases_seconds"] = round(bases, 1)
    STEPS["build_seconds"] = round(time.monotonic() - started - bases, 1)
    return built


STEPS: dict[str, Any] = {}  # seconds per step, into test-artifacts/stack.json with the stack's figures


def test_the_image_keeps_its_healthcheck_and_the_cpu_torch(image: dict[str, Any]) -> None:
    check = image["healthcheck"]
    assert check and check["Test"][0] == "CMD" and "http://127.0.0.1:8000/health" in check["Test"][-1]
    assert image["torch"]["version"].endswith("+cpu") and image["torch"]["cuda"] is None


def test_a_single_job_runs_in_the_image_without_the_stack(image: dict[str, Any], tmp_path: Path) -> None:
    """`docker run … rag-pipeline index` needs no PostgreSQL: its instance is SQLite in the data volume."""
    data = tmp_path / "data"
    data.mkdir(mode=0o777)
    data.chmod(0o777)  # the image's user (uid 10001) writes here
    done = C.run(["podman", "run", "--rm", "-v", f"{data}:/var/lib/rag", C.IMAGE, "rag-pipeline", "index",
                  "--source", "slack"], timeout=900)  # fmt: skip
    assert "documents:" in done.stdout, done.stdout[-2000:]
    assert (data / "dagster_home" / "dagster.yaml").is_file()


@pytest.fixture(scope="module")
def slack() -> Iterator[SlackEmulator]:
    """Slack's Web API for the live source: the bundled workspace's team (one data folder holds one workspace) and
    its people, with one channel more whose message is newer than the bundled export's and within the first sync's
    history."""
    ws = F.bundled_workspace()  # its channel too: the daemon's sync, once resumed, plans every channel indexed
    flags = {"team_id": BUNDLED_SLACK_TEAM, "is_restricted": False, "is_ultra_restricted": False}
    ws.users = [{**user, **flags} for user in ws.users]
    ws.users.append(F._user(F.BOT_USER, "rag-bot", "RAG Bot", team=BUNDLED_SLACK_TEAM, is_bot=True))
    yesterday = int(time.time()) - 86400
    ws.add_channel(LIVE_CHANNEL, "stack-test", members=[MEMBER, F.BOT_USER], created=yesterday - 86400)
    ws.post(LIVE_CHANNEL, {"type": "message", "ts": f"{yesterday:.6f}", "user": MEMBER, "team": BUNDLED_SLACK_TEAM,
                           "text": LIVE_TEXT})  # fmt: skip
    emulator = C.seen_from_containers(SlackEmulator(ws), C.host_address())
    try:
        yield emulator
    finally:
        emulator.stop()


@pytest.fixture(scope="module")
def jira() -> Iterator[JiraEmulator]:
    """Jira Cloud's REST API: project STK, browsable by group stk-team (the reader), with one issue from yesterday;
    the outsider is in jira-users only."""
    site = JiraSite(user_timezone="UTC", account_id="acc-rag-bot", display_name="RAG Bot")
    site.add_user("acc-reader", "Rita Reader", email=READER, groups=[JIRA_GROUP, "jira-users"])
    site.add_user("acc-outsider", "Otto Outsider", email=OUTSIDER, groups=["jira-users"])
    site.add_project(JIRA_PROJECT, "Stack test", project_id="10500", browse_groups=(JIRA_GROUP,))
    yesterday = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S.000+0000")
    person = {"accountId": "acc-reader", "displayName": "Rita Reader", "emailAddress": READER}
    site.add_issue({"id": "70001", "key": f"{JIRA_PROJECT}-1", "fields": {
        "project": {"key": JIRA_PROJECT, "name": "Stack test"}, "summary": "Quokka migration runbook",
        "description": JIRA_TEXT, "created": yesterday, "updated": yesterday, "reporter": person, "creator": person,
        "assignee": person, "issuetype": {"id": "10002", "name": "Task"}, "status": {"id": "1", "name": "Open"},
        "priority": {"id": "3", "name": "Major"}, "resolution": None, "labels": [], "components": [],
        "issuelinks": [], "subtasks": [], "attachment": [], "environment": None,
        "comment": {"comments": [], "maxResults": 0, "total": 0, "startAt": 0}}})  # fmt: skip
    emulator = C.seen_from_containers(JiraEmulator(site), C.host_address())
    try:
        yield emulator
    finally:
        emulator.stop()


@pytest.fixture(scope="module")
def confluence() -> Iterator[ConfluenceEmulator]:
    """Confluence Cloud's REST API: space STKS, viewable by group stk-space (the reader), with one page from
    yesterday; the outsider is a user of the site in no group."""
    site = ConfluenceSite()
    site.add_user("acc-reader", "Rita Reader", email=READER, groups=[CONFLUENCE_GROUP])
    site.add_user("acc-outsider", "Otto Outsider", email=OUTSIDER)
    site.add_space(CONFLUENCE_SPACE, "Stack test space", view_groups=[CONFLUENCE_GROUP])
    site.add_page(CONFLUENCE_SPACE, "Wombat onboarding", f"<p>{CONFLUENCE_TEXT}</p>",
                  datetime.now(UTC) - timedelta(days=1), author="acc-reader", id="80001")  # fmt: skip
    emulator = C.seen_from_containers(ConfluenceEmulator(site), C.host_address())
    try:
        yield emulator
    finally:
        emulator.stop()


@pytest.fixture(scope="module")
def model() -> Iterator[OpenAIFake]:
    """The answer model: the project's OpenAI stand-in, scripted to search once for a question marked STACKAGENT."""
    fake = C.seen_from_containers(OpenAIFake(), C.host_address())

    def calls(body: dict[str, Any]) -> list[tuple[str, Any]] | None:
        question = next(str(m.get("content")) for m in reversed(body["messages"]) if m.get("role") == "user")
        done = [m for m in body["messages"] if m.get("role") == "tool"]
        if "STACKAGENT" in question and not done:
            return [("search_documents", {"query": "wireless driver not working after upgrade", "top_k": 3})]
        return None

    def answer(body: dict[str, Any]) -> str | None:
        if any(m.get("role") == "tool" for m in body["messages"]):
            return "Reinstall the wireless driver after the upgrade [1]."
        return None

    fake.respond_with_tools(calls)
    fake.respond(answer)
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture(scope="module")
def issuer() -> Iterator[OidcIssuer]:
    running = C.seen_from_containers(OidcIssuer(), C.host_address())
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def stack(image: dict[str, Any], slack: SlackEmulator, jira: JiraEmulator, confluence: ConfluenceEmulator,
          model: OpenAIFake, issuer: OidcIssuer, tmp_path_factory: pytest.TempPathFactory) -> Any:  # fmt: skip
    settings = {
        # The live Slack source (code-server, worker; search for the ingestion API), on the emulator.
        "SLACK_BOT_TOKEN": slack.token,
        "SLACK_API_BASE_URL": slack.base_url,
        # The live Jira and Confluence sources (code-server, worker), on theirs: synced by the daemon's sensors.
        "JIRA_URL": jira.url,
        "JIRA_USERNAME": jira.username,
        "JIRA_API_TOKEN": jira.api_token,
        "JIRA_SITE": JIRA_SITE_NAME,
        "CONFLUENCE_URL": confluence.url,
        "CONFLUENCE_USERNAME": confluence.username,
        "CONFLUENCE_API_TOKEN": confluence.api_token,
        "CONFLUENCE_SITE": CONFLUENCE_SITE_NAME,
        # Every minute: a page added while the stack runs is the next tick's (test_a_page_added_...).
        "CONFLUENCE_SYNC_CRON": "* * * * *",
        # One index writer at a time: the index here is the embedded engine on the shared volume (the override has no
        # Qdrant server, for which deploy/compose.yaml's default of 4 is meant), and the three sources' sensor runs
        # start together once ingestion is resumed.
        "QDRANT_POOL_LIMIT": "1",
        # Answers by a model that searches for itself (search), on the OpenAI stand-in.
        "RAG_ANSWER_MODEL": "gpt-4o-mini",
        "OPENAI_API_KEY": API_KEY,
        "OPENAI_BASE_URL": model.base_url,
        "RAG_AGENT": "1",
        "RAG_AGENT_MAX_ITERATIONS": "2",
        "RAG_SERVE_CACHE_ENTRIES": "0",
    }

    def paused_before_the_first_tick() -> None:
        # The daemon's sync sensor ticks as soon as it starts; the pause keeps it from syncing the emulator's channel
        # while the bundled export is indexed. It is lifted in a container below (test_resume_...).
        C.seed_volume("rag-data", "rag-pipeline", "pause", "--reason", "stack test: no scheduled sync yet")

    started = time.monotonic()
    with C.running_stack(tmp_path_factory.mktemp("stack"), settings=settings,
                         extra_secrets={"RAG_INGEST_TOKEN": "ingest-" + secrets.token_hex(16)},
                         before_up=paused_before_the_first_tick) as running:  # fmt: skip
        running.figures["image"] = {k: v for k, v in image.items() if k != "layers"}
        try:
            yield running
        finally:
            STEPS["stack_seconds"] = round(time.monotonic() - started, 1)
            running.figures["steps"] = STEPS
            running.figures["peak_memory_mb"] = running.peak_memory_mb()
            ARTIFACTS.mkdir(exist_ok=True)
            (ARTIFACTS / "stack.json").write_text(json.dumps(running.figures, indent=1) + "\n")


def _timed(name: str) -> Any:
    """A context manager recording the seconds a step took in STEPS[name]."""

    class Timer:
        def __enter__(self) -> None:
            self.started = time.monotonic()

        def __exit__(self, *exc: object) -> None:
            STEPS[name] = {"seconds": round(time.monotonic() - self.started, 1), "passed": exc[0] is None}

    return Timer()


def test_every_service_is_up_and_healthy_but_search_until_an_index(stack: C.Stack) -> None:
    containers = stack.containers()
    assert containers["dagster-init"]["state"] == "exited" and containers["dagster-init"]["exit_code"] == 0
    running = {name: c for name, c in containers.items() if name != "dagster-init"}
    assert set(running) == {"postgres", "redis", "code-server", "webserver", "daemon", "worker", "ingest-metrics",
                            "search", "prometheus"}  # fmt: skip
    assert all(c["state"] == "running" for c in running.values())
    healthy = {name: c["health"] for name, c in running.items() if name != "search"}
    assert healthy == dict.fromkeys(healthy, "healthy")
    # The search service answers, and says why it is not ready: no index yet.
    health = httpx.get(f"{SEARCH}/health", timeout=30)
    assert health.status_code == 503 and health.json()["status"] == "unavailable"


def test_the_bundled_slack_export_is_indexed_through_the_stack_and_searched_over_http(stack: C.Stack) -> None:
    with _timed("index_bundled_export_and_search"):
        indexed = stack.compose("exec", "-T", "code-server", "rag-pipeline", "index", "--source", "slack",
                                timeout=1200)  # fmt: skip
        assert "documents: 908" in indexed.stdout, indexed.stdout[-2000:]
        stack.figures["index_seconds"] = next(
            (float(line.split("(")[1].split(" s")[0]) for line in indexed.stdout.splitlines()
             if line.startswith("rag-pipeline index (")), None,
        )  # fmt: skip
        # The run is the stack's: recorded in its PostgreSQL instance, which the webserver shows.
        runs = _graphql("{ runsOrError { ... on Runs { results { status tags { key value } } } } }")
        statuses = [r["status"] for r in runs["runsOrError"]["results"]]
        assert "SUCCESS" in statuses, runs
        started = time.monotonic()
        stack.wait_healthy(timeout=300)  # the search service too, now that there is an index
        stack.figures["search_healthy_after_index_seconds"] = round(time.monotonic() - started, 1)
        found = _search(stack, "wireless driver not working after upgrade")
        assert found.status_code == 200, found.text
        results = found.json()["results"]
        assert results and {r["source"] for r in results} == {"slack"}
        assert httpx.post(f"{SEARCH}/v1/search", json={"query": "wireless"}, timeout=60).status_code == 401


# --- (1) the ingestion API and the pause --------------------------------------------------------------------------
def _graphql(query: str) -> dict[str, Any]:
    answer = httpx.post(GRAPHQL, json={"query": query}, timeout=60).json()
    assert "errors" not in answer, answer
    return dict(answer["data"])


def _search(stack: C.Stack, query: str, **headers: str) -> httpx.Response:
    headers = headers or {"Authorization": f"Bearer {stack.secrets['RAG_SERVE_TOKEN']}", "X-User-Id": MEMBER}
    return httpx.post(f"{SEARCH}/v1/search", json={"query": query, "top_k": 5}, headers=headers, timeout=120)


def _ingest_headers(stack: C.Stack) -> dict[str, str]:
    return {"Authorization": f"Bearer {stack.secrets['RAG_INGEST_TOKEN']}"}


def _sensor_ticks(name: str = "slack_sync_sensor") -> list[dict[str, Any]]:
    """The daemon's latest ticks of one of the code server's sensors, newest first."""
    data = _graphql(
        '{ sensorOrError(sensorSelector: {repositoryLocationName: "rag_pipeline", repositoryName: "__repository__", '
        f'sensorName: "{name}"}}) {{ __typename ... on Sensor {{ sensorState {{ status ticks(limit: 5) {{ status '
        "timestamp skipReason runIds error { message } } } } ... on PythonError { message } } }"
    )
    sensor = data["sensorOrError"]
    assert sensor["__typename"] == "Sensor", sensor
    assert sensor["sensorState"]["status"] != "STOPPED", sensor
    return sorted(sensor["sensorState"]["ticks"], key=lambda t: -t["timestamp"])


def _wait_for_tick(after: float, timeout: float = 180) -> dict[str, Any]:
    """The sync sensor's first tick evaluated after ``after`` (epoch seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        ticks = [t for t in _sensor_ticks() if t["timestamp"] > after and t["status"] != "STARTED"]
        if ticks:
            return ticks[-1]
        assert time.monotonic() < deadline, f"no tick of slack_sync_sensor within {timeout:g} s: {_sensor_ticks()}"
        time.sleep(3)


def _exporter(stack: C.Stack) -> str:
    scrape = "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9464/metrics').read().decode())"
    return stack.compose("exec", "-T", "ingest-metrics", "python", "-c", scrape).stdout


def _paused_gauge(stack: C.Stack, value: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        text = _exporter(stack)
        if re.search(rf"^rag_ingest_paused(\{{\}})? {value}(\.0)?$", text, re.M):
            return
        assert time.monotonic() < deadline, [line for line in text.splitlines() if "paused" in line]
        time.sleep(3)


def _scheduler(stack: C.Stack) -> dict[str, Any]:
    status = httpx.get(f"{SEARCH}/v1/scheduler/status", headers=_ingest_headers(stack), timeout=180)
    assert status.status_code == 200, status.text
    return dict(status.json())


def test_the_pause_is_seen_by_the_daemons_sync_sensor_the_exporter_and_the_ingestion_api(stack: C.Stack) -> None:
    with _timed("pause_seen"):
        # Only the ingestion token opens the ingestion API; it opens nothing else.
        readers = {"Authorization": f"Bearer {stack.secrets['RAG_SERVE_TOKEN']}"}
        for headers in ({}, readers, {"Authorization": "Bearer wrong"}):
            refused = httpx.get(f"{SEARCH}/v1/scheduler/status", headers=headers, timeout=30)
            assert refused.status_code == 401, refused.text
        assert _search(stack, "wireless", **_ingest_headers(stack)).status_code == 401
        scheduler = _scheduler(stack)["scheduler"]
        assert scheduler["ingestion_paused"]["reason"] == "stack test: no scheduled sync yet", scheduler
        assert [s["source"] for s in scheduler["sources"]] == ["slack"], scheduler
        # The code server's sensor (run by the daemon) skips its ticks, naming the pause.
        tick = _wait_for_tick(0)
        assert tick["status"] == "SKIPPED" and "ingestion paused" in (tick["skipReason"] or ""), tick
        _paused_gauge(stack, 1)


def test_a_sync_launched_over_the_ingestion_api_runs_in_the_stack_and_is_searchable(stack: C.Stack) -> None:
    with _timed("ingest_api_sync"):
        started = httpx.post(f"{SEARCH}/v1/ingest", json={"source": "slack"}, headers=_ingest_headers(stack),
                             timeout=30)  # fmt: skip
        assert started.status_code == 202, started.text
        job = started.json()["job"]
        assert started.headers["Location"] == f"/v1/ingest/{job['id']}"
        deadline = time.monotonic() + 900
        while job["state"] not in ("succeeded", "failed") and time.monotonic() < deadline:
            time.sleep(3)
            job = httpx.get(f"{SEARCH}/v1/ingest/{job['id']}", headers=_ingest_headers(stack), timeout=30).json()["job"]
        if job["state"] != "succeeded":
            log = stack.compose("exec", "-T", "search", "tail", "-c", "4000", job["log"], check=False).stdout
            raise AssertionError(f"{job}\n{log}")
        result = job["results"]["slack"]
        assert result["exit_code"] == 0 and result["summary"]["documents"] >= 1, result
        stack.figures["ingest_api_sync"] = {"seconds": result["seconds"], "documents": result["summary"]["documents"],
                                            "runs": result["summary"].get("runs")}  # fmt: skip
        # The Dagster run is in the stack's instance: the scheduler now has the channel's watermark.
        containers = _scheduler(stack)["scheduler"]["sources"][0]["containers"]
        assert [c for c in containers if c["container"] == LIVE_CHANNEL and c["watermark"]], containers
        # The service opens the index the sync wrote, and the channel's member finds the message.
        deadline = time.monotonic() + 120
        while True:
            found = _search(stack, "zeppelin hangar lease")
            texts = [r.get("parent_text") or r.get("child_text") or "" for r in found.json().get("results", [])]
            if any("zeppelin" in t for t in texts) or time.monotonic() > deadline:
                break
            time.sleep(2)
        assert any("zeppelin" in t for t in texts), found.text


def test_resume_and_pause_in_a_container_reach_the_daemons_sensor(stack: C.Stack) -> None:
    with _timed("resume_and_pause"):
        resumed = stack.compose("exec", "-T", "code-server", "rag-pipeline", "resume")
        assert "scheduled ingestion resumed" in resumed.stdout, resumed.stdout
        # Once the command has returned: a tick that started while it ran may still have read the switch.
        resumed_at = time.time()
        # The next tick plans again from the watermarks: no skip for the pause (a run, or "up to date").
        tick = _wait_for_tick(resumed_at)
        assert "ingestion paused" not in (tick["skipReason"] or ""), tick
        stack.figures["sensor_tick_after_resume"] = {k: tick[k] for k in ("status", "skipReason", "runIds")}
        _paused_gauge(stack, 0)
        paused = stack.exec_json("code-server", "rag-pipeline", "pause", "--reason", "stack test: paused again",
                                 "--json")  # fmt: skip
        assert paused["reason"] == "stack test: paused again"
        paused_at = time.time()
        tick = _wait_for_tick(paused_at)
        assert "stack test: paused again" in (tick["skipReason"] or ""), tick
        _paused_gauge(stack, 1)
        # The runs the sensor launched while resumed (a pause stops no run already started) end well: the daemon
        # syncs by itself, its steps on the Celery worker, writing the index the search service holds.
        launched = stack.figures["sensor_tick_after_resume"]["runIds"]
        ended = {run_id: _wait_for_run(run_id) for run_id in launched}
        stack.figures["daemon_sync_runs"] = ended
        assert set(ended.values()) <= {"SUCCESS"}, ended


def _wait_for_run(run_id: str, timeout: float = 300) -> str:
    deadline = time.monotonic() + timeout
    while True:
        run = _graphql(f'{{ runOrError(runId: "{run_id}") {{ ... on Run {{ status }} }} }}')["runOrError"]
        if run.get("status") in ("SUCCESS", "FAILURE", "CANCELED") or time.monotonic() > deadline:
            return str(run.get("status"))
        time.sleep(3)


# --- (1b) Jira and Confluence, synced by the daemon's sensors -------------------------------------------------------
def _sensor_runs(sensor: str) -> list[dict[str, Any]]:
    """The runs a sensor of the code server requested (the daemon tags each with the sensor's name), newest first."""
    data = _graphql(
        f'{{ runsOrError(filter: {{tags: [{{key: "dagster/sensor_name", value: "{sensor}"}}]}}) '
        "{ ... on Runs { results { runId status creationTime } } } }"
    )
    return list(data["runsOrError"]["results"])


def _succeeded_sensor_run(sensor: str, after: float = 0, timeout: float = 600) -> dict[str, Any]:
    """The first run ``sensor`` requested after ``after`` (epoch seconds) once it succeeded; AssertionError on a
    failed one or at ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        runs = sorted((r for r in _sensor_runs(sensor) if r["creationTime"] > after), key=lambda r: r["creationTime"])
        if runs and runs[0]["status"] in ("SUCCESS", "FAILURE", "CANCELED"):
            assert runs[0]["status"] == "SUCCESS", (runs[0], _run_errors(runs[0]["runId"]))
            return runs[0]
        assert time.monotonic() < deadline, f"no finished run of {sensor} after {after} within {timeout:g} s: {runs}"
        time.sleep(5)


def _run_errors(run_id: str) -> list[str]:
    """What a failed run's events say went wrong (its steps' errors and the run's own failure)."""
    data = _graphql(
        f'{{ logsForRun(runId: "{run_id}") {{ ... on EventConnection {{ events {{ __typename '
        "... on ExecutionStepFailureEvent { stepKey error { message } } ... on RunFailureEvent { message } "
        "... on EngineEvent { message error { message } } } } } }"
    )
    events = data["logsForRun"].get("events") or []
    return [json.dumps(e)[:1500] for e in events if e.get("error") or e["__typename"] == "RunFailureEvent"]


def _found_texts(stack: C.Stack, query: str, who: str, source: str) -> list[str]:
    """The texts of ``source``'s results for ``query`` searched as the person ``who`` (an e-mail address)."""
    headers = {"Authorization": f"Bearer {stack.secrets['RAG_SERVE_TOKEN']}", "X-User-Id": who}
    found = _search(stack, query, **headers)
    assert found.status_code == 200, found.text
    return [r.get("parent_text") or r.get("child_text") or "" for r in found.json()["results"] if r["source"] == source]


def _eventually_found(stack: C.Stack, query: str, who: str, source: str, words: str, timeout: float = 120) -> None:
    """Until a search as ``who`` finds ``words`` in ``source`` (the search service reopens the index the run wrote)."""
    deadline = time.monotonic() + timeout
    while True:
        texts = _found_texts(stack, query, who, source)
        if any(words in t for t in texts):
            return
        assert time.monotonic() < deadline, f"{who} did not find {words!r} in {source}: {texts}"
        time.sleep(3)


def test_jira_and_confluence_are_synced_by_the_daemons_sensors_and_searched_with_their_acls(stack: C.Stack) -> None:
    with _timed("jira_and_confluence_sensors"):
        resumed = stack.compose("exec", "-T", "code-server", "rag-pipeline", "resume")
        assert "scheduled ingestion resumed" in resumed.stdout, resumed.stdout
        # The discovery sensors registered the project and the space at the daemon's first tick; once resumed,
        # each sync sensor requests their initial history in a run of its own (no CLI sync, no ingestion API).
        runs = {sensor: _succeeded_sensor_run(sensor) for sensor in ("jira_sync_sensor", "confluence_sync_sensor")}
        stack.figures["sensor_runs"] = {sensor: run["runId"] for sensor, run in runs.items()}
        # Who may read what: the principal directory of both sites (its own schedule is daily, so it is read now,
        # in a container, as an operator would after adding a source).
        for source in ("jira", "confluence"):
            read = stack.compose("exec", "-T", "code-server", "rag-pipeline", "directory", "--source", source,
                                 timeout=300)  # fmt: skip
            assert read.returncode == 0, read.stdout[-2000:]
        _eventually_found(stack, "quokka migration runbook", READER, "jira", JIRA_TEXT)
        _eventually_found(stack, "wombat onboarding checklist", READER, "confluence", CONFLUENCE_TEXT)
        # The outsider is a person of both directories, in neither the project's group nor the space's.
        assert _found_texts(stack, "quokka migration runbook", OUTSIDER, "jira") == []
        assert _found_texts(stack, "wombat onboarding checklist", OUTSIDER, "confluence") == []
        # The Slack member the other tests search as has no Jira or Confluence account: nothing of either.
        assert _found_texts(stack, "quokka migration runbook", MEMBER, "jira") == []
        assert _found_texts(stack, "wombat onboarding checklist", MEMBER, "confluence") == []


def test_a_page_added_while_the_stack_runs_is_indexed_by_the_sensors_own_scheduled_run(
    stack: C.Stack, confluence: ConfluenceEmulator
) -> None:
    with _timed("sensor_own_run"):
        before = _found_texts(stack, "pangolin escalation rota", READER, "confluence")
        assert not any(LATE_PAGE_TEXT in t for t in before), before
        with confluence.site.lock:
            confluence.site.add_page(CONFLUENCE_SPACE, "Pangolin escalation rota", f"<p>{LATE_PAGE_TEXT}</p>",
                                     datetime.now(UTC), author="acc-reader", id="80002")  # fmt: skip
        added = time.time()
        # The space's watermark is behind the next minute's cron tick: the daemon's sensor requests the run.
        run = _succeeded_sensor_run("confluence_sync_sensor", after=added, timeout=600)
        _eventually_found(stack, "pangolin escalation rota", READER, "confluence", LATE_PAGE_TEXT)
        assert _found_texts(stack, "pangolin escalation rota", OUTSIDER, "confluence") == []
        stack.figures["sensor_own_run"] = {"run_id": run["runId"], "run_created_after_s": round(run["creationTime"]
                                           - added, 1), "found_after_s": round(time.time() - added, 1)}  # fmt: skip
        # Paused again: no more minute-by-minute runs while the remaining tests use the stack.
        stack.compose("exec", "-T", "code-server", "rag-pipeline", "pause", "--reason", "stack test: done syncing")


# --- (2) a personal token -------------------------------------------------------------------------------------
def test_a_personal_token_made_in_a_container_searches_as_its_person(stack: C.Stack) -> None:
    with _timed("personal_token"):
        made = stack.exec_json("search", "rag-pipeline", "token", "create", "--user", MEMBER, "--scope", "search",
                               "--expires", "1h", "--note", "stack test", "--json")  # fmt: skip
        token = made["token"]
        assert token.startswith("rag_") and made["scopes"] == ["search"]
        bearer = {"Authorization": f"Bearer {token}"}
        found = _search(stack, "wireless driver not working after upgrade", **bearer)  # no identity header
        assert found.status_code == 200 and found.json()["results"], found.text
        # Its scopes hold: no answers with a search-only token.
        chat = httpx.post(f"{SEARCH}/v1/chat/completions", headers=bearer, timeout=60,
                          json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
        assert chat.status_code == 403, chat.text
        listed = stack.exec_json("search", "rag-pipeline", "token", "list", "--json")
        assert [t["last_used_at"] for t in listed if t["id"] == made["id"]] != [None], listed
        stack.compose("exec", "-T", "search", "rag-pipeline", "token", "revoke", made["id"])
        assert _search(stack, "wireless", **bearer).status_code == 401


# --- (4) agent chat ---------------------------------------------------------------------------------------------
def test_agent_chat_searches_through_the_stack_with_the_stand_in_model(stack: C.Stack, model: OpenAIFake) -> None:
    with _timed("agent_chat"):
        client = openai.OpenAI(base_url=f"{SEARCH}/v1", api_key=stack.secrets["RAG_SERVE_TOKEN"], max_retries=0,
                               default_headers={"X-User-Id": MEMBER}, timeout=120)  # fmt: skip
        reply = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "STACKAGENT how do I fix my wireless driver?"}]
        )
        extra = reply.model_extra or {}
        assert (reply.choices[0].message.content or "").startswith("Reinstall the wireless driver"), reply
        [call] = extra["rag"]["tool_calls"]
        assert call["name"] == "search_documents" and call["document_ids"] and call["error"] is None, call
        assert extra["sources"], extra
        # The model the container called is the stand-in on the host.
        assert model.calls("/chat/completions"), "the search service never reached the model"


# --- (3) Prometheus and the dashboards ----------------------------------------------------------------------------
def _dashboard_metrics() -> dict[str, set[str]]:
    """job -> the metric names the Grafana dashboards query from it."""
    out: dict[str, set[str]] = {}
    for path in DASHBOARDS:
        panels = json.loads(path.read_text(encoding="utf-8"))["panels"]
        for panel in panels:
            for target in panel.get("targets") or ():
                expr = target["expr"].replace("$__rate_interval", "1m").replace("$__interval", "1m")
                selectors: list[Any] = []
                promql_parser.walk(promql_parser.parse(expr),
                                   lambda n, s=selectors: s.append(n) if isinstance(n, promql_parser.VectorSelector)
                                   else None)  # fmt: skip
                for selector in selectors:
                    job = {m.name: m.value for m in selector.matchers.matchers}.get("job", "")
                    out.setdefault(job, set()).add(selector.name)
    return out


def _families(text: str) -> tuple[set[str], set[str]]:
    """(metric names declared by a # TYPE line, names that have a sample) in an exposition."""
    declared = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
    sampled = set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{| )", text, re.M))
    return declared, sampled


def _declared(name: str, declared: set[str]) -> bool:
    base = re.sub(r"_(bucket|sum|count|total|created)$", "", name)
    return name in declared or base in declared or f"{base}_total" in declared


def test_prometheus_scrapes_both_jobs_and_every_metric_the_dashboards_query(stack: C.Stack) -> None:
    with _timed("prometheus_and_dashboards"):
        token = stack.secrets["RAG_SERVE_TOKEN"]
        metrics = httpx.get(f"{SEARCH}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=60)
        assert metrics.status_code == 200 and "rag_requests_total" in metrics.text
        exporter = _exporter(stack)
        assert "rag_ingest_source_info" in exporter
        texts = {"rag-search": metrics.text, "rag-ingest": exporter}
        wanted = _dashboard_metrics()
        assert set(wanted) == {"rag-search", "rag-ingest"}, wanted
        # Every name a panel queries is exported by its job (declared; a labelled family has samples once observed).
        for job, names in wanted.items():
            declared, _ = _families(texts[job])
            missing = sorted(n for n in names - PROMETHEUS_OWN if not _declared(n, declared))
            assert set(missing) <= set(ONLY_WHEN), f"{job} does not export {missing}"
            assert set(missing) <= set(INGEST_METRICS), missing  # the exporter's catalogue has it all the same
            stack.figures.setdefault("dashboard_metrics_absent_by_design", {})[job] = missing
        # Prometheus scrapes both, the search service with the token compose hands it as a secret file ...
        deadline = time.monotonic() + 120
        while True:
            targets = httpx.get(f"{PROMETHEUS}/api/v1/targets", timeout=30).json()["data"]["activeTargets"]
            health = {t["labels"]["job"]: t["health"] for t in targets}
            if (health.get("rag-search") == "up" and health.get("rag-ingest") == "up") or time.monotonic() > deadline:
                break
            time.sleep(3)
        assert health == {"rag-search": "up", "rag-ingest": "up", "prometheus": "up"}, targets
        # ... and holds a series for every dashboard name its job had a sample of when the test read it.
        held: dict[str, set[str]] = {}
        deadline = time.monotonic() + 90  # the ingestion job is scraped every 30 s
        while True:
            for job in wanted:
                answer = httpx.get(f"{PROMETHEUS}/api/v1/label/__name__/values", params={"match[]": f'{{job="{job}"}}'},
                                   timeout=30).json()  # fmt: skip
                held[job] = set(answer["data"])
            lacking = {job: sorted((names & _families(texts[job])[1]) - held[job]) for job, names in wanted.items()}
            if not any(lacking.values()) or time.monotonic() > deadline:
                break
            time.sleep(5)
        assert not any(lacking.values()), lacking
        stack.figures["dashboard_metrics"] = {
            job: {"queried": len(names), "with_samples_in_prometheus": sorted(names & held[job]),
                  "declared_without_samples": sorted(names - held[job] - PROMETHEUS_OWN)}
            for job, names in wanted.items()
        }  # fmt: skip


# --- (6) retention -----------------------------------------------------------------------------------------------
def test_prune_runs_in_a_container_against_the_stacks_instance_and_keeps_the_index(stack: C.Stack) -> None:
    with _timed("prune"):
        planned = stack.exec_json("code-server", "rag-pipeline", "prune", "--dry-run", "--json")
        done = stack.exec_json("code-server", "rag-pipeline", "prune", "--json")
        stack.figures["prune"] = {"dry_run_keys": sorted(planned), "result_keys": sorted(done)}
        # Nothing the current version reads is gone: the runs' watermarks and the index.
        containers = _scheduler(stack)["scheduler"]["sources"][0]["containers"]
        assert [c for c in containers if c["container"] == LIVE_CHANNEL and c["watermark"]], containers
        found = _search(stack, "zeppelin hangar lease")
        assert found.status_code == 200 and found.json()["results"], found.text


# --- (5) OIDC sign-in -----------------------------------------------------------------------------------------------
def test_oidc_sign_in_after_the_search_service_is_recreated_with_oidc(stack: C.Stack, issuer: OidcIssuer) -> None:
    with _timed("oidc"):
        seconds = stack.restart_with("search", RAG_SERVE_AUTH="oidc", RAG_OIDC_ISSUER=issuer.issuer,
                                     RAG_OIDC_AUDIENCE=AUDIENCE, RAG_OIDC_EMAIL_CLAIM="sub")  # fmt: skip
        stack.figures["search_recreated_with_oidc_seconds"] = round(seconds, 1)
        jwt = issuer.token("abdullah182@stack-test.invalid", sub=MEMBER)
        found = _search(stack, "wireless driver not working after upgrade", Authorization=f"Bearer {jwt}")
        assert found.status_code == 200 and found.json()["results"], found.text
        # No identity header is believed any more (a 400 naming it), and the shared token is no JWT (a 401).
        asserted = _search(stack, "wireless")
        assert asserted.status_code == 400 and "X-User-Id" in asserted.text, asserted.text
        shared = _search(stack, "wireless", Authorization=f"Bearer {stack.secrets['RAG_SERVE_TOKEN']}")
        assert shared.status_code == 401, shared.text
        # A token the issuer did not sign is refused.
        forged = issuer.unsigned_token("abdullah182@stack-test.invalid")
        assert _search(stack, "wireless", Authorization=f"Bearer {forged}").status_code == 401
        assert issuer.jwks_requests >= 1
