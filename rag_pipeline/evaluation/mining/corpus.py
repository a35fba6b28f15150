"""The workspace as the miners read it: the raw documents the pipeline stored (one parquet file per source and
week), read twice so memory holds only what links need, never every text at once.

The first pass keeps, per document, its source, dates, ACL, family and version, and every handle other documents
may name it by (each source's :class:`~rag_pipeline.sources.registry.MiningFacts`); the second streams the full
records to the miners, one file at a time. A document stored in two weeks (updated later) counts once: its newest
version.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from rag_pipeline.sources.document import BELONGS_TO, FAMILY
from rag_pipeline.sources.registry import MiningFacts, registered_sources

# What the first pass reads of every document (the text is read in the second pass only).
_INFO_COLUMNS = ["document_id", "source", "container", "created", "version", "acl", "metadata", "url", "title"]
_RECORD_COLUMNS = [*_INFO_COLUMNS, "text", "authors", "updated"]


@dataclass(frozen=True)
class DocumentInfo:
    """What the checks after mining need of a document without its text."""

    source: str
    container: str
    created: datetime
    version: float
    acl: Mapping[str, Any]
    family: tuple[str, ...]  # the restricted parts written beside it (a Jira issue's restricted comments)
    belongs_to: str | None  # the head of its family, where it is one of those parts


def _parse_time(value: Any) -> datetime:
    parsed = datetime.fromisoformat(str(value))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _record(row: Mapping[str, Any]) -> dict[str, Any]:
    record = dict(row)
    record["metadata"] = json.loads(row["metadata"]) if isinstance(row.get("metadata"), str) else {}
    record["acl"] = json.loads(row["acl"]) if isinstance(row.get("acl"), str) else {}
    if isinstance(row.get("authors"), str):
        record["authors"] = json.loads(row["authors"])
    return record


class Corpus:
    """The stored raw documents of a workspace, with each source's mining facts (handles, references, authors)."""

    def __init__(
        self,
        raw_files: Sequence[Path],
        child_files: Sequence[Path] = (),
        facts: Mapping[str, MiningFacts] | None = None,
    ) -> None:
        self.raw_files = [Path(p) for p in raw_files]
        self.child_files = [Path(p) for p in child_files]
        self.facts = dict(facts) if facts is not None else {n: s.mining for n, s in registered_sources().items()}
        self._info: dict[str, DocumentInfo] = {}
        self._handles: dict[str, str] = {}
        self._loaded = False

    # --- first pass -------------------------------------------------------------------------------------------------
    def _load(self) -> None:
        if self._loaded:
            return
        for path in self.raw_files:
            for row in _rows(path, _INFO_COLUMNS):
                doc_id = str(row["document_id"])
                version = float(row["version"])
                known = self._info.get(doc_id)
                if known is not None and known.version >= version:
                    continue
                record = _record(row)
                metadata = record["metadata"]
                self._info[doc_id] = DocumentInfo(
                    source=str(row["source"]),
                    container=str(row["container"]),
                    created=_parse_time(row["created"]),
                    version=version,
                    acl=record["acl"],
                    family=tuple(str(m) for m in metadata.get(FAMILY) or ()),
                    belongs_to=metadata.get(BELONGS_TO),
                )
                facts = self.facts.get(str(row["source"]))
                if facts is not None and facts.handles is not None and not metadata.get(BELONGS_TO):
                    for handle in facts.handles(record):
                        self._handles[handle] = doc_id
        self._loaded = True

    def __len__(self) -> int:
        self._load()
        return len(self._info)

    def info(self, document_id: str) -> DocumentInfo | None:
        self._load()
        return self._info.get(document_id)

    def resolve(self, handle: str) -> str | None:
        """The document a handle (``jira-key:AC-12``) names, None when no stored document has it."""
        self._load()
        return self._handles.get(handle)

    def references_in(self, text: str) -> list[tuple[int, int, str]]:
        """Every ``(start, end, handle)`` any source finds in ``text``, in text order."""
        found: list[tuple[int, int, str]] = []
        for facts in self.facts.values():
            if facts.references is not None:
                found.extend(facts.references(text))
        return sorted(found)

    # --- second pass ------------------------------------------------------------------------------------------------
    def records(self, sources: Iterable[str] | None = None) -> Iterator[dict[str, Any]]:
        """Every document's newest record (``metadata``, ``acl`` and ``authors`` parsed), file by file."""
        self._load()
        wanted = set(sources) if sources is not None else None
        for path in self.raw_files:
            for row in _rows(path, _RECORD_COLUMNS):
                if wanted is not None and row["source"] not in wanted:
                    continue
                info = self._info.get(str(row["document_id"]))
                if info is None or float(row["version"]) != info.version:
                    continue
                yield _record(row)

    def child_spans(self, document_ids: Iterable[str]) -> dict[str, list[tuple[str, int, str]]]:
        """``document id -> [(child chunk id, first token, parent chunk id)]`` as indexed, for these documents."""
        wanted = set(document_ids)
        spans: dict[str, list[tuple[str, int, str]]] = {}
        if not wanted:
            return spans
        columns = ["chunk_id", "document_id", "token_start", "parent_id"]
        for path in self.child_files:
            table = pq.read_table(path, columns=columns, filters=[("document_id", "in", wanted)])
            rows = zip(*(table.column(c).to_pylist() for c in columns), strict=True)
            for chunk, doc, start, parent in rows:
                spans.setdefault(doc, []).append((chunk, int(start), str(parent)))
        return spans


def _rows(path: Path, columns: list[str]) -> Iterator[dict[str, Any]]:
    """The rows of one raw parquet file, in batches (a year's week of a large workspace is still one file)."""
    parquet = pq.ParquetFile(path)
    present = [c for c in columns if c in parquet.schema_arrow.names]
    for batch in parquet.iter_batches(batch_size=2048, columns=present):
        yield from batch.to_pylist()
