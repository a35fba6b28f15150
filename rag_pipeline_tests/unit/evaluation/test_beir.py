"""The BEIR loader: a tiny hand-written dataset, errors that name file and line, and the real SciFact copy."""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rag_pipeline.evaluation.beir import (
    BeirDoc,
    BeirFormatError,
    beir_documents,
    beir_eval_queries,
    load_beir,
)
from rag_pipeline.sources.document import content_hash
from rag_pipeline_tests.kit.paths import REPO_ROOT

# SciFact is not shipped (CC BY-NC): the real-copy test reads it where make bench-retrieval does, or elsewhere.
SCIFACT_ENV = "RAG_SCIFACT_DIR"
SCIFACT_DOWNLOAD = (
    "curl -LO https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/scifact.zip"
    " && unzip scifact.zip -d data && mv data/scifact data/beir_scifact"
)


def scifact_dir() -> Path:
    """``$RAG_SCIFACT_DIR``, else ``data/beir_scifact`` in the repository."""
    value = os.environ.get(SCIFACT_ENV)
    return Path(value).expanduser() if value else REPO_ROOT / "data" / "beir_scifact"


def write_beir(root: Path, corpus: list[dict], queries: list[dict], qrels: dict[str, str]) -> Path:
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in corpus), encoding="utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps(row) + "\n" for row in queries), encoding="utf-8")
    for split, text in qrels.items():
        (root / "qrels" / f"{split}.tsv").write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    corpus = [
        {"_id": "d1", "title": "Grub rescue", "text": "Boot into rescue mode.", "metadata": {}},
        # ensure_ascii=False below keeps a raw U+2028 in the file, which splitlines() would split on.
        {"_id": "d2", "text": "Kernel\u2028panic after update."},
        {"_id": 3, "title": None, "text": "Numeric id, null title."},
    ]
    queries = [
        {"_id": "q1", "text": "how to fix grub", "metadata": {}},
        {"_id": "q2", "text": "kernel panic"},
        {"_id": "q3", "text": "not judged in this split"},
        {"_id": "q4", "text": "only judged irrelevant"},
    ]
    root = write_beir(
        tmp_path / "tiny",
        corpus,
        queries,
        {
            "test": "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\nq2\td2\t1\nq2\t3\t1\nq4\td1\t0\n",
            "train": "query-id\tcorpus-id\tscore\r\nq3\td1\t1\r\n",
        },
    )
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in corpus), encoding="utf-8"
    )
    return root


def test_load_keeps_judged_queries_only(tiny: Path) -> None:
    data = load_beir(tiny)
    assert data.split == "test"
    assert data.corpus == {
        "d1": BeirDoc("d1", "Grub rescue", "Boot into rescue mode."),
        "d2": BeirDoc("d2", "", "Kernel\u2028panic after update."),
        "3": BeirDoc("3", "", "Numeric id, null title."),
    }
    assert data.queries == {"q1": "how to fix grub", "q2": "kernel panic", "q4": "only judged irrelevant"}
    assert data.qrels == {"q1": {"d1": 2, "d2": 0}, "q2": {"d2": 1, "3": 1}, "q4": {"d1": 0}}

    train = load_beir(tiny, split="train")  # CRLF line ends are tolerated
    assert train.queries == {"q3": "not judged in this split"} and train.qrels == {"q3": {"d1": 1}}


def test_documents_follow_the_project_shape(tiny: Path) -> None:
    docs = {d.id: d for d in beir_documents(load_beir(tiny), "tiny")}
    assert list(docs) == ["beir:tiny:d1", "beir:tiny:d2", "beir:tiny:3"]
    titled, untitled = docs["beir:tiny:d1"], docs["beir:tiny:d2"]
    assert titled.text == "Grub rescue\n\nBoot into rescue mode." and titled.title == "Grub rescue"
    assert untitled.text == "Kernel\u2028panic after update." and untitled.title == ""
    epoch = datetime(2000, 1, 1, tzinfo=UTC)
    for doc in docs.values():
        assert (doc.source, doc.container, doc.version) == ("beir", "tiny", 0.0)
        assert doc.created == doc.updated == epoch
        assert doc.content_hash == content_hash(doc.text)
        assert doc.acl.public and doc.acl.admits(None)
        assert doc.metadata["beir_id"] == doc.id.removeprefix("beir:tiny:")


