"""The index remembers which dense model and which BM25 terms wrote it, so nothing queries it with another's.

Vectors of two models live in different spaces: a query embedded by model B against points written by
model A returns noise without any error (and the vector and hybrid arms quietly degrade). Likewise BM25
term ids from another tokenizer match nothing (the word tokenizer's query terms never hit a Japanese
document segmented by the multilingual one). The first write records both; every later write and every
search checks them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from rag_pipeline.index.store import VectorStore

DENSE_MODEL_KEY = "dense_model"
SPARSE_TERMS_KEY = "sparse_terms"
# What indexes written before the sparse terms were recorded hold (they do record their dense model).
LEGACY_SPARSE_TERMS = "word/english"


class IndexModelMismatch(ValueError):
    """The configured dense model is not the one the index was built with."""


def _mismatch(built_with: str, configured: str, variable: str, value: str, new_one: str) -> IndexModelMismatch:
    """The refusal of a setting (``variable``) that differs from what the index was ``built_with``: set it back to
    ``value``, or build ``new_one`` elsewhere (one index never mixes two encodings of its texts)."""
    return IndexModelMismatch(
        f"{built_with} but {configured!r} is configured ({variable}): set {variable}={value} to use this index, or "
        f"build {new_one} in another data folder (--data-dir / RAG_DATA_DIR) or Qdrant collection prefix"
    )


def _dense_mismatch(recorded: str, configured: str) -> IndexModelMismatch:
    built_with = f"the index was built with dense model {recorded!r}"
    return _mismatch(built_with, configured, "RAG_DENSE_MODEL", recorded, "a new one with the new model")


def indexed_dense_model(store: VectorStore) -> str | None:
    """The dense model the index was built with (None for an empty or older index)."""
    value = store.index_info().get(DENSE_MODEL_KEY)
    return str(value) if value else None


def claim_dense_model(store: VectorStore, model: str) -> None:
    """Before a write: record ``model`` on a new index, refuse one built with another model."""
    recorded = indexed_dense_model(store)
    if recorded is None:
        store.record_index_info({DENSE_MODEL_KEY: model})
    elif recorded != model:
        raise _dense_mismatch(recorded, model)


def check_dense_model(store: VectorStore, model: str) -> None:
    """Before a search: refuse to embed queries with another model than the index's."""
    recorded = indexed_dense_model(store)
    if recorded is not None and recorded != model:
        raise _dense_mismatch(recorded, model)


def _sparse_mismatch(recorded: str, configured: str) -> IndexModelMismatch:
    built_with = f"the index's BM25 terms are {recorded!r} (tokenizer/language)"
    return _mismatch(built_with, configured, "RAG_BM25_TOKENIZER", recorded.split("/")[0], "a new one")


def indexed_sparse_terms(store: VectorStore) -> str | None:
    """The BM25 terms (tokenizer/language) the index was built with (None for an empty index)."""
    info = store.index_info()
    value = info.get(SPARSE_TERMS_KEY)
    if value:
        return str(value)
    return LEGACY_SPARSE_TERMS if info.get(DENSE_MODEL_KEY) else None


def claim_sparse_terms(store: VectorStore, terms: str) -> None:
    """Before a write: record ``terms`` on a new index, refuse one built with other terms."""
    recorded = indexed_sparse_terms(store)
    if recorded is not None and recorded != terms:
        raise _sparse_mismatch(recorded, terms)
    if store.index_info().get(SPARSE_TERMS_KEY) != terms:
        store.record_index_info({SPARSE_TERMS_KEY: terms})


def check_sparse_terms(store: VectorStore, terms: str) -> None:
    """Before a search: refuse to encode queries with other terms than the index's."""
    recorded = indexed_sparse_terms(store)
    if recorded is not None and recorded != terms:
        raise _sparse_mismatch(recorded, terms)


CHUNKING_KEY = "chunking"
# What an index written before chunk sizes were recorded was chunked with: the only sizes there were.
LEGACY_CHUNKING = "parent 2000/200, child 400/50"


def chunking_in(info: Mapping[str, Any]) -> str | None:
    """The chunk sizes an index's recorded info says it was written with (None for an empty index)."""
    value = info.get(CHUNKING_KEY)
    if value:
        return str(value)
    return LEGACY_CHUNKING if info.get(DENSE_MODEL_KEY) else None


def indexed_chunking(store: VectorStore) -> str | None:
    """The chunk sizes the index was written with (None for an empty index)."""
    return chunking_in(store.index_info())


def check_chunking(recorded: str | None, chunking: str) -> None:
    """Refuse ``chunking`` for an index ``recorded`` with other sizes: its documents would mix two sizes of parents
    and children (a re-chunk rewrites only what it re-reads)."""
    if recorded is not None and recorded != chunking:
        raise IndexModelMismatch(
            f"the index was written with chunks of {recorded} tokens (size/overlap) but {chunking} are configured "
            "(PARENT_CHUNK_SIZE, PARENT_CHUNK_OVERLAP, CHILD_CHUNK_SIZE, CHILD_CHUNK_OVERLAP): set them back to use "
            "this index, or build a new one with the new sizes in another data folder (--data-dir / RAG_DATA_DIR) "
            "or Qdrant collection prefix"
        )


def claim_chunking(store: VectorStore, chunking: str) -> None:
    """Before a write: record ``chunking`` on a new index, refuse one written with other chunk sizes."""
    check_chunking(indexed_chunking(store), chunking)
    if store.index_info().get(CHUNKING_KEY) != chunking:
        store.record_index_info({CHUNKING_KEY: chunking})


WRITTEN_AT_KEY = "written_at"


def record_written(store: VectorStore, when: datetime | None = None) -> None:
    """After a write: when the index last changed (what a reader reports as its freshness)."""
    store.record_index_info({WRITTEN_AT_KEY: (when or datetime.now(UTC)).isoformat(timespec="seconds")})


def written_at(store: VectorStore) -> str | None:
    """When documents were last written to the index (None: before this was recorded)."""
    value = store.index_info().get(WRITTEN_AT_KEY)
    return str(value) if value else None
