"""The multilingual dense model on short Korean chat turns: prompts, what is embedded, and truncation.

On the Korean help-desk threads (eval_sets/ko_helpdesk), exact cosine search over one vector per thread (no
index, no chunking, so only the embedding choices differ), nDCG@10 with 95 % bootstrap CIs for:

- the E5 prompts (``query: `` / ``passage: ``, as the model card says) against none, and against both sides
  embedded as passages (``passage: `` on the query too, the symmetric use the card suggests for similarity);
- the whole thread against its first remaining message (what the index's title vector holds) and against the best
  single turn (max over the thread's messages);
- the thread cut at the model's 512 tokens against its first 128 tokens (how much the tail of a thread adds).

    .venv/bin/python -m bench.experiments.korean_dense      # ~2 min on 2 cores with the OpenVINO encoder

Results: bench/experiments/results/korean_dense.json and a markdown table.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench import common
from rag_pipeline.connectors.slack.export import SlackExportReader
from rag_pipeline.evaluation.metrics import per_query_metrics
from rag_pipeline.evaluation.statistics import bootstrap_ci
from rag_pipeline.vectors.dense.load import load_dense_encoder

FOLDER = common.EVAL_SETS / "ko_helpdesk"
TEAM = "T0KOHELPDK"
MODEL = "multilingual-e5-small"


def _lines(text: str) -> list[str]:
    """A thread document's messages without the "author: " prefix."""
    return [line.split(": ", 1)[-1] for line in text.split("\n") if line.strip()]


def _score(
    queries: list[dict[str, Any]], ids: list[str], query_vectors: np.ndarray, doc_vectors: np.ndarray
) -> dict[str, Any]:
    return _ranked(queries, ids, query_vectors @ doc_vectors.T)


def _ranked(queries: list[dict[str, Any]], ids: list[str], scores: np.ndarray) -> dict[str, Any]:
    """nDCG@10 (mean, CI) of ranking the threads by ``scores`` (queries × threads)."""
    run = {}
    for i, query in enumerate(queries):
        top = np.argsort(-scores[i])[:100]
        run[query["id"]] = {ids[j]: float(scores[i, j]) for j in top}
    values = per_query_metrics({q["id"]: q["relevant"] for q in queries}, run)["ndcg@10"].to_numpy()
    low, high = bootstrap_ci(values)
    return {"ndcg@10": round(float(values.mean()), 4), "ci95": [round(low, 4), round(high, 4)]}


def _max_over_turns(
    queries: np.ndarray, turns: Sequence[Sequence[str]], embed: Callable[[list[str]], np.ndarray]
) -> np.ndarray:
    """Queries × threads: each thread scored by its turn closest to the query."""
    flat = [t for thread in turns for t in thread]
    vectors = embed(flat)
    owner = np.repeat(np.arange(len(turns)), [len(t) for t in turns])
    scores = queries @ vectors.T
    best = np.full((len(queries), len(turns)), -np.inf)
    np.maximum.at(best.T, owner, scores.T)
    return best


def main() -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--out", type=Path, default=common.EXPERIMENT_RESULTS / "korean_dense.json")
    args = parser.parse_args()
    encoder = load_dense_encoder(MODEL, "auto", "auto", None)
    model: Any = encoder
    documents = SlackExportReader(FOLDER / "export.zip", TEAM).read().documents
    ids = [d.id for d in documents]
    queries = [json.loads(x) for x in (FOLDER / "ko_helpdesk.jsonl").read_text(encoding="utf-8").splitlines()]
    threads = [_lines(d.text) for d in documents]
    whole = ["\n".join(t) for t in threads]
    tokenizer = model._tokenizer

    def raw(texts: list[str]) -> np.ndarray:  # no prompt: the model's own encode
        return np.asarray(model._encode(texts), dtype=np.float32)

    def head(text: str, tokens: int) -> str:
        ids_ = tokenizer(text, add_special_tokens=False, truncation=False)["input_ids"][:tokens]
        return str(tokenizer.decode(ids_))

    q_prompted = encoder.encode_queries([q["query"] for q in queries])
    q_raw = raw([q["query"] for q in queries])
    q_as_passage = encoder.encode_documents([q["query"] for q in queries])
    d_prompted = encoder.encode_documents(whole)
    results = {
        "prompts query:/passage: (the pipeline's)": _score(queries, ids, q_prompted, d_prompted),
        "no prompts": _score(queries, ids, q_raw, raw(whole)),
        "passage: on both sides": _score(queries, ids, q_as_passage, d_prompted),
        "first remaining message only (the title vector)": _score(
            queries, ids, q_prompted, encoder.encode_documents([t[0] for t in threads])
        ),
        "first 128 tokens of the thread": _score(
            queries, ids, q_prompted, encoder.encode_documents([head(w, 128) for w in whole])
        ),
    }
    best = _max_over_turns(q_prompted, threads, lambda texts: encoder.encode_documents(texts))
    results["best single turn (max over messages)"] = _ranked(queries, ids, best)
    lengths = [encoder.count_tokens(w) for w in whole]
    figures = {
        "results": results,
        "thread_tokens": {
            "median": int(np.median(lengths)),
            "p95": int(np.percentile(lengths, 95)),
            "over_512": int(sum(n > 512 for n in lengths)),
        },
        "queries": len(queries),
        "run": common.run_record(encoder),
    }
    common.write_json(args.out, figures)
    print("| dense choice | nDCG@10 [95% CI] |\n|---|---:|")
    for name, value in results.items():
        print(f"| {name} | {value['ndcg@10']:.3f} [{value['ci95'][0]:.3f}, {value['ci95'][1]:.3f}] |")
    print(f"thread tokens: {figures['thread_tokens']}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
