"""``rag_pipeline.serving.pushed_documents``: the service's side of ``POST /v1/ingest/documents`` without HTTP —
a checked batch handed to the real launcher as a push job whose file holds the batch's JSON lines, the body limit
named by its variable before anything is parsed, and the pushed sources the settings may name."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from rag_pipeline.serving.ingest_runs import IngestLauncher
from rag_pipeline.serving.pushed_documents import DocumentPushes, connectors, push_limits
from rag_pipeline.settings import ServeSettings, Settings
from rag_pipeline.sources.pushed_documents import PushInvalid, PushLimits

# What the launcher runs instead of `rag-pipeline`: prints its arguments and the pushed file's lines.
ECHO = [sys.executable, "-c", "import json, sys; print(json.dumps({'argv': sys.argv[1:], "
        "'lines': open(sys.argv[2]).read().splitlines()}))"]  # fmt: skip
LIMITS = PushLimits(sources=("hr_wiki",), max_body_bytes=4_096, max_documents=3)


def _body(*ids: str) -> bytes:
    documents = [
        {"id": i, "container": "HR", "title": f"Policy {i}", "text": "Everyone has 25 days of paid time off.",
         "updated": "2024-03-01T10:00:00Z", "acl": {"groups": ["hr"]}}
        for i in ids
    ]  # fmt: skip
    return json.dumps({"source": "hr_wiki", "documents": documents}).encode()


def test_a_checked_batch_becomes_a_push_job_whose_file_holds_its_lines(tmp_path: Path) -> None:
    pushes = DocumentPushes(IngestLauncher(tmp_path, ["slack"], command=ECHO, push_limits=LIMITS))
    batch = pushes.check(_body("pto", "sick-leave"))
    job = pushes.start(batch)
    deadline = time.monotonic() + 30
    while job.state not in ("succeeded", "failed") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert job.state == "succeeded" and job.sources == ["hr_wiki"]
    assert Path(job.push_file or "").parent == tmp_path / "ingest_api" / "pushed"
    assert Path(job.push_file or "").name == f"hr_wiki-{job.id}.jsonl"
    assert [json.loads(line)["id"] for line in batch.lines().splitlines()] == ["pto", "sick-leave"]


def test_a_body_over_the_limit_is_refused_before_parsing_naming_its_variable(tmp_path: Path) -> None:
    pushes = DocumentPushes(IngestLauncher(tmp_path, ["slack"], command=ECHO), LIMITS)
    with pytest.raises(PushInvalid) as refused:
        pushes.check(b"{" + b" " * LIMITS.max_body_bytes + b"}")  # not even JSON: the size is checked first
    assert refused.value.status == 413 and refused.value.field == "body"
    assert "4096 bytes (RAG_PUSH_MAX_BODY_BYTES)" in str(refused.value)
    assert not (tmp_path / "ingest_api" / "pushed").exists()  # nothing written


def test_more_documents_than_the_limit_refuse_the_whole_batch(tmp_path: Path) -> None:
    pushes = DocumentPushes(IngestLauncher(tmp_path, ["slack"], command=ECHO, push_limits=LIMITS))
    with pytest.raises(PushInvalid) as refused:
        pushes.check(_body("a", "b", "c", "d"))
    assert refused.value.status == 413


def test_the_pushed_sources_the_settings_name_never_shadow_a_connector(tmp_path: Path) -> None:
    assert {"slack", "jira", "confluence"} <= set(connectors())
    settings = Settings(data_dir=tmp_path, eval_dir=tmp_path)
    serve = ServeSettings(push_sources=("hr_wiki", "hr_wiki", "handbook"), push_max_documents=7)
    limits = push_limits(settings.model_copy(update={"serve": serve}))
    assert limits.sources == ("hr_wiki", "handbook") and limits.max_documents == 7
    with pytest.raises(ValueError, match="'jira' is a connector's source"):
        push_limits(settings.model_copy(update={"serve": ServeSettings(push_sources=("jira",))}))
