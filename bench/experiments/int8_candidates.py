"""Int8 encoders for the default model on this machine: are any cheaper than f32 at the cache's tolerance?

    .venv/bin/pip install nncf onnxruntime onnx             # not project dependencies: only this bench needs them
    .venv/bin/python -m bench.experiments.int8_candidates   # ~8 min on 2 cores

SciFact is read from $SCIFACT, else data/beir_scifact (download it once: bench/README.md).

Issue 14 asks for ≤ 45 CPU ms per chunk at cosine ≥ 0.999 against the torch vectors. On a CPU without native
bf16 the remaining candidates are 8-bit ones, measured here against the project's OpenVINO f32 encoder on the
same SciFact abstracts (title + text, many past 256 tokens), batch 8, longest first:

- ``openvino int8 (nncf)``: NNCF post-training quantization of the OpenVINO IR, transformer preset (SmoothQuant,
  fast bias correction), 300 calibration abstracts disjoint from the timed ones;
- ``openvino int8 ffn-only (nncf)``: the same with attention left in f32, only the feed-forward matmuls in int8;
- ``onnxruntime f32`` and ``onnxruntime int8 dynamic``: the model exported to ONNX, then ORT's dynamic
  per-channel quantization (the issue's own 50 ms figure came from this path on another CPU).

CPU ms per chunk counts every thread of the process; cosine is against the torch reference vectors.
Results: bench/experiments/results/int8_candidates.json.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench import common
from rag_pipeline.vectors.dense import load as dense
from rag_pipeline.vectors.dense.openvino import OpenVinoEncoder, cpu_supports_bf16
from rag_pipeline.vectors.dense.torch import SentenceTransformerEncoder

Encode = Callable[[Sequence[str]], np.ndarray]


def measure(encode: Encode, texts: list[str], reference: np.ndarray) -> dict[str, float]:
    """Best of two rounds of CPU and wall ms per chunk, and the cosine of each vector to the reference."""
    encode(texts[:16])
    rounds = [common.cpu_and_wall_ms(encode, texts) for _ in range(2)]
    vectors, best_cpu, best_wall = rounds[-1][0], min(r[1] for r in rounds), min(r[2] for r in rounds)
    cosine = (vectors * reference).sum(axis=1)
    return {
        "cpu_ms_per_chunk": round(best_cpu, 1),
        "wall_ms_per_chunk": round(best_wall, 1),
        "cosine_min": round(float(cosine.min()), 5),
        "cosine_mean": round(float(cosine.mean()), 5),
    }


def model_inputs(encoder: OpenVinoEncoder, texts: list[str]) -> dict[str, np.ndarray]:
    """The model inputs of one batch of ``texts``, tokenized and padded as the encoder does."""
    encoded = encoder._tokenizer(texts, truncation=True, max_length=encoder.max_tokens)
    return encoder._padded(encoded, np.arange(len(texts)))[0]


def nncf_int8(encoder: OpenVinoEncoder, calibration: list[str], attention_in_f32: bool) -> Encode:
    """The encoder with its model swapped for an NNCF-quantized copy (same tokenizer, pooling, batching)."""
    import nncf

    model = encoder._model
    samples = [model_inputs(encoder, [text]) for text in calibration]
    ignored = None
    if attention_in_f32:
        matmuls = [op.get_friendly_name() for op in model.get_ops() if op.get_type_name() == "MatMul"]
        feed_forward = [n for n in matmuls if "intermediate" in n or ("output.dense" in n and "attention" not in n)]
        ignored = nncf.IgnoredScope(names=[n for n in matmuls if n not in feed_forward])
    quantized = nncf.quantize(
        model,
        nncf.Dataset(samples),
        model_type=nncf.ModelType.TRANSFORMER,
        preset=nncf.QuantizationPreset.MIXED,
        subset_size=len(samples),
        **({"ignored_scope": ignored} if ignored else {}),
    )
    variant = OpenVinoEncoder.__new__(OpenVinoEncoder)
    variant.__dict__.update(encoder.__dict__)
    variant._model, variant._compiled, variant._stream_requests = quantized, {}, None
    return variant.encode_documents


def onnxruntime_encoders(encoder: OpenVinoEncoder, work: Path) -> dict[str, Encode]:
    """ONNX export of the bundled model (torch), as is and with ORT's dynamic per-channel int8 quantization."""
    import onnxruntime
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel

    class LastHiddenState(torch.nn.Module):
        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    names = ["input_ids", "attention_mask", "token_type_ids"]
    example = model_inputs(encoder, ["a short example", "a longer example text of a few more words"])
    model = LastHiddenState(AutoModel.from_pretrained(dense.minilm_path()).eval())
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            tuple(torch.from_numpy(example[n]) for n in names),
            str(work / "f32.onnx"),
            input_names=names,
            output_names=["hidden"],
            dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "hidden"]},
            opset_version=17,
            dynamo=False,
        )
    quantize_dynamic(str(work / "f32.onnx"), str(work / "int8.onnx"), weight_type=QuantType.QInt8, per_channel=True)

    def runner(path: Path) -> Encode:
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = os.cpu_count() or 1
        session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

        def encode(texts: Sequence[str]) -> np.ndarray:
            # Batched as the OpenVINO encoder batches (by model tokens), so the comparison is of runtimes alone.
            encoded = encoder._tokenizer(list(texts), truncation=True, max_length=encoder.max_tokens)
            order = encoder._batch_order(texts, encoded)
            vectors = np.zeros((len(texts), encoder.dimension), dtype=np.float32)
            for start in range(0, len(texts), encoder.batch_size):
                rows = order[start : start + encoder.batch_size]
                inputs, mask = encoder._padded(encoded, rows)
                hidden = session.run(None, {n: inputs[n].astype(np.int64) for n in names})[0]
                vectors[rows] = encoder._pool(hidden, mask)
            return vectors

        return encode

    return {"onnxruntime f32": runner(work / "f32.onnx"), "onnxruntime int8 dynamic": runner(work / "int8.onnx")}


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--texts", type=int, default=400, help="SciFact abstracts timed per encoder")
    parser.add_argument("--out", type=Path, default=common.EXPERIMENT_RESULTS / "int8_candidates.json")
    args = parser.parse_args()
    texts = common.scifact_texts(args.texts + 300)
    timed, calibration = texts[: args.texts], texts[args.texts :]
    if len(calibration) < 300:
        raise SystemExit(f"--texts {args.texts} leaves fewer than 300 SciFact abstracts to calibrate on")
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        reference = SentenceTransformerEncoder("ref", dense.minilm_path()).encode_documents(timed)
        encoder = OpenVinoEncoder("ref", dense.minilm_path(), work / "models", precision="f32")
        candidates: dict[str, Encode] = {"openvino f32 (the default)": encoder.encode_documents}
        candidates["openvino int8 (nncf)"] = nncf_int8(encoder, calibration, attention_in_f32=False)
        candidates["openvino int8 ffn-only (nncf)"] = nncf_int8(encoder, calibration, attention_in_f32=True)
        candidates.update(onnxruntime_encoders(encoder, work))
        results = {}
        for name, encode in candidates.items():
            results[name] = measure(encode, timed, reference)
            print(f"{name}: {results[name]}", flush=True)
    result = {
        "run": common.run_record(),
        "bf16_native": cpu_supports_bf16(),
        "texts": args.texts,
        "candidates": results,
    }
    common.write_json(args.out, result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