def test_eval_queries_keep_grades_and_drop_grade_zero(tiny: Path) -> None:
    queries = beir_eval_queries(load_beir(tiny), "tiny")
    # q4 is judged, but only as not relevant: nothing to find, so it is not an eval query.
    assert [(q.id, q.query, q.relevant) for q in queries] == [
        ("q1", "how to fix grub", {"beir:tiny:d1": 2}),
        ("q2", "kernel panic", {"beir:tiny:d2": 1, "beir:tiny:3": 1}),
    ]
    assert all(q.principal is None and not q.exclude for q in queries)
    with pytest.raises(ValueError, match="free of ':'"):
        beir_eval_queries(load_beir(tiny), "a:b")


def test_bad_json_line_names_file_and_line(tiny: Path) -> None:
    path = tiny / "corpus.jsonl"
    path.write_text(path.read_text(encoding="utf-8") + '{"_id": "d9", "text": \n', encoding="utf-8")
    with pytest.raises(BeirFormatError, match=re.escape(f"{path}:4: invalid JSON")):
        load_beir(tiny)


def test_missing_id_names_file_and_line(tiny: Path) -> None:
    path = tiny / "queries.jsonl"
    path.write_text(path.read_text(encoding="utf-8") + '\n{"text": "no id"}\n', encoding="utf-8")
    with pytest.raises(BeirFormatError, match=re.escape(f"{path}:6: missing or invalid _id")):
        load_beir(tiny)


def test_unknown_split_lists_available(tiny: Path) -> None:
    with pytest.raises(BeirFormatError, match=r"'dev'.*available splits: \['test', 'train'\]"):
        load_beir(tiny, split="dev")


def test_bad_qrels_line_and_unknown_query(tiny: Path) -> None:
    qrels = tiny / "qrels" / "test.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td1\n", encoding="utf-8")
    with pytest.raises(BeirFormatError, match=re.escape(f"{qrels}:2: expected 3 tab-separated columns")):
        load_beir(tiny)
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td1\tyes\n", encoding="utf-8")
    with pytest.raises(BeirFormatError, match=re.escape(f"{qrels}:2: score 'yes'")):
        load_beir(tiny)
    qrels.write_text("query-id\tcorpus-id\tscore\nq404\td1\t1\n", encoding="utf-8")
    with pytest.raises(BeirFormatError, match=r"not in queries\.jsonl.*q404"):
        load_beir(tiny)


def test_missing_folder_and_file(tmp_path: Path, tiny: Path) -> None:
    with pytest.raises(BeirFormatError, match=re.escape(str(tmp_path / "nope"))):
        load_beir(tmp_path / "nope")
    (tiny / "queries.jsonl").unlink()
    with pytest.raises(BeirFormatError, match=re.escape(str(tiny / "queries.jsonl"))):
        load_beir(tiny)


def test_real_scifact() -> None:
    scifact = scifact_dir()
    if not scifact.is_dir():
        pytest.skip(
            f"no BEIR SciFact copy at {scifact}: set {SCIFACT_ENV} to its folder, or download it from the"
            f" repository root: {SCIFACT_DOWNLOAD}"
        )
    data = load_beir(scifact)
    assert len(data.corpus) == 5183
    assert len(data.queries) == len(data.qrels) == 300
    assert sum(len(judged) for judged in data.qrels.values()) == 339
    assert all(doc_id in data.corpus for judged in data.qrels.values() for doc_id in judged)

    docs = beir_documents(data, "scifact")
    queries = beir_eval_queries(data, "scifact")
    assert len(docs) == 5183 and len({d.id for d in docs}) == 5183
    assert len(queries) == 300
    ids = {d.id for d in docs}
    assert all(doc_id in ids for q in queries for doc_id in q.relevant)


def test_a_query_that_is_also_a_corpus_document_excludes_itself(tmp_path: Path) -> None:
    # ArguAna-style: queries are corpus documents; BEIR scoring ignores the self-match.
    corpus = [{"_id": "a1", "text": "argument one"}, {"_id": "a2", "text": "counter argument"}]
    root = write_beir(
        tmp_path / "arg",
        corpus,
        [{"_id": "a1", "text": "argument one"}],
        {"test": "query-id\tcorpus-id\tscore\na1\ta2\t1\n"},
    )
    (query,) = beir_eval_queries(load_beir(root), "arg")
    assert query.exclude == ["beir:arg:a1"] and query.relevant == {"beir:arg:a2": 1}
