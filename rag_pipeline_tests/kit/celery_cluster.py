"""A Celery cluster on this machine for tests and the scale-out bench: Debian's ``redis-server`` on a free loopback
port as the broker, ``rag-pipeline worker`` processes (each in a session of its own, so SIGKILL takes the whole
worker as a lost machine would), and range runs launched as processes of their own (:mod:`.range_run`).

``make test`` installs the ``redis-server`` package where it is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import redis

from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.store import CollectionNames

WORKER_READY_SECONDS = 120
RUN_TIMEOUT_SECONDS = 600


def redis_server_binary() -> str | None:
    return shutil.which("redis-server")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RedisServer:
    """A running redis-server with no persistence, on loopback."""

    port: int
    process: subprocess.Popen[bytes]

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port)

    def used_memory_peak(self) -> int:
        """Bytes: Redis's own peak allocation (INFO memory)."""
        return int(self.client().info("memory")["used_memory_peak"])


@contextmanager
def redis_server(folder: Path) -> Iterator[RedisServer]:
    binary = redis_server_binary()
    if binary is None:
        raise RuntimeError("redis-server is not installed (Debian package redis-server; `make test` installs it)")
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(folder)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = RedisServer(port, process)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if server.client().ping():
                    break
            except redis.ConnectionError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"redis-server did not start on port {port}") from None
                time.sleep(0.1)
        yield server
    finally:
        process.terminate()
        process.wait(timeout=20)


@dataclass
class Worker:
    """One ``rag-pipeline worker`` process (Celery main process and its pool child) in a session of its own."""

    name: str
    log: Path
    process: subprocess.Popen[bytes]
    killed: bool = False

    @property
    def hostname(self) -> str:
        """How Celery names the worker in the events it reports (``<name>@<host>``)."""
        return f"{self.name}@{socket.gethostname()}"

    def wait_ready(self) -> None:
        deadline = time.monotonic() + WORKER_READY_SECONDS
        while " ready." not in self.text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker {self.name} did not start:\n{self.text()[-3000:]}")
            time.sleep(0.2)

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL to the whole worker: main process and pool child, as when its machine is lost."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=20)
        self.killed = True

    def rss_bytes(self) -> int:
        """Resident memory of the worker's processes together (main process and pool children)."""
        total = 0
        for pid in _session_pids(self.process.pid):
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
            except OSError:
                continue
        return total

    def stop(self) -> None:
        if self.killed or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=20)


