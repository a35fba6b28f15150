"""What every dense encoder is: the ``DenseEncoder`` protocol, the local backends' shared tokenization and
prompts, and the run metadata an encoder reports (backend, hosted spend)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

# Weights come from installed packages, never from a model hub: make any accidental hub access fail
# fast instead of hanging on a network that is not there.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class DenseEncoder(Protocol):
    """Turns texts into unit-length vectors."""

    model_id: str
    dimension: int
    max_tokens: int

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def count_tokens(self, text: str) -> int: ...


class LocalEncoder:
    """What the local backends share: lengths are counted in the model's own tokenizer, and a model that
    declares query/passage prompts (E5: ``query: `` / ``passage: ``) gets them in front of each text; other
    models encode documents and queries alike. Subclasses set ``_tokenizer`` and implement ``_encode``."""

    _tokenizer: Any
    dimension: int
    # (query prefix, document prefix), from the folder's config_sentence_transformers.json
    prompts: tuple[str, str] = ("", "")

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        prefix = self.prompts[1]
        return self._encode([prefix + t for t in texts] if prefix else texts)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        prefix = self.prompts[0]
        return self._encode([prefix + t for t in texts] if prefix else texts)

    def count_tokens(self, text: str) -> int:
        """Length in the model's own tokenizer as a document is encoded: special tokens and the document
        prompt included (what max_seq_length counts)."""
        return len(self._tokenizer(self.prompts[1] + text, add_special_tokens=True, truncation=False)["input_ids"])

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        raise NotImplementedError


def read_prompts(folder: str | Path) -> tuple[str, str]:
    """The (query, document) prompts a sentence-transformers folder declares; empty strings when none."""
    config = Path(folder) / "config_sentence_transformers.json"
    prompts = json.loads(config.read_text()).get("prompts") or {} if config.exists() else {}
    return str(prompts.get("query", "")), str(prompts.get("passage", prompts.get("document", "")))


def encoder_backend(encoder: DenseEncoder) -> str:
    """How the vectors were computed, for run metadata: ``openvino (f32)``, ``torch (cpu)``, ``openai``."""
    backend = str(getattr(encoder, "backend", type(encoder).__name__))
    detail = getattr(encoder, "precision", None) or getattr(encoder, "device", None)
    return f"{backend} ({detail})" if detail else backend


def usage_snapshot(encoder: DenseEncoder) -> dict[str, float]:
    """A hosted encoder's spend so far (requests, tokens, cost); empty for local models."""
    usage = getattr(encoder, "usage", None)
    return dict(usage.as_metadata()) if usage is not None else {}


def usage_since(encoder: DenseEncoder, before: dict[str, float]) -> dict[str, float]:
    """The spend since ``before`` (encoders are shared per process, so a run takes the difference)."""
    now = usage_snapshot(encoder)
    return {k: round(v - before.get(k, 0), 9) for k, v in now.items()}
