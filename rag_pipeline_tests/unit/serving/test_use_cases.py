"""The application layer's use cases on every engine, as the CLI runs them (an index opened per call) and as the
service runs them: a search's path is the reader's own tree's, a document is all-or-nothing for its reader, the
agent's tools are bound to their reader, whois/explain refuse what the caller may not ask."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from rag_pipeline.index.store import VectorStore
from rag_pipeline.index.writer import write_documents
from rag_pipeline.retrieval.entry import SearchModels
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.retriever import RetrieverConfig
from rag_pipeline.retrieval.tree_view import TreeView
from rag_pipeline.serving.access import OPERATOR, AccessQueries, AccessRefused
from rag_pipeline.serving.answers import question_search, reader_tools
from rag_pipeline.serving.documents import served_document
from rag_pipeline.serving.identity import Reader
from rag_pipeline.serving.one_shot import OneShotIndex
from rag_pipeline.serving.schemas import MAX_TOP_K, SearchRequest
from rag_pipeline.serving.search import nothing_under_path, search_body, search_index, within_path
from rag_pipeline_tests.unit.retrieval.test_retrieval import BM25, TopicEncoder, document

PRIVATE = {"public": False, "users": ["U1"], "groups": []}
MEMBER, STRANGER = Principal(user_id="U1"), Principal(user_id="U9")


def _corpus(store: VectorStore) -> None:
    docs = [
        document("pub", [["kernel panic on boot"], ["fixed by a new kernel"]], title="#general: kernel"),
        document("secret", [["kernel secrets of the wifi team"]], title="#secret: kernel", acl=PRIVATE),
        document("issue", [["printer kernel driver"]], source="jira", title="OPS-1: printer"),
    ]
    for point in (*docs[1].parents, *docs[1].children):
        point.payload["container"] = "G0SECRET"
    for point in (*docs[2].parents, *docs[2].children):
        point.payload["container"] = "OPS"
    write_documents(store, docs)


@pytest.fixture
def index(store: VectorStore) -> OneShotIndex:
    _corpus(store)

    @contextmanager
    def opened() -> Iterator[VectorStore]:
        yield store  # the fixture closes it: an opening here is the command's, for the call alone

    models = SearchModels("topic-encoder", BM25, dense=TopicEncoder())
    return OneShotIndex(opened, models, RetrieverConfig())


def _request(**given: object) -> SearchRequest:
    return SearchRequest.model_validate({"query": "kernel", "mode": "hybrid", **given})


def test_a_path_narrows_the_search_to_the_readers_own_containers(index: OneShotIndex) -> None:
    member = index.search(_request(path="slack/#secret"), MEMBER)
    assert [r.document_id for r in member.response.results] == ["secret"] and not member.path_outside_tree
    # The stranger's tree has no #secret: nothing is searched, and the answer says why (never the channel's content).
    stranger = index.search(_request(path="slack/#secret"), STRANGER)
    assert stranger.path_outside_tree and stranger.response.results == []
    assert "no container you may read is under path 'slack/#secret'" in stranger.response.warnings
    everything = index.search(_request(), STRANGER)
    assert {r.document_id for r in everything.response.results} == {"pub", "issue"}


def test_a_path_is_resolved_before_the_search_and_within_the_requests_own_filters(index: OneShotIndex) -> None:
    tree = index.tree(MEMBER, "slack/")
    narrowed = within_path(_request(path="slack/", source=["slack"]), tree)
    assert narrowed is not None and narrowed.path is None and narrowed.source == ["slack"]
    assert narrowed.container is not None and set(narrowed.container) == {"C1", "G0SECRET"}
    assert within_path(_request(path="slack/", source=["jira"]), tree) is None  # the filters still hold
    with pytest.raises(ValueError, match="resolve the request's path first"):
        search_index(object(), _request(path="slack/"), MEMBER)  # type: ignore[arg-type]


def test_the_body_is_the_same_for_every_face(index: OneShotIndex) -> None:
    request = _request(top_k=1)
    served = index.search(request, STRANGER)
    body = search_body(request, served, {"user_id": "U9"})
    assert list(body)[:6] == ["query", "mode", "requested_mode", "reranker", "warnings", "reader"]
    assert body["mode"] == "hybrid" and len(body["results"]) == 1 and body["cached"] is False
    assert set(body["timing_ms"]) == {"wait", "embed", "retrieve", "rerank", "total"}
    assert "rewrite" not in body and "reader" not in search_body(request, served)
    assert body["status"] == "success" and body["results_count"] == 1  # issue 67: the design's envelope
    empty = nothing_under_path(_request(path="nowhere"))
    nothing = search_body(_request(path="nowhere"), empty)
    assert nothing["results"] == [] and nothing["status"] == "no_results" and nothing["results_count"] == 0


def test_a_document_is_read_whole_or_not_at_all(index: OneShotIndex) -> None:
    document_read = index.get_document("pub", STRANGER)
    assert document_read is not None and document_read.text.startswith("kernel panic on boot")
    assert "new kernel" in document_read.text  # both parents, in order
    # Forbidden and missing are told apart by nobody.
    assert index.get_document("secret", STRANGER) is None and index.get_document("nope", STRANGER) is None
    assert index.get_document("secret", MEMBER) is not None
    with pytest.raises(ValueError, match="access control"):
        served_document("pub", [], Principal.all_documents_for_evaluation())


def test_the_agents_tools_and_an_answers_search_are_bound_to_their_reader(index: OneShotIndex) -> None:
    tools = reader_tools(index, STRANGER, "hybrid")
    assert {r.document_id for r in tools.search("kernel", None, 10)} == {"pub", "issue"}
    assert [r.document_id for r in tools.search("kernel", "jira", 10)] == ["issue"]
    assert tools.document("secret") is None and tools.document("pub") is not None
    assert tools.document("x" * 5000) is None  # a model may write anything: cut, never an error
    assert [s["source"] for s in tools.tree(None, TreeView())["sources"]] == ["jira", "slack"]
    assert "#secret" not in str(reader_tools(index, STRANGER).tree(None, TreeView(max_depth=3)))
    seen: list[int] = []

    def observe(served):  # type: ignore[no-untyped-def]
        seen.append(len(served.response.results))
        return served.response

    search = question_search(index, MEMBER, "hybrid", MAX_TOP_K + 50, observe=observe)
    assert {r.document_id for r in search("kernel " * 5000)} == {"pub", "secret", "issue"}
    assert seen == [3]  # the request was valid: the query cut to the limit, top_k clamped to MAX_TOP_K


def test_whois_and_explain_refuse_what_the_caller_may_not_ask() -> None:
    queries = AccessQueries(None, None, lambda _document: None)
    caller = Reader(principal=STRANGER, email=None, groups_from="none")
    with pytest.raises(AccessRefused) as refused:
        queries.whois(caller, "someone@example.test")
    assert (refused.value.status, refused.value.field) == (403, "person")
    # The operator may ask about anyone; here there is no directory to ask, which is said as such.
    with pytest.raises(AccessRefused) as missing:
        queries.whois(OPERATOR, "someone@example.test")
    assert missing.value.status == 404 and "no principal directory" in str(missing.value)
    assert OPERATOR.admin and OPERATOR.principal.user_id is None
