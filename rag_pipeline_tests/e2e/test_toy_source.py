"""A third source added from the test tree alone: a folder of JSON notes registered under the
``rag_pipeline.sources`` entry-point group (a ``.dist-info`` on PYTHONPATH, as an installed plugin package would
be). It is offered by ``--source`` and ``index``'s options, indexed through the same Dagster chain, searched, and
shown by the Dagster webserver (the UI's GraphQL API) with its materializations — and no shared code names it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
NOTES = {
    "kettle": ("kitchen", "Descaling the kettle", "Boil a mix of white vinegar and water, then rinse twice."),
    "bike": ("garage", "Fixing a flat bike tyre", "Find the puncture in a bucket of water and patch the inner tube."),
    "basil": ("garden", "Keeping basil alive", "Pinch off the flower buds and water the soil, not the leaves."),
}


def _plugin_path(tmp_path: Path) -> Path:
    """A folder holding the toy source's distribution metadata: what ``pip install`` of a plugin would write."""
    site = tmp_path / "site"
    info = site / "rag_pipeline_toy_source-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rag-pipeline-toy-source\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[rag_pipeline.sources]\ntoy = rag_pipeline_tests.kit.toy_source.source:SOURCE\n"
    )
    return site


def _notes(folder: Path) -> Path:
    folder.mkdir()
    for key, (shelf, title, text) in NOTES.items():
        note = {
            "id": key,
            "shelf": shelf,
            "title": title,
            "text": text,
            "author": "sam",
            "updated": f"2024-03-0{len(key) % 9 + 1}T10:00:00+00:00",
        }
        (folder / f"{key}.json").write_text(json.dumps(note))
    (folder / "broken.json").write_text("{not json")
    return folder


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    tmp = tmp_path_factory.mktemp("toy")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "DAGSTER_", "SLACK_", "JIRA_", "TOY_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(_plugin_path(tmp)), str(REPO)])
    data = tmp / "data"
    return {"env": env, "data": data, "notes": _notes(tmp / "notes")}


def _cli(toy: dict[str, object], *args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "rag-pipeline"), *args],
        env=toy["env"],
        capture_output=True,
        text=True,
        timeout=timeout,  # type: ignore[arg-type]
    )


def test_the_registered_source_is_offered_by_the_command_line(toy: dict[str, object]) -> None:
    index = _cli(toy, "index", "--help")
    assert index.returncode == 0, index.stderr
    assert "--toy-folder" in index.stdout and "{slack,jira,confluence,tools,toy}" in index.stdout
    search = _cli(toy, "search", "--help")
    assert "{slack,jira,confluence,tools,toy}" in search.stdout
    # Without the plugin on the path, the same command knows only the built-in sources.
    plain = subprocess.run(
        [str(BIN / "rag-pipeline"), "index", "--help"], capture_output=True, text=True, timeout=120,
        env={k: v for k, v in toy["env"].items() if k != "PYTHONPATH"},  # type: ignore[union-attr]
    )  # fmt: skip
    assert "--toy-folder" not in plain.stdout and "{slack,jira,confluence,tools}" in plain.stdout


def test_refreshing_the_directory_of_a_source_without_one_says_so(toy: dict[str, object], tmp_path: Path) -> None:
    done = _cli(toy, "directory", "--source", "toy", "--data-dir", str(tmp_path / "d"), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"source": "toy", "refreshed": False, "reason": "keeps no principal directory"}]
    assert "toy: keeps no principal directory" in done.stderr


@pytest.mark.slow  # indexing plus a webserver start: about two minutes
def test_the_toy_source_is_indexed_searched_and_shown_in_the_ui(toy: dict[str, object]) -> None:
    data = str(toy["data"])
    done = _cli(toy, "index", "--toy-folder", str(toy["notes"]), "--data-dir", data, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert list(result["per_source"]) == ["toy"]  # the path given chooses the source
    assert result["per_source"]["toy"]["documents"] == 3
    # The unreadable note is reported by name, the others indexed.
    assert result["skipped"]["count"] == 1 and "broken.json" in done.stderr

    found = _cli(
        toy, "search", "how do I descale a kettle with vinegar", "--source", "toy", "--data-dir", data, "--json"
    )
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)["results"]
    assert hits and hits[0]["document_id"] == "toy:kettle" and hits[0]["source"] == "toy"

    nodes, materialized = _ui_view(toy)
    assert {"toy_notes", "toy_parent_chunks", "toy_qdrant_points"} <= {k for k, g in nodes if g == "toy"}
    assert materialized > 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ui_view(toy: dict[str, object]) -> tuple[list[tuple[str, str]], int]:
    """The asset nodes (key, group) the webserver shows, and the toy raw asset's materializations."""
    port = _free_port()
    env = {**toy["env"], "RAG_DATA_DIR": str(toy["data"]), "DAGSTER_HOME": str(Path(str(toy["data"])) / "dagster_home")}  # type: ignore[dict-item]
    server = subprocess.Popen(
        [str(BIN / "dagster-webserver"), "-m", "rag_pipeline.definitions", "-h", "127.0.0.1", "-p", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/graphql"
        query = "{ assetNodes { assetKey { path } groupName } }"
        deadline = time.monotonic() + 180
        while True:
            try:
                answer = httpx.post(url, json={"query": query}, timeout=30).json()
                if answer.get("data", {}).get("assetNodes"):
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, "the webserver did not answer"
            time.sleep(1)
        nodes = [("/".join(n["assetKey"]["path"]), n["groupName"]) for n in answer["data"]["assetNodes"]]
        materializations = (
            '{ assetOrError(assetKey: {path: ["toy_notes"]}) '
            "{ ... on Asset { assetMaterializations(limit: 10) { partition } } } }"
        )
        events = httpx.post(url, json={"query": materializations}, timeout=30).json()
        return nodes, len(events["data"]["assetOrError"]["assetMaterializations"])
    finally:
        server.terminate()
        server.wait(timeout=30)
