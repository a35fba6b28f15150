"""Retrieval quality of the default dense model on the bundled dev eval sets, next to BM25.

Runs after ``bench.ingest`` on the index it built: for each query, searches child chunks
(dense exact search or BM25 with Qdrant's IDF), keeps each document's best chunk, drops the
query's ``exclude`` ids, and scores document rankings with ir-measures (nDCG@10, R@10, R@100,
RR@10). This is a model-choice measurement, not the four-way evaluation (a later milestone).

    .venv/bin/python -m bench.experiments.dense_quality [--data-dir /tmp/rag_bench] [--out FILE.json]

Results: bench/experiments/results/dense_quality.json.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import ir_measures
from ir_measures import RR, R, nDCG

from bench import common
from rag_pipeline.composition import open_index
from rag_pipeline.evaluation.eval_set import load_eval_set
from rag_pipeline.index.store import SearchFilter
from rag_pipeline.settings import Settings
from rag_pipeline.vectors.dense.load import load_dense_encoder
from rag_pipeline.vectors.sparse import Bm25Encoder

MEASURES = [nDCG @ 10, R @ 10, R @ 100, RR @ 10]
SETS = {"slack_ubuntu_dev": "slack", "jira_appcelerator_dev": "jira"}


def document_ranking(hits, exclude: set[str]) -> dict[str, float]:
    scores: dict[str, float] = {}
    for hit in hits:
        doc = hit.payload["document_id"]
        if doc not in exclude and hit.score > scores.get(doc, float("-inf")):
            scores[doc] = hit.score
    return scores


def main() -> None:
    parser = common.parser(__doc__)
    common.add_index_arguments(parser)
    parser.add_argument("--out", type=Path, default=common.EXPERIMENT_RESULTS / "dense_quality.json")
    parser.add_argument("--depth", type=int, default=300, help="child chunks retrieved per query")
    args = parser.parse_args()
    settings = Settings.from_env().with_data_dir(args.data_dir)
    encoder, bm25 = load_dense_encoder(settings.dense_model), Bm25Encoder()
    report: dict[str, dict] = {"model": encoder.model_id, "run": common.run_record(encoder)}
    with open_index(settings) as store:
        for name, source in SETS.items():
            queries = load_eval_set(args.eval_dir / f"{name}.jsonl")
            qrels = [ir_measures.Qrel(q.id, d, g) for q in queries for d, g in q.relevant.items()]
            flt = SearchFilter(sources=(source,))
            runs: dict[str, list] = {"dense": [], "bm25": []}
            started = time.perf_counter()
            vectors = encoder.encode_queries([q.query for q in queries])
            for q, vector in zip(queries, vectors, strict=True):
                exclude = set(q.exclude)
                for arm, hits in (
                    ("dense", store.search_dense(vector, args.depth, flt)),
                    ("bm25", store.search_sparse(bm25.encode_query(q.query), args.depth, flt)),
                ):
                    ranking = document_ranking(hits, exclude)
                    runs[arm].extend(ir_measures.ScoredDoc(q.id, d, s) for d, s in ranking.items())
            report[name] = {
                "queries": len(queries),
                "seconds": round(time.perf_counter() - started, 2),
                **{
                    arm: {str(m): round(v, 4) for m, v in ir_measures.calc_aggregate(MEASURES, qrels, run).items()}
                    for arm, run in runs.items()
                },
            }
    common.write_json(args.out, report)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
