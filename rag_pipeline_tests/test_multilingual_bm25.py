"""BM25 for Japanese, Chinese and Korean: Qdrant's multilingual tokenizer (RAG_BM25_TOKENIZER=multilingual),
one encoder for documents and queries, recorded by the index; English, Japanese and Korean threads in one
collection, indexed through the real partitioned assets and found by their own words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_pipeline.cli import main
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.index_info import (
    IndexModelMismatch,
    claim_sparse_terms,
    indexed_sparse_terms,
)
from rag_pipeline.index.store import CollectionNames
from rag_pipeline.vectors.sparse import Bm25Encoder, Bm25Params
from rag_pipeline_tests.conftest import D1, ts, write_slack_export

JA = "サーバーの再起動後にデータベース接続がタイムアウトします。設定ファイルの接続プールを確認してください。"
KO = "서버를 재시작한 후 데이터베이스 연결이 시간 초과됩니다. 설정 파일의 연결 풀을 확인하세요."
ZH = "服务器重启后数据库连接超时。请检查配置文件中的连接池。"
EN = "The nightly backup job fails on the replica because the disk quota is exhausted."


def _shared_terms(encoder: Bm25Encoder, query: str, document: str) -> int:
    return len(set(encoder.encode_query(query).indices) & set(encoder.encode_documents([document])[0].indices))


@pytest.mark.parametrize(
    ("document", "query"),
    [(JA, "データベース"), (JA, "タイムアウト"), (ZH, "数据库"), (ZH, "配置文件"), (KO, "데이터베이스"), (KO, "설정")],
)
def test_a_word_of_a_cjk_document_matches_it_with_the_multilingual_tokenizer_only(document: str, query: str) -> None:
    multilingual = Bm25Encoder(Bm25Params(tokenizer="multilingual"))
    assert _shared_terms(multilingual, query, document) >= 1
    # Korean is written with spaces, so the word tokenizer finds a bare noun only when no particle is attached.
    if document != KO:
        assert _shared_terms(Bm25Encoder(), query, document) == 0
    # Segmented, not one term per sentence: a document has many terms.
    assert len(multilingual.encode_documents([document])[0].indices) >= 8


def test_english_keeps_its_stemming_with_either_tokenizer() -> None:
    for tokenizer in ("word", "multilingual"):
        encoder = Bm25Encoder(Bm25Params(tokenizer=tokenizer))
        assert _shared_terms(encoder, "backups failing", EN) == 2, tokenizer  # backup(s), fail(s|ing)
    assert Bm25Encoder().terms_id == "word/english"
    assert Bm25Encoder(Bm25Params(tokenizer="multilingual")).model_id.endswith(",tokenizer=multilingual)")


def test_the_index_records_its_terms_and_refuses_others(tmp_path: Path) -> None:
    with EdgeVectorStore(tmp_path / "new", CollectionNames.with_prefix("t")) as store:
        store.create_collections(4)
        assert indexed_sparse_terms(store) is None
        claim_sparse_terms(store, "multilingual/english")
        assert indexed_sparse_terms(store) == "multilingual/english"
        with pytest.raises(IndexModelMismatch, match="RAG_BM25_TOKENIZER=multilingual"):
            claim_sparse_terms(store, "word/english")
    # An index written before the terms were recorded (it records its dense model) holds the word tokenizer's.
    with EdgeVectorStore(tmp_path / "old", CollectionNames.with_prefix("t")) as store:
        store.create_collections(4)
        store.record_index_info({"dense_model": "all-MiniLM-L6-v2"})
        assert indexed_sparse_terms(store) == "word/english"
        with pytest.raises(IndexModelMismatch):
            claim_sparse_terms(store, "multilingual/english")


def _multilingual_export(root: Path) -> Path:
    day = {
        "2024-03-01": [
            {"type": "message", "user": "U1", "text": JA, "ts": ts(D1 + 100)},
            {"type": "message", "user": "U2", "text": KO, "ts": ts(D1 + 200)},
            {"type": "message", "user": "U3", "text": ZH, "ts": ts(D1 + 300)},
            {"type": "message", "user": "U1", "text": EN, "ts": ts(D1 + 400)},
        ]
    }
    export = write_slack_export(root, day)
    users = json.loads((export / "users.json").read_text())
    (export / "users.json").write_text(json.dumps([{**u, "team_id": "T0GLOBAL"} for u in users]))
    return export


def _bm25_top(capsys: pytest.CaptureFixture[str], data: Path, query: str) -> str:
    argv = ["search", query, "--mode", "bm25", "--groups", "slack:T0GLOBAL:members", "--json", "--data-dir", str(data)]
    assert main(argv) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert results, query
    return results[0]["child_text"]


def test_one_collection_of_four_languages_finds_each_by_its_own_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    export = _multilingual_export(tmp_path / "export")
    data = tmp_path / "data"
    monkeypatch.setenv("RAG_BM25_TOKENIZER", "multilingual")
    assert main(["index", "--slack-export", str(export), "--data-dir", str(data), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == 4
    assert "タイムアウト" in _bm25_top(capsys, data, "タイムアウト")
    assert "超时" in _bm25_top(capsys, data, "数据库连接超时")
    assert "초과됩니다" in _bm25_top(capsys, data, "데이터베이스 연결")
    assert "backup" in _bm25_top(capsys, data, "backup quota")
    # Queried with the other tokenizer, the index refuses instead of matching nothing.
    monkeypatch.setenv("RAG_BM25_TOKENIZER", "word")
    assert main(["search", "タイムアウト", "--mode", "bm25", "--data-dir", str(data)]) == 2
    assert "RAG_BM25_TOKENIZER=multilingual" in capsys.readouterr().err
