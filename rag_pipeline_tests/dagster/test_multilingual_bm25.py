"""BM25 for Japanese, Chinese and Korean: character bigrams (RAG_BM25_TOKENIZER=cjk-bigram) and Qdrant's
multilingual tokenizer (=multilingual), one encoder for documents and queries, recorded by the index; English,
Japanese, Chinese and Korean threads in one collection, indexed through the real partitioned assets and found by
their own words."""

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
from rag_pipeline.vectors.sparse import Bm25Encoder, Bm25Params, cjk_bigrams, cjk_tokenizer_advice, contains_cjk
from rag_pipeline_tests.kit.data import D1, ts, write_slack_export

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
@pytest.mark.parametrize("tokenizer", ["multilingual", "cjk-bigram"])
def test_a_word_of_a_cjk_document_matches_it_with_a_cjk_tokenizer_only(
    document: str, query: str, tokenizer: str
) -> None:
    cjk = Bm25Encoder(Bm25Params(tokenizer=tokenizer))  # type: ignore[arg-type]
    assert _shared_terms(cjk, query, document) >= 1
    # Korean is written with spaces, so the word tokenizer finds a bare noun only when no particle is attached.
    if document != KO:
        assert _shared_terms(Bm25Encoder(), query, document) == 0
    # Segmented, not one term per sentence: a document has many terms.
    assert len(cjk.encode_documents([document])[0].indices) >= 8


def test_with_bigrams_every_piece_of_a_cjk_run_matches_wherever_a_segmenter_would_cut() -> None:
    """No dictionary decides the terms: any two or more consecutive characters of the document, e.g. the tail of
    one word and the head of the next, are all found in it, and a query shares nothing with a text it is not in."""
    bigram = Bm25Encoder(Bm25Params(tokenizer="cjk-bigram"))
    for document in (JA, KO, ZH):
        terms = set(bigram.encode_documents([document])[0].indices)
        for run in (r for r in document.replace("。", " ").replace(".", " ").split() if len(r) >= 2):
            for start in range(len(run) - 1):
                for end in range(start + 2, len(run) + 1):
                    piece = bigram.encode_query(run[start:end]).indices
                    assert piece and set(piece) <= terms, run[start:end]
    assert _shared_terms(bigram, "ネットワーク", JA) == 0
    assert _shared_terms(bigram, "网络", ZH) == 0
    # The multilingual tokenizer's dictionary splits "設定ファイル" one way in the document …
    assert _shared_terms(Bm25Encoder(Bm25Params(tokenizer="multilingual")), "定フ", JA) == 0


def test_bigrams_fold_full_width_letters_and_half_width_katakana() -> None:
    bigram = Bm25Encoder(Bm25Params(tokenizer="cjk-bigram"))
    assert _shared_terms(bigram, "API", "ＡＰＩのタイムアウト") == 1
    assert _shared_terms(bigram, "サーバー", "ｻｰﾊﾞｰの再起動") == 3  # サー ーバ バー
    assert cjk_bigrams("再起動") == " 再起 起動 "
    assert cjk_bigrams("鍵") == " 鍵 "  # a one-character run stays a term
    # The katakana middle dot separates words: no bigram straddles it.
    assert cjk_bigrams("ジョン・スミス") == " ジョ ョン ・ スミ ミス "


def test_english_is_unchanged_by_bigrams_and_keeps_its_stemming() -> None:
    english = [EN, "Version 2.4.1 crashes: see https://example.org/a_b?c=1 and the e-mail thread (again!)"]
    word, bigram = Bm25Encoder(), Bm25Encoder(Bm25Params(tokenizer="cjk-bigram"))
    assert bigram.encode_documents(english) == word.encode_documents(english)
    assert all(cjk_bigrams(text) == text for text in english)
    for tokenizer in ("word", "multilingual", "cjk-bigram"):
        encoder = Bm25Encoder(Bm25Params(tokenizer=tokenizer))  # type: ignore[arg-type]
        assert _shared_terms(encoder, "backups failing", EN) == 2, tokenizer  # backup(s), fail(s|ing)
    assert Bm25Encoder().terms_id == "word/english"
    assert Bm25Encoder(Bm25Params(tokenizer="multilingual")).model_id.endswith(",tokenizer=multilingual)")
    assert bigram.terms_id == "cjk-bigram/english"
    assert bigram.model_id.endswith(",tokenizer=cjk-bigram)")


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


