"""The pushed sources' raw record (``<data>/pushed_sources/``) is the only copy of what was pushed: retention's plan
never lists it, however old (there is no owner that could give it up), and ``backup`` copies it with the data
folder (a folder under ``ingest_api/``, which backups leave out, would lose it)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg

from rag_pipeline.index.backup import EmbeddedIndexBackup
from rag_pipeline.pipeline.backup import BackupSources, back_up
from rag_pipeline.runs.retention import plan_retention
from rag_pipeline.settings import Settings
from rag_pipeline.sources.pushed_documents import PushBatch, PushedDocument
from rag_pipeline.sources.pushed_store import FOLDER, PushedStore

DOCUMENT = PushedDocument.model_validate_json(
    '{"id": "pto", "container": "HR", "text": "25 days a year", "updated": "2024-03-01T10:00:00Z",'
    ' "acl": {"groups": ["hr"]}}'
)


def _recorded(data: Path) -> Path:
    path = PushedStore(data).record(PushBatch("hr_wiki", [DOCUMENT], ["old"]), datetime(2024, 3, 4, tzinfo=UTC))
    old = (datetime.now(UTC) - timedelta(days=800)).timestamp()
    os.utime(path, (old, old))
    return path


def test_retention_never_plans_to_delete_the_record(tmp_path: Path) -> None:
    data = tmp_path / "data"
    path = _recorded(data)
    env = {"RAG_DATA_DIR": str(data), "RAG_RETENTION_RUN_DAYS": "1", "RAG_RETENTION_REPORT_DAYS": "1"}
    settings = Settings.from_env(env)
    with dg.DagsterInstance.ephemeral() as instance:
        plan = plan_retention(settings, instance, datetime.now(UTC) + timedelta(days=365))
    listed = [item.path for item in plan.paths]
    assert not [p for p in listed if FOLDER in Path(p).parts], listed
    assert path.is_file()


def test_a_backup_holds_the_record(tmp_path: Path) -> None:
    data = tmp_path / "data"
    path = _recorded(data)
    settings = Settings.from_env({"RAG_DATA_DIR": str(data)})
    paths = settings.paths
    sources = BackupSources(paths, None, EmbeddedIndexBackup(paths.qdrant, wait_seconds=5))
    manifest = back_up(sources, tmp_path / "backup").manifest
    relative = f"data/{path.relative_to(data).as_posix()}"
    assert relative in {f.path for f in manifest.files}, [f.path for f in manifest.files]
    assert (tmp_path / "backup" / relative).read_bytes() == path.read_bytes()
