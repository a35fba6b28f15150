"""What a source hands the raw documents asset for a run's partitions, whichever reader it is, and the checks
every source's documents pass before they land in a partition."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from rag_pipeline.sources.document import Document, truncated
from rag_pipeline.sources.identifiers import is_valid_container_id
from rag_pipeline.sources.problems import RecordProblem, describe, shown


@dataclass
class SourceRead:
    """Documents for a run's partitions; ``partition_day`` overrides a document's own day,
    ``failed`` maps a container to why it could not be read."""

    documents: list[Document] = field(default_factory=list)
    problems: list[RecordProblem] = field(default_factory=list)
    partition_day: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


# How a document whose day has no partition is reported (the backfill counts these for its advice).
OUTSIDE_PARTITIONS = "is outside the partitions"


@dataclass
class AdmittedDocuments:
    """The documents a run writes, each with its partition day, and the ones turned away or changed."""

    documents: list[tuple[str, Document]] = field(default_factory=list)
    problems: list[RecordProblem] = field(default_factory=list)


def admit_documents(
    documents: Iterable[Document],
    *,
    day_of: Callable[[Document], str],
    first_day: str,
    last_day: str,
    max_chars: int,
    wanted: Callable[[str, str], bool] | None = None,
) -> AdmittedDocuments:
    """The documents of ``documents`` that a run may write, as (partition day, document), after the checks
    every source shares, whichever reader (export, dump, live API) produced them. Each failed check is a
    problem naming the document, never an exception that would lose the rest of the run:

    - the container is a valid id: it becomes a partition key and a path component;
    - the day (``day_of``) lies within ``first_day``..``last_day``: a document before the partitions' start
      (or dated in the future) has no partition to land in;
    - one document per id, the newest version: a second copy would be counted but written once;
    - at most ``max_chars`` characters of text: longer text is truncated.

    ``wanted(day, container)`` selects the run's partitions; only their documents are checked for size, so
    a truncation is reported by the run that writes the document and not by every run of its container.
    """
    first, last = date.fromisoformat(first_day), date.fromisoformat(last_day)
    out = AdmittedDocuments()
    kept: dict[str, tuple[str, Document]] = {}
    for doc in documents:
        where = _where(doc)
        if not is_valid_container_id(doc.container):
            out.problems.append(RecordProblem(where, f"container {shown(doc.container)} is not a valid id"))
            continue
        try:
            day = day_of(doc)
            inside = first <= date.fromisoformat(day) <= last
        except Exception as exc:  # a time no day can be taken from is this document's problem alone
            out.problems.append(RecordProblem(where, f"no partition day: {describe(exc)}"))
            continue
        if not inside:
            out.problems.append(
                RecordProblem(where, f"partition day {day} {OUTSIDE_PARTITIONS} ({first_day}..{last_day})")
            )
            continue
        previous = kept.get(doc.id)
        if previous is not None:
            earlier = previous[1]
            newer = doc if doc.version > earlier.version else earlier
            reason = f"read twice (versions {earlier.version} and {doc.version}); kept {newer.version}"
            out.problems.append(RecordProblem(where, reason))
            if newer is earlier:
                continue
        kept[doc.id] = (day, doc)
    for day, doc in kept.values():
        if wanted is not None and not wanted(day, doc.container):
            continue
        cut = truncated(doc, max_chars)
        if cut is not None:
            out.problems.append(
                RecordProblem(
                    _where(doc),
                    f"text of {len(doc.text):,} characters truncated to {max_chars:,} (RAG_MAX_DOCUMENT_CHARS)",
                )
            )
            doc = cut
        out.documents.append((day, doc))
    return out


def _where(doc: Document) -> str:
    return f"{doc.id} ({doc.title[:60]})" if doc.title else doc.id
