"""The language a data folder's index is built for, decided once before its first write and recorded
(:mod:`rag_pipeline.text.language`): from ``RAG_LANGUAGE`` / ``--language`` when set, from an index already in
the folder (built before the choice was recorded), else from a sample of the documents about to be indexed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from rag_pipeline.composition import store_location
from rag_pipeline.index.index_info import IndexModelMismatch, indexed_dense_model, indexed_sparse_terms
from rag_pipeline.index.opening import open_vector_store
from rag_pipeline.settings import Settings
from rag_pipeline.text.language import (
    LanguageChoice,
    choose_language,
    chosen,
    language_of_models,
    record_choice,
)


def decide_language(settings: Settings, texts: Callable[[], Sequence[str]]) -> tuple[Settings, LanguageChoice | None]:
    """The settings to index with and the choice in force (None: both models set explicitly, nothing to
    choose). Decides and records the choice when the folder has none; ``texts()`` is called only then."""
    recorded = settings.recorded_language()
    if recorded is not None:
        if settings.language not in ("auto", recorded.language):
            raise IndexModelMismatch(
                f"this data folder's index is built for {recorded.language} ({settings.paths.language}), not "
                f"{settings.language} (--language / RAG_LANGUAGE): index {settings.language} text into another "
                "data folder (--data-dir), or leave the language to the folder"
            )
        return settings, recorded
    if settings.dense_model_pinned and settings.bm25_tokenizer_pinned:
        return settings, None
    if settings.language != "auto":
        choice = chosen(settings.language, "setting")
    else:
        choice = _from_existing_index(settings) or choose_language(texts())
    # What the index is written with: a model set explicitly stays (with_language_applied keeps it too).
    choice = replace(
        choice,
        dense_model=settings.dense_model if settings.dense_model_pinned else choice.dense_model,
        bm25_tokenizer=settings.bm25_tokenizer if settings.bm25_tokenizer_pinned else choice.bm25_tokenizer,
    )
    record_choice(settings.paths.language, choice)
    return settings.with_language_applied(), choice


def _from_existing_index(settings: Settings) -> LanguageChoice | None:
    """The models of an index already in the folder (written before choices were recorded): it can only be
    searched with them, so they are the choice."""
    if not settings.qdrant.url and not settings.has_embedded_index():
        return None
    location = store_location(settings)
    store = open_vector_store(location)
    try:
        dense, terms = indexed_dense_model(store), indexed_sparse_terms(store)
    finally:
        store.close()
    if dense is None:
        return None
    tokenizer = (terms or "word").split("/")[0]
    language = language_of_models(dense, tokenizer)
    return LanguageChoice(language, dense, tokenizer, "existing index", decided_at=chosen(language, "").decided_at)
