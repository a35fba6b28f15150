"""The reader's deep tree on every engine (the embedded one and the Qdrant client's, the server's code path):
document and page nodes, the Confluence page hierarchy, ``root_path`` and ``max_depth``, counts, paging, and only
what the reader may read (a private channel's name, a restricted page's title never reach an outsider)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rag_pipeline.index.store import VectorStore
from rag_pipeline.index.writer import write_documents
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.tree import reader_tree
from rag_pipeline.retrieval.tree_view import MAX_TREE_DEPTH, TreeView, listing_and_view, reader_tree_view
from rag_pipeline_tests.unit.retrieval.test_retrieval import document

SECRET_CHANNEL = {"public": False, "users": ["U1"], "groups": []}
RESTRICTED_PAGE = {"public": False, "users": ["U1"], "groups": []}
MEMBER, STRANGER = Principal(user_id="U1"), Principal(user_id="U9")
SITE = "confluence:site.example"


def _in(points, container: str, **fields: object) -> None:
    for point in (*points.parents, *points.children):
        point.payload["container"] = container
        point.payload.update(fields)


def tree_corpus(store: VectorStore) -> None:
    """#general (two threads), #secret (U1 only), and a Confluence space ENG: Home > Runbooks (restricted to U1) >
    Deploy; Home > Onboarding; a blog post."""
    docs = [
        document("slack:T1:C1:100.1", [["one"], ["two"]], title="#general: first thread"),
        document("slack:T1:C1:200.2", [["three"]], title="#general: second thread"),
        document("slack:T1:G0SECRET:300.3", [["secret plans"]], title="#secret: plans", acl=SECRET_CHANNEL),
        document(f"{SITE}:1", [["home"]], source="confluence", title="Engineering"),
        document(
            f"{SITE}:2", [["runbooks"]], source="confluence", title="Engineering › Runbooks Vault", acl=RESTRICTED_PAGE
        ),
        document(f"{SITE}:3", [["deploy"]], source="confluence", title="Engineering › Runbooks Vault › Deploy"),
        document(f"{SITE}:4", [["onboarding"]], source="confluence", title="Engineering › Onboarding"),
        document(f"{SITE}:5", [["news"]], source="confluence", title="Engineering › Release news"),
    ]
    _in(docs[2], "G0SECRET")
    for doc, ancestors in zip(docs[3:7], ([], ["1"], ["1", "2"], ["1"]), strict=True):
        _in(doc, "ENG", ancestors=ancestors, content_type="page")
    _in(docs[7], "ENG", content_type="blogpost")
    write_documents(store, docs)


def view(store: VectorStore, reader: Principal, **given: object) -> dict:
    return reader_tree_view(store, reader, TreeView.model_validate(given)).to_dict()


def test_the_default_view_is_the_two_old_levels(store: VectorStore) -> None:
    tree_corpus(store)
    body = view(store, STRANGER)
    # A container's children are not counted at the depth limit: that would read every document.
    assert [(n["kind"], n["level"], n["path"], n["documents"], n["children"]) for n in body["nodes"]] == [
        ("source", 0, "confluence", 4, 1),
        ("container", 1, "confluence/ENG", 4, None),
        ("source", 0, "slack", 2, 1),
        ("container", 1, "slack/#general", 2, None),
    ]
    assert body["total"] == 4 and body["next_offset"] is None and body["nodes"][1]["relative_path"] == "confluence/ENG"
    # The old listing under a prefix and the view, from one read: the same as each alone.
    listed, page = listing_and_view(store, STRANGER, "SLACK", TreeView(max_depth=2))
    assert listed == reader_tree(store, STRANGER, "SLACK") and page.to_dict() == view(store, STRANGER, max_depth=2)


def test_pages_nest_under_their_readable_parents_only(store: VectorStore) -> None:
    tree_corpus(store)
    member = {n["path"]: n for n in view(store, MEMBER, root_path="confluence/ENG", max_depth=5)["nodes"]}
    assert member["confluence/ENG"]["relative_path"] == "" and member["confluence/ENG"]["documents"] == 5
    deploy = member["confluence/ENG/1/2/3"]
    assert (deploy["kind"], deploy["level"], deploy["name"], deploy["relative_path"]) == ("page", 4, "Deploy", "1/2/3")
    assert member["confluence/ENG/1"]["documents"] == 4 and member["confluence/ENG/1"]["children"] == 2
    assert member["confluence/ENG/5"]["kind"] == "document"  # the blog post: no page tree
    assert member["confluence/ENG/1/2"]["name"] == "Runbooks Vault"

    stranger = view(store, STRANGER, root_path="confluence/ENG", max_depth=5)
    paths = {n["path"]: n for n in stranger["nodes"]}
    # Deploy hangs from Home, its nearest readable ancestor; the restricted page is nowhere, nor its title.
    assert set(paths) == {"confluence/ENG", "confluence/ENG/1", "confluence/ENG/1/3", "confluence/ENG/1/4",
                          "confluence/ENG/5"}  # fmt: skip
    assert paths["confluence/ENG/1/3"]["name"] == "Deploy" and paths["confluence/ENG"]["documents"] == 4
    assert "Runbooks Vault" not in str(stranger) and "/2" not in str(list(paths))
    # The restricted page as a root: nothing, as for a path that does not exist.
    assert view(store, STRANGER, root_path="confluence/ENG/1/2")["nodes"] == []
    assert [n["name"] for n in view(store, MEMBER, root_path="CONFLUENCE/eng/1/2")["nodes"]] == [
        "Runbooks Vault",
        "Deploy",
    ]


def test_a_private_channel_never_reaches_a_non_member(store: VectorStore) -> None:
    tree_corpus(store)
    stranger = view(store, STRANGER, max_depth=MAX_TREE_DEPTH)
    assert "#secret" not in str(stranger) and "plans" not in str(stranger) and "G0SECRET" not in str(stranger)
    assert view(store, STRANGER, root_path="slack/#secret", max_depth=3)["total"] == 0
    member = view(store, MEMBER, root_path="slack/#secret", max_depth=1)["nodes"]
    assert [(n["kind"], n["name"], n["document_id"]) for n in member] == [
        ("container", "#secret", None),
        ("document", "#secret: plans", "slack:T1:G0SECRET:300.3"),
    ]


def test_max_depth_cuts_levels_and_pages_walk_the_whole_listing(store: VectorStore) -> None:
    tree_corpus(store)
    sources = view(store, MEMBER, max_depth=0)
    assert [n["path"] for n in sources["nodes"]] == ["confluence", "slack"] and sources["nodes"][1]["children"] == 2
    two = view(store, MEMBER, root_path="confluence/ENG", max_depth=1)["nodes"]
    assert [n["relative_path"] for n in two] == ["", "1", "5"]  # Home and the blog post; Home's pages below depth
    everything = view(store, MEMBER, max_depth=MAX_TREE_DEPTH)
    assert everything["total"] == 2 + 3 + 8
    pages, offset = [], 0
    while offset is not None:
        page = view(store, MEMBER, max_depth=MAX_TREE_DEPTH, offset=offset, limit=3)
        assert len(page["nodes"]) <= 3
        pages += page["nodes"]
        offset = page["next_offset"]
    assert pages == everything["nodes"]


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"max_depth": -1}, "max_depth"),
        ({"max_depth": MAX_TREE_DEPTH + 1}, "max_depth"),
        ({"limit": 0}, "limit"),
        ({"offset": -1}, "offset"),
        ({"root_path": ""}, "root_path"),
    ],
)
def test_a_bad_view_is_refused_naming_its_field(given: dict, field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        TreeView.model_validate(given)
    assert refused.value.errors()[0]["loc"] == (field,)


def test_the_tree_never_lists_without_access_control(store: VectorStore) -> None:
    with pytest.raises(ValueError, match="access control"):
        reader_tree_view(store, Principal.all_documents_for_evaluation(), TreeView())
