"""The language a data folder's index is built for: chosen from a sample of its documents when nobody said,
recorded, kept by later runs and later commands, overridden by RAG_LANGUAGE / --language, and never by a model
set explicitly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_pipeline.env_values import SettingsError
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.index_info import IndexModelMismatch, claim_dense_model, claim_sparse_terms
from rag_pipeline.index.store import CollectionNames
from rag_pipeline.runs.language import decide_language
from rag_pipeline.settings import Settings
from rag_pipeline.text.language import (
    CJK_DOCUMENT_SHARE,
    choose_language,
    chosen,
    is_cjk_text,
    read_choice,
    record_choice,
)

JA = "サーバーの再起動後にデータベース接続がタイムアウトします。"
EN = "The nightly backup job fails on the replica because the disk quota is exhausted."


def test_a_document_is_cjk_by_the_share_of_its_letters() -> None:
    assert is_cjk_text(JA) and is_cjk_text("서버를 재시작한 후") and is_cjk_text("服务器重启后数据库连接超时")
    # A Japanese question quoting an English error line is still Japanese; an English line naming one
    # Japanese word, or full of digits and symbols, is not.
    assert is_cjk_text(f"{JA} Error: connection refused (ECONNREFUSED) at 10.0.0.1:5432")
    assert not is_cjk_text(f"{EN} Ask 田中 about it.") and not is_cjk_text("½ — 42 %") and not is_cjk_text("")


def test_the_folder_goes_cjk_from_a_small_share_of_cjk_documents() -> None:
    english = [EN] * 100
    assert choose_language(english).language == "english"
    threshold = int(CJK_DOCUMENT_SHARE * 100)
    just_under = [JA] * (threshold - 1) + [EN] * (101 - threshold)
    assert choose_language(just_under).language == "english"
    mixed = [JA] * threshold + [EN] * (100 - threshold)
    picked = choose_language(mixed)
    assert (picked.language, picked.dense_model, picked.bm25_tokenizer) == (
        "cjk", "multilingual-e5-small", "cjk-bigram",
    )  # fmt: skip
    assert (picked.sampled, picked.cjk_documents, picked.decided_by) == (100, threshold, "sample")
    # A big folder is sampled evenly, not by its head: Japanese documents at the end still count.
    tail = [EN] * 9000 + [JA] * 1000
    assert choose_language(tail, sample=500).cjk_documents == 50


def test_a_choice_round_trips_and_a_damaged_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "language.json"
    assert read_choice(path) is None
    record_choice(path, chosen("cjk", "setting"))
    assert read_choice(path) == chosen("cjk", "setting").__class__(**json.loads(path.read_text()))
    path.write_text('{"language": "klingon"}')
    with pytest.raises(SettingsError, match=str(path)):
        read_choice(path)


def _settings(data: Path, **env: str) -> Settings:
    return Settings.from_env({"RAG_DATA_DIR": str(data), **env})


def test_settings_apply_the_recorded_choice_unless_a_language_or_a_model_is_set(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert (_settings(data).dense_model, _settings(data).bm25_tokenizer) == ("all-MiniLM-L6-v2", "word")
    assert _settings(data).language_undecided()
    record_choice(data / "language.json", chosen("cjk", "sample"))
    settings = _settings(data)
    assert (settings.dense_model, settings.bm25_tokenizer) == ("multilingual-e5-small", "cjk-bigram")
    assert not settings.language_undecided()
    # Another folder has its own choice (none yet): English defaults, not the first folder's models.
    other = settings.with_data_dir(tmp_path / "other")
    assert (other.dense_model, other.bm25_tokenizer) == ("all-MiniLM-L6-v2", "word")
    assert other.with_data_dir(data).dense_model == "multilingual-e5-small"
    # RAG_LANGUAGE sets both models; a model set by its own variable always wins.
    assert _settings(data, RAG_LANGUAGE="english").dense_model == "all-MiniLM-L6-v2"
    pinned = _settings(data, RAG_BM25_TOKENIZER="multilingual")
    assert (pinned.dense_model, pinned.bm25_tokenizer) == ("multilingual-e5-small", "multilingual")
    assert _settings(tmp_path / "x").with_language("cjk").dense_model == "multilingual-e5-small"


def _texts(seen: list[str], texts: list[str]):  # type: ignore[no-untyped-def]
    def read() -> list[str]:
        seen.append("read")
        return texts

    return read


def test_the_first_index_decides_and_later_runs_keep_the_choice(tmp_path: Path) -> None:
    data, seen = tmp_path / "data", []
    settings, choice = decide_language(_settings(data), _texts(seen, [JA, JA, EN]))
    assert choice is not None and choice.language == "cjk" and seen == ["read"]
    assert settings.dense_model == "multilingual-e5-small"
    # Later: the recorded choice, without reading the documents again, even if they are English now.
    again, kept = decide_language(_settings(data), _texts(seen, [EN] * 10))
    assert kept == choice and seen == ["read"] and again.dense_model == "multilingual-e5-small"
    # Asking for the other language on this folder is refused before anything is written, naming both.
    with pytest.raises(IndexModelMismatch, match=r"built for cjk .* not english"):
        decide_language(_settings(data, RAG_LANGUAGE="english"), _texts(seen, [EN]))


def test_an_explicit_language_is_recorded_without_sampling(tmp_path: Path) -> None:
    seen: list[str] = []
    _, choice = decide_language(_settings(tmp_path, RAG_LANGUAGE="cjk"), _texts(seen, [EN]))
    assert choice is not None and (choice.language, choice.decided_by) == ("cjk", "setting") and seen == []
    assert _settings(tmp_path).bm25_tokenizer == "cjk-bigram"  # kept by a later run that says auto
    # Both models set explicitly: nothing to choose, nothing recorded.
    both = {"RAG_DENSE_MODEL": "all-MiniLM-L6-v2", "RAG_BM25_TOKENIZER": "word"}
    assert decide_language(_settings(tmp_path / "p", **both), _texts(seen, [JA]))[1] is None
    assert not (tmp_path / "p" / "language.json").exists() and seen == []


def test_an_index_built_before_the_choice_existed_keeps_its_models(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with EdgeVectorStore(data / "qdrant", CollectionNames.with_prefix("rag")) as store:
        store.create_collections(4)
        claim_dense_model(store, "all-MiniLM-L6-v2")
        claim_sparse_terms(store, "word/english")
    seen: list[str] = []
    settings, choice = decide_language(_settings(data), _texts(seen, [JA] * 10))
    assert choice is not None and (choice.language, choice.decided_by) == ("english", "existing index")
    assert seen == [] and settings.dense_model == "all-MiniLM-L6-v2"
