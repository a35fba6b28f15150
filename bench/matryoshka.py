"""What cutting the bundled dense models' vectors to their first N dimensions (renormalized, the Matryoshka way)
costs in nDCG@10 and buys in memory and search time, on the bundled English dev sets (issue 67 item 3).

Neither bundled model is Matryoshka-trained (their cards say nothing of it, and the loader refuses
``all-MiniLM-L6-v2@256``): this measures plain truncation of an ordinary model, the floor a Matryoshka-trained
model would beat, so the figures say whether a cut is worth asking a real Matryoshka model for.

    .venv/bin/python -m bench.matryoshka [--models all-MiniLM-L6-v2 multilingual-e5-small] [--dims 256 192 128 64]

The corpus: the bundled Slack (#ubuntu threads) and Jira (Appcelerator issues) documents, read by their
connectors; each document embedded once as a passage (its first window of the model's max_seq_length tokens; the
index embeds child chunks instead, so the absolute nDCG is this arm's own, not the pipeline's), each question as
a query. The dense arm alone ranks each set's source's documents by cosine (exact, numpy), the query's own
``exclude`` left out; nDCG@10 and Recall@100 by the project's ranx scoring. Memory: float32 bytes per vector and
for the corpus, and for the bench index's child chunks (bench/results/ingest.json). Search time: exact top-10 of
one query against 100,000 vectors (the corpus's, repeated), CPU and wall ms per query, median of 5 passes over 50
queries (the engine's vector comparisons scale with the dimension the same way; the query's own embedding is not
counted: cutting does not change it).
Results: bench/results/matryoshka.json; the reading in docs/notes/matryoshka.md.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench import common
from rag_pipeline.connectors.jira import settings as jira_settings
from rag_pipeline.connectors.jira.dump import JiraDumpReader
from rag_pipeline.connectors.slack import settings as slack_settings
from rag_pipeline.connectors.slack.export import SlackExportReader
from rag_pipeline.evaluation.eval_set import load_eval_set
from rag_pipeline.evaluation.metrics import per_query_metrics
from rag_pipeline.vectors.dense.base import encoder_backend
from rag_pipeline.vectors.dense.load import load_dense_encoder
from rag_pipeline.vectors.dense.matryoshka import truncate_normalized

SETS = {"slack_ubuntu_dev": "slack", "jira_appcelerator_dev": "jira"}
METRICS = ("ndcg@10", "recall@100")
PASSES = 5
SEARCH_ROWS = 100_000
SEARCH_QUERIES = 50


def corpus() -> dict[str, dict[str, str]]:
    """source -> document id -> text (title and body)."""
    slack = SlackExportReader(slack_settings.BUNDLED_SLACK_EXPORT, slack_settings.BUNDLED_SLACK_TEAM).read().documents
    jira = JiraDumpReader(jira_settings.BUNDLED_JIRA_DUMP, jira_settings.BUNDLED_JIRA_SITE).read().documents
    return {
        "slack": {d.id: f"{d.title}\n{d.text}" for d in slack},
        "jira": {d.id: f"{d.title}\n{d.text}" for d in jira},
    }


def score(ids: list[str], docs: np.ndarray, queries: list[Any], query_vectors: np.ndarray) -> dict[str, float]:
    sims = query_vectors @ docs.T
    run: dict[str, dict[str, float]] = {}
    for q, row in zip(queries, sims, strict=True):
        top = np.argsort(-row)[: 100 + len(q.exclude)]
        excluded = set(q.exclude)
        run[q.id] = {ids[i]: float(row[i]) for i in top if ids[i] not in excluded}
    qrels = {q.id: q.relevant for q in queries}
    frame = per_query_metrics(qrels, run, METRICS)
    return {m: round(float(frame[m].mean()), 4) for m in METRICS}


def search_ms(docs: np.ndarray, query_vectors: np.ndarray) -> dict[str, float]:
    """One exact top-10 search (one query against a matrix of SEARCH_ROWS vectors: the corpus's, repeated, so the
    dimension and not the call's overhead decides), CPU ms and wall ms per query, the median of PASSES passes over
    the first SEARCH_QUERIES queries. CPU time counts every thread and varies less with the other load."""
    matrix = np.ascontiguousarray(np.resize(docs, (SEARCH_ROWS, docs.shape[1])))
    queries = query_vectors[:SEARCH_QUERIES]
    cpu_passes, wall_passes = [], []
    for _ in range(PASSES):
        cpu, wall = time.process_time(), time.perf_counter()
        for vector in queries:
            row = matrix @ vector
            np.argpartition(-row, 10)[:10]
        cpu_passes.append((time.process_time() - cpu) * 1000 / len(queries))
        wall_passes.append((time.perf_counter() - wall) * 1000 / len(queries))
    return {
        "exact_top10_cpu_ms": round(float(np.median(cpu_passes)), 3),
        "exact_top10_wall_ms": round(float(np.median(wall_passes)), 3),
    }


def measure(
    model: str,
    dims: list[int],
    texts: dict[str, dict[str, str]],
    eval_dir: Path,
    out: dict[str, Any],
    save: Callable[[], None],
) -> None:
    """Every set's figures for ``model`` into ``out``, ``save()`` called after each (a long run keeps what it
    measured)."""
    encoder = load_dense_encoder(model, backend="auto", device="cpu")
    chunks = json.loads((common.RESULTS / "ingest.json").read_text())["first_run"]["child_chunks"]
    out.update(
        model_id=encoder.model_id,
        backend=encoder_backend(encoder),
        full_dimension=encoder.dimension,
        max_tokens=encoder.max_tokens,
        sets={},
    )
    for name, source in SETS.items():
        ids = list(texts[source])
        started = time.perf_counter()
        docs = encoder.encode_documents([texts[source][i] for i in ids])
        queries = load_eval_set(eval_dir / f"{name}.jsonl")
        query_vectors = encoder.encode_queries([q.query for q in queries])
        print(f"{model} {name}: {len(ids)} documents embedded in {time.perf_counter() - started:.0f} s", flush=True)
        rows = {}
        for d in [encoder.dimension, *dims]:
            cut_docs, cut_queries = truncate_normalized(docs, d), truncate_normalized(query_vectors, d)
            rows[str(d)] = {
                **score(ids, cut_docs, queries, cut_queries),
                "bytes_per_vector": d * 4,
                "corpus_vector_mb": round(len(ids) * d * 4 / 2**20, 2),
                "bench_index_child_vectors_mb": round(chunks * d * 4 / 2**20, 2),
                **search_ms(cut_docs, cut_queries),
            }
            print(f"  {d}: {rows[str(d)]}", flush=True)
        full = rows[str(encoder.dimension)]
        for row in rows.values():
            row["ndcg@10_change"] = round(row["ndcg@10"] - full["ndcg@10"], 4)
            row["memory_vs_full"] = round(row["bytes_per_vector"] / full["bytes_per_vector"], 3)
            row["search_cpu_vs_full"] = round(row["exact_top10_cpu_ms"] / full["exact_top10_cpu_ms"], 3)
        out["sets"][name] = {"documents": len(ids), "queries": len(queries), "by_dimension": rows}
        save()


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("--models", nargs="+", default=["all-MiniLM-L6-v2", "multilingual-e5-small"])
    parser.add_argument("--dims", nargs="+", type=int, default=[256, 192, 128, 64])
    parser.add_argument("--eval-dir", type=Path, default=common.EVAL_SETS)
    parser.add_argument("--out", type=Path, default=common.RESULTS / "matryoshka.json")
    args = parser.parse_args()
    texts = corpus()
    record = common.run_record()
    record["load_average_at_start"] = list(os.getloadavg())
    record["matryoshka_trained"] = {m: False for m in args.models}
    record["what"] = (
        "plain truncation of models not trained for it (renormalized first N dimensions), document-level dense "
        "arm (first window of each document), exact cosine search in numpy"
    )
    record["models"] = {}

    def save() -> None:
        record["load_average_at_end"] = list(os.getloadavg())
        common.write_json(args.out, record)

    for model in args.models:
        record["models"][model] = {}
        measure(model, args.dims, texts, args.eval_dir, record["models"][model], save)
    save()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
