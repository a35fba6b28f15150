"""The week spill (issue 68): an offline source's documents written once per week, read back per batch of weeks
with the same documents and the same checks' decisions as the whole read."""

from __future__ import annotations

from rag_pipeline.pipeline.keys import week_key
from rag_pipeline.sources.document import Document
from rag_pipeline.sources.problems import RecordProblem
from rag_pipeline.sources.source_read import admit_documents
from rag_pipeline.sources.week_spill import WeekSpill
from rag_pipeline_tests.kit.mining import PUBLIC_SLACK, document


def _doc(doc_id: str, day: str, container: str = "C1", text: str = "hello") -> Document:
    return document(doc_id, "slack", f"{text} {doc_id}", f"{day}T10:00:00", PUBLIC_SLACK, container=container)


def _admit(documents: list[Document]) -> tuple[list[tuple[str, str, float]], list[str]]:
    admitted = admit_documents(
        documents, day_of=lambda d: d.day, first_day="2024-01-01", last_day="2024-12-31", max_chars=1_000
    )
    return sorted((day, d.id, d.version) for day, d in admitted.documents), sorted(p.reason for p in admitted.problems)


def test_a_read_of_some_weeks_gives_those_weeks_documents_of_the_containers_asked_for() -> None:
    manifest = RecordProblem("channels.json[3]", "entry without an id")
    pieces = [
        ([_doc("a", "2024-03-04"), _doc("b", "2024-03-12")], [manifest]),
        ([_doc("c", "2024-03-05", container="C2"), _doc("d", "2024-05-01", container="C2")], [manifest]),
    ]
    spill = WeekSpill.write(iter(pieces))
    try:
        assert spill.problems == [manifest]  # once, though every piece reports it
        assert spill.weeks() == sorted({week_key("2024-03-04"), week_key("2024-03-12"), week_key("2024-05-01")})
        read = spill.read({"C1": [], "C2": []}, ["2024-03-04", "2024-03-06"])
        assert sorted(d.id for d in read.documents) == ["a", "c"]
        assert read.problems == [manifest]
        only_c1 = spill.read({"C1": []}, ["2024-03-04", "2024-03-12", "2024-05-01"])
        assert sorted(d.id for d in only_c1.documents) == ["a", "b"]
        assert sorted(d.id for d in spill.documents()) == ["a", "b", "c", "d"]
    finally:
        spill.close()
    assert not spill.folder.exists()


def test_every_copy_of_an_id_read_twice_is_seen_by_every_batch_so_the_checks_keep_the_same_one() -> None:
    older, newer = _doc("x", "2024-02-05", text="old"), _doc("x", "2024-06-03", text="new")
    documents = [older, _doc("y", "2024-02-06"), newer, _doc("z", "2024-06-04")]
    spill = WeekSpill.write([(documents[:2], []), (documents[2:], [])])
    try:
        whole = _admit(documents)
        # Each week checked alone (and the shared file) decides as the whole read did.
        parts = [_admit(group) for group in spill.groups()]
        assert sorted(x for p in parts for x in p[0]) == whole[0]
        assert sorted(x for p in parts for x in p[1]) == whole[1]
        assert any("read twice" in reason for reason in whole[1])
        # A batch of the older copy's week still sees the newer copy, and the check drops the older one.
        early = spill.read({"C1": []}, ["2024-02-05"])
        assert {d.text for d in early.documents if d.id == "x"} == {older.text, newer.text}
        assert ("2024-06-03", "x", newer.version) in _admit(early.documents)[0]
    finally:
        spill.close()


def test_a_document_no_partition_holds_is_in_every_read_so_every_run_reports_it() -> None:
    old, kept = _doc("old", "1970-01-02"), _doc("kept", "2024-03-04")
    spill = WeekSpill.write([([old, kept], [])], first_day="2004-01-01")
    try:
        assert spill.weeks() == [week_key("2024-03-04")]
        assert sorted(d.id for d in spill.read({"C1": []}, ["2024-03-04"]).documents) == ["kept", "old"]
        assert [d.id for d in spill.read({"C1": []}, ["2024-09-02"]).documents] == ["old"]
    finally:
        spill.close()