def _session_pids(session: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == session:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def rag_pipeline_command() -> str:
    return str(Path(sys.executable).parent / "rag-pipeline")


@dataclass
class Cluster:
    """Workers and the environment they and the runs share (broker, data folder, DAGSTER_HOME)."""

    env: dict[str, str]
    folder: Path
    workers: list[Worker] = field(default_factory=list)

    def start_worker(self, name: str, *queues: str) -> Worker:
        log = self.folder / f"{name}.log"
        args = [rag_pipeline_command(), "worker", "-n", name, "--loglevel", "INFO"]
        for queue in queues:
            args += ["-q", queue]
        with log.open("wb") as out:
            process = subprocess.Popen(args, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        worker = Worker(name, log, process)
        self.workers.append(worker)
        return worker

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()


def bundled_slack_env(folder: Path) -> dict[str, str]:
    """This process's environment without the project's settings: the bundled Slack export, no Jira dump, no eval
    sets (so a run selects nothing but the Slack chain)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "DAGSTER_", "QDRANT_"))}
    return {**env, "RAG_EVAL_DIR": str(folder / "no_eval_sets"), "RAG_JIRA_DUMP": str(folder / "no_jira.jsonl.gz")}


def celery_env(base: Mapping[str, str], data: Path, broker: str, visibility_timeout: int) -> dict[str, str]:
    """What a worker and a run launched against it see: the Celery executor, the broker, one data folder."""
    env = {
        **base,
        "RAG_EXECUTOR": "celery",
        "RAG_CELERY_BROKER_URL": broker,
        "RAG_CELERY_VISIBILITY_TIMEOUT": str(visibility_timeout),
    }
    return with_data(env, data)


def with_data(env: Mapping[str, str], data: Path) -> dict[str, str]:
    out = {**env, "RAG_DATA_DIR": str(data), "DAGSTER_HOME": str(data / "dagster_home")}
    (data / "dagster_home").mkdir(parents=True, exist_ok=True)
    return out


def launch_range_run(
    env: Mapping[str, str], source: str, container: str, first: str, last: str
) -> subprocess.Popen[str]:
    """A range run in a process of its own (as the run launcher starts one)."""
    args = [sys.executable, "-m", "rag_pipeline_tests.kit.range_run", "--source", source, "--container", container]
    return subprocess.Popen(
        [*args, "--first", first, "--last", last],
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished_run(process: subprocess.Popen[str]) -> dict[str, object]:
    """The run's JSON line once its process ended (fails with its stderr when it did not succeed)."""
    out, err = process.communicate(timeout=RUN_TIMEOUT_SECONDS)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if process.returncode != 0 or not lines:
        raise AssertionError(f"range run failed (exit {process.returncode}):\n{out[-2000:]}\n{err[-5000:]}")
    return dict(json.loads(lines[-1]))


def ensure_instance(env: Mapping[str, str]) -> None:
    """Write the runners' instance config into DAGSTER_HOME (pools, event storage) before anything opens it."""
    from rag_pipeline.runs.instance import DAGSTER_YAML

    home = Path(env["DAGSTER_HOME"])
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text(DAGSTER_YAML.format(home=home), encoding="utf-8")
    # Its databases are created here, once, before workers and runs open it side by side.
    with dg.DagsterInstance.from_config(str(home)) as instance:
        _ = (instance.run_storage, instance.event_log_storage, instance.schedule_storage)


@dataclass(frozen=True)
class StepExecution:
    """One execution of a step by a worker, from the run's event log."""

    run_id: str
    step: str
    worker: str
    submitted: float
    started: float


def step_executions(home: Path, run_ids: list[str]) -> list[StepExecution]:
    """Every step execution a Celery worker reported for the runs: which worker, when it was handed over and
    when the worker began it (the difference is the queue latency)."""
    out: list[StepExecution] = []
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for run_id in run_ids:
            submitted: dict[str, float] = {}
            for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
                event = record.dagster_event
                if event is None or event.step_key is None:
                    continue
                data = event.engine_event_data.metadata or {}
                if (record.user_message or "").startswith("Submitting celery task"):
                    submitted[event.step_key] = record.timestamp
                elif "Celery worker" in data:
                    worker = str(data["Celery worker"].value)
                    out.append(
                        StepExecution(
                            run_id, event.step_key, worker, submitted.get(event.step_key, record.timestamp),
                            record.timestamp,
                        )
                    )  # fmt: skip
    return out


def step_intervals(home: Path, run_ids: list[str], step: str) -> list[tuple[float, float]]:
    """(start, end) of every successful execution of ``step`` in the runs."""
    out = []
    with dg.DagsterInstance.from_config(str(home)) as instance:
        for run_id in run_ids:
            started = None
            for record in instance.all_logs(run_id):
                event = record.dagster_event
                if event is None or event.step_key != step:
                    continue
                if event.event_type == dg.DagsterEventType.STEP_START:
                    started = record.timestamp
                elif event.event_type == dg.DagsterEventType.STEP_SUCCESS and started is not None:
                    out.append((started, record.timestamp))
    return out


def index_snapshot(data: Path) -> dict[str, object]:
    """The embedded index of a data folder: its documents, point counts and every point's (id, document, version)."""
    with EdgeVectorStore(data / "qdrant", CollectionNames.with_prefix("rag")) as store:
        documents = store.indexed_documents()
        names = store.names
        return {
            "documents": documents,
            "counts": {name: store.count(name) for name in (names.children, names.parents)},
            "points": {
                name: sorted((p.id, p.document_id, p.version) for p in store.document_points(name, sorted(documents)))
                for name in (names.children, names.parents)
            },
        }
