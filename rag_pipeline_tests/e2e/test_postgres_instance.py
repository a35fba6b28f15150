"""The deployment instance (deploy/dagster.postgres.yaml) on a real PostgreSQL server: a partition chain
materialized there, and runs, event logs and partition status read back from it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import dagster as dg
import psycopg2
import pytest

from rag_pipeline_tests.kit import pipeline
from rag_pipeline_tests.kit.data import jira_issue, write_jira_dump
from rag_pipeline_tests.kit.paths import REPO_ROOT
from rag_pipeline_tests.kit.postgres_server import PostgresServer, server_for_tests

ROOT = REPO_ROOT
CHAIN = pipeline.chain("jira")


@pytest.fixture(scope="module")
def postgres():
    with server_for_tests() as server:
        yield server


@pytest.fixture
def postgres_instance(postgres: PostgresServer, tmp_path: Path, monkeypatch):
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "deploy" / "dagster.postgres.yaml", home / "dagster.yaml")
    for name, value in postgres.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.get() as instance:
        yield instance
        instance.wipe()


def _query(server: PostgresServer, sql: str) -> list[tuple]:
    with (
        psycopg2.connect(
            host=server.host, port=server.port, user=server.user, password=server.password, dbname=server.database
        ) as conn,
        conn.cursor() as cur,
    ):
        cur.execute(sql)
        return cur.fetchall()


def test_partition_chain_on_the_postgres_instance(
    postgres: PostgresServer, postgres_instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    instance = postgres_instance
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    # The project's subclass, whose pool-slot claims hold the limit (rag_pipeline/runs/pool_claims_postgres.py).
    assert type(instance.event_log_storage).__name__ == "SerializedPoolClaimsPostgresStorage"
    assert type(instance.schedule_storage).__name__ == "PostgresScheduleStorage"
    assert instance.run_retries_enabled and instance.run_retries_max_retries == 1
    assert instance.get_concurrency_config().pool_config.default_pool_limit == 1

    dump = write_jira_dump(
        tmp_path / "issues.jsonl.gz",
        [
            jira_issue("1", "PG-1", "2024-03-01T10:00:00.000+0000", "Postgres stores the runs"),
            jira_issue("2", "PG-2", "2024-03-01T11:00:00.000+0000", "and the event log"),
            jira_issue("3", "PG-3", "2024-03-02T09:00:00.000+0000", "and partition status"),
        ],
    )
    resources = pipeline.resources(tmp_path / "data", live=False)
    resources["jira_dump"] = resources["jira_source"] = type(resources["jira_dump"])(path=str(dump), site="pg.test")
    instance.add_dynamic_partitions("jira_projects", ["PG"])
    days = ["2024-03-01", "2024-03-02"]
    keys = ["2024-02-26"]  # both days' week
    run_ids = []
    for day in days:
        result = dg.materialize(
            CHAIN, instance=instance, resources=resources, **pipeline.cell("jira_issues", "PG", day)
        )
        assert result.success
        run_ids.append(result.run_id)

    # Read back through the instance ...
    runs = instance.get_runs()
    assert {r.run_id for r in runs} == set(run_ids) and all(r.is_success for r in runs)
    for asset in ("jira_issues", "jira_child_chunks", "jira_qdrant_points"):
        assert instance.get_materialized_partitions(dg.AssetKey(asset)) == set(keys)
    records = instance.fetch_materializations(dg.AssetKey("jira_issues"), limit=10).records
    documents = sorted(r.asset_materialization.metadata["documents"].value for r in records)
    assert documents == [1, 2] and {r.partition_key for r in records} == set(keys)
    checks = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("jira_child_chunks"), "children_have_text"), limit=10
    )
    assert checks and all(c.status.value == "SUCCEEDED" for c in checks), [(c.status, c.partition) for c in checks]

    # ... and straight from PostgreSQL, so nothing was kept in SQLite on the side.
    assert not list(Path(os.environ["DAGSTER_HOME"]).rglob("*.db"))
    assert _query(postgres, "SELECT count(*) FROM runs WHERE status = 'SUCCESS'")[0][0] == 2
    rows = _query(
        postgres,
        "SELECT asset_key, partition FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION' "
        "AND asset_key LIKE '%jira_qdrant_points%'",
    )
    assert sorted(partition for _, partition in rows) == keys * len(days)  # one per run
