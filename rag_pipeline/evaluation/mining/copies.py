"""Masked copies: where the index scores chat threads whole for BM25 (CJK indexes: every child carries the
thread's vector), a thread's question cannot be masked by leaving chunks out, so a thread query judges a copy of its
thread with the question removed — the construction of the bundled Korean help-desk set (root deleted) — written
into the index for the evaluation alone.

A copy is ``<thread id>#masked-question``: the thread's text without its question, its title taken from the first
message left, the thread's ACL narrowed by ``restricted_to`` to a group of its own (``rag:evaluation:<digest>``) that
no directory grants, so no reader ever sees one (the ACL machinery every search applies, not a special case); only
its query's principal gets that group (tag ``masked-copy:<group>``). Each mining replaces the previous copies (by
the suffix: never an indexed document of a source). Costs one embedding per chunk of the ≤ ``max_queries`` sampled
threads.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from rag_pipeline.index.store import VectorStore
from rag_pipeline.sources.document import Acl, Document, content_hash
from rag_pipeline.stages import documents_frame, index_documents_directly
from rag_pipeline.text.chunking import Chunker
from rag_pipeline.vectors.cache import EmbeddingCache
from rag_pipeline.vectors.dense.base import DenseEncoder
from rag_pipeline.vectors.sparse import Bm25Encoder

COPY_SUFFIX = "#masked-question"
COPY_GROUP = "rag:evaluation"
COPY_TAG = "masked-copy:"


def copy_id(document_id: str) -> str:
    return f"{document_id}{COPY_SUFFIX}"


def copy_group(document_id: str) -> str:
    return f"{COPY_GROUP}:{hashlib.sha256(document_id.encode()).hexdigest()[:16]}"


def is_copy(document_id: str) -> bool:
    return document_id.endswith(COPY_SUFFIX)


def masked_copy(record: Mapping[str, Any], question_end: int, question: str) -> Document | None:
    """The thread of ``record`` without its first ``question_end`` characters (its question); None when nothing
    is left."""
    text = str(record.get("text") or "")[question_end:].lstrip("\n").strip()
    if not text:
        return None
    first = text.split("\n", 1)[0].split(": ", 1)[-1]
    title = str(record.get("title") or "")
    shown = question[: min(len(question), 40)]
    title = title.replace(question[:100], first[:100]) if shown and shown in title else first[:100]
    acl = Acl.model_validate(record["acl"])
    doc_id = str(record["document_id"])
    created = record["created"]
    return Document(
        id=copy_id(doc_id),
        source=str(record["source"]),
        container=str(record["container"]),
        title=title,
        text=text,
        url=None,
        created=created,
        updated=record.get("updated") or created,
        version=float(record["version"]),
        content_hash=content_hash(text),
        acl=acl.model_copy(update={"restricted_to": (copy_group(doc_id),)}),
        metadata={"masked_copy_of": doc_id},
    )


def replace_masked_copies(
    store: VectorStore,
    copies: Sequence[Document],
    keep: set[str],
    chunker: Chunker,
    encoder: DenseEncoder,
    bm25: Bm25Encoder,
    cache: EmbeddingCache | None = None,
) -> dict[str, int]:
    """Remove the earlier copies no current set judges (``keep``: copy ids the sets name), then write ``copies``
    (chunked, embedded and BM25-weighted as the chain does; an unchanged copy is not written again)."""
    old = [doc_id for doc_id in store.indexed_documents() if is_copy(doc_id) and doc_id not in keep]
    if old:
        for collection in (store.names.children, store.names.parents):
            store.delete_documents(collection, old)
    chunks = 0
    if copies:
        report = index_documents_directly(store, documents_frame(copies), chunker, encoder, bm25, cache)
        chunks = report.children
    return {"removed": len(old), "written": len(copies), "child_chunks": chunks}
