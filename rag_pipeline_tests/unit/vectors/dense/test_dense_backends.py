"""Dense backends: OpenVINO gives torch's vectors, converts once, falls back to torch; device selection."""

from __future__ import annotations

import gzip
import itertools
import json
import logging
import sys
from pathlib import Path

import numpy as np
import pytest

from rag_pipeline.connectors.jira.settings import BUNDLED_JIRA_DUMP
from rag_pipeline.settings import Settings, SettingsError
from rag_pipeline.vectors.dense import load as dense
from rag_pipeline.vectors.dense import openvino as openvino_dense
from rag_pipeline.vectors.dense.base import encoder_backend
from rag_pipeline.vectors.dense.load import load_dense_encoder
from rag_pipeline.vectors.dense.openvino import COSINE_TOLERANCE, OpenVinoEncoder, UnsupportedModel
from rag_pipeline.vectors.dense.torch import SentenceTransformerEncoder, resolve_device
from rag_pipeline_tests.kit.tokenizer_checks import assert_pads_as_the_tokenizer


def _jira_texts(n: int) -> list[str]:
    """Summaries and descriptions of the bundled Jira dump (real text, in the repository): half the longest of
    its first 400 issues (past the model's 256 tokens), half in dump order."""
    texts = []
    with gzip.open(BUNDLED_JIRA_DUMP, "rt", encoding="utf-8") as handle:
        for line in itertools.islice(handle, 400):
            fields = json.loads(line)["fields"]
            if isinstance(fields.get("description"), str):
                texts.append(f"{fields['summary']}\n{fields['description']}")
    longest = sorted(texts, key=len, reverse=True)[: n // 2]
    return longest + [t for t in texts if t not in longest][: n - len(longest)]


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def openvino_encoder(model_cache: Path) -> OpenVinoEncoder:
    return OpenVinoEncoder("all-MiniLM-L6-v2", dense.minilm_path(), model_cache)


def test_openvino_gives_the_reference_vectors_within_tolerance(openvino_encoder: OpenVinoEncoder) -> None:
    reference = SentenceTransformerEncoder("all-MiniLM-L6-v2", dense.minilm_path())
    # Whole issues, several longer than the model's 256 tokens: truncation must match too.
    texts = [*_jira_texts(40), "", "x", "日本語のテキストも同じトークナイザで"]
    ours, theirs = openvino_encoder.encode_documents(texts), reference.encode_documents(texts)
    assert ours.shape == theirs.shape == (len(texts), 384)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosine = (ours * theirs).sum(axis=1)
    assert cosine.min() >= COSINE_TOLERANCE, cosine.min()
    assert any(reference.count_tokens(t) > reference.max_tokens for t in texts)
    assert (openvino_encoder.max_tokens, openvino_encoder.dimension) == (reference.max_tokens, reference.dimension)
    assert [openvino_encoder.count_tokens(t) for t in texts] == [reference.count_tokens(t) for t in texts]
    # Batch composition (sorted by length, padded per batch, batches run on parallel streams and finish in
    # any order) never changes a text's vector nor puts it in another text's row.
    alone = np.vstack([openvino_encoder.encode_documents([t]) for t in texts])
    assert (alone * ours).sum(axis=1).min() > 0.99999


def test_a_failure_in_bulk_work_reaches_the_caller_and_leaves_nothing_running(
    openvino_encoder: OpenVinoEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bulk batches run on parallel streams: when one fails, the caller gets that error only after every batch
    already started has finished, so the next call never finds a request still busy."""
    openvino_encoder.encode_documents(_jira_texts(16))
    assert "THROUGHPUT" in openvino_encoder._compiled  # bulk work took the streamed path
    requests = openvino_encoder._stream_requests
    assert requests and len(requests) >= 2
    # One batch more than it takes to start every request and restart the first.
    texts = _jira_texts(openvino_encoder.batch_size * (len(requests) + 2))
    expected = openvino_encoder.encode_documents(texts)
    padded, calls = openvino_encoder._padded, []

    def fail_while_a_batch_runs(encoded: object, rows: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
        calls.append(len(rows))
        if len(calls) == len(requests) + 2:  # every slot was started, one of them twice: a batch is running
            raise RuntimeError("padding failed on a batch")
        return padded(encoded, rows)

    with monkeypatch.context() as patch:
        patch.setattr(openvino_encoder, "_padded", fail_while_a_batch_runs)
        with pytest.raises(RuntimeError, match="padding failed"):
            openvino_encoder.encode_documents(texts)
    assert all(request.wait_for(0) for request in requests)  # wait_for(0): False while a request runs
    assert np.allclose(openvino_encoder.encode_documents(texts), expected, atol=1e-6)


def test_batches_are_formed_by_model_tokens_so_little_is_padding(
    openvino_encoder: OpenVinoEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Japanese takes a model token per character, English about one per word: ordered by characters (as
    sentence-transformers orders them) a batch pairs texts of unlike token counts; ordered by tokens, texts of
    like length share a batch. The vectors do not depend on the order."""
    texts = ["word " * 30, "日本" * 45, "word " * 16, "日本" * 30]  # characters: 150, 90, 80, 60
    tokens = [openvino_encoder.count_tokens(t) for t in texts]
    assert tokens[1] > tokens[3] > tokens[0] > tokens[2]
    padded, batches = openvino_encoder._padded, []

    def recording(encoded: object, rows: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
        inputs, mask = padded(encoded, rows)
        batches.append(mask.shape)
        return inputs, mask

    monkeypatch.setattr(openvino_encoder, "batch_size", 2)
    monkeypatch.setattr(openvino_encoder, "_padded", recording)
    vectors = openvino_encoder.encode_documents(texts)
    by_tokens = 2 * tokens[1] + 2 * tokens[0]  # (90 and 60 characters), (150 and 80)
    by_characters = 2 * tokens[1] + 2 * tokens[3]  # (150 and 90 characters), (80 and 60)
    assert sum(rows * width for rows, width in batches) == by_tokens < by_characters
    alone = np.vstack([openvino_encoder.encode_documents([t]) for t in texts])
    assert (alone * vectors).sum(axis=1).min() > 0.99999


def test_batches_are_padded_as_the_tokenizer_pads_on_either_side() -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(dense.minilm_path())
    assert_pads_as_the_tokenizer(tokenizer, ["input_ids", "attention_mask", "token_type_ids"])
    tokenizer.padding_side = "left"
    assert_pads_as_the_tokenizer(tokenizer, ["input_ids", "attention_mask", "token_type_ids"])


def test_bulk_work_runs_one_batch_at_a_time_where_throughput_mode_does_not_compile(
    model_cache: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    encoder = OpenVinoEncoder("all-MiniLM-L6-v2", dense.minilm_path(), model_cache)
    compiled_for = encoder._compiled_for

    def no_streams(hint: str) -> object:
        if hint == "THROUGHPUT":
            raise RuntimeError("streams are not supported here")
        return compiled_for(hint)

    monkeypatch.setattr(encoder, "_compiled_for", no_streams)
    texts = _jira_texts(20)
    with caplog.at_level(logging.WARNING, logger="rag_pipeline.vectors.dense.openvino"):
        vectors = encoder.encode_documents(texts)
    assert "throughput mode unavailable" in caplog.text and "streams are not supported" in caplog.text
    alone = np.vstack([encoder.encode_documents([t]) for t in texts[:3]])
    assert (alone * vectors[:3]).sum(axis=1).min() > 0.99999


def test_the_conversion_happens_once_per_cache_folder(
    openvino_encoder: OpenVinoEncoder, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    converted = [p for p in model_cache.iterdir() if (p / "model.xml").exists()]
    assert len(converted) == 1 and "openvino" in converted[0].name
    assert not [p for p in model_cache.iterdir() if ".partial" in p.name]

    def refuse(*args: object) -> None:
        raise AssertionError("converted again")

    monkeypatch.setattr(openvino_dense, "_convert", refuse)
    again = OpenVinoEncoder("all-MiniLM-L6-v2", dense.minilm_path(), model_cache)
    assert np.allclose(again.encode_queries(["hello"]), openvino_encoder.encode_queries(["hello"]), atol=1e-6)


def test_auto_falls_back_to_torch_when_openvino_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "openvino", None)  # import fails as if the package were not installed
    dense._load_local_encoder.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="rag_pipeline.vectors.dense.load"):
            encoder = load_dense_encoder(backend="auto", device="cpu", model_cache=tmp_path)
        assert isinstance(encoder, SentenceTransformerEncoder)
        assert encoder_backend(encoder) == "torch (cpu)"
        assert "OpenVINO unavailable" in caplog.text and "ModuleNotFoundError" in caplog.text
        with pytest.raises(ImportError):
            load_dense_encoder(backend="openvino", device="cpu", model_cache=tmp_path)
    finally:
        dense._load_local_encoder.cache_clear()


def test_auto_picks_an_accelerator_torch_sees(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == "cuda"
    assert resolve_device("cpu") == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert resolve_device("auto") == "mps"
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu"


def test_openvino_on_an_accelerator_and_unknown_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="runs on the CPU, not cuda"):
        load_dense_encoder(backend="openvino", device="cuda", model_cache=tmp_path)
    with pytest.raises(ValueError, match="unknown dense backend 'onnx'"):
        load_dense_encoder(backend="onnx")
    with pytest.raises(ValueError, match="unknown dense device 'tpu'"):
        load_dense_encoder(device="tpu")


def test_a_pipeline_openvino_cannot_reproduce_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "max-pooled"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            ]
        )
    )
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": True})
    )
    with pytest.raises(UnsupportedModel, match="max-pooled: pooling"):
        openvino_dense._pipeline(folder)


def test_backend_and_device_come_from_the_environment(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {"RAG_DATA_DIR": str(tmp_path), "RAG_DENSE_BACKEND": "torch", "RAG_DENSE_DEVICE": "cpu"}
    )
    assert (settings.dense_backend, settings.dense_device) == ("torch", "cpu")
    # One conversion serves every data folder: the user's cache folder unless RAG_MODEL_CACHE says otherwise.
    assert Settings.from_env({"RAG_DATA_DIR": str(tmp_path), "XDG_CACHE_HOME": "/x"}).model_cache == Path(
        "/x/rag_pipeline/models"
    )
    moved = Settings.from_env({"RAG_DATA_DIR": str(tmp_path), "RAG_MODEL_CACHE": str(tmp_path / "m")})
    assert moved.model_cache == tmp_path / "m"
    assert isinstance(settings, Settings)
    with pytest.raises(SettingsError, match="RAG_DENSE_BACKEND"):
        Settings.from_env({"RAG_DATA_DIR": str(tmp_path), "RAG_DENSE_BACKEND": "onnx"})
