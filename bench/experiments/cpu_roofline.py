"""How close the CPU embedder runs to this machine's f32 arithmetic ceiling, and what that ceiling allows.

    .venv/bin/python -m bench.experiments.cpu_roofline      # 400 SciFact abstracts + 400 demo Jira chunks
    .venv/bin/python -m bench.experiments.cpu_roofline --texts 100

SciFact is read from $SCIFACT, else data/beir_scifact (download it once: bench/README.md); without it only the
Jira chunks are measured.

Three measurements:
1. The ceiling: single-thread f32 matrix-multiply throughput (GFLOP/s per core) through OpenVINO's CPU plugin
   and through numpy's BLAS, on the encoder's own layer shapes (384×1536 feed-forward, 384×384 projections)
   and on a large square product; the best is the practical peak a transformer's dense layers can reach.
2. The work: floating-point operations per text for the bundled MiniLM (from its config), counted on the
   padded batches the encoder actually runs (its batch size and length order), plus the padding share.
3. The encoder: OpenVINO's CPU ms per text on the same texts (bulk path, as indexing runs it), with its
   batches formed by model tokens (as it runs) and by characters (as sentence-transformers forms them, and
   the encoder did before 2026-11-26), alternated over ``--rounds`` rounds, medians reported.

From these: the achieved GFLOP/s per CPU-second, its share of the peak, and the floor — CPU ms per text if
every multiply ran at the peak. A floor above a target means no f32 engine reaches that target on this CPU.
Results: bench/experiments/results/cpu_roofline.json.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench import common
from rag_pipeline.connectors.jira.dump import JiraDumpReader
from rag_pipeline.vectors.dense import load as dense
from rag_pipeline.vectors.dense.openvino import OpenVinoEncoder


def matmul_gflops_openvino(rows: int, inner: int, cols: int, seconds: float = 3.0) -> float:
    """Single-thread f32 GFLOP/s of ``[rows, inner] @ [inner, cols]`` through OpenVINO's CPU plugin."""
    import openvino as ov
    import openvino.opset13 as ops

    weights = np.random.default_rng(0).standard_normal((inner, cols)).astype(np.float32)
    data = ops.parameter([rows, inner], np.float32, name="x")
    model = ov.Model([ops.matmul(data, ops.constant(weights), False, False)], [data])
    compiled = ov.Core().compile_model(
        model, "CPU", {"INFERENCE_NUM_THREADS": 1, "INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY"}
    )
    request = compiled.create_infer_request()
    x = np.random.default_rng(1).standard_normal((rows, inner)).astype(np.float32)
    return _rate(lambda: request.infer([x]), 2.0 * rows * inner * cols, seconds)


