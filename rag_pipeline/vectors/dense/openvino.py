"""The same sentence-transformers vectors through OpenVINO, at a fraction of torch's CPU cost.

The model is converted once from its local weights (torch, the reference path, does the tracing) and the
OpenVINO IR is kept under a cache folder keyed by the weights and the runtime version, so later processes
load it in a second without importing torch. Tokenization, truncation, pooling and normalization are the
sentence-transformers model's own settings, so the vectors match the reference (cosine ≥ 0.999, the
tolerance the embedding cache relies on: it keys vectors on the model id, not on the backend).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag_pipeline.vectors.dense.base import LocalEncoder, read_prompts
from rag_pipeline.vectors.dense.model_folder import written_aside

log = logging.getLogger(__name__)

# Vectors further than this from the reference would need their own embedding-cache key.
COSINE_TOLERANCE = 0.999
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class UnsupportedModel(ValueError):
    """The model's pipeline is not one this backend reproduces (the caller falls back to torch)."""


def _pipeline(path: Path) -> tuple[str, bool]:
    """Pooling mode and whether vectors are normalized, read from the sentence-transformers folder."""
    modules = json.loads((path / "modules.json").read_text())
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    if kinds[:2] != ["Transformer", "Pooling"] or not set(kinds[2:]) <= {"Normalize"}:
        raise UnsupportedModel(f"{path}: modules {kinds} (only Transformer, Pooling[, Normalize] are converted)")
    pooling = json.loads((path / modules[1]["path"] / "config.json").read_text())
    modes = [k.removeprefix("pooling_mode_").removesuffix("_tokens") for k, v in pooling.items() if v is True]
    if modes not in (["mean"], ["cls_token"], ["cls"]):
        raise UnsupportedModel(f"{path}: pooling {modes} (only mean or CLS pooling is converted)")
    return ("mean" if modes == ["mean"] else "cls"), "Normalize" in kinds


def _max_seq_length(path: Path, tokenizer: Any) -> int:
    config = path / "sentence_bert_config.json"
    if config.exists():
        value = json.loads(config.read_text()).get("max_seq_length")
        if value:
            return int(value)
    return int(tokenizer.model_max_length)


def _weights_digest(path: Path) -> str:
    """Names, sizes and modification times of the model's files: a changed model gets a fresh conversion."""
    parts = sorted(f"{p.relative_to(path)}:{p.stat().st_size}:{int(p.stat().st_mtime)}" for p in path.rglob("*"))
    return hashlib.sha256("\n".join(p for p in parts if p).encode()).hexdigest()[:16]


def _convert(path: Path, target: Path, tokenizer: Any) -> None:
    """Trace the Hugging Face encoder with torch and save it as OpenVINO IR (atomically: a crash leaves none)."""
    import openvino as ov
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as transformers_logging

    # Tracing warns about shape-dependent Python branches that are constant for an encoder with an attention
    # mask (the vector test checks every length); a user's terminal should not see them.
    transformers_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    model = AutoModel.from_pretrained(str(path)).eval()
    example = tokenizer(
        ["a short example", "a longer example text of a few more words"], padding=True, return_tensors="pt"
    )
    example = {k: v for k, v in example.items() if k in _INPUTS}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        converted = ov.convert_model(model, example_input=example)
    # Two processes converting at once both succeed; a crash mid-way leaves no half-written model.
    with written_aside(target, "model.xml") as temporary:
        ov.save_model(converted, str(temporary / "model.xml"), compress_to_fp16=False)


def cpu_supports_bf16() -> bool:
    """Whether OpenVINO's CPU plugin runs bf16 natively here (AVX-512 BF16 or AMX); elsewhere it emulates it."""
    import openvino as ov

    return "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")


