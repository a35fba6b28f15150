"""The pushed sources' raw record (``sources/pushed_store.py``): what a rebuild writes back is the latest version of
each id in arrival order, a tombstone removes what came before it (and a later push brings the id back), an older
version pushed later does not win (the index writer's rule), a line torn by a crash is skipped and the next append
starts a line of its own, and weeks are read oldest first."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from rag_pipeline.sources.pushed_documents import PushBatch, PushedDocument
from rag_pipeline.sources.pushed_store import PushedStore

MONDAY = datetime(2024, 3, 4, 9, tzinfo=UTC)
NEXT_WEEK = datetime(2024, 3, 11, 9, tzinfo=UTC)


def _doc(doc_id: str, text: str, updated: str = "2024-03-01T10:00:00Z") -> PushedDocument:
    return PushedDocument.model_validate_json(
        f'{{"id": "{doc_id}", "container": "HR", "text": "{text}", "updated": "{updated}", "acl": {{"users": ["U1"]}}}}'
    )


def _push(store: PushedStore, at: datetime, documents: list[PushedDocument], deleted: list[str] = []) -> Path:  # noqa: B006
    return store.record(PushBatch("hr_wiki", documents, list(deleted)), at)


def test_latest_version_wins_and_a_tombstone_removes_until_pushed_again(tmp_path: Path) -> None:
    store = PushedStore(tmp_path)
    _push(store, MONDAY, [_doc("a", "first a"), _doc("b", "only b"), _doc("c", "first c")])
    _push(store, MONDAY, [_doc("a", "second a", "2024-03-02T10:00:00Z")], deleted=["b", "c"])
    _push(store, NEXT_WEEK, [_doc("c", "c again", "2024-03-05T10:00:00Z")])
    # Pushed after the second version but older: the index skips it, so the record does too.
    _push(store, NEXT_WEEK, [_doc("a", "stale a", "2024-02-01T10:00:00Z")])

    state = store.state("hr_wiki")
    assert {k: d.text for k, d in state.documents.items()} == {"a": "second a", "c": "c again"}
    assert state.deleted == {"b"} and state.unreadable == 0
    batch = state.batch()
    assert batch.deleted() == ["hr_wiki:b"] and sorted(d.id for d in batch.documents()) == ["hr_wiki:a", "hr_wiki:c"]
    assert [p.name for p in store.files("hr_wiki")] == ["2024-W10.jsonl", "2024-W11.jsonl"]
    assert store.sources() == ["hr_wiki"]


def test_a_torn_line_is_skipped_and_the_next_record_starts_its_own_line(tmp_path: Path) -> None:
    store = PushedStore(tmp_path)
    path = _push(store, MONDAY, [_doc("a", "first a")])
    with path.open("a") as out:
        out.write('{"id": "b", "container": "HR", "te')  # a crash half-way through an append
    _push(store, MONDAY, [_doc("c", "whole c")])

    state = store.state("hr_wiki")
    assert sorted(state.documents) == ["a", "c"] and state.unreadable == 1


def test_nothing_recorded_is_an_empty_state(tmp_path: Path) -> None:
    store = PushedStore(tmp_path)
    assert store.sources() == [] and store.files("hr_wiki") == []
    state = store.state("hr_wiki")
    assert state.documents == {} and state.deleted == set()
