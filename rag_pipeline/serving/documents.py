"""The read-a-document use case: a whole document as a reader may see it, from its parent points, or nothing (a
missing document and a forbidden one are not told apart, so a caller cannot probe for documents it may not see).
The service caches the parts (:class:`~rag_pipeline.serving.service.SearchService`); the CLI reads them from an
index opened for the call."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from rag_pipeline.index.store import IndexedAcl, VectorStore
from rag_pipeline.retrieval.principal import Principal


@dataclass(frozen=True)
class ServedDocument:
    """A whole document as a reader may see it: its title, link and parent texts in order."""

    document_id: str
    source: str
    container: str
    title: str
    url: str | None
    updated: str | None
    authors: list[str]
    text: str

    def to_dict(self) -> dict[str, Any]:
        """The document as the HTTP API, the MCP tools and the agent return it (its fields, in order)."""
        return asdict(self)


def read_document(store: VectorStore, document_id: str, reader: Principal) -> ServedDocument | None:
    """A whole document from ``store`` as ``reader`` may see it (the CLI's ``ask``; the service caches the parts)."""
    return served_document(document_id, document_parents(store, document_id), reader)


def indexed_acl(store: VectorStore, document_id: str) -> IndexedAcl | None:
    """The document's indexed ACL (what searches filter on), read from its first parent point; None when it is not
    indexed. For ``explain``, which decides itself what the caller may be told."""
    refs = store.document_points(store.names.parents, [document_id])
    parents = store.retrieve(store.names.parents, [r.id for r in refs[:1]]) if refs else []
    return IndexedAcl.from_payload(parents[0].payload.get("acl")) if parents else None


def document_parents(store: VectorStore, document_id: str) -> list[Any]:
    """Every parent point of the document, with its payload (text and ACL); none when it is not indexed."""
    refs = store.document_points(store.names.parents, [document_id])
    return store.retrieve(store.names.parents, [r.id for r in refs]) if refs else []


def served_document(document_id: str, parents: list[Any], reader: Principal) -> ServedDocument | None:
    """The document from its parent points if ``reader`` may read every one of them; None otherwise (missing and
    forbidden are not told apart, so a caller cannot probe for documents it may not see)."""
    if reader.all_documents:
        raise ValueError("a reader's document is read with access control")
    readable = [p for p in parents if reader.admits(p.payload.get("acl") or {})]
    if not readable or len(readable) != len(parents):
        return None
    readable.sort(key=lambda p: (p.payload.get("chunk_index", 0), p.id))
    first = readable[0].payload
    return ServedDocument(
        document_id=document_id,
        source=str(first.get("source", "")),
        container=str(first.get("container", "")),
        title=str(first.get("title", "")),
        url=first.get("url"),
        updated=first.get("updated"),
        authors=list(first.get("authors") or []),
        text="\n\n".join(str(p.payload.get("text", "")) for p in readable),
    )
