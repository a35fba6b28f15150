"""Contract suite: every vector store engine must behave the same, and the writer's guarantees."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from rag_pipeline.index.client_store import ClientVectorStore
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.store import AclCondition, Fusion, SearchFilter, StorePoint
from rag_pipeline.index.writer import DocumentPoints, write_documents
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.sources.document import Acl
from rag_pipeline.vectors.sparse import Bm25Encoder

BM25 = Bm25Encoder()
TEXTS = {
    "d1": ["kernel panic after upgrade", "boot hangs with kernel message"],
    "d2": ["wifi drops every minute", "network manager restarts wifi"],
    "d3": ["printer queue stuck", "cups printer offline"],
}


def _vec(doc: str, i: int) -> list[float]:
    base = {"d1": [1.0, 0.1, 0.0], "d2": [0.0, 1.0, 0.1], "d3": [0.1, 0.0, 1.0]}[doc]
    return [*base, 0.1 * i]


def _pid(*parts: object) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(map(str, parts))))


def doc_points(
    doc: str,
    version: float,
    texts: list[str] | None = None,
    source: str = "slack",
    acl: dict | None = None,
    updated: str = "2024-01-01T00:00:00+00:00",
) -> DocumentPoints:
    texts = texts if texts is not None else TEXTS[doc]
    base = {
        "document_id": doc,
        "source": source,
        "container": "C1",
        "version": version,
        "content_hash": f"{doc}@{version}",
        "acl": acl or {"public": False, "users": [], "groups": ["g"]},
        "updated": updated,
    }
    parent = StorePoint(id=_pid(doc, "parent", 0), payload={**base, "level": "parent", "text": " ".join(texts)})
    children = [
        StorePoint(
            id=_pid(doc, "child", i),
            payload={**base, "level": "child", "parent_id": parent.id, "text": t},
            dense=_vec(doc, i),
            sparse=BM25.encode_documents([t])[0],
        )
        for i, t in enumerate(texts)
    ]
    return DocumentPoints(doc, version, [parent], children)


def test_create_is_idempotent_and_counts(store) -> None:
    store.create_collections(4)
    write_documents(store, [doc_points(d, 1.0) for d in TEXTS])
    assert store.count(store.names.children) == 6 and store.count(store.names.parents) == 3
    assert store.count(store.names.children, SearchFilter(document_ids=("d1", "d3"))) == 4
    assert store.count(store.names.children, SearchFilter(sources=("jira",))) == 0
    assert store.count(store.names.parents, SearchFilter(extra={"level": "parent"}, document_ids=("d2",))) == 1


def test_search_dense_sparse_hybrid(store) -> None:
    write_documents(store, [doc_points(d, 1.0) for d in TEXTS])
    dense = store.search_dense([1.0, 0.1, 0.0, 0.0], limit=2)
    assert [h.payload["document_id"] for h in dense] == ["d1", "d1"]
    sparse = store.search_sparse(BM25.encode_query("printer offline"), limit=3)
    assert sparse[0].payload["text"] == "cups printer offline"
    hybrid = store.search_hybrid([0.0, 1.0, 0.1, 0.0], BM25.encode_query("wifi drops"), limit=3, fusion=Fusion(k=60))
    assert {h.payload["document_id"] for h in hybrid[:2]} == {"d2"}
    # RRF with k=60 (Qdrant ranks from 0: 1/(k + rank)): first in both lists scores 2/60, not Qdrant's default 2/2.
    assert hybrid[0].score == pytest.approx(2 / 60, rel=1e-4)
    filtered = store.search_hybrid(
        [1.0, 0.1, 0.0, 0.0], BM25.encode_query("kernel wifi"), limit=10, flt=SearchFilter(document_ids=("d2",))
    )
    assert filtered and {h.payload["document_id"] for h in filtered} == {"d2"}


ACLS = {
    "d1": {"public": True, "users": [], "groups": []},
    "d2": {"public": False, "users": ["U2"], "groups": []},
    "d3": {"public": False, "users": [], "groups": ["team"]},
}
READERS = {
    AclCondition((), ()): {"d1"},
    AclCondition(("U2",), ()): {"d1", "d2"},
    AclCondition(("U9",), ("team",)): {"d1", "d3"},
    AclCondition(("U2",), ("team", "other")): {"d1", "d2", "d3"},
    # One person's several account ids: any of them admits (a Slack id and a Jira account id)
    AclCondition(("J7", "U2"), ()): {"d1", "d2"},
}


@pytest.mark.parametrize("reader", list(READERS), ids=lambda r: f"{'+'.join(r.user_ids)}-{'+'.join(r.groups)}")
def test_acl_filter_in_every_search(store, reader: AclCondition) -> None:
    write_documents(store, [doc_points(d, 1.0, acl=ACLS[d]) for d in TEXTS])
    _assert_every_search_finds(store, SearchFilter(acl=reader), READERS[reader])


def _assert_every_search_finds(store, flt: SearchFilter, expected: set[str]) -> None:
    """Dense, sparse and both fusions under ``flt`` find exactly ``expected`` (each document has two children)."""
    query_dense, query_sparse = [0.3, 0.3, 0.3, 0.1], BM25.encode_query("kernel wifi printer")
    for hits in (
        store.search_dense(query_dense, 10, flt),
        store.search_sparse(query_sparse, 10, flt),
        store.search_hybrid(query_dense, query_sparse, 10, flt=flt),
        store.search_hybrid(query_dense, query_sparse, 10, flt=flt, fusion=Fusion("dbsf")),
    ):
        assert {h.payload["document_id"] for h in hits} == expected
    assert store.count(store.names.children, flt) == 2 * len(expected)


RESTRICTED_ACLS = {
    "d1": {"public": True, "users": [], "groups": []},
    # Restricted Jira comments: the readers *and* the comment's role or group.
    "d2": {"public": False, "users": [], "groups": ["team"], "restricted_to": ["role"]},
    "d3": {"public": False, "users": ["U2"], "groups": [], "restricted_to": ["role", "grp"]},
}
RESTRICTED_READERS = {
    AclCondition((), ("team",)): {"d1"},  # the readers without the restriction
    AclCondition((), ("role",)): {"d1"},  # the restriction without the issue
    AclCondition((), ("team", "role")): {"d1", "d2"},
    AclCondition(("U2",), ("grp",)): {"d1", "d3"},
    AclCondition(("U2",), ()): {"d1"},
}


@pytest.mark.parametrize(
    "reader", list(RESTRICTED_READERS), ids=lambda r: f"{'+'.join(r.user_ids)}-{'+'.join(r.groups)}"
)
def test_a_restricted_acl_admits_only_readers_of_both_parts_in_every_search(store, reader: AclCondition) -> None:
    write_documents(store, [doc_points(d, 1.0, acl=RESTRICTED_ACLS[d]) for d in TEXTS])
    _assert_every_search_finds(store, SearchFilter(acl=reader), RESTRICTED_READERS[reader])
    principal = Principal(user_id=(reader.user_ids or (None,))[0], groups=reader.groups)
    assert {d for d, acl in RESTRICTED_ACLS.items() if principal.admits(acl)} == RESTRICTED_READERS[reader]
    assert {
        d for d, acl in RESTRICTED_ACLS.items() if Acl.model_validate(acl).admits(principal.user_id, set(reader.groups))
    } == RESTRICTED_READERS[reader]


def test_date_range_filter(store) -> None:
    days = {"d1": "2024-01-01T10:00:00+00:00", "d2": "2024-01-02T00:00:00+00:00", "d3": "2024-01-03T00:00:00+00:00"}
    write_documents(store, [doc_points(d, 1.0, updated=days[d]) for d in TEXTS])
    flt = SearchFilter(updated_from="2024-01-01T00:00:00+00:00", updated_to="2024-01-03T00:00:00+00:00")
    hits = store.search_dense([0.3, 0.3, 0.3, 0.1], 10, flt)
    assert {h.payload["document_id"] for h in hits} == {"d1", "d2"}  # upper bound is exclusive


def _hand_fused(lists: list[list], weights: tuple[float, ...], k: int) -> dict[str, float]:
    fused: dict[str, float] = {}
    for hits, w in zip(lists, weights, strict=True):
        for rank0, hit in enumerate(hits):
            # Qdrant (1.16+): 1 / ((rank0 + 1)/w + k − 1), i.e. 1/(k + rank0) when w = 1 (ranks from 0).
            fused[hit.id] = fused.get(hit.id, 0.0) + 1.0 / ((rank0 + 1) / w + k - 1)
    return fused


def _hand_dbsf(lists: list[list]) -> dict[str, float]:
    fused: dict[str, float] = {}
    for hits in lists:
        scores = np.array([h.score for h in hits])
        # mean ± 3 sample standard deviations (ddof=1), as Qdrant computes them
        low, high = scores.mean() - 3 * scores.std(ddof=1), scores.mean() + 3 * scores.std(ddof=1)
        for hit in hits:
            fused[hit.id] = fused.get(hit.id, 0.0) + (hit.score - low) / (high - low)
    return fused


@pytest.mark.parametrize(("k", "weights"), [(60, None), (60, (3.0, 1.0)), (2, (1.0, 2.5))])
def test_rrf_scores_equal_hand_computation(store, k: int, weights: tuple[float, float] | None) -> None:
    write_documents(store, [doc_points(d, 1.0) for d in TEXTS])
    dense, sparse = [1.0, 0.1, 0.0, 0.0], BM25.encode_query("printer wifi kernel")
    lists = [store.search_dense(dense, 50), store.search_sparse(sparse, 50)]
    expected = _hand_fused(lists, weights or (1.0, 1.0), k)
    hybrid = store.search_hybrid(dense, sparse, 10, fusion=Fusion(k=k, weights=weights))
    assert {h.id: h.score for h in hybrid} == pytest.approx(expected, rel=1e-5)
    assert [h.score for h in hybrid] == pytest.approx(sorted(expected.values(), reverse=True), rel=1e-5)


def test_dbsf_scores_equal_hand_computation(store) -> None:
    write_documents(store, [doc_points(d, 1.0) for d in TEXTS])
    dense, sparse = [1.0, 0.1, 0.0, 0.0], BM25.encode_query("printer wifi kernel")
    expected = _hand_dbsf([store.search_dense(dense, 50), store.search_sparse(sparse, 50)])
    hybrid = store.search_hybrid(dense, sparse, 10, fusion=Fusion("dbsf"))
    assert {h.id: h.score for h in hybrid} == pytest.approx(expected, rel=1e-4)


def test_rewrite_replaces_stale_points_and_keeps_ids(store) -> None:
    write_documents(store, [doc_points("d1", 1.0)])
    first_ids = {r.id for r in store.document_points(store.names.children, ["d1"])}
    report = write_documents(store, [doc_points("d1", 1.0)])
    assert (
        report.points_removed == 0 and {r.id for r in store.document_points(store.names.children, ["d1"])} == first_ids
    )
    # A newer version with one chunk fewer: the stale child goes, after the new points are in.
    report = write_documents(store, [doc_points("d1", 2.0, texts=["kernel panic fixed by new kernel"])])
    assert (report.documents_written, report.points_removed) == (1, 1)
    refs = store.document_points(store.names.children, ["d1"])
    assert len(refs) == 1 and refs[0].version == 2.0
    assert store.retrieve(store.names.children, [refs[0].id])[0].payload["text"] == "kernel panic fixed by new kernel"


def test_older_version_never_regresses_newer(store) -> None:
    write_documents(store, [doc_points("d1", 5.0, texts=["newest text"])])
    report = write_documents(store, [doc_points("d1", 3.0), doc_points("d2", 3.0)])
    assert report.documents_skipped_older == 1 and report.skipped_document_ids == ["d1"]
    assert report.documents_written == 1
    texts = [h.payload["text"] for h in store.retrieve(store.names.children, [_pid("d1", "child", 0)])]
    assert texts == ["newest text"] and store.count(store.names.children, SearchFilter(document_ids=("d1",))) == 1
    # Within one write, the newest version of a document wins whatever the order.
    write_documents(store, [doc_points("d3", 9.0, texts=["v9"]), doc_points("d3", 7.0)])
    assert store.retrieve(store.names.children, [_pid("d3", "child", 0)])[0].payload["text"] == "v9"


def test_delete_documents(store) -> None:
    write_documents(store, [doc_points(d, 1.0) for d in TEXTS])
    for collection in (store.names.children, store.names.parents):
        store.delete_documents(collection, ["d2"])
    assert store.count(store.names.children) == 4 and store.count(store.names.parents) == 2
    assert store.document_points(store.names.children, ["d2"]) == []


def test_engines_agree(tmp_path: Path) -> None:
    edge, local = EdgeVectorStore(tmp_path / "e"), ClientVectorStore.connect()
    results = []
    for s in (edge, local):
        s.create_collections(4)
        write_documents(s, [doc_points(d, 1.0) for d in TEXTS])
        results.append(
            (
                # Engines order exact ties differently; compare rankings with ties broken by id.
                sorted(
                    (-round(h.score, 4), h.id) for h in s.search_sparse(BM25.encode_query("kernel printer wifi"), 6)
                ),
                sorted((-round(h.score, 4), h.id) for h in s.search_dense([0.5, 0.5, 0.2, 0.1], 6)),
                sorted(h.id for h in s.search_hybrid([0.5, 0.5, 0.2, 0.1], BM25.encode_query("wifi printer"), 4)),
            )
        )
        s.close()
    assert results[0][0] == results[1][0]
    assert results[0][1] == results[1][1]
    assert results[0][2] == results[1][2]


def test_edge_store_reopens_with_data(tmp_path: Path) -> None:
    with EdgeVectorStore(tmp_path / "q") as s:
        s.create_collections(4)
        write_documents(s, [doc_points("d1", 1.0)])
    with EdgeVectorStore(tmp_path / "q") as s:
        assert s.count(s.names.children) == 2
        assert s.search_sparse(BM25.encode_query("panic"), 1)[0].payload["document_id"] == "d1"


def _family_member(head: str, member: str, version: float, text: str) -> DocumentPoints:
    points = doc_points(head, version, [text])
    for point in [*points.parents, *points.children]:
        point.payload.update(document_id=member, belongs_to=head)
    points.parents[0].id = _pid(member, "parent", 0)
    for i, child in enumerate(points.children):
        child.id, child.payload["parent_id"] = _pid(member, "child", i), points.parents[0].id
    return DocumentPoints(member, version, points.parents, points.children, belongs_to=head)


def _head(version: float, members: tuple[str, ...]) -> DocumentPoints:
    points = doc_points("d1", version)
    for point in [*points.parents, *points.children]:
        point.payload["family"] = list(members)
    return DocumentPoints("d1", version, points.parents, points.children, family=members)


def test_a_rewritten_head_removes_the_members_it_no_longer_has_and_an_old_rerun_brings_none_back(store) -> None:
    """A Jira issue (d1) with two restricted comments, each its own document: version 2 keeps one; a re-run of
    version 1 afterwards (an old partition) changes nothing, the dropped comment stays gone."""
    version_1 = [
        _head(1.0, ("d1#c1", "d1#c2")),
        _family_member("d1", "d1#c1", 1.0, "kernel note for developers"),
        _family_member("d1", "d1#c2", 1.0, "kernel secret for admins"),
    ]
    write_documents(store, version_1)
    assert set(store.indexed_documents()) == {"d1", "d1#c1", "d1#c2"}

    report = write_documents(
        store, [_head(2.0, ("d1#c1",)), _family_member("d1", "d1#c1", 2.0, "kernel note for developers")]
    )
    assert set(store.indexed_documents()) == {"d1", "d1#c1"}
    assert report.points_removed == 2  # d1#c2's parent and child

    rerun = write_documents(store, version_1)
    assert rerun.documents_skipped_older == 3 and set(rerun.skipped_document_ids) == {"d1", "d1#c1", "d1#c2"}
    assert set(store.indexed_documents()) == {"d1", "d1#c1"}
    # Written in separate batches (a member before its head's newer version is known), the rule holds too.
    write_documents(store, [_family_member("d1", "d1#c2", 1.5, "kernel secret for admins")], batch_size=1)
    assert "d1#c2" not in store.indexed_documents()
