"""The reader's tree on every engine: containers counted by document (not by parent chunk), newest activity, names
from a channel's titles, and only where the reader may read a document."""

from __future__ import annotations

import pytest

from rag_pipeline.index.writer import write_documents
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.tree import reader_tree, tree_json
from rag_pipeline_tests.unit.retrieval.test_retrieval import document

PRIVATE = {"public": False, "users": ["U1"], "groups": []}


def test_the_tree_counts_documents_per_container_within_the_readers_access(store) -> None:
    docs = [
        document("a", [["one"], ["two"]], title="#general: first thread"),  # two parents, one document
        document("b", [["three"]], title="#general: second thread"),
        document("c", [["secret plans"]], title="#secret: plans", acl=PRIVATE),
        document("d", [["an issue"]], source="jira", title="OPS-1: an issue"),
    ]
    docs[2].parents[0].payload["container"] = docs[2].children[0].payload["container"] = "G0SECRET"
    for point in (*docs[3].parents, *docs[3].children):
        point.payload["container"] = "OPS"
    write_documents(store, docs)
    everyone = reader_tree(store, Principal(user_id="U9"))
    assert [(n.path, n.documents) for n in everyone] == [("jira/OPS", 1), ("slack/#general", 2)]
    member = {n.path: n for n in reader_tree(store, Principal(user_id="U1"))}
    assert set(member) == {"jira/OPS", "slack/#general", "slack/#secret"} and member["slack/#secret"].latest
    assert [n.path for n in reader_tree(store, Principal(user_id="U1"), "SLACK/#se")] == ["slack/#secret"]
    grouped = tree_json(reader_tree(store, Principal(user_id="U1")))
    assert [s["source"] for s in grouped] == ["jira", "slack"] and grouped[1]["documents"] == 3
    with pytest.raises(ValueError, match="access control"):
        reader_tree(store, Principal.all_documents_for_evaluation())


def test_a_change_of_readers_is_a_recorded_write(store) -> None:
    """Readers' caches key on the index's last write: an ACL change (and a removal) must record one, or a reader
    whose access was removed would keep getting cached results from a Qdrant server (never reopened)."""
    from rag_pipeline.index.index_info import written_at
    from rag_pipeline.reconciliation.reconcile import update_acls
    from rag_pipeline.sources.document import Acl

    write_documents(store, [document("a", [["one"]])])
    store.record_index_info({"written_at": "2000-01-01T00:00:00+00:00"})
    update_acls(store, {"a": Acl(public=False, users=("U1",), groups=())})
    assert written_at(store) != "2000-01-01T00:00:00+00:00"
    assert reader_tree(store, Principal(user_id="U2")) == []  # the new ACL holds
