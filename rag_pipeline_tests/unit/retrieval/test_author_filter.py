"""Authors in every point's payload, the ``authors`` search filter on both engines and ``search --author``;
``top_k`` below 1 refused by the retriever and by ``search --top-k``.

Documents come from the Slack Web API emulator through the real slack-sdk client; a 4-d stand-in encoder
replaces the dense model. The command runs on the embedded engine: the Qdrant REST stand-in answers
collection setup only (it checks here that a server gets the ``authors`` payload index), not searches.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_pipeline.connectors.slack.threads import workspace_group
from rag_pipeline.index.client_store import ClientVectorStore
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.index_info import claim_dense_model
from rag_pipeline.index.store import SearchFilter, VectorStore
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.retriever import Retriever
from rag_pipeline.sources.document import Document
from rag_pipeline.vectors.sparse import Bm25Encoder
from rag_pipeline_tests.kit import slack_fixtures as F
from rag_pipeline_tests.kit.emulators.qdrant_rest import QdrantRestRecorder
from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
from rag_pipeline_tests.kit.pipeline import resources
from rag_pipeline_tests.kit.slack_index import (
    UNLOADABLE_MODEL,
    HashEncoder,
    index_threads,
    point_payloads,
    read_threads,
)

EVERYONE = Principal.all_documents_for_evaluation()
# Every thread's text names its authors ("alice: ..."), so this query matches threads of every author; mentions
# ("@bob can you pin ...") match threads the person did not write.
EVERY_NAME = "alice bob carol dave erin frank"
MEMBERS = workspace_group(F.CRAFTED_TEAM)


@pytest.fixture(scope="module")
def threads() -> list[Document]:
    with SlackEmulator(F.crafted_workspace()) as emu:
        return read_threads(emu, F.GENERAL_CHANNEL, F.PRIVATE_CHANNEL)


def _by(threads: list[Document], *authors: str) -> set[str]:
    return {d.id for d in threads if set(d.authors) & set(authors)}


def test_every_point_carries_its_documents_authors(store: VectorStore, threads: list[Document]) -> None:
    index_threads(store, threads)
    payloads = point_payloads(store, [d.id for d in threads])
    authors = {d.id: d.authors for d in threads}
    assert len(payloads) > len(threads)  # children and parents
    for payload in payloads.values():
        assert payload["authors"] == list(authors[payload["document_id"]])
    assert {a for d in threads for a in d.authors} >= {"alice", "bob", "carol", "dave"}


def test_the_authors_filter_keeps_documents_by_any_of_them_on_both_engines(
    store: VectorStore, threads: list[Document]
) -> None:
    index_threads(store, threads)
    retriever = Retriever(store, Bm25Encoder(), dense=HashEncoder())
    everything = {d.id for d in threads}
    for authors in (("dave",), ("carol",), ("dave", "carol"), ("nobody",)):
        expected = _by(threads, *authors)
        assert expected < everything  # the filter has something to drop
        assert store.indexed_documents(SearchFilter(authors=authors)).keys() == expected
        for mode in ("bm25", "vector", "hybrid"):
            response = retriever.search(EVERY_NAME, mode, EVERYONE, top_k=100, authors=authors)
            assert response.mode == mode and response.warnings == []
            found = {r.document_id for r in response.results}
            assert found <= expected, (authors, mode)
            assert all(set(r.authors) & set(authors) for r in response.results)
        # Lexical search finds all of them (each names its author); unfiltered it finds others too.
        lexical = retriever.search(EVERY_NAME, "bm25", EVERYONE, 100, authors=authors).results
        assert {r.document_id for r in lexical} == expected
    unfiltered = {r.document_id for r in retriever.search(EVERY_NAME, "bm25", EVERYONE, 100).results}
    assert unfiltered - _by(threads, "dave")
    # The ACL still applies on top of the author filter: dave reads none of carol's private threads, carol does.
    private = {d.id for d in threads if d.container == F.PRIVATE_CHANNEL}
    dave, carol = Principal(user_id=F.DAVE, groups=(MEMBERS,)), Principal(user_id=F.CAROL, groups=(MEMBERS,))
    as_dave = {r.document_id for r in retriever.search(EVERY_NAME, "bm25", dave, 100, authors=["carol"]).results}
    as_carol = {r.document_id for r in retriever.search(EVERY_NAME, "bm25", carol, 100, authors=["carol"]).results}
    assert as_carol == _by(threads, "carol") and as_dave == as_carol - private and as_carol & private


def test_search_command_author_option(tmp_path: Path, threads: list[Document], monkeypatch, capsys) -> None:
    from rag_pipeline.cli import main

    monkeypatch.setenv("RAG_DENSE_MODEL", UNLOADABLE_MODEL)
    monkeypatch.delenv("QDRANT_URL", raising=False)
    qdrant = resources(tmp_path, live=False)["qdrant"]
    assert qdrant.engine == "qdrant-edge"
    with qdrant.open() as store:
        store.create_collections(HashEncoder.dimension)
        claim_dense_model(store, UNLOADABLE_MODEL)
        index_threads(store, threads)

    def search(*options: str) -> list[dict]:
        argv = ["search", EVERY_NAME, "--mode", "bm25", "--all-documents", "--top-k", "100", "--json", *options]
        assert main([*argv, "--data-dir", str(tmp_path)]) == 0
        return list(json.loads(capsys.readouterr().out)["results"])

    everything = {r["document_id"] for r in search()}
    assert everything == {d.id for d in threads}
    dave = search("--author", "dave")
    assert {r["document_id"] for r in dave} == _by(threads, "dave") and all("dave" in r["authors"] for r in dave)
    both = search("--author", "dave", "--author", "carol")
    assert {r["document_id"] for r in both} == _by(threads, "dave", "carol") > _by(threads, "dave")
    assert search("--author", "Dave") == []  # names match exactly, as the results show them
    # The table lists each result's authors too.
    assert main(["search", EVERY_NAME, "--mode", "bm25", "--all-documents", "--author", "dave", "--data-dir",
                 str(tmp_path)]) == 0  # fmt: skip
    assert "dave" in capsys.readouterr().out


def test_search_command_refuses_an_empty_author(tmp_path: Path, capsys) -> None:
    from rag_pipeline.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["search", "x", "--author", " ", "--data-dir", str(tmp_path)])
    assert stop.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: argument --author: the author is empty")


def test_a_server_gets_the_authors_payload_index_also_on_an_existing_collection() -> None:
    with QdrantRestRecorder() as server:
        store = ClientVectorStore.connect(url=server.url)
        store.create_collections(4)
        assert server.collections["rag_children"]["indexes"]["authors"] == "keyword"
        # A collection created before ``authors`` was indexed gets that index, and only that one, on the next write.
        for name in ("rag_children", "rag_parents"):
            del server.collections[name]["indexes"]["authors"]
        created_before = len([c for c in server.calls if c.path.endswith("/index")])
        store.create_collections(4)
        again = [c for c in server.calls if c.path.endswith("/index")][created_before:]
        assert sorted((c.path, c.body["field_name"]) for c in again) == [
            ("/collections/rag_children/index", "authors"),
            ("/collections/rag_parents/index", "authors"),
        ]
        store.create_collections(4)  # nothing missing: nothing sent
        assert len([c for c in server.calls if c.path.endswith("/index")]) == created_before + 2
        store.close()


def test_an_embedded_index_gets_the_authors_payload_index_when_opened(tmp_path: Path) -> None:
    import qdrant_edge as qe

    with EdgeVectorStore(tmp_path) as store:
        store.create_collections(4)
        for shard in store._shards.values():  # as a shard written before ``authors`` was indexed
            shard.update(qe.UpdateOperation.delete_field_index("authors"))
            assert "authors" not in shard.info().payload_schema
    with EdgeVectorStore(tmp_path) as store:
        schemas = [shard.info().payload_schema for shard in store._shards.values()]
    assert len(schemas) == 2 and all("authors" in schema for schema in schemas)


# --- top_k ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("top_k", [0, -1, -5])
def test_the_retriever_refuses_top_k_below_one(store: VectorStore, threads: list[Document], top_k: int) -> None:
    index_threads(store, threads)
    retriever = Retriever(store, Bm25Encoder())
    assert len(retriever.search(EVERY_NAME, "bm25", EVERYONE, top_k=1).results) == 1
    for mode in ("bm25", "reranked"):
        with pytest.raises(ValueError, match=f"top_k must be at least 1, got {top_k}"):
            retriever.search(EVERY_NAME, mode, EVERYONE, top_k=top_k)


@pytest.mark.parametrize(
    ("argv", "shown"),
    [(["--top-k", "-1"], "-1"), (["--top-k=-1"], "-1"), (["--top-k", "0"], "0"), (["--top-k=-0"], "0")],
)
def test_search_command_refuses_top_k_below_one(argv: list[str], shown: str, tmp_path: Path, capsys) -> None:
    from rag_pipeline.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["search", "x", *argv, "--data-dir", str(tmp_path)])
    assert stop.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"error: argument --top-k: must be at least 1, got {shown} (see `rag-pipeline search --help`)"]
