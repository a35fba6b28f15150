"""Small-to-big: child hits become one result per document, carrying the best child and its parent."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rag_pipeline.index.store import Hit
from rag_pipeline.retrieval.results import SearchResult

# What grouping children into documents reads of a hit's payload (``source`` for the router's ordering too): a
# first-stage search reads only these, and the retriever reads the whole payload of the children it returns.
GROUPING_FIELDS = ("document_id", "parent_id", "source")


def documents_from_hits(hits: Sequence[Hit], exclude: Iterable[str] = (), complete: bool = True) -> list[SearchResult]:
    """One result per document (max child score), best first; ``exclude`` ids are dropped: documents, or child
    chunks by their point id (the document may still be found by its other children).

    A document's score is its best child's score, and the result carries that child and its parent;
    ``matching_children`` counts how many of the document's children were hit (a rerank signal). ``complete``:
    the hits carry the child's whole payload; else only what grouping reads (:data:`GROUPING_FIELDS`), and the
    results say so (``hydrated`` false) until :func:`read_payload` fills them.

    Equal scores go to the smaller child id, and equal documents to the smaller document id. The ties matter:
    Qdrant's fusion collects candidates in a hash map seeded per process, so equal RRF scores (rank i in one list
    vs rank i in the other) come back in a different order in every process, and evaluations would not repeat
    exactly. One pass over the hits (an evaluation groups ~3 million of them).
    """
    best: dict[str, Hit] = {}
    counts: dict[str, int] = {}
    excluded = set(exclude)
    for hit in hits:
        if hit.id in excluded:
            continue  # a child chunk left out (a mined thread's question: the thread must be found by its replies)
        doc_id = hit.payload["document_id"]
        current = best.get(doc_id)
        if current is None:
            best[doc_id] = hit
            counts[doc_id] = 1
            continue
        counts[doc_id] += 1
        if hit.score > current.score or (hit.score == current.score and hit.id < current.id):
            best[doc_id] = hit
    results = []
    for doc_id, hit in best.items():
        if doc_id in excluded:
            continue
        payload = hit.payload
        result = SearchResult(
            document_id=doc_id,
            score=float(hit.score),
            source=payload.get("source", ""),
            container="",
            title="",
            url=None,
            child_id=hit.id,
            child_text="",
            parent_id=payload.get("parent_id", hit.id),
            hydrated=False,
            matching_children=counts[doc_id],
        )
        if complete:
            read_payload(result, payload)
        results.append(result)
    results.sort(key=lambda r: (-r.score, r.document_id))
    return results


def read_payload(result: SearchResult, payload: Mapping[str, Any], fields: Sequence[str] | None = None) -> None:
    """Fill a result from its child's payload (what a grouping-only search left out): every field, and the result is
    then whole (``hydrated``), or only ``fields`` of it."""
    for name in _READERS if fields is None else fields:
        _READERS[name](result, payload)
    if fields is None:
        result.hydrated = True


def _setter(attribute: str, key: str, convert: Any = None) -> Any:
    def read(result: SearchResult, payload: Mapping[str, Any]) -> None:
        value = payload.get(key)
        setattr(result, attribute, convert(value) if convert is not None else value)

    return read


# Payload key → how a result takes it.
_READERS = {
    "source": lambda result, payload: setattr(result, "source", payload.get("source", result.source)),
    "container": _setter("container", "container", lambda v: v or ""),
    "title": _setter("title", "title", lambda v: v or ""),
    "url": _setter("url", "url"),
    "text": _setter("child_text", "text", lambda v: v or ""),
    "updated": _setter("updated", "updated"),
    "authors": _setter("authors", "authors", lambda v: list(v or [])),
    "acl": _setter("acl", "acl", lambda v: v or {}),
    "resolution": _setter("resolution", "resolution"),
}


def document_scores(hits: Sequence[Hit]) -> list[tuple[str, float]]:
    """(document id, best child score), in the order :func:`documents_from_hits` gives them, from hits that carry
    ``document_id`` alone (the rerank signals need nothing else, and reading whole payloads doubled their cost)."""
    best: dict[str, float] = {}
    for hit in hits:
        doc_id = hit.payload["document_id"]
        best[doc_id] = max(best.get(doc_id, float(hit.score)), float(hit.score))
    return sorted(best.items(), key=lambda item: (-item[1], item[0]))
