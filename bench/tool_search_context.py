"""Tool search on MetaTool (issue 67): what ``min_similarity``, a caller's active set and the context optimization
(``include_full_params=false``, ``max_description_length``) do to nDCG@5 and to the prompt tokens sent.

The real CLI indexes ``eval_sets/tools_metatool/catalog.json`` (199 tools) as :mod:`bench.tool_search` does; then
every TEST query of ``tools_metatool_test.jsonl`` (1,000) goes through the application layer's
:func:`~rag_pipeline.serving.tool_selection.find_tools` (the use case HTTP, MCP and the CLI call), top 5, the
multi-signal mode with no outcomes recorded (usage 0 and success 0.5 for every tool, so the ranking is by meaning):

- ``threshold``: ``min_similarity`` none, 0.2 … 0.6: nDCG@5, Recall@5, tools returned per query, queries left with
  none, prompt tokens of the tools returned;
- ``active set``: an agent's session — each search's top tool is activated (the tool the agent loads and calls),
  the set bounded at RAG_TOOL_ACTIVE_MAX_TOOLS=20 (the oldest deactivated first); the active tools are left out of
  the next searches. Sessions of 10 queries in the set's order (mixed topics) and in the order of their relevant
  tool (a session staying on a few tasks). Reported: nDCG@5 of what the search returns, ``available@5`` (the
  relevant tool returned or already active: what the model can call), the prompt tokens of the tools returned per
  query and, of them, those of tools this session's model was given before (resent), against the same sessions
  without an active set;
- ``context``: the tokens (cl100k, the chat-completions entry) of the top 5 as full definitions, without parameter
  schemas, with descriptions cut to 100 / 60 characters, and both (the ranking, so nDCG@5, is the same in all).

    .venv/bin/python -m bench.tool_search_context [--work /tmp/rag-tool-search-context] [--skip-index]

Results: bench/results/tool_search_context.json and markdown tables on stdout.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench import common
from bench.tool_search import SET, index
from rag_pipeline.composition import bm25_encoder, dense_encoder_of, open_index
from rag_pipeline.evaluation.eval_set import EvalQuery, load_eval_set
from rag_pipeline.evaluation.metrics import per_query_metrics
from rag_pipeline.evaluation.tool_search_eval import GENERATION, TEST_SET
from rag_pipeline.retrieval.entry import SearchModels, build_retriever
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.retriever import Retriever
from rag_pipeline.retrieval.tool_search import ToolRoster, ToolSearch, ToolSearchConfig, ToolSearchResponse, ToolView
from rag_pipeline.serving.active_tools import ActiveSetLimits, ActiveSetRefused, ActiveToolSets, CallerKey
from rag_pipeline.serving.schemas import ToolSearchRequest
from rag_pipeline.serving.tool_selection import change_active_tools, find_tools
from rag_pipeline.settings import Settings

TOP_K = 5
THRESHOLDS: tuple[float | None, ...] = (None, 0.2, 0.3, 0.4, 0.5, 0.6)
SESSION_QUERIES = 10
MAX_ACTIVE = 20
VIEWS = {
    "full": ToolView(),
    "no params": ToolView(include_full_params=False),
    "descriptions ≤ 100": ToolView(max_description_length=100),
    "descriptions ≤ 60": ToolView(max_description_length=60),
    "no params, ≤ 60": ToolView(include_full_params=False, max_description_length=60),
}
READER = Principal.all_documents_for_evaluation()


class BenchTools:
    """The tool index the use case runs on, over one retriever (the service's, without its index turns)."""

    def __init__(self, retriever: Retriever) -> None:
        self.retriever = retriever
        self.search = ToolSearch(ToolSearchConfig(top_k=TOP_K))

    def search_tools(
        self, request: ToolSearchRequest, reader: Principal, exclude: Collection[str] = ()
    ) -> ToolSearchResponse:
        return self.search.search(self.retriever, reader, request.query, {}, mode=request.mode, top_k=request.top_k,
                                  generation=GENERATION, categories=request.categories or (),
                                  min_similarity=request.min_similarity, exclude=exclude)  # fmt: skip

    def tool_roster(self) -> ToolRoster:
        return self.search.roster(self.search.catalog(self.retriever.store, GENERATION))


def _ndcg(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> dict[str, float]:
    frame = per_query_metrics(qrels, run, ("ndcg@5", "recall@5"))
    return {"ndcg@5": round(float(frame["ndcg@5"].mean()), 4), "recall@5": round(float(frame["recall@5"].mean()), 4)}


def _ranked(body: dict[str, Any]) -> dict[str, float]:
    return {t["document_id"]: float(TOP_K - i) for i, t in enumerate(body["tools"])}


def thresholds(tools: BenchTools, queries: Sequence[EvalQuery], qrels: dict[str, dict[str, int]]) -> list[dict]:
    rows = []
    sets = ActiveToolSets()
    for threshold in THRESHOLDS:
        run: dict[str, dict[str, float]] = {}
        returned, tokens, empty = [], [], 0
        started = time.perf_counter()
        for query in queries:
            request = ToolSearchRequest(query=query.query, top_k=TOP_K, min_similarity=threshold)
            body = find_tools(tools, sets, CallerKey("bench", query.id), request, READER)
            run[query.id] = _ranked(body)
            returned.append(len(body["tools"]))
            tokens.append(body["prompt_tokens"]["loaded"])
            empty += not body["tools"]
        rows.append({"min_similarity": threshold, **_ndcg(qrels, run),
                     "mean_tools": round(float(np.mean(returned)), 2), "queries_with_no_tool": empty,
                     "mean_tokens": round(float(np.mean(tokens)), 1),
                     "seconds": round(time.perf_counter() - started, 1)})  # fmt: skip
        print(f"threshold {threshold}: {rows[-1]}", file=sys.stderr, flush=True)
    return rows


def session(tools: BenchTools, queries: Sequence[EvalQuery], qrels: dict[str, dict[str, int]], active: bool) -> dict:
    """Sessions of SESSION_QUERIES queries; with ``active``, each search's top tool is activated (LRU at the bound)."""
    sets = ActiveToolSets(ActiveSetLimits(max_tools=MAX_ACTIVE))
    run: dict[str, dict[str, float]] = {}
    available, tokens, resent = [], [], []
    for start in range(0, len(queries), SESSION_QUERIES):
        caller = CallerKey("bench", f"session-{start}")
        sent: set[str] = set()  # the tools this session's model was given already
        for query in queries[start : start + SESSION_QUERIES]:
            request = ToolSearchRequest(query=query.query, top_k=TOP_K, exclude_active=active)
            body = find_tools(tools, sets, caller, request, READER)
            run[query.id] = _ranked(body)
            relevant = set(query.relevant)
            returned = {t["document_id"] for t in body["tools"]}
            held = {f"tools:catalog:{name}" for name in body["active_tools"]} if active else set()
            available.append(bool(relevant & (returned | held)))
            tokens.append(body["prompt_tokens"]["loaded"])
            resent.append(sum(t["tokens"] for t in body["tools"] if t["name"] in sent))
            sent.update(t["name"] for t in body["tools"])
            if active and body["tools"]:
                top = body["tools"][0]["name"]
                try:
                    change_active_tools(tools, sets, caller, "activate", [top])
                except ActiveSetRefused:  # full: the oldest tool goes, as an agent unloads what it used first
                    oldest = sets.active(caller, ())[0]
                    change_active_tools(tools, sets, caller, "deactivate", [oldest])
                    change_active_tools(tools, sets, caller, "activate", [top])
    return {**_ndcg(qrels, run), "available@5": round(float(np.mean(available)), 4),
            "mean_tokens_sent": round(float(np.mean(tokens)), 1),
            "mean_tokens_resent": round(float(np.mean(resent)), 1)}  # fmt: skip


def contexts(tools: BenchTools, queries: Sequence[EvalQuery]) -> dict[str, float]:
    totals = {name: 0 for name in VIEWS}
    for query in queries:
        found = tools.search_tools(ToolSearchRequest(query=query.query, top_k=TOP_K), READER)
        for name, view in VIEWS.items():
            totals[name] += sum(view.tokens(hit.entry) for hit in found.tools)
    return {name: round(total / len(queries), 1) for name, total in totals.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--work", type=Path, default=Path("/tmp/rag-tool-search-context"), help="data folder")
    parser.add_argument("--skip-index", action="store_true", help="reuse --work's index")
    parser.add_argument("--out", type=Path, default=common.RESULTS / "tool_search_context.json")
    args = parser.parse_args(argv)
    data = args.work / "data"
    index_seconds = None
    if not args.skip_index:
        print("indexing the catalog …", file=sys.stderr, flush=True)
        index_seconds = round(index(SET / "catalog.json", data), 1)
    queries = load_eval_set(SET / TEST_SET)
    qrels = {q.id: dict(q.relevant) for q in queries}
    settings = Settings.from_env({**os.environ, "RAG_DATA_DIR": str(data)})
    encoder = dense_encoder_of(settings)
    results: dict[str, Any] = {"run": common.run_record(encoder, argv), "index_seconds": index_seconds,
                               "eval_set": str(SET.relative_to(common.ROOT)), "queries": len(queries), "top_k": TOP_K,
                               "mode": "multi-signal, no outcomes recorded"}  # fmt: skip
    with open_index(settings) as store:
        # One retriever: each query is embedded once (its query cache), so the runs differ only in what they keep.
        tools = BenchTools(build_retriever(store, SearchModels(settings.dense_model, bm25_encoder(settings),
                                                               dense=encoder)))  # fmt: skip
        results["catalog_tools"] = len(tools.tool_roster().names)
        results["threshold"] = thresholds(tools, queries, qrels)
        by_tool = sorted(queries, key=lambda q: (sorted(q.relevant), q.id))
        results["active_set"] = {
            "session_queries": SESSION_QUERIES,
            "max_tools": MAX_ACTIVE,
            "mixed topics": {"without": session(tools, queries, qrels, False),
                             "with": session(tools, queries, qrels, True)},
            "by relevant tool": {"without": session(tools, by_tool, qrels, False),
                                 "with": session(tools, by_tool, qrels, True)},
        }  # fmt: skip
        results["context_tokens_top5"] = contexts(tools, queries)
    common.write_json(args.out, results)
    print(table(results))
    print(f"wrote {args.out}")
    return 0


def table(results: dict[str, Any]) -> str:
    lines = ["| min_similarity | nDCG@5 | Recall@5 | tools / query | queries with none | tokens / query |",
             "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for row in results["threshold"]:
        lines.append(f"| {row['min_similarity'] if row['min_similarity'] is not None else 'none'} | "
                     f"{row['ndcg@5']:.3f} | {row['recall@5']:.3f} | {row['mean_tools']:.2f} | "
                     f"{row['queries_with_no_tool']} | {row['mean_tokens']:.0f} |")  # fmt: skip
    lines += ["", "| session order | active set | nDCG@5 | available@5 | tokens sent / query | of them resent |",
              "|---|---|---:|---:|---:|---:|"]  # fmt: skip
    for order in ("mixed topics", "by relevant tool"):
        for kind in ("without", "with"):
            row = results["active_set"][order][kind]
            lines.append(f"| {order} | {kind} | {row['ndcg@5']:.3f} | {row['available@5']:.3f} | "
                         f"{row['mean_tokens_sent']:.0f} | {row['mean_tokens_resent']:.0f} |")  # fmt: skip
    lines += ["", "| top-5 definitions as | tokens / query |", "|---|---:|"]
    lines += [f"| {name} | {tokens:.0f} |" for name, tokens in results["context_tokens_top5"].items()]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
