"""Tool search on MetaTool: does the multi-signal score (semantic + usage + success) find the tool a request
needs better than plain vector, BM25 or hybrid search, and how many prompt tokens does loading the top 5 save?

The real CLI indexes ``eval_sets/tools_metatool/catalog.json`` (199 tools, ``--source tools``) into a fresh data
folder; then :class:`~rag_pipeline.retrieval.tool_search.ToolSearch` answers every TEST query of
``tools_metatool_test.jsonl`` in each arm, top 5:

- ``vector``, ``bm25``, ``hybrid``: the retriever's ranking of the tools;
- ``multi-signal``: the design's 0.5 semantic + 0.3 usage + 0.2 success over the 30 best vector candidates;
- ``multi-signal (semantic only)``: weights (1, 0, 0), the same candidates with usage and success off, so the
  difference to ``multi-signal`` is their effect alone; ``(no success)`` and ``(no usage)`` split it.

The scoring is :func:`rag_pipeline.evaluation.tool_search_eval.evaluate_tool_search`, which the Dagster asset
``tool_search_eval`` runs too. Usage and success are SIMULATED FROM THE TRAINING SPLIT ONLY (``train.ndjson``;
a prior learned on the test queries would leak their labels):

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

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import common
from rag_pipeline.composition import bm25_encoder, dense_encoder_of, open_index
from rag_pipeline.evaluation.eval_set import load_eval_set
from rag_pipeline.evaluation.tool_search_eval import TEST_SET, TRAIN_FILE, evaluate_tool_search, read_train, table
from rag_pipeline.retrieval.entry import SearchModels, build_retriever
from rag_pipeline.settings import Settings

SET = common.EVAL_SETS / "tools_metatool"


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
    queries = load_eval_set(args.set / TEST_SET)
    train = read_train(args.set / TRAIN_FILE)
    settings = Settings.from_env({**os.environ, "RAG_DATA_DIR": str(data)})
    encoder = dense_encoder_of(settings)
    results: dict[str, Any] = {"run": common.run_record(encoder, argv), "index_seconds": round(index_seconds, 1)}
    with open_index(settings) as store:
        models = SearchModels(settings.dense_model, bm25_encoder(settings), dense=encoder)
        figures = evaluate_tool_search(
            lambda: build_retriever(store, models), queries, train, train_sample=args.train_sample,
            on_progress=lambda message: print(message + " …", file=sys.stderr, flush=True),
        )  # fmt: skip
    set_name = args.set.relative_to(common.ROOT) if args.set.is_relative_to(common.ROOT) else args.set
    results.update({"eval_set": str(set_name), **figures})
    common.write_json(args.out, results)
    print(f"CPU: {results['run']['machine'].get('cpu')}, dense: {results['run']['machine'].get('dense_encoder')}")
    print(table(results))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
