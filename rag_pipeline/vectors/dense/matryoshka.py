"""Shorter vectors from a local Matryoshka model: ``<model>@256`` keeps the first 256 dimensions of each vector and
scales it back to unit length, as ``openai:<model>@256`` asks OpenAI's models for.

Only a model trained for it (Matryoshka representation learning) keeps its ranking when cut: its model card says
so (sentence-transformers writes ``MatryoshkaLoss`` and the trained ``matryoshka_dims`` into the cards it
generates; nomic, mxbai, arctic-embed and others name it in their cards). A model whose card does not is refused
with the reason; cutting one anyway is an experiment (``bench/matryoshka.py``), not a setting. The bundled models
(all-MiniLM-L6-v2, multilingual-e5-small) are not Matryoshka models.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag_pipeline.vectors.dense.base import DenseEncoder

_SUFFIX = re.compile(r"^(?P<model>.+)@(?P<dims>\d+)$")
_CARD_DIMS = re.compile(r"matryoshka_dims[\"']?\s*[:=]\s*\[(?P<dims>[\d,\s]+)\]", re.IGNORECASE)


class NotMatryoshka(ValueError):
    """A model asked for fewer dimensions whose card does not say it was trained to give them."""


def split_dimensions(name: str) -> tuple[str, int | None]:
    """``all-MiniLM-L6-v2@256`` -> (``all-MiniLM-L6-v2``, 256); a name without ``@<digits>`` -> (name, None)."""
    found = _SUFFIX.match(name)
    if found is None:
        return name, None
    return found["model"], int(found["dims"])


def card_dimensions(folder: str | Path) -> tuple[bool, tuple[int, ...]]:
    """Whether the folder's model card (README.md) says the model is a Matryoshka model, and the dimensions it
    lists as trained (``matryoshka_dims``; empty when it names none)."""
    card = Path(folder) / "README.md"
    text = card.read_text(encoding="utf-8", errors="replace") if card.exists() else ""
    if "matryoshka" not in text.lower():
        return False, ()
    listed = _CARD_DIMS.search(text)
    dims = tuple(sorted({int(d) for d in re.findall(r"\d+", listed["dims"])}, reverse=True)) if listed else ()
    return True, dims


def check_dimensions(model_id: str, folder: str | Path, wanted: int, full: int | None = None) -> None:
    """Refuse ``wanted`` dimensions of a model that cannot give them (NotMatryoshka, saying why): checked from the
    card before the model is loaded, and against its ``full`` dimension once it is."""
    supported, dims = card_dimensions(folder)
    if not supported:
        raise NotMatryoshka(
            f"{model_id} is not a Matryoshka model (its model card does not say it was trained for shorter "
            f"vectors), so its first {wanted} dimensions would not rank as the whole vector does: use the model "
            "without @<dimensions>, or a Matryoshka-trained model folder"
        )
    if wanted < 1:
        raise NotMatryoshka(f"{model_id}: @{wanted} asks for no dimensions (at least 1)")
    if full is not None and wanted > full:
        raise NotMatryoshka(f"{model_id} gives {full} dimensions: @{wanted} must be 1..{full}")
    if dims and wanted not in dims:
        raise NotMatryoshka(
            f"{model_id} was trained for {', '.join(map(str, dims))} dimensions (its model card): @{wanted} is not one"
        )


def truncate_normalized(vectors: np.ndarray, dims: int) -> np.ndarray:
    """The first ``dims`` of each row, scaled back to unit length (a zero row stays zero)."""
    cut = np.asarray(vectors, dtype=np.float32)[:, :dims]
    norms = np.linalg.norm(cut, axis=1, keepdims=True)
    unit: np.ndarray = np.divide(cut, norms, out=np.zeros_like(cut), where=norms > 0)
    return unit


class TruncatedEncoder:
    """``inner``'s vectors cut to their first ``dims`` and renormalized. The model id carries ``@<dims>``, so the
    embedding cache and the index's model claim never mix the cut vectors with the whole ones."""

    def __init__(self, inner: DenseEncoder, dims: int) -> None:
        self.inner = inner
        self.dims = dims
        self.model_id = f"{inner.model_id}@{dims}"
        self.dimension = dims
        self.max_tokens = inner.max_tokens

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        return truncate_normalized(self.inner.encode_documents(texts), self.dims)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return truncate_normalized(self.inner.encode_queries(texts), self.dims)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def __getattr__(self, name: str) -> Any:
        # The backend's facts (backend, precision, device, prompts) for run metadata are the inner encoder's.
        if name == "inner":  # not set yet (a copy being built): no recursion through it
            raise AttributeError(name)
        return getattr(self.inner, name)
