"""``rag-pipeline backup`` and ``restore`` end to end, on a folder the real ``rag-pipeline sync`` wrote from the Slack
emulator: one backup taken while a search service serves it and a second sync is half-way through its run (paused in
its chunking step, its new messages already read), one after; both restored into empty folders. The restored folders
answer several queries exactly as the original does, hold its watermarks, and a sync on them re-embeds nothing and
duplicates nothing (the mid-write one catches up on what the paused run was writing)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rag_pipeline_tests.kit import serving_fixtures as S
from rag_pipeline_tests.kit import slack_fixtures as F
from rag_pipeline_tests.kit.data import ts
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.emulators.slack_workspace import SlackWorkspace
from rag_pipeline_tests.kit.paths import REPO_ROOT

pytestmark = pytest.mark.slow  # four syncs, a service and four backup/restore commands: about three minutes

CHANNEL = "C0BACKUP1"
QUERIES = ["zeppelin hangar lease", "quarterly budget review", "kernel upgrade on the build servers", "lunch"]

# `rag-pipeline sync` stopped inside its parent-chunking step (its raw step has written what it read) until the
# test creates the go file: a writer caught in the middle of its run.
PAUSED_SYNC = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    import rag_pipeline.defs.chain.assets as chain

    marker, go = Path(os.environ["PAUSE_MARKER"]), Path(os.environ["PAUSE_GO"])
    chunk, calls = chain.chunk_documents, []

    def paused(*args, **kwargs):
        if not calls:
            calls.append(1)
            marker.write_text(str(os.getpid()))
            deadline = time.monotonic() + 300
            while not go.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        return chunk(*args, **kwargs)

    chain.chunk_documents = paused
    from rag_pipeline.cli import main
    sys.exit(main(sys.argv[1:]))
    """
)


@pytest.fixture(scope="module")
def workspace() -> Iterator[tuple[SlackWorkspace, SlackEmulator]]:
    ws = SlackWorkspace(team_id=F.CRAFTED_TEAM, domain=F.CRAFTED_DOMAIN)
    ws.users = [F._user(F.ALICE, "alice", "Alice Anders"), F._user(F.BOT_USER, "rag-bot", "RAG Bot", is_bot=True)]
    yesterday = int(time.time()) - 86400
    ws.add_channel(CHANNEL, "general", members=[F.ALICE, F.BOT_USER], created=yesterday - 86400)
    for offset, text in enumerate(["the zeppelin hangar lease renews in april", "quarterly budget review on monday"]):
        ws.post(CHANNEL, F._msg(ts(yesterday + offset * 60), F.ALICE, text))
    with SlackEmulator(ws) as running:
        yield ws, running


def _env(data_dir: Path, emulator: SlackEmulator, **extra: str) -> dict[str, str]:
    return S.service_env(data_dir, SLACK_BOT_TOKEN="xoxb-test-token", SLACK_API_BASE_URL=emulator.base_url,
                         RAG_RERANKER="none", **extra)  # fmt: skip


def _cli(data_dir: Path, emulator: SlackEmulator, *args: str) -> dict:
    result = subprocess.run(S.rag_pipeline_command(*args, "--json"), env=_env(data_dir, emulator), capture_output=True,
                            text=True, timeout=300, cwd=REPO_ROOT)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(json.loads(result.stdout))


def _embeddings(data_dir: Path) -> int:
    db = sqlite3.connect(data_dir / "embedding_cache.sqlite")
    try:
        return int(db.execute("SELECT count(*) FROM embeddings").fetchone()[0])
    finally:
        db.close()


def _search(service: S.ServiceProcess) -> list[list[tuple[str, str, float]]]:
    """Each query's results (document, chunk, score) as Alice, from the service."""
    out = []
    for query in QUERIES:
        response = httpx.post(f"{service.url}/v1/search", json={"query": query, "mode": "hybrid", "top_k": 10},
                              headers={"X-User-Id": F.ALICE}, timeout=60)  # fmt: skip
        assert response.status_code == 200, response.text
        out.append([(r["document_id"], r["child_text"], round(r["score"], 6)) for r in response.json()["results"]])
    return out


def _folder_search(data_dir: Path, log: Path) -> list[list[tuple[str, str, float]]]:
    with S.running_service(data_dir, log, RAG_RERANKER="none") as service:
        return _search(service)


