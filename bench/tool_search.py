"""Tool search on MetaTool: does the multi-signal score (semantic + usage + success) find the tool a request
needs better than plain vector, BM25 or hybrid search, and how many prompt tokens does loading the top 5 save?

The real CLI indexes ``eval_sets/tools_metatool/catalog.json`` (199 tools, ``--source tools``) into a fresh data
folder; then :class:`~rag_pipeline.retrieval.tool_search.ToolSearch` answers every TEST query of
``tools_metatool_test.jsonl`` in each arm, top 5:

- ``vector``, ``bm25``, ``hybrid``: the retriever's ranking of the tools;
- ``multi-signal``: the design's 0.5 semantic + 0.3 usage + 0.2 success over the 30 best vector candidates;
- ``multi-signal (semantic only)``: weights (1, 0, 0), the same candidates with usage and success off, so the
  difference to ``multi-signal`` is their effect alone; ``(no success)`` and ``(no usage)`` split it.

Usage and success are SIMULATED FROM THE TRAINING SPLIT ONLY (``train.ndjson``; a prior learned on the test
queries would leak their labels):

- usage: a tool's calls are the number of training queries labelled with it;
- success: the vector arm's top-1 tool for the first ``--train-sample`` training queries (the file is ordered by
  sha1, so this is a deterministic sample) stands for the tool an agent would call; the call succeeds when it is
  the labelled tool. ToolStats has one ``calls`` for both signals, so the simulated success rate, Laplace's
  (right + 1) / (top-1 + 2), is carried as ``successes = round(calls × rate)`` over the usage calls: the usage
  signal stays the label counts and the success signal that rate (0.5, neutral, for a tool never ranked first).

Scores: nDCG@5, Recall@5 and Recall@1 (top-1 accuracy) with 95 % bootstrap CIs over queries; every arm against
``vector`` by a paired randomization test (Holm-adjusted over the arms); mean prompt tokens of the tools
returned against loading all 199 (``tokens_loaded`` / ``tokens_all``: cl100k tokens of each tool's
chat-completions entry); p50/p95 latency per search (each arm on a fresh retriever, so every query is embedded
once, inside its timing; the catalog is read once per arm, as a server reads it once per index version).

    .venv/bin/python -m bench.tool_search [--work /tmp/rag-tool-search]

Results: bench/results/tool_search.json and a markdown table on stdout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench import common
from rag_pipeline.commands.search import bm25_encoder, open_index
from rag_pipeline.evaluation.eval_set import load_eval_set
from rag_pipeline.evaluation.metrics import per_query_metrics
from rag_pipeline.evaluation.statistics import bootstrap_ci, holm, paired_permutation_pvalues
from rag_pipeline.retrieval.entry import SearchModels, build_retriever
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.tool_outcomes import ToolOutcomes, ToolStats
from rag_pipeline.retrieval.tool_search import ToolMode, ToolSearch, ToolSearchConfig
from rag_pipeline.settings import Settings
from rag_pipeline.vectors.dense.base import DenseEncoder

SET = common.EVAL_SETS / "tools_metatool"
TOP_K = 5
METRICS = ("ndcg@5", "recall@5", "recall@1")
BASELINE = "vector"
# The index does not change during a run: one generation, so the catalog is read once per arm, as a server reads
# it once per index version (the query cache stays off: cache_entries=0).
GENERATION = "bench"


@dataclass(frozen=True)
class Arm:
    name: str
    mode: ToolMode
    weights: tuple[float, float, float] = ToolSearchConfig().weights


ARMS = (
    Arm("vector", "vector"),
    Arm("bm25", "bm25"),
    Arm("hybrid", "hybrid"),
    Arm("multi-signal", "multi-signal"),
    Arm("multi-signal (semantic only)", "multi-signal", (1.0, 0.0, 0.0)),
    Arm("multi-signal (no success)", "multi-signal", (0.5, 0.3, 0.0)),
    Arm("multi-signal (no usage)", "multi-signal", (0.5, 0.0, 0.2)),
)


def index(catalog: Path, data: Path) -> float:
    """``rag-pipeline index --tools-catalog`` into a fresh ``data`` folder; its seconds."""
    shutil.rmtree(data, ignore_errors=True)
    command = [str(Path(sys.executable).parent / "rag-pipeline"), "index", "--tools-catalog", str(catalog)]
    # --language english: the catalog is English, and naming it keeps the models the same on every run.
    command += ["--source", "tools", "--data-dir", str(data), "--language", "english"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=os.environ.copy())
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return time.perf_counter() - started


def read_train(path: Path) -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(row["query"], row["tool"]) for row in rows]


def simulate(
    search: ToolSearch, retriever: Any, principal: Principal, train: Sequence[tuple[str, str]], sample: int
) -> tuple[dict[str, ToolStats], dict[str, Any]]:
    """Per-tool stats from the training split (module docstring), and the raw counts behind them."""
    labels = Counter(tool for _, tool in train)
    first: Counter[str] = Counter()
    right: Counter[str] = Counter()
    for query, tool in train[:sample]:
        tools = search.search(retriever, principal, query, {}, mode="vector", top_k=1, generation=GENERATION).tools
        if tools:
            name = tools[0].entry.name
            first[name] += 1
            right[name] += name == tool
    stats = {}
    for tool, calls in labels.items():
        rate = (right[tool] + 1) / (first[tool] + 2)
        stats[tool] = ToolStats(calls=calls, successes=round(calls * rate))
    raw = {
        "train_queries": len(train),
        "success_sample": min(sample, len(train)),
        "vector_top1_accuracy_on_sample": round(sum(right.values()) / max(1, min(sample, len(train))), 4),
        "per_tool": {
            tool: {
                "labels": labels[tool],
                "top1": first[tool],
                "right": right[tool],
                "calls": s.calls,
                "successes": s.successes,
            }
            for tool, s in sorted(stats.items())
        },
    }
    return stats, raw


def run_arm(
    arm: Arm,
    settings: Settings,
    store: Any,
    encoder: DenseEncoder,
    queries: Sequence[Any],
    stats: dict[str, ToolStats],
) -> tuple[dict[str, dict[str, float]], list[float], list[int], int]:
    """The arm's ranking per query id, each search's seconds, tokens loaded per search and the catalog's tokens."""
    # A fresh retriever: its query-embedding cache is empty, so each arm pays for embedding its queries.
    retriever = build_retriever(store, SearchModels(settings.dense_model, bm25_encoder(settings), dense=encoder))
    search = ToolSearch(ToolSearchConfig(weights=arm.weights, top_k=TOP_K), cache_entries=0)
    principal = Principal.all_documents_for_evaluation()
    # One search first (not a test query, so nothing it caches is reused): the first call opens the collections.
    search.search(retriever, principal, "warm-up: weather forecast", stats, mode=arm.mode, generation=GENERATION)
    run: dict[str, dict[str, float]] = {}
    seconds: list[float] = []
    loaded: list[int] = []
    tokens_all = 0
    for query in queries:
        started = time.perf_counter()
        response = search.search(retriever, principal, query.query, stats, mode=arm.mode, generation=GENERATION)
        seconds.append(time.perf_counter() - started)
        # Rank-derived scores keep ToolSearch's own order (ties included) for ranx.
        run[query.id] = {h.entry.document_id: float(TOP_K - i) for i, h in enumerate(response.tools)}
        loaded.append(response.tokens_loaded)
        tokens_all = response.tokens_all
    return run, seconds, loaded, tokens_all


