"""Where can the pipeline's CJK BM25 fall below a plain bm25s bigram anchor? Each difference, one at a time.

The pipeline's ``cjk-bigram`` BM25 (the Japanese path) differs from the anchor of ``bench/cjk_chat.py`` (bm25s,
k1 1.5, b 0.75, whole threads, IDF over threads, a query term counted as often as it occurs) in five ways:

1. k1 = 1.2;
2. a fixed length prior (``THREAD_AVG_LEN`` = 350 BM25 tokens) instead of the corpus's mean thread length;
3. Qdrant's query weight 1 per distinct term (only ``ko-morpheme-bigram`` counts them);
4. IDF counted over child chunks, not threads: every child of a thread carries the thread's vector
   (``scores_whole_threads``), so a thread of five children counts five times in a term's document frequency;
5. English stopwords and Snowball stems on the Latin words (not modelled: the Korean threads have few).

This replays BM25 in numpy over the anchor's bigram tokens of the Korean help-desk threads (the only CJK chat data
here; built by ``bench.experiments.korean_heldout build``) with each difference switched on alone, then all, and
then under a stress test: threads cut into as many children as a 100-token child size would give (long Japanese
Slack threads have many children; these have one to three), and a corpus whose mean thread is 3x or 1/3 the prior.

    .venv/bin/python -m bench.experiments.cjk_bm25_gap

Results: bench/results/cjk_bm25_gap.json.
"""

from __future__ import annotations

import glob
import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from bench import common
from bench.cjk_chat import _bigrams
from bench.experiments.korean_heldout import FOLDER, TEAM, WORK
from rag_pipeline.connectors.slack.export import SlackExportReader
from rag_pipeline.evaluation.statistics import bootstrap_ci, paired_permutation_p
from rag_pipeline.vectors.sparse import THREAD_AVG_LEN


@dataclass(frozen=True)
class Variant:
    k1: float = 1.5
    b: float = 0.75
    avg_len: float | None = None  # None: the corpus's mean
    query_counts: bool = True
    df_over_children: bool = False


def bm25(docs: Sequence[Counter[str]], children: np.ndarray, queries: Sequence[list[str]], v: Variant) -> np.ndarray:
    """Queries × threads BM25 scores."""
    lengths = np.array([sum(d.values()) for d in docs], dtype=float)
    avg = v.avg_len or float(lengths.mean())
    df: Counter[str] = Counter()
    for d, c in zip(docs, children, strict=True):
        for term in d:
            df[term] += int(c) if v.df_over_children else 1
    n = float(children.sum()) if v.df_over_children else float(len(docs))
    norm = v.k1 * (1 - v.b + v.b * lengths / avg)
    out = np.zeros((len(queries), len(docs)))
    for i, query in enumerate(queries):
        weights = Counter(query) if v.query_counts else Counter(set(query))
        for term, w in weights.items():
            if term not in df:
                continue
            idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
            tf = np.array([d.get(term, 0) for d in docs], dtype=float)
            out[i] += w * idf * tf * (v.k1 + 1) / (tf + norm)
    return out


def ndcg(scores: np.ndarray, relevant: Sequence[int]) -> np.ndarray:
    values = []
    for row, rel in zip(scores, relevant, strict=True):
        rank = int((row > row[rel]).sum()) + int((row[:rel] == row[rel]).sum())  # ties: earlier index first
        values.append(1 / math.log2(rank + 2) if rank < 10 else 0.0)
    return np.array(values)


def children_per_thread(ids: Sequence[str]) -> np.ndarray:
    files = glob.glob(str(WORK / "all-cjk" / "parquet" / "slack_child_chunks" / "*.parquet"))
    counts = pd.concat([pd.read_parquet(f, columns=["document_id"]) for f in files])["document_id"].value_counts()
    return np.array([int(counts.get(i, 1)) for i in ids])