def _points(data_dir: Path) -> tuple[int, int]:
    from rag_pipeline.index.edge_store import EdgeVectorStore

    store = EdgeVectorStore(data_dir / "qdrant", wait_seconds=60)
    try:
        return store.count(store.names.children), store.count(store.names.parents)
    finally:
        store.close()


def test_a_backup_taken_mid_sync_and_while_serving_restores_a_folder_that_answers_the_same(
    workspace: tuple[SlackWorkspace, SlackEmulator], tmp_path: Path
) -> None:
    ws, emulator = workspace
    data = tmp_path / "data"
    _cli(data, emulator, "sync", "--source", "slack")

    now = int(time.time())
    ws.post(CHANNEL, F._msg(ts(now - 30), F.ALICE, "kernel upgrade on the build servers tonight"))
    ws.post(CHANNEL, F._msg(ts(now - 20), F.ALICE, "who is up for lunch at noon"))
    marker, go = tmp_path / "paused", tmp_path / "go"
    writer = subprocess.Popen(
        [sys.executable, "-c", PAUSED_SYNC, "sync", "--source", "slack", "--json"],
        env=_env(data, emulator, PAUSE_MARKER=str(marker), PAUSE_GO=str(go)), cwd=REPO_ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    with S.running_service(data, tmp_path / "serve.log", RAG_RERANKER="none") as service:
        try:
            deadline = time.monotonic() + 300
            while not marker.exists():
                assert writer.poll() is None and time.monotonic() < deadline, writer.communicate()
                time.sleep(0.1)
            # Searches go on while the backup runs: none fails, none waits long.
            latencies: list[float] = []
            stop = threading.Event()

            def search_meanwhile() -> None:
                while not stop.is_set():
                    started = time.monotonic()
                    _search(service)
                    latencies.append(time.monotonic() - started)

            searcher = threading.Thread(target=search_meanwhile)
            searcher.start()
            try:
                mid = _cli(data, emulator, "backup", str(tmp_path / "mid"))
            finally:
                stop.set()
                searcher.join()
            assert latencies and max(latencies) < 30, latencies
        finally:
            go.write_text("go")
        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err[-3000:]
        assert json.loads(out)["documents"] >= 2
        final = _cli(data, emulator, "backup", str(tmp_path / "final"))
        original = _search(service)

    assert mid["index_held_seconds"] < 5 and final["index_held_seconds"] < 5
    # The paused run had not finished: its watermark is not in the mid-write backup, and is in the final one.
    assert mid["watermarks"]["slack"][CHANNEL] < final["watermarks"]["slack"][CHANNEL]
    assert original[2] and any("kernel upgrade" in text for _, text, _ in original[2])

    # The final backup, restored: the same answers, the same watermarks, and a sync embeds and adds nothing.
    restored = _cli(data, emulator, "restore", str(tmp_path / "final"), "--data-dir", str(tmp_path / "r_final"))
    assert restored["restored_watermarks"] == final["watermarks"]
    embedded = _embeddings(tmp_path / "r_final")
    assert _points(tmp_path / "r_final") == _points(data)
    _cli(tmp_path / "r_final", emulator, "sync", "--source", "slack")
    assert _embeddings(tmp_path / "r_final") == embedded == _embeddings(data)
    assert _points(tmp_path / "r_final") == _points(data)
    assert _folder_search(tmp_path / "r_final", tmp_path / "serve_final.log") == original

    # The mid-write backup, restored: a consistent earlier state; its first sync reads the paused run's stretch
    # again and ends where the original did, with no point twice and no text embedded twice.
    restored = _cli(data, emulator, "restore", str(tmp_path / "mid"), "--data-dir", str(tmp_path / "r_mid"))
    assert restored["restored_watermarks"] == mid["watermarks"]
    _cli(tmp_path / "r_mid", emulator, "sync", "--source", "slack")
    assert _points(tmp_path / "r_mid") == _points(data)
    assert _embeddings(tmp_path / "r_mid") == _embeddings(data)
    assert _folder_search(tmp_path / "r_mid", tmp_path / "serve_mid.log") == original
    print(f"\nbackup of the test folder: {final['bytes']} bytes in {final['files']} files, {final['seconds']} s, "
          f"index held {final['index_held_seconds']} s; mid-sync {mid['seconds']} s", file=sys.stderr)  # fmt: skip
    assert os.path.isdir(tmp_path / "final")
