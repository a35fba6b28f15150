"""The image built and the stack started by a real container engine (issue 50), as `make stack-test` runs it.

podman builds the image (on official base images where a registry answers, Debian-built stand-ins otherwise),
Docker Compose v2 starts deploy/compose.yaml with the stack test's override against podman's API, the bundled
Slack export is indexed through the stack (a run of the code server, recorded in the stack's PostgreSQL
instance, its steps on the Celery worker), a directory user searches over HTTP, every health check and
``/metrics`` answers, and everything is torn down. Marked ``stack``: not in the default or slow suites (it
needs a container engine and root on the machine; `make stack-test` installs and prepares them).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from rag_pipeline_tests.kit import container_stack as C

pytestmark = pytest.mark.stack
MEMBER = "UA0752CDB64"  # a member of the bundled #ubuntu export (its directory maps the id to the person)
ARTIFACTS = C.REPO / "test-artifacts"


@pytest.fixture(scope="module")
def image() -> dict[str, Any]:
    C.build_bases()
    return C.build_image()


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
def stack(image: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    with C.running_stack(tmp_path_factory.mktemp("stack")) as running:
        running.figures["image"] = {k: v for k, v in image.items() if k != "layers"}
        yield running


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
    health = httpx.get("http://127.0.0.1:8000/health", timeout=30)
    assert health.status_code == 503 and health.json()["status"] == "unavailable"


def test_the_bundled_slack_export_is_indexed_through_the_stack_and_searched_over_http(stack: C.Stack) -> None:
    indexed = stack.compose("exec", "-T", "code-server", "rag-pipeline", "index", "--source", "slack", timeout=1200)
    assert "documents: 908" in indexed.stdout, indexed.stdout[-2000:]
    stack.figures["index_seconds"] = next(
        (float(line.split("(")[1].split(" s")[0]) for line in indexed.stdout.splitlines()
         if line.startswith("rag-pipeline index (")), None,
    )  # fmt: skip
    # The run is the stack's: recorded in its PostgreSQL instance, which the webserver shows.
    runs = httpx.post("http://127.0.0.1:3000/graphql", json={"query": "{ runsOrError { ... on Runs { results { "
                      "status tags { key value } } } } }"}, timeout=60).json()  # fmt: skip
    statuses = [r["status"] for r in runs["data"]["runsOrError"]["results"]]
    assert "SUCCESS" in statuses, runs
    started = time.monotonic()
    stack.wait_healthy(timeout=300)  # the search service too, now that there is an index
    stack.figures["search_healthy_after_index_seconds"] = round(time.monotonic() - started, 1)
    token = stack.secrets["RAG_SERVE_TOKEN"]
    headers = {"Authorization": f"Bearer {token}", "X-User-Id": MEMBER}
    found = httpx.post("http://127.0.0.1:8000/v1/search", json={"query": "wireless driver not working after upgrade",
                       "top_k": 5}, headers=headers, timeout=120)  # fmt: skip
    assert found.status_code == 200, found.text
    results = found.json()["results"]
    assert results and {r["source"] for r in results} == {"slack"}
    assert httpx.post("http://127.0.0.1:8000/v1/search", json={"query": "wireless"}, timeout=60).status_code == 401
    metrics = httpx.get("http://127.0.0.1:8000/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=60)
    assert metrics.status_code == 200 and "rag_requests_total" in metrics.text
    scrape = "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9464/metrics').read().decode())"
    exporter = stack.compose("exec", "-T", "ingest-metrics", "python", "-c", scrape)
    assert "rag_ingest_source_info" in exporter.stdout
    # Prometheus scrapes both, the search service with the token compose hands it as a secret file.
    deadline = time.monotonic() + 120
    while True:
        targets = httpx.get("http://127.0.0.1:9090/api/v1/targets", timeout=30).json()["data"]["activeTargets"]
        health = {t["labels"]["job"]: t["health"] for t in targets}
        if (health.get("rag-search") == "up" and health.get("rag-ingest") == "up") or time.monotonic() > deadline:
            break
        time.sleep(3)
    assert health == {"rag-search": "up", "rag-ingest": "up", "prometheus": "up"}, targets
    stack.figures["peak_memory_mb"] = stack.peak_memory_mb()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "stack.json").write_text(json.dumps(stack.figures, indent=1) + "\n")
