"""Would a document-side title vector help as a hybrid prefetch? Issue 15's lever 2, measured before building it.

Every indexed document's title (Jira summary, Slack thread root) is embedded with the index's model (through the
embedding cache) and searched brute force, once with the whole query and once with its title line. Those two
document lists join the shipped fusion's lists in the harness's replay of Qdrant's weighted RRF
(``rag_pipeline/evaluation/fusion_tuning.py``), and k and the weights are chosen out of fold. Needs the demo index:

    .venv/bin/python -m bench.experiments.title_vector_lever [--data-dir /tmp/rag_bench]   # 4 min on 2 cores

Results: bench/experiments/results/title_vector_lever.json.
"""

from __future__ import annotations

import glob
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bench import common
from bench.experiments.hybrid_levers import _dense, _sparse
from rag_pipeline.composition import dense_encoder_of, open_index
from rag_pipeline.evaluation.eval_set import load_eval_set, load_eval_set_meta
from rag_pipeline.evaluation.fusion_tuning import (
    FusionSetting,
    QueryCandidates,
    cross_validate,
    setting_scores,
)
from rag_pipeline.evaluation.runner import principal_of
from rag_pipeline.index.store import Hit
from rag_pipeline.retrieval.query_cache import QueryEmbeddingCache
from rag_pipeline.retrieval.query_text import split_query
from rag_pipeline.retrieval.retriever import search_filter
from rag_pipeline.retrieval.sparse_query import SPARSE_QUERY_PRESETS, sparse_query
from rag_pipeline.settings import Settings
from rag_pipeline.vectors.cache import EmbeddingCache
from rag_pipeline.vectors.sparse import Bm25Encoder

# What ships (rag_pipeline/retrieval/fusion.py): per eval set, k and the lists with their weights.
SHIPPED = {
    "jira_appcelerator_dev": (10, (("dense", 1.0), ("bm25", 1.0), ("dense:title", 0.5))),
    "slack_ubuntu_dev": (10, (("dense", 1.6), ("bm25", 0.4))),
    "acl_bundled_dev": (60, (("dense", 1.0), ("bm25", 1.0), ("dense:title", 0.5))),
}


class TitleIndex:
    """Every document's title vector, searched brute force under a principal and the eval set's sources."""

    def __init__(self, data_dir: Path, embed: QueryEmbeddingCache) -> None:
        files = [
            f
            for table in ("jira_issues", "slack_threads")
            for f in glob.glob(str(data_dir / "parquet" / table / "**" / "*.parquet"), recursive=True)
        ]
        columns = ["document_id", "source", "title", "acl"]
        docs = pd.concat([pd.read_parquet(f, columns=columns) for f in files]).drop_duplicates(
            "document_id", keep="last"
        )
        self.ids = docs["document_id"].tolist()
        self.sources = docs["source"].tolist()
        self.acls = [json.loads(a) for a in docs["acl"]]
        self.vectors = np.asarray(embed.get_many(docs["title"].fillna("").tolist()), dtype=np.float32)

    def allowed(self, principal, sources) -> np.ndarray:
        return np.array(
            [
                (not sources or s in sources) and principal.admits(a)
                for s, a in zip(self.sources, self.acls, strict=True)
            ]
        )

    def search(self, vector, allowed: np.ndarray, limit: int = 100) -> list[Hit]:
        scores = self.vectors @ np.asarray(vector, dtype=np.float32)
        order = [i for i in np.argsort(-scores) if allowed[i]][:limit]
        return [
            Hit(f"t:{self.ids[i]}", float(scores[i]), {"document_id": self.ids[i], "parent_id": f"t:{self.ids[i]}"})
            for i in order
        ]


def evaluate(name: str, candidates: list[QueryCandidates]) -> dict[str, object]:
    k, shipped = SHIPPED[name]
    settings = [FusionSetting(k, shipped)]
    for kk in (10, 60):
        for w in (0.25, 0.5, 1.0):
            settings.append(FusionSetting(kk, (*shipped, ("doctitle", w))))
            settings.append(FusionSetting(kk, (*shipped, ("doctitle", w), ("doctitle:title", w))))
    matrix = setting_scores(candidates, settings)
    cv = cross_validate(candidates, settings, matrix=matrix)
    return {
        "queries": len(candidates),
        "shipped": round(float(matrix[0].mean()), 4),
        "with_title_vector_out_of_fold": round(float(cv.scores.mean()), 4),
        "chosen_per_fold": [{b: s.describe() for b, s in p.items()} for p in cv.chosen],
        "fixed_settings": {s.describe(): round(float(matrix[i].mean()), 4) for i, s in enumerate(settings)},
    }


def main() -> None:
    parser = common.parser(__doc__)
    common.add_index_arguments(parser)
    parser.add_argument("--out", type=Path, default=common.EXPERIMENT_RESULTS / "title_vector_lever.json")
    args = parser.parse_args()
    settings = Settings.from_env().with_data_dir(args.data_dir)
    encoder = dense_encoder_of(settings)
    embed = QueryEmbeddingCache(encoder, persistent=EmbeddingCache(settings.paths.embedding_cache))
    started = time.perf_counter()
    titles = TitleIndex(args.data_dir, embed)
    print(f"{len(titles.ids)} titles embedded in {time.perf_counter() - started:.0f} s", flush=True)
    bm25 = Bm25Encoder()
    fielded = SPARSE_QUERY_PRESETS["fielded"]
    results: dict[str, object] = {}
    for name in SHIPPED:
        path = args.eval_dir / f"{name}.jsonl"
        meta = load_eval_set_meta(path)
        queries = [q for q in load_eval_set(path) if q.judged]
        title_lines = [split_query(q.query).title for q in queries]
        embed.get_many([q.query for q in queries] + [t for t in title_lines if t])
        candidates = []
        with open_index(settings) as store:
            for q, title in zip(queries, title_lines, strict=True):
                principal = principal_of(q)
                flt = search_filter(principal, meta.sources)
                allowed = titles.allowed(principal, meta.sources)
                lists = {
                    "dense": _dense(store, embed.get(q.query), flt),
                    "bm25": _sparse(store, sparse_query(bm25, q.query, fielded), flt),
                    "dense:title": _dense(store, embed.get(title), flt) if title else [],
                    "doctitle": titles.search(embed.get(q.query), allowed),
                    "doctitle:title": titles.search(embed.get(title), allowed) if title else [],
                }
                candidates.append(QueryCandidates(q.id, q.query, lists, q.relevant, tuple(q.exclude), 0))
        results[name] = figures = evaluate(name, candidates)
        print(name, figures["shipped"], "→", figures["with_title_vector_out_of_fold"], flush=True)
    common.write_json(args.out, {"run": common.run_record(encoder), **results}, indent=1)


if __name__ == "__main__":
    main()