def matmul_gflops_numpy(rows: int, inner: int, cols: int, seconds: float = 3.0) -> float:
    """Single-thread f32 GFLOP/s of the same product through numpy's BLAS."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    a = rng.standard_normal((rows, inner)).astype(np.float32)
    b = rng.standard_normal((inner, cols)).astype(np.float32)
    with threadpool_limits(1):
        return _rate(lambda: a @ b, 2.0 * rows * inner * cols, seconds)


def _rate(call: Any, flops: float, seconds: float) -> float:
    """Best GFLOP/s over repeated calls for ``seconds`` (best, not mean: other load only ever slows it)."""
    call()
    best = 0.0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.process_time()
        for _ in range(5):
            call()
        elapsed = time.process_time() - start
        if elapsed > 0:
            best = max(best, 5 * flops / elapsed / 1e9)
    return best


def model_flops(config: dict[str, Any], lengths: list[int], batch_size: int) -> dict[str, float]:
    """Multiply-add FLOPs of a BERT encoder over ``lengths``, batched as the encoder batches them (longest
    first, padded to the longest in each batch). Embedding lookups, layer norms, softmax and pooling are left
    out: they are a few percent and memory-bound, so the count is a lower bound on the work."""
    hidden, inner, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    per_token = layers * 2 * (4 * hidden * hidden + 2 * hidden * inner)  # Q, K, V, output; two FFN matrices

    def attention(length: int) -> int:
        return layers * 2 * (2 * length * length * hidden)  # Q·Kᵀ and weights·V

    ordered = sorted(lengths, reverse=True)
    padded_flops = 0.0
    padded_tokens = 0
    for start in range(0, len(ordered), batch_size):
        batch = ordered[start : start + batch_size]
        padded_tokens += batch[0] * len(batch)
        padded_flops += len(batch) * (batch[0] * per_token + attention(batch[0]))
    real_flops = sum(n * per_token + attention(n) for n in lengths)
    return {
        "gflop_per_text_padded": padded_flops / len(lengths) / 1e9,
        "gflop_per_text_unpadded": real_flops / len(lengths) / 1e9,
        "mean_tokens": float(np.mean(lengths)),
        "padding_share": 1 - sum(lengths) / padded_tokens,
    }


def char_order_padding(lengths_by_text: list[int], chars: list[int], batch_size: int) -> float:
    """Padding share when batches are formed by character length (sentence-transformers' order, and the
    encoder's before 2026-11-26)."""
    order = np.argsort([-c for c in chars], kind="stable")
    real = padded = 0
    for start in range(0, len(order), batch_size):
        batch = [lengths_by_text[i] for i in order[start : start + batch_size]]
        real += sum(batch)
        padded += max(batch) * len(batch)
    return 1 - real / padded


def demo_jira_texts(n: int, encoder: OpenVinoEncoder) -> list[str]:
    """The first ``n`` child chunks of the bundled Jira export, chunked as indexing chunks them."""
    from rag_pipeline.connectors.jira.settings import BUNDLED_JIRA_DUMP, BUNDLED_JIRA_SITE
    from rag_pipeline.stages import chunk_documents, documents_frame
    from rag_pipeline.text.chunking import Chunker

    read = JiraDumpReader(BUNDLED_JIRA_DUMP, BUNDLED_JIRA_SITE).read()
    documents = documents_frame(read.documents[: max(n, 50)])
    _, children = chunk_documents(documents, Chunker(None, encoder.count_tokens, encoder.max_tokens))
    return list(children["text"][:n])


def _scifact_texts(n: int) -> list[str]:
    """The first ``n`` SciFact abstracts, or none when SciFact is not downloaded (that corpus is then skipped)."""
    folder = common.scifact_folder()
    return common.scifact_texts(n, folder) if (folder / "corpus.jsonl").is_file() else []


class CharacterOrderEncoder(OpenVinoEncoder):
    """The encoder with batches formed by character length, as before 2026-11-26."""

    def _batch_order(self, texts: Sequence[str], encoded: Any) -> np.ndarray:
        return np.argsort([-len(t) for t in texts], kind="stable")


def ordering_rounds(encoders: dict[str, OpenVinoEncoder], texts: list[str], rounds: int) -> dict[str, Any]:
    """Median CPU and wall ms per text of each encoder, alternated round by round (the machine's load drifts)."""
    cpu: dict[str, list[float]] = {name: [] for name in encoders}
    wall: dict[str, list[float]] = {name: [] for name in encoders}
    vectors: dict[str, np.ndarray] = {}
    for _ in range(rounds):
        for name, encoder in encoders.items():
            vectors[name], cpu_ms, wall_ms = common.cpu_and_wall_ms(encoder.encode_documents, texts)
            cpu[name].append(cpu_ms)
            wall[name].append(wall_ms)
    first, *others = vectors.values()
    return {
        **{
            name: {
                "cpu_ms_per_text_median": round(float(np.median(cpu[name])), 1),
                "wall_ms_per_text_median": round(float(np.median(wall[name])), 1),
                "cpu_ms_per_text_rounds": [round(v, 1) for v in cpu[name]],
            }
            for name in encoders
        },
        "cosine_min_between_orders": round(float(min((first * other).sum(axis=1).min() for other in others)), 7),
    }


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--texts", type=int, default=400, help="texts per corpus (default 400)")
    parser.add_argument("--rounds", type=int, default=4, help="alternated rounds per batch order (default 4)")
    parser.add_argument("--target-ms", type=float, default=45.0, help="CPU ms per text to judge (default 45)")
    parser.add_argument("--out", type=Path, default=common.EXPERIMENT_RESULTS / "cpu_roofline.json")
    args = parser.parse_args()

    peaks = {
        "openvino 256x384 @ 384x1536 (feed-forward)": matmul_gflops_openvino(256, 384, 1536),
        "openvino 256x384 @ 384x384 (projection)": matmul_gflops_openvino(256, 384, 384),
        "openvino 2048x2048 @ 2048x2048": matmul_gflops_openvino(2048, 2048, 2048),
        "numpy 256x384 @ 384x1536": matmul_gflops_numpy(256, 384, 1536),
        "numpy 2048x2048 @ 2048x2048": matmul_gflops_numpy(2048, 2048, 2048),
    }
    for name, value in peaks.items():
        print(f"peak {name}: {value:.1f} GFLOP/s per core", flush=True)
    peak = max(peaks.values())

    path = dense.minilm_path()
    config = json.loads((Path(path) / "config.json").read_text())
    with tempfile.TemporaryDirectory() as cache:
        encoder = OpenVinoEncoder("roofline", path, cache, precision="f32")
        by_characters = CharacterOrderEncoder("roofline", path, cache, precision="f32")
        corpora = {
            "scifact abstracts": _scifact_texts(args.texts),
            "demo jira child chunks": demo_jira_texts(args.texts, encoder),
        }
        rows: dict[str, Any] = {}
        for name, texts in corpora.items():
            if not texts:
                print(f"{name}: no texts found, skipped", flush=True)
                continue
            tokenized = encoder._tokenizer(texts, truncation=True, max_length=encoder.max_tokens)["input_ids"]
            lengths = [len(ids) for ids in tokenized]
            work = model_flops(config, lengths, encoder.batch_size)
            for warm in (encoder, by_characters):
                warm.encode_documents(texts[:16])
            orders = ordering_rounds(
                {"batches by model tokens": encoder, "batches by characters": by_characters}, texts, args.rounds
            )
            cpu_ms = orders["batches by model tokens"]["cpu_ms_per_text_median"]
            achieved = work["gflop_per_text_padded"] / (cpu_ms / 1000)
            rows[name] = {
                "texts": len(texts),
                **{k: round(v, 4) for k, v in work.items()},
                "padding_share_char_order": round(
                    char_order_padding(lengths, [len(t) for t in texts], encoder.batch_size), 4
                ),
                "openvino_cpu_ms_per_text": round(cpu_ms, 1),
                "batch_order": orders,
                "achieved_gflops_per_cpu_second": round(achieved, 1),
                "share_of_peak": round(achieved / peak, 3),
                "floor_cpu_ms_at_peak_padded": round(work["gflop_per_text_padded"] / peak * 1000, 1),
                "floor_cpu_ms_at_peak_unpadded": round(work["gflop_per_text_unpadded"] / peak * 1000, 1),
            }
            print(f"{name}: {json.dumps(rows[name])}", flush=True)

    result = {
        "run": common.run_record(),
        "target_cpu_ms_per_text": args.target_ms,
        "peak_gflops_per_core": {k: round(v, 1) for k, v in peaks.items()},
        "corpora": rows,
    }
    common.write_json(args.out, result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
