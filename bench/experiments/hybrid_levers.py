"""Hybrid-quality levers, one ablation row each, on every bundled dev set (issue 15).

Runs on the index ``bench.ingest`` (or ``rag-pipeline demo --data-dir``) built. Each query's child
lists are fetched once from the real index, as its principal: dense (whole query), dense (title line),
BM25 with each query weighting, BM25 (title line). Rows are then computed from those lists with the
engine's own fusion arithmetic (:mod:`rag_pipeline.evaluation.fusion_tuning`):

* arms as shipped before this work: vector, BM25 (plain), hybrid RRF k=60 1:1 (the baseline of the
  paired tests);
* BM25 query weightings (fixed settings) and the weighting chosen by 5-fold cross-validation;
* hybrid with the better sparse query; with (k, weights) learned by cross-validation, with and without
  length-aware weights; multi-query merge (whole text and title line, dense and sparse); the title line's
  dense vector as a third prefetch (what ships for Jira and mixed searches).

Every learned row is out-of-fold: each query is scored with settings chosen on the other folds.
Each row has a bootstrap 95 % CI and a paired permutation test against plain RRF.

    .venv/bin/python -m bench.experiments.hybrid_levers [--data-dir /tmp/rag_bench] [--out FILE_STEM]

Results: bench/experiments/results/hybrid_levers.json and .md.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from bench import common
from rag_pipeline.composition import dense_encoder_of, open_index
from rag_pipeline.evaluation.eval_set import load_eval_set, load_eval_set_meta
from rag_pipeline.evaluation.fusion_tuning import (
    CrossValidated,
    FusionSetting,
    QueryCandidates,
    cross_validate,
    grid,
    ndcg_at_10,
    ranking,
    setting_scores,
)
from rag_pipeline.evaluation.runner import principal_of
from rag_pipeline.evaluation.statistics import bootstrap_ci, paired_permutation_p
from rag_pipeline.index.store import Hit, SearchFilter, VectorStore
from rag_pipeline.retrieval.grouping import documents_from_hits
from rag_pipeline.retrieval.query_cache import QueryEmbeddingCache
from rag_pipeline.retrieval.query_text import split_query
from rag_pipeline.retrieval.retriever import search_filter
from rag_pipeline.retrieval.sparse_query import SparseQueryConfig, sparse_query
from rag_pipeline.settings import Settings
from rag_pipeline.vectors.cache import EmbeddingCache
from rag_pipeline.vectors.sparse import Bm25Encoder, SparseVector, token_counts

DEPTH = 400  # children per list: the retriever's depth for 100 documents

SPARSE_VARIANTS: dict[str, SparseQueryConfig] = {
    "plain": SparseQueryConfig(),
    "prose": SparseQueryConfig(mode="fielded", title_weight=1, body="prose"),
    "title+2": SparseQueryConfig(mode="fielded", title_weight=2),
    "title+4": SparseQueryConfig(mode="fielded", title_weight=4),
    "title+2,prose": SparseQueryConfig(mode="fielded", title_weight=2, body="prose"),
    "title+4,prose": SparseQueryConfig(mode="fielded", title_weight=4, body="prose"),
    "title+4,prose,k3=1.2": SparseQueryConfig(mode="fielded", title_weight=4, body="prose", k3=1.2),
    "title+4,prose,body=0.5": SparseQueryConfig(mode="fielded", title_weight=4, body="prose", body_weight=0.5),
}


def _slim(hits: list[Hit]) -> list[Hit]:
    """Best first, cut to DEPTH, keeping only the payload grouping needs (texts would take gigabytes)."""
    ranked = sorted(hits, key=lambda h: (-h.score, h.id))[:DEPTH]
    keep = ("document_id", "parent_id")
    return [Hit(h.id, h.score, {k: h.payload[k] for k in keep if k in h.payload}) for h in ranked]


def _dense(store: VectorStore, vector: object, flt: SearchFilter) -> list[Hit]:
    return _slim(store.search_dense([float(x) for x in vector], DEPTH + 16, flt))  # type: ignore[attr-defined]


def _sparse(store: VectorStore, vector: SparseVector, flt: SearchFilter) -> list[Hit]:
    return _slim(store.search_sparse(vector, DEPTH + 16, flt))


def collect(
    store: VectorStore, queries_path: Path, embed: QueryEmbeddingCache, bm25: Bm25Encoder
) -> list[QueryCandidates]:
    meta = load_eval_set_meta(queries_path)
    queries = [q for q in load_eval_set(queries_path) if q.judged]
    titles = [split_query(q.query).title for q in queries]
    embed.get_many([q.query for q in queries] + [t for t in titles if t])
    lengths = token_counts([q.query for q in queries])
    out = []
    for q, title, length in zip(queries, titles, lengths, strict=True):
        flt = search_filter(principal_of(q), meta.sources)
        lists = {"dense": _dense(store, embed.get(q.query), flt)}
        for name, config in SPARSE_VARIANTS.items():
            lists[f"bm25:{name}"] = _sparse(store, sparse_query(bm25, q.query, config), flt)
        if title:
            lists["dense:title"] = _dense(store, embed.get(title), flt)
            lists["bm25:title"] = _sparse(store, bm25.encode_query(title), flt)
        else:
            # No title line: no title lists, as in the product (the title prefetch is dropped).
            lists["dense:title"], lists["bm25:title"] = [], []
        out.append(QueryCandidates(q.id, q.query, lists, q.relevant, tuple(q.exclude), length))
    return out


def single_list(candidates: list[QueryCandidates], name: str) -> np.ndarray:
    return ndcg_at_10(candidates, {c.query_id: ranking(c.lists[name], c.exclude) for c in candidates})


def document_level(candidates: list[QueryCandidates], names: list[str], k: int = 60) -> np.ndarray:
    """RRF over each list's document ranking (best child per document) instead of over child chunks."""
    rankings = {}
    for c in candidates:
        scores: dict[str, float] = {}
        for name in names:
            for rank, result in enumerate(documents_from_hits(c.lists[name], c.exclude)):
                scores[result.document_id] = scores.get(result.document_id, 0.0) + 1.0 / (k + rank)
        rankings[c.query_id] = sorted(scores.items(), key=lambda x: (-x[1], x[0]))[:100]
    return ndcg_at_10(candidates, rankings)


