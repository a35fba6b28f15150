"""The reference encoder: a sentence-transformers model from a local folder, run by torch."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from rag_pipeline.vectors.dense.base import LocalEncoder, read_prompts


class SentenceTransformerEncoder(LocalEncoder):
    """A sentence-transformers model from a local folder, run by torch (the reference vectors) on ``device``."""

    backend = "torch"

    def __init__(
        self,
        model_id: str,
        path: str,
        batch_size: int = 32,
        threads: int | None = None,
        device: str = "cpu",
        trust_remote_code: bool = False,
    ) -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        if threads:
            torch.set_num_threads(threads)
        self.model_id = model_id
        self.batch_size = batch_size
        self.device = device
        # trust_remote_code: the folder's own modeling code runs (the loader asks the operator's leave first).
        self._model = SentenceTransformer(path, device=device, trust_remote_code=trust_remote_code)
        self._tokenizer = self._model.tokenizer
        self.prompts = read_prompts(path)
        self._lock = threading.Lock()
        dimension, max_tokens = self._model.get_embedding_dimension(), self._model.max_seq_length
        if dimension is None or max_tokens is None:
            raise TypeError(f"{path}: the model declares no embedding dimension or maximum sequence length")
        self.dimension = int(dimension)
        self.max_tokens = int(max_tokens)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(
                list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
            )
        return np.asarray(vectors, dtype=np.float32)


def resolve_device(device: str) -> str:
    """``auto`` becomes the accelerator torch sees (CUDA, then MPS) or ``cpu``."""
    if device != "auto":
        return device
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    return "mps" if mps is not None and mps.is_available() else "cpu"
