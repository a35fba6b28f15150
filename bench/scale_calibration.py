"""Is bench.scale's synthetic data shaped like the real index? Compare the neighbourhoods of real child-chunk
vectors with the generators' at the same number of points.

    .venv/bin/python -m bench.scale_calibration                  # 4,000 bundled child chunks, ~4 min uncached
    .venv/bin/python -m bench.scale_calibration --points 300000  # also each generator's query stats at 300k

HNSW recall depends on the data's local intrinsic dimension (LID): how many directions the nearest neighbours
spread in. Uniform-looking noise in 384 dimensions is the worst case; text embeddings live near a much
lower-dimensional surface. Per vector set, over up to 1,000 probes, this reports the Levina-Bickel maximum
likelihood LID from the 20 nearest neighbours, the median cosine to the 1st and 10th neighbour and the mean
cosine between two random vectors (how much every vector shares one direction). Real vectors: a seeded sample of
the bundled Slack and Jira child chunks, embedded with the default model (through the data folder's embedding
cache); real queries: the bundled dev sets' questions. Generators: ``text`` and ``isotropic`` from bench.scale.
Results: bench/results/scale_calibration.json.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from bench import common
from bench.scale import SHAPES

NEIGHBOURS = 20


def neighbourhood(queries: np.ndarray, points: np.ndarray, leave_one_out: bool = False) -> dict[str, float]:
    """LID (median and mean), median cosine to the 1st and 10th neighbour of each query among ``points``."""
    scores = queries @ points.T
    if leave_one_out:  # the queries are the first rows of points: a point is not its own neighbour
        scores[np.arange(len(queries)), np.arange(len(queries))] = -np.inf
    nearest = np.partition(scores, -NEIGHBOURS, axis=1)[:, -NEIGHBOURS:]  # the 20 best, unordered: no full sort
    top = -np.sort(-nearest, axis=1)
    distance = np.sqrt(np.maximum(2.0 - 2.0 * top, 1e-12))
    lid = -1.0 / np.mean(np.log(distance[:, :-1] / distance[:, -1:]), axis=1)
    return {
        "lid_median": round(float(np.median(lid)), 2),
        "lid_mean": round(float(np.mean(lid)), 2),
        "cos_1st": round(float(np.median(top[:, 0])), 3),
        "cos_10th": round(float(np.median(top[:, 9])), 3),
    }


def vector_set_stats(points: np.ndarray, queries: np.ndarray | None, probes: int = 1000) -> dict[str, Any]:
    """Stats of a set of unit vectors: corpus points against the rest, queries against the corpus."""
    rng = np.random.default_rng(0)
    order = rng.permutation(len(points))
    points = points[order]
    pairs = rng.integers(0, len(points), size=(20_000, 2))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    result: dict[str, Any] = {
        "points": len(points),
        "mean_pair_cos": round(float(np.mean(np.sum(points[pairs[:, 0]] * points[pairs[:, 1]], axis=1))), 3),
        "corpus": neighbourhood(points[:probes], points, leave_one_out=True),
    }
    if queries is not None:
        result["queries"] = neighbourhood(queries[:probes], points)
    return result


def real_vectors(points: int, seed: int) -> tuple[np.ndarray, np.ndarray, object]:
    """A seeded sample of the bundled child chunks (distinct texts, in random order: any prefix is a sample too)
    and the dev sets' questions, embedded like the index does; and the encoder."""
    from rag_pipeline.defs.chain.resources import ChunkingResource
    from rag_pipeline.defs.parts import source_specs
    from rag_pipeline.settings import Settings
    from rag_pipeline.stages import chunk_documents, documents_frame
    from rag_pipeline.vectors.cache import EmbeddingCache, embed_with_cache
    from rag_pipeline.vectors.dense.load import load_dense_encoder

    settings = Settings.from_env()
    encoder = load_dense_encoder(settings.dense_model)
    chunker = ChunkingResource().chunker(encoder)
    texts: list[str] = []
    for spec in source_specs(settings).values():
        read = spec.offline_resource.read()
        _, children = chunk_documents(documents_frame(read.documents), chunker)
        texts.extend(children["text"])
    # an identical text is a neighbour at distance ~0, which would pull its probe's LID down
    texts = list(dict.fromkeys(texts))
    rng = np.random.default_rng(seed)
    sample = [texts[i] for i in rng.permutation(len(texts))[:points]]
    questions = []
    for path in sorted(common.EVAL_SETS.glob("*_dev.jsonl")):
        # split on newlines only: str.splitlines also breaks at the U+2028 separators some Slack messages carry
        questions += [json.loads(line)["query"] for line in path.read_text().split("\n") if line.strip()]
    cache = EmbeddingCache(settings.paths.embedding_cache)
    print(f"embedding {len(sample):,} of {len(texts):,} child chunks and {len(questions)} questions", flush=True)
    vectors, _ = embed_with_cache(sample, encoder.model_id, encoder.encode_documents, cache)
    query_vectors = np.asarray(encoder.encode_queries(questions), dtype=np.float32)
    return np.asarray(vectors, dtype=np.float32), query_vectors, encoder


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument(
        "--sample", type=int, nargs="+", default=[4_000], help="real child chunks (and generated points) compared"
    )
    parser.add_argument("--points", type=int, nargs="*", default=[], help="also the generators' query stats at N")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--out", type=Path, default=common.RESULTS / "scale_calibration.json")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    real, questions, encoder = real_vectors(max(args.sample), args.seed)
    sizes = sorted({min(n, len(real)) for n in args.sample})
    report: dict[str, Any] = {"run": common.run_record(encoder), "neighbours": NEIGHBOURS, "real": {}}
    for n in sizes:
        report["real"][str(n)] = vector_set_stats(real[:n], questions)
    print("real", json.dumps(report["real"]), flush=True)
    for name, shape in SHAPES.items():
        corpus = shape()
        report[name] = {}
        queries = corpus.query_vectors(len(questions))
        for n in sizes:
            report[name][str(n)] = vector_set_stats(corpus.dense(0, n), queries)
        for n in args.points:
            points = np.concatenate([corpus.dense(s, min(65_536, n - s)) for s in range(0, n, 65_536)])
            report[name][str(n)] = {"points": n, "queries": neighbourhood(corpus.query_vectors(200), points)}
        print(name, json.dumps(report[name]), flush=True)
    common.write_json(args.out, report)


if __name__ == "__main__":
    main()