def pad_batch(
    tokenizer: Any, encoded: Any, rows: Sequence[int] | np.ndarray, names: Sequence[str]
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The model inputs ``names`` and the attention mask of ``rows`` of an unpadded tokenizer output, padded
    to the longest row as ``tokenizer(..., padding=True)`` pads them: its pad token and pad token type, on its
    padding side. A tokenizer without a pad token (where Hugging Face would refuse) pads with 0: the attention
    mask hides padding from the model and from pooling alike."""
    width = max((len(encoded["input_ids"][i]) for i in rows), default=0)
    left = tokenizer.padding_side == "left"
    fills = {"input_ids": tokenizer.pad_token_id or 0, "token_type_ids": tokenizer.pad_token_type_id}
    padded: dict[str, np.ndarray] = {}
    for name in {*names, "attention_mask"}:
        array = np.full((len(rows), width), fills.get(name, 0), dtype=np.int64)
        for row, index in enumerate(rows):
            values = encoded[name][index]
            if left:
                array[row, width - len(values) :] = values
            else:
                array[row, : len(values)] = values
        padded[name] = array
    return {name: padded[name] for name in names}, padded["attention_mask"]


class OpenVinoEncoder(LocalEncoder):
    """A sentence-transformers folder run by OpenVINO on the CPU (bf16 where the CPU has it natively)."""

    backend = "openvino"

    def __init__(
        self,
        model_id: str,
        path: str | Path,
        cache_dir: str | Path,
        batch_size: int = 8,
        threads: int | None = None,
        precision: str | None = None,
        streamed: bool = True,
    ) -> None:
        """``streamed`` False runs bulk work one batch at a time on all cores, as queries run: one compiled
        model instead of two (about 185 MB less for MiniLM), ~7 % more CPU per chunk on 2 cores."""
        import openvino as ov
        from transformers import AutoTokenizer

        folder = Path(path)
        self.model_id = model_id
        self.batch_size = batch_size
        self.streamed = streamed
        self._pooling, self._normalize = _pipeline(folder)
        self._tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self.prompts = read_prompts(folder)
        self.max_tokens = _max_seq_length(folder, self._tokenizer)
        slug = re.sub(r"[^A-Za-z0-9._-]+", "--", model_id.strip("/"))[-80:]
        ir = Path(cache_dir) / f"{slug}-{_weights_digest(folder)}-openvino-{ov.__version__.split('-')[0]}"
        if not (ir / "model.xml").exists():
            log.info("converting %s to OpenVINO under %s (once)", model_id, ir)
            ir.parent.mkdir(parents=True, exist_ok=True)
            _convert(folder, ir, self._tokenizer)
        self.precision = precision or ("bf16" if cpu_supports_bf16() else "f32")
        self._config: dict[str, Any] = {"INFERENCE_PRECISION_HINT": self.precision}
        if threads:
            self._config["INFERENCE_NUM_THREADS"] = threads
        self._core = ov.Core()
        self._model = self._core.read_model(str(ir / "model.xml"))
        self._inputs = [name for name in _INPUTS if any(name in i.get_names() for i in self._model.inputs)]
        self.dimension = int(self._model.outputs[0].get_partial_shape()[2].get_length())
        self._compiled: dict[str, Any] = {}
        self._stream_requests: list[Any] | None = None
        self._lock = threading.Lock()
        # Compiled now, not at the first text: a CPU or setting OpenVINO cannot run fails while the caller can
        # still fall back to torch, and the first query does not pay for the compilation.
        self._compiled_for("LATENCY")

    def _compiled_for(self, hint: str) -> Any:
        """The model compiled for ``LATENCY`` (one batch on every core) or ``THROUGHPUT`` (several streams,
        each on a share of the cores), compiled the first time it is needed."""
        if hint not in self._compiled:
            config = {**self._config, "PERFORMANCE_HINT": hint}
            self._compiled[hint] = self._core.compile_model(self._model, "CPU", config)
        return self._compiled[hint]

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return vectors
        encoded = self._tokenizer(list(texts), truncation=True, max_length=self.max_tokens)
        order = self._batch_order(texts, encoded)
        batches = [order[start : start + self.batch_size] for start in range(0, len(texts), self.batch_size)]
        with self._lock:
            if self.streamed and len(batches) > 1 and self._requests():
                self._encode_streamed(encoded, batches, vectors)
            else:  # one batch (a query) cannot use several streams, so all cores work on it
                for rows in batches:
                    inputs, mask = self._padded(encoded, rows)
                    vectors[rows] = self._pool(self._compiled_for("LATENCY")(inputs)[0], mask)
        return vectors

    def _batch_order(self, texts: Sequence[str], encoded: Any) -> np.ndarray:
        """Longest first by model tokens, not by characters as sentence-transformers orders them: on 400 of the
        demo's Jira chunks character order made 8.5 % of the computed tokens padding, token order 1 %
        (bench/experiments/cpu_roofline.py). Pooling ignores padding, so the order never changes a vector. ``texts`` is
        for orders that need the strings (the benchmark's character order)."""
        return np.argsort([-len(ids) for ids in encoded["input_ids"]], kind="stable")

    def _encode_streamed(self, encoded: Any, batches: list[np.ndarray], vectors: np.ndarray) -> None:
        """Bulk work through OpenVINO's throughput mode: batches run at once on parallel streams while this
        thread pads the next one. Cheaper per chunk than one batch on all cores (measured 7–10 % on 2
        cores; on more cores one batch splits worse) and the same vectors: each batch is computed alike.

        Requests are waited on here rather than given a completion callback: a Python callback runs on
        OpenVINO's own threads, where dropping the last reference to a request or queue aborts the process
        ("Resource deadlock avoided", seen at exit of a benchmark)."""
        requests = self._requests()
        in_flight: dict[int, tuple[np.ndarray, np.ndarray]] = {}

        def collect(slot: int) -> None:
            if slot in in_flight:
                rows, mask = in_flight.pop(slot)
                requests[slot].wait()
                vectors[rows] = self._pool(requests[slot].get_output_tensor(0).data, mask)

        try:
            for number, rows in enumerate(batches):
                slot = number % len(requests)
                inputs, mask = self._padded(encoded, rows)  # while the slot's batch still runs
                collect(slot)
                requests[slot].start_async(inputs)
                in_flight[slot] = (rows, mask)
            for slot in range(len(requests)):
                collect(slot)
        finally:
            for slot in in_flight:  # after a failure: nothing may still run when the caller gets the error
                with contextlib.suppress(Exception):  # the first error is the one to report
                    requests[slot].wait()

    def _requests(self) -> list[Any]:
        """One inference request per stream of the throughput-compiled model, made once and reused; none
        (bulk work then runs as queries do, with one warning) where that model does not compile."""
        if self._stream_requests is None:
            try:
                compiled = self._compiled_for("THROUGHPUT")
                count = int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
                self._stream_requests = [compiled.create_infer_request() for _ in range(max(count, 1))]
            except Exception as exc:  # the latency-compiled model works: lose the speed-up, not the run
                log.warning("OpenVINO throughput mode unavailable (%s); one batch at a time", exc)
                self._stream_requests = []
        return self._stream_requests

    def _padded(self, encoded: Any, rows: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
        return pad_batch(self._tokenizer, encoded, rows, self._inputs)

    def _pool(self, output: Any, attention_mask: np.ndarray) -> np.ndarray:
        hidden: np.ndarray = np.asarray(output, dtype=np.float32)
        if self._pooling == "cls":
            pooled: np.ndarray = hidden[:, 0].copy()
        else:
            mask = attention_mask[..., None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        if self._normalize:
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return pooled