def main() -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--out", default=str(common.RESULTS / "cjk_bm25_gap.json"))
    args = parser.parse_args()
    documents = SlackExportReader(FOLDER / "export.zip", TEAM).read().documents
    ids = [d.id for d in documents]
    tokens = [_bigrams(d.text) for d in documents]
    docs = [Counter(t) for t in tokens]
    lines = (FOLDER / "ko_helpdesk.jsonl").read_text(encoding="utf-8").splitlines()
    queries = [json.loads(x) for x in lines if x.strip()]
    position = {d: i for i, d in enumerate(ids)}
    relevant = [position[next(iter(q["relevant"]))] for q in queries]
    query_tokens = [_bigrams(q["query"]) for q in queries]
    children = children_per_thread(ids)
    stressed = np.array([max(1, math.ceil(len(t) / 100)) for t in tokens])
    mean_len = float(np.mean([len(t) for t in tokens]))
    pipeline = Variant(k1=1.2, avg_len=THREAD_AVG_LEN, query_counts=False, df_over_children=True)
    variants: dict[str, tuple[Variant, np.ndarray]] = {
        "anchor (k1 1.5, mean length, counts, IDF over threads)": (Variant(), children),
        "k1 1.2": (Variant(k1=1.2), children),
        f"fixed length prior {THREAD_AVG_LEN:g}": (Variant(avg_len=THREAD_AVG_LEN), children),
        "query weight 1 per distinct term": (Variant(query_counts=False), children),
        "IDF over children (as indexed)": (Variant(df_over_children=True), children),
        "all four (the pipeline's cjk-bigram)": (pipeline, children),
        "IDF over children, 100-token children": (Variant(df_over_children=True), stressed),
        "all four, 100-token children": (pipeline, stressed),
        "all four but query counts": (Variant(k1=1.2, avg_len=THREAD_AVG_LEN, df_over_children=True), children),
        "length prior 3x the mean": (Variant(avg_len=3 * mean_len), children),
        "length prior 1/3 the mean": (Variant(avg_len=mean_len / 3), children),
    }
    base = None
    results: dict[str, Any] = {}
    for name, (variant, counts) in variants.items():
        values = ndcg(bm25(docs, counts, query_tokens, variant), relevant)
        base = values if base is None else base
        low, high = bootstrap_ci(values)
        results[name] = {
            "ndcg@10": round(float(values.mean()), 4),
            "ci95": [round(low, 4), round(high, 4)],
            "vs_anchor": round(float(values.mean() - base.mean()), 4),
            "p_vs_anchor": round(paired_permutation_p(values, base), 4) if values is not base else 1.0,
        }
        print(f"{name}: {results[name]}", flush=True)
    # Only dl / avg_len enters BM25: a prior r times the corpus mean is a corpus whose threads are 1/r of the prior
    # (a Japanese Slack workspace whose mean thread is 1,050 bigrams against the prior 350 is r = 1/3).
    sweep: dict[str, dict[str, float]] = {}
    for b in (0.75, 0.5):
        for ratio in (0.25, 1 / 3, 0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0):
            variant = Variant(k1=1.2, b=b, avg_len=ratio * mean_len, df_over_children=True, query_counts=False)
            values = ndcg(bm25(docs, children, query_tokens, variant), relevant)
            sweep.setdefault(f"b={b:g}", {})[f"prior/mean={ratio:.2f}"] = round(float(values.mean()), 4)
        print(f"b={b:g}: {sweep[f'b={b:g}']}", flush=True)
    out = {
        "run": common.run_record(),
        "prior_over_mean_sweep": sweep,
        "mean_thread_bigrams": round(mean_len, 1),
        "children_per_thread": dict(Counter(children.tolist())),
        "children_per_thread_100_token_children": {
            "mean": round(float(stressed.mean()), 2),
            "max": int(stressed.max()),
        },
        "results": results,
    }
    common.write_json(args.out, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
