"""The index remembers which dense model wrote it, so nothing queries it with another model's vectors.

Vectors of two models live in different spaces: a query embedded by model B against points written by
model A returns noise without any error (and the vector and hybrid arms quietly degrade). The first
write records the model; every later write and every search checks it.
"""

from __future__ import annotations

from rag_pipeline.index.store import VectorStore

DENSE_MODEL_KEY = "dense_model"


class IndexModelMismatch(ValueError):
    """The configured dense model is not the one the index was built with."""


def _mismatch(recorded: str, configured: str) -> IndexModelMismatch:
    return IndexModelMismatch(
        f"the index was built with dense model {recorded!r} but {configured!r} is configured (RAG_DENSE_MODEL): "
        f"set RAG_DENSE_MODEL={recorded} to use this index, or build a new one with the new model in another "
        "data folder (--data-dir / RAG_DATA_DIR) or Qdrant collection prefix"
    )


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
        raise _mismatch(recorded, model)


def check_dense_model(store: VectorStore, model: str) -> None:
    """Before a search: refuse to embed queries with another model than the index's."""
    recorded = indexed_dense_model(store)
    if recorded is not None and recorded != model:
        raise _mismatch(recorded, model)
