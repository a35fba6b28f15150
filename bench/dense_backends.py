"""Dense backends on this machine: CPU cost per chunk, agreement with torch, and the vector arm's quality.

    .venv/bin/python -m bench.dense_backends                    # 1,000 SciFact abstracts, then SciFact nDCG@10
    .venv/bin/python -m bench.dense_backends --texts 300 --no-quality
    SCIFACT=<folder> .venv/bin/python -m bench.dense_backends

SciFact is read from $SCIFACT, else data/beir_scifact (download it once: bench/README.md).

Speed: the same texts through torch fp32 (the reference) and OpenVINO (f32 as the encoder runs bulk work, on
parallel streams; f32 one batch at a time on all cores, as before 2026-11-26; bf16 where the CPU runs it
natively), each twice in alternation, best of two; CPU ms per chunk counts every thread of the process, which
varies less with other load than wall time. Agreement: cosine of each text's vector against torch's.
Quality: ``rag-pipeline bench --beir <scifact> --arms vector`` once per backend, each in its own data folder
(the embedding cache keys on the model, not the backend, so a shared folder would not re-embed).
Results: bench/results/dense_backends.json.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from bench import common
from rag_pipeline.vectors.dense import load as dense
from rag_pipeline.vectors.dense.openvino import OpenVinoEncoder, cpu_supports_bf16
from rag_pipeline.vectors.dense.torch import SentenceTransformerEncoder


def speed(texts: list[str], model_cache: Path) -> dict[str, Any]:
    encoders: dict[str, Any] = {"torch fp32": SentenceTransformerEncoder("ref", dense.minilm_path())}
    encoders["openvino f32"] = OpenVinoEncoder("ref", dense.minilm_path(), model_cache, precision="f32")
    encoders["openvino f32, one stream"] = OpenVinoEncoder(
        "ref", dense.minilm_path(), model_cache, precision="f32", streamed=False
    )
    if cpu_supports_bf16():
        encoders["openvino bf16"] = OpenVinoEncoder("ref", dense.minilm_path(), model_cache, precision="bf16")
    for encoder in encoders.values():
        encoder.encode_documents(texts[:16])  # first-call allocation is not the steady state
    best: dict[str, dict[str, float]] = {}
    vectors: dict[str, np.ndarray] = {}
    for _ in range(2):
        for name, encoder in encoders.items():
            vectors[name], cpu_ms, wall_ms = common.cpu_and_wall_ms(encoder.encode_documents, texts)
            previous = best.get(name, {"cpu_ms_per_chunk": float("inf"), "wall_ms_per_chunk": float("inf")})
            best[name] = {
                "cpu_ms_per_chunk": round(min(cpu_ms, previous["cpu_ms_per_chunk"]), 1),
                "wall_ms_per_chunk": round(min(wall_ms, previous["wall_ms_per_chunk"]), 1),
            }
            print(f"{name}: {cpu_ms:.1f} CPU ms/chunk, {wall_ms:.1f} wall ms/chunk", flush=True)
    reference = vectors["torch fp32"]
    for name, figures in best.items():
        cosine = (vectors[name] * reference).sum(axis=1)
        figures["cosine_min"] = round(float(cosine.min()), 6)
        figures["cosine_mean"] = round(float(cosine.mean()), 6)
        figures["cpu_cost_vs_torch"] = round(figures["cpu_ms_per_chunk"] / best["torch fp32"]["cpu_ms_per_chunk"], 3)
    return best


def quality(backend: str, work: Path, scifact: Path) -> dict[str, Any]:
    env = {"RAG_DENSE_BACKEND": backend, "RAG_DENSE_DEVICE": "cpu"}
    figures = common.beir_bench(scifact, ["--arms", "vector"], work / backend, env)
    vector = figures["arms"]["vector"]
    return {
        "seconds": figures["seconds"],
        "vector_ndcg@10": round(vector["ndcg@10"], 4),
        "vector_recall@100": round(vector["recall@100"], 4),
    }


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--texts", type=int, default=1000, help="SciFact abstracts timed per backend")
    parser.add_argument("--no-quality", action="store_true", help="skip the SciFact nDCG@10 runs (minutes each)")
    parser.add_argument("--out", type=Path, default=common.RESULTS / "dense_backends.json")
    args = parser.parse_args()
    scifact_folder = common.require_beir(common.scifact_folder())
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        result: dict[str, Any] = {
            "run": common.run_record(),
            "bf16_native": cpu_supports_bf16(),
            "texts": args.texts,
            "speed": speed(common.scifact_texts(args.texts, scifact_folder), work / "models"),
        }
        if not args.no_quality:
            scifact = {backend: quality(backend, work, scifact_folder) for backend in ("torch", "openvino")}
            scifact["ndcg@10_difference"] = round(
                scifact["openvino"]["vector_ndcg@10"] - scifact["torch"]["vector_ndcg@10"], 4
            )
            result["scifact"] = scifact
        elif args.out.exists() and "scifact" in (previous := json.loads(args.out.read_text())):
            result["scifact"] = {**previous["scifact"], "note": "kept from the last run with quality (--no-quality)"}
    common.write_json(args.out, result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
