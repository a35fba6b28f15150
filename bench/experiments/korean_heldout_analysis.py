"""The analysis step of :mod:`bench.experiments.korean_heldout`: every figure from the pickled candidates that its
``build`` and ``collect`` steps wrote.

    .venv/bin/python -m bench.experiments.korean_heldout_analysis

Each ko_helpdesk query has one relevant thread (grade 1), so nDCG@10 is ``1 / log2(rank + 1)`` for a rank ≤ 10
and 0 otherwise; it is computed directly (ranx gives the same numbers, checked on the arms).
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable, Sequence
from typing import Any

import bm25s
import numpy as np

from bench import common
from bench.cjk_chat import _bigrams
from bench.experiments.korean_heldout import TEAM, WORK, export_of, half_of
from rag_pipeline.connectors.slack.export import SlackExportReader
from rag_pipeline.evaluation.statistics import bootstrap_ci, paired_permutation_p
from rag_pipeline.retrieval.rerank.learned import (
    LAMBDARANK_PARAMS,
    RerankExample,
    cross_fit,
    featurize,
    term_encoder,
    train_reranker,
)

Ranked = Sequence[str]


def ndcg(ranked: Ranked, relevant: str) -> float:
    for i, doc in enumerate(ranked[:10]):
        if doc == relevant:
            return 1.0 / math.log2(i + 2)
    return 0.0


def load(corpus: str, language: str) -> dict[str, Any]:
    with (WORK / f"{corpus}-{language}.pkl").open("rb") as f:
        data: dict[str, Any] = pickle.load(f)
    data["relevant"] = {q["id"]: next(iter(q["relevant"])) for q in data["queries"]}
    data["text"] = {q["id"]: q["query"] for q in data["queries"]}
    return data


def anchor(corpus: str, data: dict[str, Any], tokenize: Callable[[str], list[str]] = _bigrams,
           k1: float = 1.5, b: float = 0.75) -> dict[str, list[str]]:  # fmt: skip
    """Plain bm25s over whole threads (bench/cjk_chat.py's anchor): query id → ranked thread ids."""
    documents = SlackExportReader(export_of(corpus), TEAM).read().documents
    ids = [d.id for d in documents]
    engine = bm25s.BM25(k1=k1, b=b)
    engine.index([tokenize(d.text) for d in documents], show_progress=False)
    qs = data["queries"]
    found, _ = engine.retrieve([tokenize(q["query"]) for q in qs], k=min(100, len(ids)), show_progress=False)
    return {q["id"]: [ids[int(d)] for d in found[i]] for i, q in enumerate(qs)}


def scores(data: dict[str, Any], run: dict[str, Ranked], ids: Sequence[str]) -> np.ndarray:
    return np.array([ndcg(run.get(q, []), data["relevant"][q]) for q in ids])


def arm_runs(data: dict[str, Any]) -> dict[str, dict[str, list[str]]]:
    return {arm: {q: [d for d, _ in r] for q, r in rankings.items()} for arm, rankings in data["arms"].items()}


def reranked_run(model: Any, examples: Sequence[RerankExample]) -> dict[str, list[str]]:
    """Each example's candidates in the model's order (``model``: a reranker, or query id → reranker)."""
    out = {}
    for e in examples:
        chosen = model(e) if callable(model) else model
        s = chosen.score_features(e.features)
        order = sorted(range(len(e.candidates)), key=lambda i: (-s[i], i))
        out[e.query_id] = [e.candidates[i].document_id for i in order]
    return out


def cross_fitted(examples: Sequence[RerankExample], encoder: Any, **kwargs: Any) -> dict[str, list[str]]:
    fitted = cross_fit(examples, folds=5, encoder=encoder, **kwargs)
    return reranked_run(lambda e: fitted.for_query(e.query), examples)


def row(values: np.ndarray, anchor_values: np.ndarray, hybrid_values: np.ndarray | None) -> dict[str, Any]:
    low, high = bootstrap_ci(values)
    out = {
        "ndcg@10": round(float(values.mean()), 4),
        "ci95": [round(low, 4), round(high, 4)],
        "vs_anchor": round(float(values.mean() - anchor_values.mean()), 4),
        "p_vs_anchor": round(paired_permutation_p(values, anchor_values), 4) if values is not anchor_values else 1.0,
    }
    if hybrid_values is not None and not np.array_equal(values, hybrid_values):
        out["vs_hybrid"] = round(float(values.mean() - hybrid_values.mean()), 4)
        out["p_vs_hybrid"] = round(paired_permutation_p(values, hybrid_values), 4)
    return out


def splits() -> list[tuple[str, str, str, Callable[[dict[str, Any]], tuple[list[str], list[str]]]]]:
    """(name, tuning corpus, scored corpus, query ids of (tuning, scored) from the scored corpus's data)."""

    def halves(which: int) -> Callable[[dict[str, Any]], tuple[list[str], list[str]]]:
        def cut(data: dict[str, Any]) -> tuple[list[str], list[str]]:
            ids = [q["id"] for q in data["queries"]]
            tune = [q for q in ids if half_of(data["text"][q]) != which]
            return tune, [q for q in ids if half_of(data["text"][q]) == which]

        return cut

    def whole(data: dict[str, Any]) -> tuple[list[str], list[str]]:
        return [], [q["id"] for q in data["queries"]]

    return [
        ("samsung→iphone", "samsung", "iphone", whole),
        ("iphone→samsung", "iphone", "samsung", whole),
        ("half A→B", "all", "all", halves(1)),
        ("half B→A", "all", "all", halves(0)),
    ]


def _with_features(data: dict[str, Any], language: str) -> dict[str, Any]:
    featurize(data["examples"], term_encoder("ko-morpheme-bigram" if language == "korean" else "cjk-bigram"))
    return data


# The reranked arm before this work: the English LambdaRank parameters, no guard.
BEFORE: dict[str, Any] = {"params": dict(LAMBDARANK_PARAMS), "guard": False}


def analyse() -> None:
    results: dict[str, Any] = {"run": common.run_record(), "splits": {}}
    lines = ["| index | split (tuned → scored) | n | anchor | vector | bm25 | hybrid | reranked before "
             "| reranked after | transfer before | transfer after |", "|---|---|---:|" + "---:|" * 8]  # fmt: skip
    for language in ("korean", "cjk"):
        loaded = {c: _with_features(load(c, language), language) for c in ("samsung", "iphone", "all")}
        anchors = {c: anchor(c, d) for c, d in loaded.items()}
        encoder = term_encoder("ko-morpheme-bigram" if language == "korean" else "cjk-bigram")
        for name, tuned_on, scored_on, cut in splits():
            data = loaded[scored_on]
            tune_ids, ids = cut(data)
            by_id = {e.query_id: e for e in data["examples"]}
            scored = [by_id[q] for q in ids]
            training = loaded[tuned_on]["examples"] if tuned_on != scored_on else [by_id[q] for q in tune_ids]
            runs = {arm: run for arm, run in arm_runs(data).items()}
            runs["reranked before"] = cross_fitted(scored, encoder, **BEFORE)
            runs["reranked after"] = cross_fitted(scored, encoder)
            runs["transfer before"] = reranked_run(train_reranker(training, encoder=encoder, **BEFORE), scored)
            runs["transfer after"] = reranked_run(train_reranker(training, encoder=encoder), scored)
            a = scores(data, anchors[scored_on], ids)
            h = scores(data, runs["hybrid"], ids)
            figures = {"anchor (bm25s bigrams)": row(a, a, None)}
            for arm, run in runs.items():
                figures[arm] = row(scores(data, run, ids), a, None if arm == "hybrid" else h)
            results["splits"][f"{language}: {name}"] = {"queries": len(ids), "arms": figures}
            cells = " | ".join(f"{f['ndcg@10']:.3f}" for f in figures.values())
            lines.append(f"| {language} | {name} | {len(ids)} | {cells} |")
            print(lines[-1], flush=True)
            common.write_json(common.RESULTS / "korean_heldout.json", results)
    print("\n".join(lines))


def main() -> int:
    common.parser(__doc__).parse_args()
    analyse()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