def row(scores: np.ndarray, baseline: np.ndarray, note: str = "") -> dict[str, object]:
    low, high = bootstrap_ci(scores)
    return {
        "ndcg@10": round(float(scores.mean()), 4),
        "ci95": [round(low, 4), round(high, 4)],
        "diff_vs_rrf": round(float(scores.mean() - baseline.mean()), 4),
        "p_vs_rrf": round(paired_permutation_p(scores, baseline), 4) if not np.array_equal(scores, baseline) else 1.0,
        "note": note,
    }


def evaluate_set(candidates: list[QueryCandidates]) -> dict[str, object]:
    plain_rrf = FusionSetting(60, (("dense", 1.0), ("bm25:plain", 1.0)))
    baseline = setting_scores(candidates, [plain_rrf])[0]
    rows: dict[str, dict[str, object]] = {}
    rows["vector"] = row(single_list(candidates, "dense"), baseline)
    sparse_scores = np.vstack([single_list(candidates, f"bm25:{n}") for n in SPARSE_VARIANTS])
    for name, scores in zip(SPARSE_VARIANTS, sparse_scores, strict=True):
        rows[f"bm25 [{name}]"] = row(scores, baseline, "fixed setting")
    titled = [c for c in candidates if c.lists["bm25:title"]]
    for c in candidates:  # a query without a title line searches with all of it
        c.lists["bm25:title only"] = c.lists["bm25:title"] or c.lists["bm25:plain"]
    rows["bm25 [title only]"] = row(
        single_list(candidates, "bm25:title only"), baseline, f"{len(titled)} queries have a title line"
    )
    sparse_settings = [FusionSetting(60, ((f"bm25:{n}", 1.0),)) for n in SPARSE_VARIANTS]
    cv_sparse = cross_validate(candidates, sparse_settings, matrix=sparse_scores)
    rows["bm25 [weighting chosen by CV]"] = row(
        cv_sparse.scores, baseline, "chosen per fold: " + ", ".join(p["all"].weights[0][0] for p in cv_sparse.chosen)
    )
    rows["hybrid rrf k=60 [plain]"] = row(baseline, baseline, "baseline")
    hybrid_rows = {}
    for name in SPARSE_VARIANTS:
        setting = FusionSetting(60, (("dense", 1.0), (f"bm25:{name}", 1.0)))
        hybrid_rows[name] = setting_scores(candidates, [setting])[0]
        if name != "plain":
            rows[f"hybrid rrf k=60 [{name}]"] = row(hybrid_rows[name], baseline, "fixed setting")
    # Learned fusion on each sparse weighting: grid over k and the dense share, chosen out of fold.
    all_settings: list[FusionSetting] = []
    for name in SPARSE_VARIANTS:
        all_settings += grid("dense", f"bm25:{name}")
    matrix = setting_scores(candidates, all_settings)
    plain_grid = [i for i, s in enumerate(all_settings) if s.weights[1][0] == "bm25:plain"]
    cv_plain = cross_validate(candidates, [all_settings[i] for i in plain_grid], matrix=matrix[plain_grid])
    rows["hybrid learned k,weights [plain]"] = row(cv_plain.scores, baseline, _chosen(cv_plain))
    cv_all = cross_validate(candidates, all_settings, matrix=matrix)
    rows["hybrid learned k,weights,weighting"] = row(cv_all.scores, baseline, _chosen(cv_all))
    cv_len = cross_validate(candidates, all_settings, matrix=matrix, length_aware=True)
    rows["hybrid learned, length-aware"] = row(cv_len.scores, baseline, _chosen(cv_len))
    rows["hybrid rrf k=60, fused per document"] = row(
        document_level(candidates, ["dense", "bm25:plain"]), baseline, "each list grouped to documents before RRF"
    )
    multi = [
        FusionSetting(k, (("dense", 1.0), ("bm25:plain", 1.0), ("dense:title", t), ("bm25:title", t)))
        for k in (20, 60)
        for t in (0.5, 1.0)
    ]
    multi_matrix = setting_scores(candidates, multi)
    rows["multi-query rrf (whole+title, k=60)"] = row(multi_matrix[3], baseline, "fixed setting")
    cv_multi = cross_validate(candidates, multi, matrix=multi_matrix)
    rows["multi-query learned"] = row(cv_multi.scores, baseline, _chosen(cv_multi))
    # Field-aware dense from the query side: the title line embedded alone as a third prefetch, with the
    # fielded BM25 query (what ships).
    fielded = "bm25:title+4,prose,k3=1.2"
    title_prefetch = [
        FusionSetting(k, (("dense", 1.0), (fielded, 1.0), ("dense:title", t)))
        for k in (10, 20, 40, 60)
        for t in (0.5, 1.0)
    ]
    title_matrix = setting_scores(candidates, title_prefetch)
    rows["hybrid + title dense prefetch (k=60, 0.5) [fielded]"] = row(title_matrix[6], baseline, "fixed setting")
    rows["hybrid + title dense prefetch (k=10, 0.5) [fielded]"] = row(title_matrix[0], baseline, "fixed setting")
    cv_title = cross_validate(candidates, title_prefetch, matrix=title_matrix)
    rows["hybrid + title dense prefetch, k and weight learned [fielded]"] = row(
        cv_title.scores, baseline, _chosen(cv_title)
    )
    best = int(np.argmax(matrix.mean(axis=1)))
    in_sample = {"setting": all_settings[best].describe(), "ndcg@10": round(float(matrix[best].mean()), 4)}
    return {"queries": len(candidates), "rows": rows, "best_on_all_queries": in_sample}


