"""Concurrent use of the embedded index: one opener at a time per folder, and everyone else waits its turn.

The end-to-end tests run the real CLI in separate processes on a small index. A "holder" process (a reader
that keeps the store open, as a slow search would) makes every overlap certain instead of a matter of
timing: each test checks that the other processes reported waiting before the holder lets go.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import qdrant_edge as qe

from rag_pipeline.commands.errors import explain
from rag_pipeline.composition import open_index
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.store_lock import FolderLock, StoreBusyError, acquire_folder
from rag_pipeline.runs.backfill import run_backfill
from rag_pipeline.settings import Settings
from rag_pipeline_tests.kit.data import jira_issue, write_jira_dump

SITE = "jira.appcelerator.org"
WAITING = "waiting for the index at"
# Generous bounds for a loaded 2-core machine; the tests finish long before them when things work.
PROCESS_SECONDS = 180
WAIT_SECONDS = 150


# --- the lock itself (in-process, fake clock) --------------------------------------------------------------


class FakeClock:
    """Time that moves only when the code under test sleeps; ``at`` runs callbacks at given times."""

    def __init__(self, at: dict[float, Callable[[], None]] | None = None) -> None:
        self.now = 0.0
        self.at = dict(at or {})

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        for when in sorted(t for t in self.at if t <= self.now):
            self.at.pop(when)()


def test_a_waiter_reports_every_few_seconds_and_gives_up_at_the_limit(tmp_path: Path) -> None:
    other = FolderLock(tmp_path, "rag-pipeline demo, step jira_qdrant_points")
    assert other.try_acquire()
    clock, notices = FakeClock(), []
    with pytest.raises(StoreBusyError) as busy:
        acquire_folder(tmp_path, lambda: None, wait_seconds=12, on_wait=notices.append, clock=clock, sleep=clock.sleep)
    # The first notice after a second (a shorter wait is normal turn-taking), then every five seconds.
    assert [n.rsplit("(", 1)[1] for n in notices] == ["1 s of 12 s)", "6 s of 12 s)", "11 s of 12 s)"]
    assert notices[0].startswith(f"waiting for the index at {tmp_path}, held by this same process (rag-pipeline demo")
    message = str(busy.value)
    assert f"the index at {tmp_path} is still held by" in message and "after waiting 12 s" in message
    assert "RAG_STORE_WAIT_SECONDS" in message and "QDRANT_URL" in message
    other.release()


def test_a_waiter_gets_the_folder_when_the_holder_lets_go(tmp_path: Path) -> None:
    other = FolderLock(tmp_path, "holder")
    assert other.try_acquire()
    clock, loads = FakeClock(at={3.0: other.release}), []
    lock = acquire_folder(tmp_path, lambda: loads.append(1), wait_seconds=10, clock=clock, sleep=clock.sleep)
    assert lock.held and loads == [1] and 3.0 <= clock.now < 4.0
    assert lock.holder() is not None and lock.holder().pid == os.getpid()  # type: ignore[union-attr]
    lock.release()
    assert lock.holder() is None  # a free lock names nobody


def test_a_shard_held_outside_the_lock_counts_as_busy_too(tmp_path: Path) -> None:
    """An opener that loads a shard without the folder lock (older code, a script) makes the store wait
    like the lock does, instead of failing with qdrant-edge's `Can't init WAL: Kind(WouldBlock)`."""
    with EdgeVectorStore(tmp_path) as store:
        store.create_collections(4)
    raw = qe.EdgeShard.load(str(tmp_path / "rag_children"))
    with pytest.raises(StoreBusyError, match="after waiting 0 s"):
        EdgeVectorStore(tmp_path)  # wait_seconds=0: one try
    letting_go = threading.Timer(1.0, raw.close)
    letting_go.start()
    started = time.monotonic()
    store = EdgeVectorStore(tmp_path, wait_seconds=30)
    assert store.count(store.names.children) == 0 and time.monotonic() - started >= 0.9
    store.close()
    store.close()  # idempotent: the folder is given back once
    with EdgeVectorStore(tmp_path) as again:
        assert again.count(again.names.children) == 0


# --- real processes on a small index -----------------------------------------------------------------------


@dataclass
class Started:
    """A process this test started, with its output in files (read while it runs)."""

    name: str
    process: subprocess.Popen[bytes]
    out: Path
    err: Path

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def finish(self) -> str:
        """Wait for the exit; the stdout text, or a failure showing both streams."""
        try:
            self.process.wait(timeout=PROCESS_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            pytest.fail(f"{self.name} did not finish:\n{self.stderr()[-3000:]}")
        out = self.out.read_text()
        assert self.process.returncode == 0, f"{self.name} exited {self.process.returncode}:\n{self.stderr()[-3000:]}"
        return out


class Processes:
    """Starts the CLI and a holder in subprocesses; whatever is still running at teardown is killed."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env = env
        self.logs = logs
        self.started: list[Started] = []
        cli = Path(sys.executable).with_name("rag-pipeline")
        self.cli = [str(cli)] if cli.exists() else [sys.executable, "-m", "rag_pipeline.cli"]

    def start(self, name: str, command: list[str], env: dict[str, str] | None = None) -> Started:
        out, err = self.logs / f"{name}.out", self.logs / f"{name}.err"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            process = subprocess.Popen(command, env={**self.env, **(env or {})}, stdout=stdout, stderr=stderr)
        started = Started(name, process, out, err)
        self.started.append(started)
        return started

    def rag(self, name: str, *args: str, env: dict[str, str] | None = None) -> Started:
        return self.start(name, [*self.cli, *args], env)

    def holder(self, folder: Path, release: Path) -> Started:
        """A reader that keeps the store open until ``release`` exists (what a slow search would do)."""
        script = textwrap.dedent(
            f"""
            import pathlib, time
            from rag_pipeline.index.edge_store import EdgeVectorStore
            store = EdgeVectorStore({str(folder)!r}, label="rag-pipeline search (test holder)")
            print("held", flush=True)
            while not pathlib.Path({str(release)!r}).exists():
                time.sleep(0.05)
            store.close()
            print("released", flush=True)
            """
        )
        holder = self.start("holder", [sys.executable, "-c", script])
        _wait_until(lambda: "held" in holder.out.read_text(), "the holder to open the store", holder)
        return holder

    def kill_all(self) -> None:
        for started in self.started:
            if started.process.poll() is None:
                started.process.kill()
                started.process.wait()


def _wait_until(condition: Callable[[], bool], what: str, *watch: Started) -> None:
    deadline = time.monotonic() + PROCESS_SECONDS
    while not condition():
        for started in watch:
            if started.process.poll() is not None and not condition():
                pytest.fail(
                    f"{started.name} exited {started.process.returncode} before {what}:\n{started.stderr()[-3000:]}"
                )
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}:\n" + "\n".join(s.stderr()[-1500:] for s in watch))
        time.sleep(0.1)


def test_a_holder_killed_mid_hold_leaves_the_folder_free(tmp_path: Path) -> None:
    """The kernel drops the lock with its process: no stale lock after a crash, nothing to clean up."""
    with EdgeVectorStore(tmp_path / "qdrant") as store:
        store.create_collections(4)
    processes = Processes(dict(os.environ), tmp_path)
    try:
        holder = processes.holder(tmp_path / "qdrant", tmp_path / "never")
        with pytest.raises(StoreBusyError):
            EdgeVectorStore(tmp_path / "qdrant")
        holder.process.kill()  # SIGKILL: no close, no flush
        holder.process.wait()
        with EdgeVectorStore(tmp_path / "qdrant") as store:
            assert store.count(store.names.children) == 0
    finally:
        processes.kill_all()


@pytest.fixture(scope="module")
def index_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A small Jira index (built once, in-process, by the demo's runner) and the environment that points at it."""
    root = tmp_path_factory.mktemp("concurrent")
    dump = write_jira_dump(
        root / "jira.jsonl.gz",
        [
            jira_issue("1", "AC-1", "2024-03-01T10:00:00.000+0000", description="Build fails on Windows"),
            jira_issue("2", "AC-2", "2024-03-04T10:00:00.000+0000", description="Crash when opening a window"),
            jira_issue("3", "AC-3", "2024-03-05T10:00:00.000+0000", description="Windows installer hangs"),
        ],
    )
    (root / "eval_sets").mkdir()
    env = {
        "RAG_DATA_DIR": str(root / "data"),
        "RAG_JIRA_DUMP": str(dump),
        "JIRA_SITE": SITE,
        "RAG_EVAL_DIR": str(root / "eval_sets"),
        "RAG_STORE_WAIT_SECONDS": str(WAIT_SECONDS),
    }
    built = run_backfill(Settings.from_env(env), sources=("jira",))
    assert built.as_dict()["documents"] == 3
    inherited = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    return {**inherited, **env}


@pytest.fixture
def processes(index_env: dict[str, str], tmp_path: Path) -> Iterator[Processes]:
    started = Processes(index_env, tmp_path)
    yield started
    started.kill_all()


def _results(out: str) -> list[str]:
    return [r["document_id"] for r in json.loads(out)["results"]]


def _search(processes: Processes, name: str, query: str, mode: str) -> Started:
    return processes.rag(name, "search", query, "--mode", mode, "--all-documents", "--json")


# Slow suite (~20 s of subprocess searches); the waiter, killed-holder and wait-past-the-limit tests
# stay in the default suite.
@pytest.mark.slow
def test_two_concurrent_searches_both_answer(processes: Processes, index_env: dict[str, str], tmp_path: Path) -> None:
    """Both searches load their model, find the store held, wait, and answer once it is free."""
    release = tmp_path / "release"
    holder = processes.holder(Path(index_env["RAG_DATA_DIR"]) / "qdrant", release)
    searches = [_search(processes, f"search{i}", "build fails on windows", "hybrid") for i in (1, 2)]
    for search in searches:
        _wait_until(lambda s=search: WAITING in s.stderr(), f"{search.name} to wait", search)
    assert "held by another process" in searches[0].stderr() and "test holder" in searches[0].stderr()
    release.touch()
    holder.finish()
    for search in searches:
        out = search.finish()
        assert _results(out)[0] == f"jira:{SITE}:1"
        # The query was embedded before the store was opened: the search itself read it from the cache.
        assert json.loads(out)["milliseconds"]["embed"] < 50


def test_a_wait_past_the_limit_fails_with_a_clear_message(
    processes: Processes, index_env: dict[str, str], tmp_path: Path
) -> None:
    """What `rag-pipeline search` stops with (the CLI prints it as one `error:` line, exit 1)."""
    folder = Path(index_env["RAG_DATA_DIR"]) / "qdrant"
    release = tmp_path / "release"
    holder = processes.holder(folder, release)
    settings = Settings.from_env({**index_env, "RAG_STORE_WAIT_SECONDS": "1"})
    started = time.monotonic()
    with pytest.raises(StoreBusyError) as failed, open_index(settings):
        pytest.fail("the index opened while the holder had it")
    assert 1 <= time.monotonic() - started < 30
    held_by = f"held by another process (pid {holder.process.pid}: rag-pipeline search (test holder), for "
    assert str(failed.value).startswith(f"the index at {folder} is still {held_by}")
    assert "after waiting 1 s (RAG_STORE_WAIT_SECONDS)" in str(failed.value)
    assert explain(failed.value).code == 1  # a runtime failure, not a usage error
    release.touch()
    holder.finish()


@pytest.mark.slow  # about a minute: runs in the slow suite (make test runs both)
def test_four_searches_during_a_full_refresh_all_answer_and_the_points_step_waits(
    processes: Processes, index_env: dict[str, str], tmp_path: Path
) -> None:
    """Four searches start with `demo --full-refresh`. The holder keeps the store until the refresh's points
    step and all four searches are waiting for it: the step waits instead of failing the run. Once the holder
    lets go, the points step and the searches take turns, and every one of them finishes."""
    release = tmp_path / "release"
    holder = processes.holder(Path(index_env["RAG_DATA_DIR"]) / "qdrant", release)
    demo = processes.rag("demo", "demo", "--full-refresh", "--source", "jira", "--no-eval", "--json")
    # Two dense searches (each loads the model before it opens the store) and two keyword searches.
    queries = {
        "hybrid": ("build fails on windows", f"jira:{SITE}:1"),
        "reranked": ("build fails on windows", f"jira:{SITE}:1"),
        "bm25": ("installer hangs", f"jira:{SITE}:3"),
        "bm25-2": ("crash when opening a window", f"jira:{SITE}:2"),
    }
    searches = {name: _search(processes, name, query, name.split("-")[0]) for name, (query, _) in queries.items()}
    _wait_until(lambda: WAITING in demo.stderr(), "the points step to wait", demo)
    assert "jira_qdrant_points: waiting for the index" in demo.stderr()
    for search in searches.values():
        _wait_until(lambda s=search: WAITING in s.stderr(), f"the {search.name} search to wait", search, demo)
    assert demo.process.poll() is None  # still waiting, not failed
    release.touch()
    holder.finish()
    summary = json.loads(demo.finish())
    assert summary["per_source"]["jira"]["documents"] == 3 and summary["points"] > 0
    for name, search in searches.items():
        assert _results(search.finish())[0] == queries[name][1], name
