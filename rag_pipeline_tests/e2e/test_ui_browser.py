"""The Dagster UI end to end: the demo materialized on a temp instance (a slice of the bundled data), the
real ``dagster-webserver`` on 127.0.0.1, GraphQL checks, and headless-Chromium screenshots of the asset
graph and the evaluation report saved as test artifacts (``RAG_TEST_ARTIFACTS``, default ``test-artifacts/``).

Marked slow: ``make test`` runs it after the default suite (it installs Debian's ``chromium`` where missing).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from rag_pipeline.connectors.jira import settings as jira_settings
from rag_pipeline.connectors.slack import settings as slack_settings
from rag_pipeline.evaluation.eval_set import EvalSetMeta, load_eval_set, write_eval_set
from rag_pipeline.settings import Settings
from rag_pipeline_tests.kit.paths import REPO_ROOT

ROOT = REPO_ROOT
SLICE_DAY = "2004-11-16"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--window-size=1600,1000",
    "--virtual-time-budget=20000",
]

pytestmark = pytest.mark.slow


def _slice_data(folder: Path) -> dict[str, str]:
    """One day of the bundled Slack export, one Jira project, and the dev queries of that day."""
    export = folder / "slack_export"
    (export / "ubuntu").mkdir(parents=True)
    for name in ("channels.json", "users.json"):
        shutil.copy(slack_settings.BUNDLED_SLACK_EXPORT / name, export / name)
    shutil.copy(slack_settings.BUNDLED_SLACK_EXPORT / "ubuntu" / f"{SLICE_DAY}.json", export / "ubuntu")
    dump = folder / "jira.jsonl.gz"
    with gzip.open(jira_settings.BUNDLED_JIRA_DUMP, "rt") as src, gzip.open(dump, "wt") as out:
        for line in src:
            if json.loads(line)["fields"]["project"]["key"] == "MOD":
                out.write(line)
    dev = load_eval_set(Settings.from_env().eval_dir / "slack_ubuntu_dev.jsonl")
    day = (1100563200, 1100649600)
    queries = [q for q in dev if any(day[0] <= float(d.split(":")[-1]) < day[1] for d in q.relevant)]
    write_eval_set(
        folder / "eval_sets",
        EvalSetMeta(name="ui_slice", description="dev queries of one day", queries=len(queries), sources=["slack"],
                    source="test", license="CC-BY-4.0", attribution="Kummerfeld et al."),
        queries,
    )  # fmt: skip
    return {
        "RAG_SLACK_EXPORT": str(export),
        "RAG_JIRA_DUMP": str(dump),
        "SLACK_TEAM_ID": "T0UBUNTU",
        "SLACK_WORKSPACE_DOMAIN": "ubuntu.slack.com",
        "JIRA_SITE": "jira.appcelerator.org",
        "RAG_EVAL_DIR": str(folder / "eval_sets"),
        "RAG_DATA_DIR": str(folder / "data"),
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _graphql(url: str, query: str) -> dict:
    request = urllib.request.Request(
        f"{url}/graphql", data=json.dumps({"query": query}).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        payload = json.loads(response.read())
    assert "errors" not in payload, payload.get("errors")
    return payload["data"]


def _screenshot(chromium: str, url: str, path: Path, profile: Path) -> None:
    subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={path}", url],
        check=True, capture_output=True, timeout=180,
    )  # fmt: skip


def _looks_rendered(path: Path) -> bool:
    """A real page, not a blank or error screen: many distinct colours across the image."""
    import matplotlib.image as mpimg

    pixels = mpimg.imread(path)
    colours = np.unique((pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    return len(colours) > 50


def test_dagster_ui_shows_the_materialized_demo(tmp_path: Path, monkeypatch) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("Chromium not found: `make test` installs Debian's chromium before the slow suite")
    env = _slice_data(tmp_path)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "data" / "dagster_home"))
    for name in ("SLACK_BOT_TOKEN", "JIRA_URL", "QDRANT_URL", "RAG_NOTIFY_SLACK_CHANNEL"):
        monkeypatch.delenv(name, raising=False)

    from rag_pipeline.runs.backfill import run_backfill
    from rag_pipeline.runs.directory import refresh_directories
    from rag_pipeline.runs.evaluation import run_evaluation

    backfill = run_backfill(Settings.from_env().with_data_dir(tmp_path / "data"))
    assert backfill.as_dict()["runs"] > 0
    # What `index` and `demo` do after the backfill: the principal directory of the sources read.
    refresh_directories(Settings.from_env().with_data_dir(tmp_path / "data"), ["slack", "jira"], live=False)
    # As the demo runs it: the workspace's own questions mined first, then every arm, the report, the weekly quality.
    evaluation = run_evaluation(Settings.from_env().with_data_dir(tmp_path / "data"), force=True, mine=True)
    assert evaluation.ran and not evaluation.failures

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    webserver = Path(sys.executable).parent / "dagster-webserver"
    log = (tmp_path / "webserver.log").open("w")
    server = subprocess.Popen(
        [str(webserver), "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=ROOT, env={**os.environ, **env, "DAGSTER_HOME": os.environ["DAGSTER_HOME"]},
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"{url}/server_info", timeout=5)
                break
            except OSError:
                assert server.poll() is None, (tmp_path / "webserver.log").read_text()[-3000:]
                assert time.time() < deadline, "dagster-webserver did not come up in 120 s"
                time.sleep(1)

        nodes = _graphql(
            url,
            "{ assetNodes { assetKey { path } isPartitioned partitionStats { numMaterialized } "
            "assetMaterializations(limit: 1) { runId } } }",
        )["assetNodes"]
        by_key = {"/".join(n["assetKey"]["path"]): n for n in nodes}
        assert {"slack_threads", "jira_issues", "retrieval_eval", "retrieval_eval_report"} <= set(by_key)
        for key, node in by_key.items():
            if key == "reranker_model":
                continue  # trained on demand (`rag-pipeline search --mode reranked`), not by the demo
            if key in ("tool_definitions", "tool_search_eval") or key.startswith("tools_"):
                continue  # the demo indexes no tool catalog (RAG_TOOLS_CATALOG unset): the tools source holds nothing
            if key.startswith("confluence_"):
                continue  # nor a Confluence dump (RAG_CONFLUENCE_DUMP unset; the bundled corpus is the bench's)
            if node["isPartitioned"]:
                assert node["partitionStats"]["numMaterialized"] > 0, key
            else:
                assert node["assetMaterializations"], key
        report = _graphql(
            url,
            '{ assetOrError(assetKey: {path: ["retrieval_eval_report"]}) { ... on Asset { '
            "assetMaterializations(limit: 1) { metadataEntries { label } } } } }",
        )["assetOrError"]["assetMaterializations"][0]["metadataEntries"]
        labels = {entry["label"] for entry in report}
        assert {"eval_sets", "report_dir"} <= labels and any(label.startswith("ui_slice") for label in labels)

        artifacts = Path(os.environ.get("RAG_TEST_ARTIFACTS", ROOT / "test-artifacts"))
        artifacts.mkdir(parents=True, exist_ok=True)
        shots = {
            "dagster_asset_graph.png": f"{url}/asset-groups",
            "dagster_eval_report.png": f"{url}/assets/retrieval_eval_report",
        }
        for name, page in shots.items():
            _screenshot(chromium, page, artifacts / name, tmp_path / f"profile-{name}")
            assert (artifacts / name).stat().st_size > 20_000, name
            assert _looks_rendered(artifacts / name), name
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
