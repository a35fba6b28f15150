"""Pushed documents survive a rebuild of the index from raw data (issue 66 item 4): through the real commands in
child processes. Two documents are pushed (``rag-pipeline push``, what ``POST /v1/ingest/documents``' jobs run) and
one deleted; then the index is rebuilt the way an operator rebuilds it for a model change (the index folder
removed, ``rag-pipeline index … --full-refresh`` over the same inputs). The surviving pushed document is searchable
for a reader in its ACL again (and for no one else), the deleted one stays gone, and a re-push after the rebuild
replaces the document (every point of it at the new version, the old text gone), never a second copy."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rag_pipeline.composition import open_index
from rag_pipeline.settings import Settings
from rag_pipeline_tests.kit import serving_fixtures as S

pytestmark = pytest.mark.slow  # two index builds and four pushes: several minutes on 2 cores

HR = "hr_readers"
KEPT, DELETED = "hr_wiki:sabbatical", "hr_wiki:parental"
QUERY = "sabbatical leave after years of service"


def _run(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = S.service_env(data, RAG_PUSH_SOURCES="hr_wiki", RAG_RERANKER="none")
    result = subprocess.run(S.rag_pipeline_command(*args), env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, (args, result.stderr[-3000:])
    return result


def _push(data: Path, tmp: Path, *rows: dict[str, Any]) -> dict[str, Any]:
    file = tmp / "push.jsonl"
    file.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return dict(json.loads(_run(data, "push", str(file), "--source", "hr_wiki", "--json").stdout))


def _found(data: Path, groups: str, query: str = QUERY) -> list[str]:
    out = _run(data, "search", query, "--groups", groups, "--top-k", "20", "--json").stdout
    return [r["document_id"] for r in json.loads(out)["results"] if r["document_id"].startswith("hr_wiki:")]


def _document(doc_id: str, text: str, updated: str) -> dict[str, Any]:
    return {"id": doc_id, "container": "HR", "title": doc_id.title(), "text": text, "updated": updated,
            "acl": {"groups": [HR]}}  # fmt: skip


def _versions(data: Path, document_id: str) -> set[float]:
    """The versions of every point (children and parents) of ``document_id``, read from the index itself."""
    settings = Settings.from_env(S.service_env(data)).with_data_dir(data).with_language_applied()
    with open_index(settings) as store:
        return {
            ref.version
            for collection in (store.names.children, store.names.parents)
            for ref in store.document_points(collection, [document_id])
        }


def test_pushed_documents_come_back_after_a_rebuild_and_a_repush_still_replaces(tmp_path: Path) -> None:
    root = tmp_path / "fixture"
    data = S.build_index(root)
    sabbatical = _document("sabbatical", "Sabbatical leave: after five years of service anyone may take three "
                           "months of leave.", "2024-03-01T10:00:00Z")  # fmt: skip
    parental = _document("parental", "Parental leave: sixteen weeks of paid leave for every new parent.",
                         "2024-03-01T10:00:00Z")  # fmt: skip
    assert _push(data, tmp_path, sabbatical, parental)["documents_written"] == 2
    assert _push(data, tmp_path, {"id": "parental", "deleted": True})["deleted"] == 1
    assert _found(data, HR) == [KEPT]
    records = sorted((data / "pushed_sources" / "hr_wiki").glob("*.jsonl"))
    assert records, "the pushes were not recorded in the data folder"

    # A model change's rebuild: the index folder removed, then every week indexed again from the same inputs.
    shutil.rmtree(data / "qdrant")
    rebuilt = _run(data, "index", "--slack-export", str(root / "export"), "--jira-dump", str(root / "issues.jsonl.gz"),
               "--slack-team", S.TEAM, "--slack-domain", "serve.slack.com", "--jira-site", S.SITE,
               "--jira-directory", str(root / "jira_users.csv"), "--full-refresh")  # fmt: skip
    assert "hr_wiki: replayed 1 written, 0 already indexed, 0 deleted" in rebuilt.stderr, rebuilt.stderr[-3000:]

    assert _found(data, HR) == [KEPT]  # back for its reader
    assert _found(data, "someone_else") == []  # and for no one else
    assert DELETED not in _found(data, HR, "parental leave sixteen weeks for every new parent")
    first_versions = _versions(data, KEPT)
    assert len(first_versions) == 1

    # A re-push after the rebuild replaces the document: every point at the new version, never a second copy.
    changed = {**sabbatical, "text": "Sabbatical leave: after seven years of service anyone may take six months "
               "of leave.", "updated": "2024-04-01T10:00:00Z"}  # fmt: skip
    assert _push(data, tmp_path, changed)["documents_written"] == 1
    versions = _versions(data, KEPT)
    assert len(versions) == 1 and versions != first_versions, versions
    assert _found(data, HR) == [KEPT]

    # The record now says the new version: a replay (any other rebuild's step) finds it indexed and writes nothing.
    replay = json.loads(_run(data, "push", "--replay", "--json").stdout)
    assert replay == [dict(replay[0], source="hr_wiki", documents_written=0, already_indexed=1)], replay
