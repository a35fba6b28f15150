"""Local Matryoshka models (``<model>@<N>``: the first N dimensions, renormalized) where the model card says the model
was trained for it, refused with the reason elsewhere; and a folder whose configuration names code of its own,
loaded only with the operator's leave (RAG_DENSE_TRUST_REMOTE_CODE). The folders are the bundled all-MiniLM-L6-v2's
files with a card or a config of the kind such models ship (its weights, linked, not a Matryoshka model's: the
checks are of the loader's behaviour, not of ranking quality, which bench/matryoshka.py measures)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from rag_pipeline.vectors.dense import load as dense
from rag_pipeline.vectors.dense.load import RemoteCodeRefused, load_dense_encoder, remote_code_of
from rag_pipeline.vectors.dense.matryoshka import (
    NotMatryoshka,
    TruncatedEncoder,
    card_dimensions,
    split_dimensions,
    truncate_normalized,
)

TEXTS = ["how do I reset the vpn token", "kernel panic after the upgrade"]
# What sentence-transformers writes into the card of a model trained with MatryoshkaLoss.
MATRYOSHKA_CARD = """---
library_name: sentence-transformers
tags:
- sentence-transformers
- loss:MatryoshkaLoss
---
### MatryoshkaLoss
```json
{"loss": "MultipleNegativesRankingLoss", "matryoshka_dims": [384, 256, 128, 64], "n_dims_per_step": -1}
```
"""
REMOTE_MODULE = '''"""A model class of the folder's own, as remote-code models ship one."""
from transformers import BertConfig, BertModel


class FolderBertConfig(BertConfig):
    model_type = "bert"


class FolderBertModel(BertModel):
    config_class = FolderBertConfig
'''


def _minilm_copy(target: Path) -> Path:
    """The bundled model's folder: small files copied (they are edited), the weights linked."""
    source = Path(dense.minilm_path())
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("model.safetensors"))
    (target / "model.safetensors").symlink_to(source / "model.safetensors")
    return target


@pytest.fixture(autouse=True)
def fresh_loader():
    dense._load_local_encoder.cache_clear()
    yield
    dense._load_local_encoder.cache_clear()


def test_a_name_splits_into_model_and_dimensions_and_a_cut_is_unit_length() -> None:
    assert split_dimensions("all-MiniLM-L6-v2@256") == ("all-MiniLM-L6-v2", 256)
    assert split_dimensions("/models/e5@v2") == ("/models/e5@v2", None)
    assert split_dimensions("all-MiniLM-L6-v2") == ("all-MiniLM-L6-v2", None)
    cut = truncate_normalized(np.array([[3.0, 4.0, 12.0], [0.0, 0.0, 1.0]]), 2)
    assert np.allclose(cut, [[0.6, 0.8], [0.0, 0.0]])  # a row with nothing left stays zero, never NaN


def test_a_bundled_model_is_not_matryoshka_and_is_refused_before_it_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("loaded a model the card refuses")

    monkeypatch.setattr(dense, "SentenceTransformerEncoder", never)
    with pytest.raises(NotMatryoshka, match="not a Matryoshka model"):
        load_dense_encoder("all-MiniLM-L6-v2@256", backend="torch", device="cpu", model_cache=tmp_path)
    assert card_dimensions(dense.minilm_path()) == (False, ())


def test_a_matryoshka_folder_gives_its_first_dimensions_renormalized(tmp_path: Path) -> None:
    folder = _minilm_copy(tmp_path / "matryoshka-model")
    (folder / "README.md").write_text(MATRYOSHKA_CARD)
    assert card_dimensions(folder) == (True, (384, 256, 128, 64))
    full = load_dense_encoder(str(folder), backend="torch", device="cpu", model_cache=tmp_path)
    cut = load_dense_encoder(f"{folder}@256", backend="torch", device="cpu", model_cache=tmp_path)
    assert isinstance(cut, TruncatedEncoder) and cut.dimension == 256 and cut.model_id == f"{full.model_id}@256"
    vectors = cut.encode_queries(TEXTS)
    assert vectors.shape == (2, 256) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    whole = full.encode_queries(TEXTS)
    assert np.allclose(vectors, whole[:, :256] / np.linalg.norm(whole[:, :256], axis=1, keepdims=True), atol=1e-5)
    assert cut.count_tokens("vpn") == full.count_tokens("vpn") and cut.backend == "torch"
    with pytest.raises(NotMatryoshka, match="trained for 384, 256, 128, 64 dimensions"):
        load_dense_encoder(f"{folder}@200", backend="torch", device="cpu", model_cache=tmp_path)
    with pytest.raises(NotMatryoshka, match="at least 1"):
        load_dense_encoder(f"{folder}@0", backend="torch", device="cpu", model_cache=tmp_path)


def test_remote_code_loads_only_with_the_operators_leave(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "hf_modules"))
    folder = _minilm_copy(tmp_path / "remote-code-model")
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "folder_bert.FolderBertConfig", "AutoModel": "folder_bert.FolderBertModel"}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "folder_bert.py").write_text(REMOTE_MODULE)
    assert remote_code_of(folder) == ["folder_bert.FolderBertConfig", "folder_bert.FolderBertModel"]
    with pytest.raises(RemoteCodeRefused, match="RAG_DENSE_TRUST_REMOTE_CODE=true"):
        load_dense_encoder(str(folder), backend="auto", device="cpu", model_cache=tmp_path)
    with pytest.raises(ValueError, match="openvino backend cannot convert it"):
        load_dense_encoder(str(folder), backend="openvino", device="cpu", model_cache=tmp_path, trust_remote_code=True)
    allowed = load_dense_encoder(
        str(folder), backend="auto", device="cpu", model_cache=tmp_path, trust_remote_code=True
    )
    assert type(allowed._model[0].auto_model).__name__ == "FolderBertModel"  # the folder's own class ran
    stock = load_dense_encoder(str(_minilm_copy(tmp_path / "stock")), backend="torch", device="cpu")
    assert np.allclose(allowed.encode_queries(TEXTS), stock.encode_queries(TEXTS), atol=1e-5)
