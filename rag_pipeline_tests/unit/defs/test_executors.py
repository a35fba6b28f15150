"""RAG_EXECUTOR and the step routing: every step is tagged with the Celery queue its pool implies, the executors are
configured from the settings without copying a broker's password, and ``rag-pipeline worker`` starts dagster-celery
on the same config. (The cluster itself runs in e2e/test_celery_workers.py.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._config import process_config

from rag_pipeline.defs.builders import build_definitions
from rag_pipeline.defs.executors import (
    CELERY_QUEUE_TAG,
    EMBED_STEP_K8S_CONFIG,
    K8S_CONFIG_TAG,
    celery_executor_config,
)
from rag_pipeline.settings import Settings, SettingsError

BROKER = "redis://:broker-password@127.0.0.1:6399/0"


def _settings(tmp_path: Path, **env: str) -> Settings:
    return Settings.from_env({"RAG_DATA_DIR": str(tmp_path / "data"), **env})


def _asset_job(settings: Settings) -> dg.JobDefinition:
    return build_definitions(settings).resolve_implicit_global_asset_job_def()


def test_every_step_is_routed_to_the_queue_of_what_it_touches(tmp_path: Path) -> None:
    job = _asset_job(_settings(tmp_path))
    queues = {node.name: node.tags.get(CELERY_QUEUE_TAG) for node in job.graph.node_defs}
    assert None not in queues.values(), [name for name, queue in queues.items() if queue is None]
    for node in job.graph.node_defs:
        queue = queues[node.name]
        if node.pool == "qdrant":  # whatever opens the index runs where the index is
            assert queue == "qdrant", node.name
        elif node.pool in ("slack_api", "jira_api", "confluence_api"):
            assert queue == node.pool, node.name
    assert queues["slack_threads"] == "slack_api" and queues["jira_issues"] == "jira_api"
    assert queues["confluence_pages"] == "confluence_api"
    for name in ("slack_parent_chunks", "slack_child_chunks", "slack_dense_vectors", "jira_sparse_vectors"):
        assert queues[name] == "embed"
    # Only the embedding step asks Kubernetes for its own resources.
    sized = {node.name for node in job.graph.node_defs if K8S_CONFIG_TAG in node.tags}
    assert sized == {"slack_dense_vectors", "jira_dense_vectors", "confluence_dense_vectors", "tools_dense_vectors"}
    dense = next(node for node in job.graph.node_defs if node.name == "slack_dense_vectors")
    assert json.loads(dense.tags[K8S_CONFIG_TAG]) == EMBED_STEP_K8S_CONFIG


def test_the_executor_follows_rag_executor(tmp_path: Path) -> None:
    assert _asset_job(_settings(tmp_path)).executor_def.name == "in_process"  # the embedded folder: one process
    assert _asset_job(_settings(tmp_path, QDRANT_URL="http://127.0.0.1:6333")).executor_def.name == "multiprocess"
    assert _asset_job(_settings(tmp_path, RAG_EXECUTOR="k8s")).executor_def.name == "k8s"
    celery = _asset_job(_settings(tmp_path, RAG_EXECUTOR="celery", RAG_CELERY_BROKER_URL=BROKER)).executor_def
    assert celery.name == "celery"


def test_the_celery_config_names_the_broker_variable_and_never_holds_its_value(tmp_path: Path) -> None:
    settings = _settings(tmp_path, RAG_EXECUTOR="celery", RAG_CELERY_BROKER_URL=BROKER,
                         RAG_CELERY_VISIBILITY_TIMEOUT="600")  # fmt: skip
    config = celery_executor_config(settings)
    assert "broker-password" not in json.dumps(config)
    assert config["broker"] == {"env": "RAG_CELERY_BROKER_URL"} == config["backend"]  # results on the broker
    source = config["config_source"]
    assert source["task_acks_late"] and source["task_reject_on_worker_lost"]
    assert source["broker_transport_options"]["visibility_timeout"] == 600
    # Valid for dagster-celery's executor schema, the variable resolved only when the config is processed.
    from dagster_celery import celery_executor

    os.environ["RAG_CELERY_BROKER_URL"] = BROKER
    try:
        processed = process_config(celery_executor.config_schema.config_type, config)
    finally:
        del os.environ["RAG_CELERY_BROKER_URL"]
    assert processed.success, processed.errors
    assert processed.value["broker"] == BROKER
    separate = _settings(tmp_path, RAG_EXECUTOR="celery", RAG_CELERY_BROKER_URL=BROKER,
                         RAG_CELERY_BACKEND_URL="redis://127.0.0.1:6399/1")  # fmt: skip
    assert celery_executor_config(separate)["backend"] == {"env": "RAG_CELERY_BACKEND_URL"}


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"RAG_EXECUTOR": "celery"}, "RAG_CELERY_BROKER_URL"),
        ({"RAG_EXECUTOR": "spark"}, "RAG_EXECUTOR"),
        ({"RAG_EXECUTOR": "celery", "RAG_CELERY_BROKER_URL": BROKER, "RAG_CELERY_VISIBILITY_TIMEOUT": "5"},
         "RAG_CELERY_VISIBILITY_TIMEOUT"),
    ],
)  # fmt: skip
def test_a_bad_executor_setting_names_the_variable(tmp_path: Path, env: dict[str, str], named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        _settings(tmp_path, **env)


def _cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``rag-pipeline`` in this process (only ever with --print-command or failing before the worker starts)."""
    from rag_pipeline.cli import main

    try:
        code = main(list(args))
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 2
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_worker_starts_dagster_celery_on_the_executors_config_and_every_queue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [n for n in os.environ if n.startswith(("RAG_", "DAGSTER_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RAG_CELERY_BROKER_URL", BROKER)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))  # restored afterwards (the command exports it)
    code, out, err = _cli(monkeypatch, capsys, "worker", "--print-command", "-n", "w1", "-c", "2")
    assert code == 0, err
    assert "RAG_EXECUTOR is auto here" in err  # the code location must hand steps over; the worker says so
    command = out.split()
    assert command[1:5] == ["worker", "start", "-A", "dagster_celery.app"]
    # One comma-separated -q: Celery 5 keeps only the last of several -Q.
    assert command[command.index("-q") + 1] == "slack_api,jira_api,confluence_api,tools_api,embed,qdrant,dagster"
    assert command.count("-q") == 1 and "--concurrency=2" in command and command[command.index("-n") + 1] == "w1"
    config_file = Path(command[command.index("-y") + 1])
    assert config_file.parent == tmp_path / "home"
    written = yaml.safe_load(config_file.read_text())
    assert written == {"execution": {"config": celery_executor_config(Settings.from_env())}}
    assert "broker-password" not in config_file.read_text()

    monkeypatch.setenv("RAG_EXECUTOR", "celery")
    code, out, err = _cli(monkeypatch, capsys, "worker", "--print-command", "-q", "embed", "-q", "qdrant")
    assert out.split()[out.split().index("-q") + 1] == "embed,qdrant" and "note:" not in err
    code, _, err = _cli(monkeypatch, capsys, "worker", "-q", "gpu")
    assert code == 2 and "gpu" in err
    monkeypatch.delenv("RAG_CELERY_BROKER_URL")
    code, _, err = _cli(monkeypatch, capsys, "worker")
    assert code == 2 and "RAG_CELERY_BROKER_URL" in err  # named by the settings (RAG_EXECUTOR=celery) or the worker
    monkeypatch.delenv("RAG_EXECUTOR")
    code, _, err = _cli(monkeypatch, capsys, "worker")
    assert code == 2 and "RAG_CELERY_BROKER_URL is not set" in err  # the worker itself needs a broker
