"""Tool search evaluated like document search: every mode on a tool-retrieval eval set (MetaTool by default,
``eval_sets/tools_metatool``), nDCG@5 / Recall@5 / Recall@1 with 95 % bootstrap CIs, each arm against ``vector`` by
a paired randomization test (Holm over the arms), the prompt tokens the returned tools cost against loading every
tool, and latency. ``bench/tool_search.py`` and the Dagster asset ``tool_search_eval`` both run
:func:`evaluate_tool_search`.

Usage and success for the multi-signal arms are SIMULATED FROM THE TRAINING SPLIT ONLY (a prior learned on the
test queries would leak their labels):

- usage: a tool's calls are the number of training queries labelled with it;
- success: the vector arm's top-1 tool for the first ``train_sample`` training queries stands for the tool an agent
  would call; the call succeeds when it is the labelled tool. ToolStats has one ``calls`` for both signals, so the
  simulated success rate, Laplace's (right + 1) / (top-1 + 2), is carried as ``successes = round(calls × rate)``.

Arms: ``vector``, ``bm25``, ``hybrid`` (the retriever's ranking of the tools), ``multi-signal`` (the design's
weights over the 30 best vector candidates), and the multi-signal score with semantic only, without success and
without usage, so each signal's effect shows on its own.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rag_pipeline.evaluation.eval_set import EvalQuery
from rag_pipeline.evaluation.metrics import per_query_metrics
from rag_pipeline.evaluation.statistics import bootstrap_ci, holm, paired_permutation_pvalues, percentile_ms
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.retriever import Retriever
from rag_pipeline.retrieval.tool_outcomes import ToolOutcomes, ToolStats
from rag_pipeline.retrieval.tool_search import ToolMode, ToolSearch, ToolSearchConfig

TOP_K = 5
METRICS = ("ndcg@5", "recall@5", "recall@1")
BASELINE = "vector"
TEST_SET = "tools_metatool_test.jsonl"
TRAIN_FILE = "train.ndjson"
# The index does not change during an evaluation: one generation, so the catalog is read once per arm, as a
# server reads it once per index version (the query cache stays off).
GENERATION = "evaluation"


@dataclass(frozen=True)
class ToolArm:
    """One way of ranking tools: a tool-search mode and, for the multi-signal score, its weights."""

    name: str
    mode: ToolMode
    weights: tuple[float, float, float] = ToolSearchConfig().weights


ARMS = (
    ToolArm("vector", "vector"),
    ToolArm("bm25", "bm25"),
    ToolArm("hybrid", "hybrid"),
    ToolArm("multi-signal", "multi-signal"),
    ToolArm("multi-signal (semantic only)", "multi-signal", (1.0, 0.0, 0.0)),
    ToolArm("multi-signal (no success)", "multi-signal", (0.5, 0.3, 0.0)),
    ToolArm("multi-signal (no usage)", "multi-signal", (0.5, 0.0, 0.2)),
)


def read_train(path: Path) -> list[tuple[str, str]]:
    """The training split: (query, tool name) per line of ``{"query", "tool"}`` JSON."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(row["query"], row["tool"]) for row in rows]


