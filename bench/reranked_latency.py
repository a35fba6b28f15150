"""The served reranked arm's latency on issue-length queries (issue 48 part 3: p50 ≤ 150 ms with the same model).

A learned reranker is trained (as ``reranker_model`` trains it: every labelled query of the set, the default L2
and bag) on the Jira dev set's hybrid candidates, then each query is searched as the service searches it —
``Retriever.search(mode="reranked", top_k=10)`` with parent text, no evaluation sharing — after its embedding is
cached (the figure is the search: candidates, signals, features, boosters). Run on an index of the bundled data::

    /usr/bin/time -v .venv/bin/python -m bench.reranked_latency --data DATA [--queries 200]

Results: bench/results/reranked_latency.json (p50/p95 ms per stage).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from bench import common
from rag_pipeline.composition import dense_encoder_of, open_index, served_config
from rag_pipeline.evaluation.eval_set import load_eval_set
from rag_pipeline.evaluation.runner import principal_of, rerank_examples
from rag_pipeline.retrieval.entry import SearchModels, build_retriever
from rag_pipeline.retrieval.rerank import learned
from rag_pipeline.settings import Settings
from rag_pipeline.vectors.sparse import Bm25Encoder, Bm25Params


def main() -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--eval-set", type=Path, default=Path("eval_sets/jira_appcelerator_dev.jsonl"))
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--out", type=Path, default=common.RESULTS / "reranked_latency.json")
    args = parser.parse_args()
    settings = Settings.from_env({"RAG_DATA_DIR": str(args.data)})
    queries = [q for q in load_eval_set(args.eval_set) if q.judged]
    with open_index(settings) as store:
        encoder = Bm25Encoder(Bm25Params(tokenizer=settings.bm25_tokenizer))
        models = SearchModels(dense_model=settings.dense_model, bm25=encoder, dense=dense_encoder_of(settings))
        config = served_config(settings)
        retriever = build_retriever(store, models, config)
        retriever.embed_queries([q.query for q in queries])
        started = time.perf_counter()
        model = learned.train_reranker(rerank_examples(retriever, queries, sources=["jira"]), encoder=encoder)
        trained = time.perf_counter() - started
        timed = queries[: args.queries]
        for query in timed[:10]:  # warm-up: first calls allocate
            retriever.search(query.query, "reranked", principal_of(query), top_k=10, sources=["jira"], reranker=model)
        stages: dict[str, list[float]] = {"search": [], "rerank": [], "total": []}
        for query in timed:
            response = retriever.search(
                query.query, "reranked", principal_of(query), top_k=10, sources=["jira"], reranker=model
            )
            embed = response.seconds.get("embed", 0.0)
            stages["search"].append((response.seconds.get("search", 0.0) - embed) * 1000)
            stages["rerank"].append(response.seconds.get("rerank", 0.0) * 1000)
            stages["total"].append((response.seconds.get("total", 0.0) - embed) * 1000)
    figures = {
        name: {"p50_ms": round(float(np.percentile(v, 50)), 1), "p95_ms": round(float(np.percentile(v, 95)), 1)}
        for name, v in stages.items()
    }
    result = {"queries": len(timed), "bag": len(model.boosters), "train_seconds": round(trained, 1), **figures}
    print(result)
    common.write_json(args.out, {**result, "run": common.run_record()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