# The multilingual tokenizer is the runner-up (bench/results/multilingual_dense.json): its run is in the slow suite.
@pytest.mark.parametrize("tokenizer", ["cjk-bigram", pytest.param("multilingual", marks=pytest.mark.slow)])
def test_one_collection_of_four_languages_finds_each_by_its_own_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tokenizer: str
) -> None:
    export = _multilingual_export(tmp_path / "export")
    data = tmp_path / "data"
    # `index` exports DAGSTER_HOME for its process; the other parameter's run must not find this one's runs.
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.setenv("RAG_BM25_TOKENIZER", tokenizer)
    assert main(["index", "--slack-export", str(export), "--data-dir", str(data), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["per_source"]["slack"]["cjk_child_chunks"] == 3
    assert json.loads(captured.out)["documents"] == 4
    assert "warning" not in captured.err
    # A CJK index scores Slack threads whole (issue 53).
    assert json.loads(captured.out)["per_source"]["slack"]["bm25_scored_text"] == "thread"
    # Nobody chose a language: three of the four threads are CJK, so the folder's first index chose the
    # multilingual dense model (the tokenizer was set explicitly and stays), and recorded it.
    language = json.loads(captured.out)["language"]
    assert (language["language"], language["dense_model"], language["bm25_tokenizer"]) == (
        "cjk", "multilingual-e5-small", tokenizer,
    )  # fmt: skip
    assert language["decided_by"] == "sample" and language["chosen_by_this_run"]
    assert (language["sampled"], language["cjk_documents"]) == (4, 3)
    assert json.loads((data / "language.json").read_text())["dense_model"] == "multilingual-e5-small"
    assert "タイムアウト" in _bm25_top(capsys, data, "タイムアウト")
    assert "超时" in _bm25_top(capsys, data, "数据库连接超时")
    assert "초과됩니다" in _bm25_top(capsys, data, "데이터베이스 연결")
    assert "backup" in _bm25_top(capsys, data, "backup quota")
    # Queried with the other tokenizer, the index refuses instead of matching nothing.
    monkeypatch.setenv("RAG_BM25_TOKENIZER", "word")
    assert main(["search", "タイムアウト", "--mode", "bm25", "--data-dir", str(data)]) == 2
    assert f"RAG_BM25_TOKENIZER={tokenizer}" in capsys.readouterr().err


@pytest.mark.slow  # a second index run (15 s); the default suite checks the count and the advice separately
def test_indexing_cjk_text_with_the_word_tokenizer_warns_and_names_the_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    export = _multilingual_export(tmp_path / "export")
    data = tmp_path / "data"
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv("RAG_BM25_TOKENIZER", raising=False)
    # English chosen on purpose (auto would choose CJK for this export, and warn about nothing).
    argv = ["index", "--slack-export", str(export), "--data-dir", str(data), "--json", "--language", "english"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["per_source"]["slack"]["cjk_child_chunks"] == 3
    assert "warning: 3 of 4 slack child chunks contain Japanese, Chinese or Korean text" in captured.err
    assert "RAG_BM25_TOKENIZER=cjk-bigram" in captured.err
    # What the warning is about: a word of the Japanese thread finds nothing in BM25.
    argv = ["search", "タイムアウト", "--mode", "bm25", "--groups", "slack:T0GLOBAL:members", "--json"]
    assert main([*argv, "--data-dir", str(data)]) == 0
    assert all("タイムアウト" not in r["child_text"] for r in json.loads(capsys.readouterr().out)["results"])


def test_the_advice_is_for_a_noticeable_share_of_cjk_chunks_under_the_word_tokenizer_only() -> None:
    assert cjk_tokenizer_advice("word", 0, 500, "slack") is None
    assert cjk_tokenizer_advice("word", 4, 500, "slack") is None  # under 1 %: a stray word
    assert "5 of 500 jira child chunks" in (cjk_tokenizer_advice("word", 5, 500, "jira") or "")
    assert cjk_tokenizer_advice("cjk-bigram", 500, 500, "slack") is None
    assert contains_cjk("見てください") and contains_cjk("서버") and not contains_cjk("naïve café — ½")