def simulate_outcomes(
    search: ToolSearch, retriever: Retriever, train: Sequence[tuple[str, str]], sample: int
) -> tuple[dict[str, ToolStats], dict[str, Any]]:
    """Per-tool stats from the training split (module docstring), and the raw counts behind them."""
    principal = Principal.all_documents_for_evaluation()
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
    used = min(sample, len(train))
    raw = {
        "train_queries": len(train),
        "success_sample": used,
        "vector_top1_accuracy_on_sample": round(sum(right.values()) / max(1, used), 4),
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


@dataclass
class ArmRun:
    """One arm's ranking per query id, each search's seconds and the prompt tokens of what it returned."""

    run: dict[str, dict[str, float]]
    seconds: list[float]
    loaded: list[int]
    tokens_all: int


def run_arm(arm: ToolArm, retriever: Retriever, queries: Sequence[EvalQuery], stats: dict[str, ToolStats]) -> ArmRun:
    search = ToolSearch(ToolSearchConfig(weights=arm.weights, top_k=TOP_K))
    principal = Principal.all_documents_for_evaluation()
    # One search first (not a test query, so nothing it caches is reused): the first call opens the collections.
    search.search(retriever, principal, "warm-up: weather forecast", stats, mode=arm.mode, generation=GENERATION)
    out = ArmRun({}, [], [], 0)
    for query in queries:
        started = time.perf_counter()
        response = search.search(retriever, principal, query.query, stats, mode=arm.mode, generation=GENERATION)
        out.seconds.append(time.perf_counter() - started)
        # Rank-derived scores keep ToolSearch's own order (ties included) for ranx.
        out.run[query.id] = {h.entry.document_id: float(TOP_K - i) for i, h in enumerate(response.tools)}
        out.loaded.append(response.tokens_loaded)
        out.tokens_all = response.tokens_all
    return out


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
            entry[metric] = {**deltas[name][metric], "p": round(raw[name][metric], 4),
                             "p_holm": round(adjusted[name], 4)}  # fmt: skip
    return figures, comparisons


def _latency_ms(seconds: Sequence[float]) -> dict[str, float]:
    """Median and 95th percentile in ms, as the retrieval evaluation reports them (statistics.percentile_ms)."""
    milliseconds = [x * 1000 for x in seconds]
    return {"p50_ms": round(percentile_ms(milliseconds, 50), 2), "p95_ms": round(percentile_ms(milliseconds, 95), 2),
            "n": len(milliseconds)}  # fmt: skip


def missing_tools(queries: Sequence[EvalQuery], indexed: set[str]) -> set[str]:
    """The relevant tool ids of ``queries`` that the index does not hold (an eval set for another catalog)."""
    return {doc for q in queries for doc in q.relevant} - indexed


def evaluate_tool_search(
    new_retriever: Callable[[], Retriever],
    queries: Sequence[EvalQuery],
    train: Sequence[tuple[str, str]],
    *,
    train_sample: int = 2000,
    arms: Sequence[ToolArm] = ARMS,
    on_progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Every arm over ``queries`` on the tool catalog of the index ``new_retriever()`` searches, usage and success
    simulated from ``train``. Each arm gets a fresh retriever, so each pays for embedding its own queries (a shared
    query cache would make every arm after the first look faster than it is)."""
    say = on_progress or (lambda _message: None)
    retriever = new_retriever()
    simulator = ToolSearch(ToolSearchConfig(top_k=1))
    catalog = simulator.catalog(retriever.store)
    missing = missing_tools(queries, set(catalog))
    if missing:
        raise ValueError(
            f"{len(missing)} relevant tool(s) of the eval set are not indexed (e.g. {sorted(missing)[0]}): index "
            "its catalog first (rag-pipeline index --tools-catalog <its catalog.json> --source tools)"
        )
    say(f"simulating usage and success on {min(train_sample, len(train))} training queries")
    stats, simulated = simulate_outcomes(simulator, retriever, train, train_sample)
    outcomes = ToolOutcomes()  # in memory: the store the service reads, loaded with the simulation
    outcomes.load(stats)
    loaded_stats = outcomes.stats()
    runs: dict[str, dict[str, dict[str, float]]] = {}
    per_arm: dict[str, dict[str, Any]] = {}
    for arm in arms:
        say(f"arm {arm.name}")
        done = run_arm(arm, new_retriever(), queries, loaded_stats)
        runs[arm.name] = done.run
        mean_loaded = float(np.mean(done.loaded)) if done.loaded else 0.0
        per_arm[arm.name] = {
            "mode": arm.mode,
            "weights": list(arm.weights) if arm.mode == "multi-signal" else None,
            "latency": _latency_ms(done.seconds),
            "tokens": {
                "mean_loaded": round(mean_loaded, 1),
                "all_tools": done.tokens_all,
                "saved_share": round(1 - mean_loaded / done.tokens_all, 4) if done.tokens_all else None,
            },
        }
    figures, comparisons = score({q.id: dict(q.relevant) for q in queries}, runs)
    return {
        "queries": len(queries),
        "catalog_tools": len(catalog),
        "top_k": TOP_K,
        "arms": {name: {**figures[name], **per_arm[name]} for name in per_arm},
        "comparisons": comparisons,
        "simulated_outcomes": simulated,
    }


def table(results: dict[str, Any]) -> str:
    """The results as a markdown table, then each arm against vector."""
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