def _mean_ci(values: np.ndarray) -> dict[str, Any]:
    low, high = bootstrap_ci(values)
    return {"mean": round(float(np.mean(values)), 4), "ci95": [round(low, 4), round(high, 4)]}


def score(
    qrels: dict[str, dict[str, int]], runs: dict[str, dict[str, dict[str, float]]]
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Per arm: each metric's mean and CI; and every arm against the baseline (paired, Holm over arms)."""
    frames = {name: per_query_metrics(qrels, run, METRICS) for name, run in runs.items()}
    figures = {name: {m: _mean_ci(frame[m].to_numpy()) for m in METRICS} for name, frame in frames.items()}
    base = frames[BASELINE]
    raw: dict[str, dict[str, float]] = {}
    deltas: dict[str, dict[str, Any]] = {}
    for name, frame in frames.items():
        if name == BASELINE:
            continue
        a = frame[list(METRICS)].to_numpy().T
        b = base.loc[frame.index, list(METRICS)].to_numpy().T
        pvalues = paired_permutation_pvalues(a, b)
        raw[name] = {m: float(p) for m, p in zip(METRICS, pvalues, strict=True)}
        deltas[name] = {m: _mean_ci(a[i] - b[i]) for i, m in enumerate(METRICS)}
    comparisons: dict[str, Any] = {}
    for metric in METRICS:
        adjusted = holm({name: p[metric] for name, p in raw.items()})
        for name in raw:
            entry = comparisons.setdefault(f"{name} vs {BASELINE}", {})
            entry[metric] = {
                **deltas[name][metric],
                "p": round(raw[name][metric], 4),
                "p_holm": round(adjusted[name], 4),
            }
    return figures, comparisons


def table(results: dict[str, Any]) -> str:
    lines = [
        "| arm | nDCG@5 [95 % CI] | Recall@5 [95 % CI] | Recall@1 | tokens (top 5) | p50 ms | p95 ms |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, arm in results["arms"].items():
        cells = []
        for metric in ("ndcg@5", "recall@5"):
            f = arm[metric]
            cells.append(f"{f['mean']:.3f} [{f['ci95'][0]:.3f}, {f['ci95'][1]:.3f}]")
        cells.append(f"{arm['recall@1']['mean']:.3f}")
        cells.append(f"{arm['tokens']['mean_loaded']:.0f}")
        cells += [f"{arm['latency']['p50_ms']:.1f}", f"{arm['latency']['p95_ms']:.1f}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    tokens_all = next(iter(results["arms"].values()))["tokens"]["all_tools"]
    lines.append(f"\nAll {results['catalog_tools']} tools: {tokens_all} prompt tokens (cl100k).")
    for name, comparison in results["comparisons"].items():
        parts = [
            f"{m} {c['mean']:+.3f} [{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}] p={c['p']:.4f} (Holm {c['p_holm']:.4f})"
            for m, c in comparison.items()
        ]
        lines.append(f"- {name}: " + "; ".join(parts))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--work", type=Path, default=Path("/tmp/rag-tool-search"), help="data folder (rebuilt)")
    parser.add_argument("--set", type=Path, default=SET, help="the built eval set's folder (default: %(default)s)")
    parser.add_argument("--train-sample", type=int, default=2000, help="training queries the success is simulated on")
    parser.add_argument("--out", type=Path, default=common.RESULTS / "tool_search.json")
    args = parser.parse_args(argv)
    data = args.work / "data"
    print("indexing the catalog …", file=sys.stderr, flush=True)
    index_seconds = index(args.set / "catalog.json", data)
    queries = load_eval_set(args.set / "tools_metatool_test.jsonl")
    qrels = {q.id: q.relevant for q in queries}
    train = read_train(args.set / "train.ndjson")
    settings = Settings.from_env({**os.environ, "RAG_DATA_DIR": str(data)})
    encoder = settings.load_dense_encoder()
    results: dict[str, Any] = {"run": common.run_record(encoder, argv), "index_seconds": round(index_seconds, 1)}
    runs: dict[str, dict[str, dict[str, float]]] = {}
    per_arm: dict[str, dict[str, Any]] = {}
    with open_index(settings) as store:
        print(f"simulating usage and success on {args.train_sample} training queries …", file=sys.stderr, flush=True)
        retriever = build_retriever(store, SearchModels(settings.dense_model, bm25_encoder(settings), dense=encoder))
        simulator = ToolSearch(ToolSearchConfig(top_k=1), cache_entries=0)
        principal = Principal.all_documents_for_evaluation()
        stats, simulated = simulate(simulator, retriever, principal, train, args.train_sample)
        outcomes = ToolOutcomes()  # in memory: the store tool search reads in service, loaded with the simulation
        outcomes.load(stats)
        loaded_stats = outcomes.stats()
        catalog_tools = len(simulator.catalog(store))
        for arm in ARMS:
            print(f"arm {arm.name} …", file=sys.stderr, flush=True)
            run, seconds, loaded, tokens_all = run_arm(arm, settings, store, encoder, queries, loaded_stats)
            runs[arm.name] = run
            per_arm[arm.name] = {
                "mode": arm.mode,
                "weights": list(arm.weights) if arm.mode == "multi-signal" else None,
                "latency": common.latency_ms(seconds),
                "tokens": {
                    "mean_loaded": round(float(np.mean(loaded)), 1),
                    "all_tools": tokens_all,
                    "saved_share": round(1 - float(np.mean(loaded)) / tokens_all, 4) if tokens_all else None,
                },
            }
    figures, comparisons = score(qrels, runs)
    results.update(
        {
            "eval_set": str(args.set.relative_to(common.ROOT) if args.set.is_relative_to(common.ROOT) else args.set),
            "queries": len(queries),
            "catalog_tools": catalog_tools,
            "top_k": TOP_K,
            "arms": {name: {**figures[name], **per_arm[name]} for name in per_arm},
            "comparisons": comparisons,
            "simulated_outcomes": simulated,
        }
    )
    common.write_json(args.out, results)
    print(f"CPU: {results['run']['machine'].get('cpu')}, dense: {results['run']['machine'].get('dense_encoder')}")
    print(table(results))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
