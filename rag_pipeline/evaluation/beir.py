"""BEIR-format benchmark data (e.g. SciFact) as the project's documents and eval queries.

A BEIR dataset folder holds::

    corpus.jsonl          {"_id": "4983", "title": "...", "text": "...", "metadata": {...}}
    queries.jsonl         {"_id": "1", "text": "...", "metadata": {...}}
    qrels/<split>.tsv     query-id<TAB>corpus-id<TAB>score, after a header line

Only the queries judged in the chosen split are kept, as BEIR's own loader does. Errors name the file and
line, so a truncated download or a hand-edited file is easy to find.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rag_pipeline.evaluation.eval_set import EvalQuery
from rag_pipeline.sources.document import Acl, Document, content_hash

BEIR_SOURCE = "beir"
# BEIR documents carry no dates; a fixed instant keeps documents, partitions and hashes reproducible.
BEIR_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
QRELS_HEADER = ("query-id", "corpus-id", "score")


class BeirFormatError(ValueError):
    """A BEIR file is missing or malformed; the message names the file (and line)."""


@dataclass(frozen=True)
class BeirDoc:
    """One corpus entry."""

    id: str
    title: str
    text: str


@dataclass(frozen=True)
class BeirDataset:
    """A loaded BEIR split: the whole corpus, the judged queries and their graded relevance."""

    directory: Path
    split: str
    corpus: dict[str, BeirDoc]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def load_beir(directory: str | Path, split: str = "test") -> BeirDataset:
    """Read ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv`` from a BEIR dataset folder."""
    directory = Path(directory)
    if not directory.is_dir():
        raise BeirFormatError(f"BEIR dataset folder does not exist: {directory}")
    qrels = _read_qrels(directory, split)
    corpus = {}
    for path, number, row in _read_jsonl(directory / "corpus.jsonl"):
        doc_id = _field_id(path, number, row)
        if doc_id in corpus:
            raise BeirFormatError(f"{path}:{number}: duplicate corpus _id {doc_id!r}")
        corpus[doc_id] = BeirDoc(
            id=doc_id, title=_field_text(path, number, row, "title"), text=_field_text(path, number, row, "text")
        )
    queries = {}
    for path, number, row in _read_jsonl(directory / "queries.jsonl"):
        query_id = _field_id(path, number, row)
        if query_id not in qrels:
            continue
        text = _field_text(path, number, row, "text")
        if not text.strip():
            raise BeirFormatError(f"{path}:{number}: query {query_id!r} has no text")
        queries[query_id] = text
    unknown = [query_id for query_id in qrels if query_id not in queries]
    if unknown:
        raise BeirFormatError(
            f"{directory / 'qrels' / f'{split}.tsv'}: {len(unknown)} judged queries are not in queries.jsonl, "
            f"e.g. {unknown[:5]}"
        )
    # Queries in their file order, judgements keyed the same way: iteration order is stable across loads.
    return BeirDataset(
        directory=directory,
        split=split,
        corpus=corpus,
        queries=queries,
        qrels={query_id: qrels[query_id] for query_id in queries},
    )


def beir_document_id(name: str, doc_id: str) -> str:
    """The project document id of a BEIR corpus entry (shared by documents and eval queries)."""
    return f"beir:{name}:{doc_id}"


def beir_documents(dataset: BeirDataset, name: str) -> list[Document]:
    """The corpus as project documents: public, undated (fixed epoch), titled when BEIR gives a title."""
    _check_name(name)
    acl = Acl(public=True)
    documents = []
    for doc in dataset.corpus.values():
        # Titles carry much of the meaning in scientific corpora (BEIR's models also see title + text).
        text = f"{doc.title}\n\n{doc.text}" if doc.title.strip() else doc.text
        documents.append(
            Document(
                id=beir_document_id(name, doc.id),
                source=BEIR_SOURCE,
                container=name,
                title=doc.title,
                text=text,
                created=BEIR_EPOCH,
                updated=BEIR_EPOCH,
                version=0.0,
                content_hash=content_hash(text),
                acl=acl,
                metadata={"beir_id": doc.id},
            )
        )
    return documents


def beir_eval_queries(dataset: BeirDataset, name: str) -> list[EvalQuery]:
    """The judged queries in the project's eval format, relevance keyed by project document ids.

    Grade-0 judgements ("judged not relevant") are dropped because the eval format treats every listed id
    as relevant; a query left with no relevant document is dropped too, since recall is undefined for it.
    """
    _check_name(name)
    queries = []
    for query_id, text in dataset.queries.items():
        relevant = {
            beir_document_id(name, doc_id): grade for doc_id, grade in dataset.qrels[query_id].items() if grade > 0
        }
        if relevant:
            # ArguAna, Quora, CQADupStack: the query is also a corpus document; BEIR ignores that self-match.
            own = beir_document_id(name, query_id)
            exclude = [own] if query_id in dataset.corpus and own not in relevant else []
            queries.append(EvalQuery(id=query_id, query=text, relevant=relevant, exclude=exclude))
    return queries


def _check_name(name: str) -> None:
    # Document ids are colon-separated: a colon in the name would make them ambiguous.
    if not name or ":" in name:
        raise ValueError(f"BEIR dataset name must be non-empty and free of ':', got {name!r}")


def _read_lines(path: Path) -> list[str]:
    if not path.is_file():
        raise BeirFormatError(f"BEIR file is missing: {path}")
    # split("\n"), not splitlines(): JSON strings may hold U+2028 or U+0085, which splitlines() breaks on.
    return path.read_text(encoding="utf-8").split("\n")


def _read_jsonl(path: Path) -> list[tuple[Path, int, dict[str, Any]]]:
    rows = []
    for number, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BeirFormatError(f"{path}:{number}: invalid JSON: {exc}") from exc
        if not isinstance(row, dict):
            raise BeirFormatError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
        rows.append((path, number, row))
    return rows


def _field_id(path: Path, number: int, row: dict[str, Any]) -> str:
    value = row.get("_id")
    # Some BEIR exports write numeric ids; qrels are text, so ids are compared as strings.
    if isinstance(value, bool) or not isinstance(value, str | int) or str(value) == "":
        raise BeirFormatError(f"{path}:{number}: missing or invalid _id")
    return str(value)


def _field_text(path: Path, number: int, row: dict[str, Any], key: str) -> str:
    value = row.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BeirFormatError(f"{path}:{number}: {key!r} must be a string, got {type(value).__name__}")
    return value


def _read_qrels(directory: Path, split: str) -> dict[str, dict[str, int]]:
    path = directory / "qrels" / f"{split}.tsv"
    if not path.is_file():
        available = sorted(p.stem for p in (directory / "qrels").glob("*.tsv"))
        raise BeirFormatError(f"no qrels for split {split!r} at {path}; available splits: {available or 'none'}")
    qrels: dict[str, dict[str, int]] = {}
    for number, raw in enumerate(_read_lines(path), start=1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        columns = line.split("\t")
        if number == 1 and tuple(c.strip() for c in columns) == QRELS_HEADER:
            continue
        if len(columns) != 3:
            raise BeirFormatError(f"{path}:{number}: expected 3 tab-separated columns, got {len(columns)}")
        query_id, doc_id, score = (c.strip() for c in columns)
        try:
            grade = int(score)
        except ValueError as exc:
            raise BeirFormatError(f"{path}:{number}: score {score!r} is not an integer") from exc
        if not query_id or not doc_id:
            raise BeirFormatError(f"{path}:{number}: empty query-id or corpus-id")
        judged = qrels.setdefault(query_id, {})
        if doc_id in judged and judged[doc_id] != grade:
            raise BeirFormatError(f"{path}:{number}: conflicting scores for ({query_id!r}, {doc_id!r})")
        judged[doc_id] = grade
    return qrels
