"""A small permission-varied index built by the real ``rag-pipeline index``, and ``rag-pipeline serve`` /
``rag-pipeline mcp`` run as real processes on free loopback ports, for the search-service tests.

The data: a Slack export (public #general, private #secret with members U1 and U3) and a Jira dump (project
OPS readable by its project group, one OPS issue restricted to a security level, project HR), each naming
what it is about, so every query has a known answer per reader.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from rag_pipeline.connectors.jira.dump import issue_document_id, project_group, security_level_group
from rag_pipeline.connectors.slack.threads import workspace_group
from rag_pipeline_tests.kit.data import D1, jira_issue, ts, write_jira_dump, write_slack_export

TEAM = "T0SERVE"
SITE = "jira.serve.test"
MEMBERS = workspace_group(TEAM)
OPS = project_group(SITE, "OPS")
HR = project_group(SITE, "HR")
SECURE = security_level_group(SITE, "10001")

GENERAL_THREAD = f"slack:{TEAM}:C0PUB:{ts(D1 + 100)}"
SECRET_THREAD = f"slack:{TEAM}:G0PRIV:{ts(D1 + 700)}"
OPS_ISSUE = issue_document_id(SITE, "1")  # OPS-1
OPS_SECRET_ISSUE = issue_document_id(SITE, "2")  # OPS-2, security level "Internal"
HR_ISSUE = issue_document_id(SITE, "3")  # HR-1
ALL_DOCUMENTS = (GENERAL_THREAD, SECRET_THREAD, OPS_ISSUE, OPS_SECRET_ISSUE, HR_ISSUE)


def _slack_export(root: Path) -> Path:
    general = {
        "2024-03-01": [
            {
                "type": "message",
                "user": "U1",
                "text": "the postgres upgrade to version 16 is planned for friday, the infra team decided",
                "ts": ts(D1 + 100),
                "thread_ts": ts(D1 + 100),
                "reply_count": 1,
            },
            {
                "type": "message",
                "user": "U2",
                "text": "ok, I will pause the replication before the postgres upgrade",
                "ts": ts(D1 + 200),
                "thread_ts": ts(D1 + 100),
            },
        ]
    }
    secret = {
        "2024-03-01": [
            {
                "type": "message",
                "user": "U3",
                "text": "confidential: the salary budget for the postgres team grows next quarter",
                "ts": ts(D1 + 700),
            }
        ]
    }
    export = write_slack_export(root, general, secret)
    # Emails, so the principal directory `index` writes joins U1 with her Jira account (JIRA_DIRECTORY_ROWS).
    users = json.loads((export / "users.json").read_text())
    for user in users:
        user.setdefault("profile", {})["email"] = EMAILS[user["id"]]
    (export / "users.json").write_text(json.dumps(users))
    return export


EMAILS = {"U1": "alice@serve.test", "U2": "bob@serve.test", "U3": "carol@serve.test"}
# The Jira site's directory file: Alice browses OPS and holds the Internal security level; nobody browses HR.
JIRA_DIRECTORY_ROWS = "account_id,email,groups\nacc-alice,Alice@Serve.Test,project:OPS;security:10001\n"


def _jira_dump(path: Path) -> Path:
    issues = [
        jira_issue(
            "1",
            "OPS-1",
            "2024-03-02T09:00:00.000+0000",
            description="Upgrade the postgres cluster to version 16 with a replication pause.",
            summary="Postgres upgrade runbook",
        ),
        jira_issue(
            "2",
            "OPS-2",
            "2024-03-02T10:00:00.000+0000",
            description="Postgres superuser passwords rotate during the upgrade.",
            summary="Postgres credentials rotation",
            security={"id": "10001", "name": "Internal"},
        ),
        jira_issue(
            "3",
            "HR-1",
            "2024-03-03T10:00:00.000+0000",
            description="Hiring plan for the postgres database administrators.",
            summary="Postgres DBA hiring",
        ),
    ]
    return write_jira_dump(path, issues)


def rag_pipeline_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "rag_pipeline.cli", *args]


def service_env(data_dir: Path, **extra: str) -> dict[str, str]:
    # DAGSTER_HOME too: a runner in the test process sets it (runs/instance.py) for the folder it ran on, and a
    # child given another data folder would put its Dagster instance (a restore, a sync) in that first folder.
    prefixes = ("RAG_", "QDRANT_", "SLACK_", "JIRA_", "CONFLUENCE_", "DAGSTER_HOME")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env.update(RAG_DATA_DIR=str(data_dir), RAG_STORE_WAIT_SECONDS="60", **extra)
    return env


def build_index(root: Path) -> Path:
    """The small index, written by the real ``rag-pipeline index`` (both sources); returns the data folder."""
    data_dir = root / "data"
    export = _slack_export(root / "export")
    dump = _jira_dump(root / "issues.jsonl.gz")
    directory = root / "jira_users.csv"
    directory.write_text(JIRA_DIRECTORY_ROWS)
    result = subprocess.run(
        rag_pipeline_command(
            "index",
            "--slack-export",
            str(export),
            "--jira-dump",
            str(dump),
            "--slack-team",
            TEAM,
            "--slack-domain",
            "serve.slack.com",
            "--jira-site",
            SITE,
            "--jira-directory",
            str(directory),
        ),
        env=service_env(data_dir),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return data_dir


def copy_index(source: Path, target: Path) -> Path:
    """A copy of a data folder that keeps the embedded engine's sparse files sparse: its 1.6 MB of data sit in
    preallocated files, which ``shutil.copytree`` writes out in full (480 MB, seconds more to load)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", "--sparse=always", str(source), str(target)], check=True)
    return target


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ServiceProcess:
    """``rag-pipeline serve`` in its own process; its stderr goes to a file the test can read."""

    def __init__(self, data_dir: Path, log_path: Path, **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._log = log_path.open("w")
        self.process = subprocess.Popen(
            rag_pipeline_command("serve", "--port", str(self.port), "--access-log"),
            env=service_env(data_dir, **env),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 180.0, status: int = 200) -> dict:
        """Polls /health until it answers ``status`` (the models load first)."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"serve exited {self.process.returncode}: {self.log()}")
            with contextlib.suppress(httpx.TransportError):
                last = httpx.get(f"{self.url}/health", timeout=5)
                if last.status_code == status:
                    return dict(last.json())
            time.sleep(0.2)
        raise AssertionError(f"serve not ready in {timeout} s (last: {last and last.text}): {self.log()}")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


@contextlib.contextmanager
def running_service(data_dir: Path, log_path: Path, **env: str) -> Iterator[ServiceProcess]:
    service = ServiceProcess(data_dir, log_path, **env)
    try:
        service.wait_ready()
        yield service
    finally:
        service.stop()