def _chosen(cv: CrossValidated) -> str:
    return "chosen per fold: " + "; ".join(", ".join(f"{b}={s.describe()}" for b, s in p.items()) for p in cv.chosen)


def markdown(results: dict[str, dict[str, object]]) -> str:
    lines = ["| set | row | nDCG@10 | 95% CI | Δ vs RRF | p |", "|---|---|---:|---|---:|---:|"]
    for name, result in results.items():
        for label, r in result["rows"].items():  # type: ignore[union-attr]
            lo, hi = r["ci95"]
            cells = [name, label, f"{r['ndcg@10']:.3f}", f"{lo:.3f}–{hi:.3f}", f"{r['diff_vs_rrf']:+.3f}"]
            lines.append("| " + " | ".join([*cells, f"{r['p_vs_rrf']:.3f}"]) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = common.parser(__doc__)
    common.add_index_arguments(parser)
    parser.add_argument("--out", type=Path, default=common.EXPERIMENT_RESULTS / "hybrid_levers")
    parser.add_argument("--sets", nargs="*", default=list(common.DEV_SETS))
    args = parser.parse_args()
    settings = Settings.from_env().with_data_dir(args.data_dir)
    bm25 = Bm25Encoder()
    encoder = dense_encoder_of(settings)
    embed = QueryEmbeddingCache(encoder, persistent=EmbeddingCache(settings.paths.embedding_cache))
    results: dict[str, dict[str, object]] = {}
    for name in args.sets:
        started = time.perf_counter()
        with open_index(settings) as store:
            candidates = collect(store, args.eval_dir / f"{name}.jsonl", embed, bm25)
        fetched = time.perf_counter() - started
        results[name] = evaluate_set(candidates)
        results[name]["seconds"] = {"fetch": round(fetched, 1), "total": round(time.perf_counter() - started, 1)}
        print(name, json.dumps(results[name]["rows"], indent=None)[:4000], flush=True)
    common.write_json(args.out.with_suffix(".json"), {"run": common.run_record(encoder), **results})
    args.out.with_suffix(".md").write_text(markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
