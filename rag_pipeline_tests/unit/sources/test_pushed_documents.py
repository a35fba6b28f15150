"""``rag_pipeline.sources.pushed_documents``: a pushed document in the project's shape (id ``<source>:<id>``, version
``updated`` unless given, the hash of its text), the JSON lines ``rag-pipeline push`` reads and a job's file writes
(the same batch back), and which names may be pushed sources."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from rag_pipeline.sources.document import Acl, content_hash
from rag_pipeline.sources.pushed_documents import (
    PushInvalid,
    batch_from_lines,
    checked_batch,
    field_path,
    pushed_source_names,
)

CONNECTORS = ("slack", "jira", "confluence", "tools")
DOCUMENT = {"id": "pto", "container": "HR", "text": "25 days a year", "updated": "2024-03-01T11:00:00+01:00",
            "acl": {"groups": ["hr"], "restricted_to": ["staff"]}}  # fmt: skip


def test_a_pushed_document_in_the_projects_shape() -> None:
    batch = checked_batch(json.dumps({"source": "hr_wiki", "documents": [DOCUMENT]}), ("hr_wiki",), CONNECTORS, 10)
    [document] = batch.documents()
    assert document.id == "hr_wiki:pto" and document.source == "hr_wiki" and document.container == "HR"
    assert document.updated == datetime(2024, 3, 1, 10, tzinfo=UTC) == document.created
    assert document.version == document.updated.timestamp() and document.content_hash == content_hash("25 days a year")
    assert document.acl == Acl(groups=("hr",), restricted_to=("staff",))
    given = checked_batch(json.dumps({"source": "hr_wiki", "documents": [{**DOCUMENT, "version": 7.5}]}),
                          ("hr_wiki",), CONNECTORS, 10)  # fmt: skip
    assert given.documents()[0].version == 7.5


def test_a_jobs_lines_read_back_as_the_same_batch() -> None:
    body = json.dumps({"source": "hr_wiki", "documents": [DOCUMENT], "deleted": ["old"]})
    batch = checked_batch(body, ("hr_wiki",), CONNECTORS, 10)
    again = checked_batch(batch_from_lines(batch.lines(), "hr_wiki"), ("hr_wiki",), CONNECTORS, 10)
    assert again.documents() == batch.documents() and again.deleted() == ["hr_wiki:old"]


def test_a_line_that_is_not_an_object_is_named() -> None:
    with pytest.raises(PushInvalid) as refused:
        batch_from_lines(json.dumps(DOCUMENT) + "\n\n[1, 2]\n", "hr_wiki")
    assert refused.value.field == "line 3"


def test_which_names_may_be_pushed_sources() -> None:
    assert pushed_source_names(["hr_wiki", "handbook", "hr_wiki"], CONNECTORS) == ("hr_wiki", "handbook")
    for bad in ("slack", "HR", "../x", "a" * 40, "1wiki"):
        with pytest.raises(ValueError, match="RAG_PUSH_SOURCES"):
            pushed_source_names([bad], CONNECTORS)


def test_field_paths_read_like_the_body() -> None:
    assert field_path(("documents", 3, "acl")) == "documents[3].acl"
    assert field_path(("deleted", 1)) == "deleted[1]" and field_path(()) == "body"
