"""The prf arm (RM3 over the BM25 arm's first results) against bm25 and hybrid, in both of its shapes:

- ``prf[bm25]``: BM25 with the RM3-expanded query;
- ``prf[hybrid]``: the hybrid arm (same fusion, dense side unchanged) with the RM3-expanded BM25 side.

Every arm runs on one index per target, through the same evaluation code as ``rag-pipeline bench`` (``run_arm``,
``summarize_outcomes``: nDCG@10 with a 95 % bootstrap CI, paired randomization tests Holm-corrected against the
baseline). Each target is summarised twice, against ``bm25`` and against ``hybrid``, and every prf variant's
paired difference to both is given with its own bootstrap CI and unadjusted paired p.

    .venv/bin/python -m bench.experiments.prf --demo-dir /tmp/rag_demo     # the bundled dev sets
    .venv/bin/python -m bench.experiments.prf --beir "$SCIFACT"            # SciFact (embeds ~10k children)
    .venv/bin/python -m bench.experiments.prf --beir eval_sets/manpages_ja --bm25-tokenizer cjk-bigram --bm25-only
    RAG_DENSE_MODEL=multilingual-e5-small .venv/bin/python -m bench.experiments.prf --beir eval_sets/manpages_ja \
        --bm25-tokenizer cjk-bigram --sample 150                          # hybrid on a sample (~11 min)

``--demo-dir`` opens the demo's index (``rag-pipeline demo --no-eval --data-dir DIR``) with the project's own
opening code, so nothing else may hold it meanwhile. ``--beir`` builds a temporary index as ``rag-pipeline bench
--beir`` does (children of 400 tokens split at the model's input, BM25 avg_len = corpus mean), embedding through
the cache in ``--data-dir``. ``--bm25-only`` skips the dense model's embeddings (the chunking still counts in
its tokenizer) and runs only bm25 and prf[bm25]. ``--sample N`` runs on a seeded sample of the folder instead
(``sample_beir`` of ``bench.experiments.multilingual_dense``: N queries, their relevant pages and as many other
pages, written under ``--data-dir``; the target is then named ``<folder>_sampleN``); the dense model is
``RAG_DENSE_MODEL`` (default all-MiniLM-L6-v2). Results are merged into ``--out``
(bench/experiments/results/prf.json) under the target's name. SciFact is not shipped: download it once
(bench/README.md) and pass its folder, e.g. ``SCIFACT=data/beir_scifact``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from bench import common
from bench.experiments.multilingual_dense import sample_beir
from rag_pipeline.composition import bm25_encoder, dense_encoder_of, open_index
from rag_pipeline.directory.lookup import person_resolver
from rag_pipeline.evaluation.beir import beir_eval_queries, load_beir
from rag_pipeline.evaluation.beir_index import build_beir_index, corpus_avg_len
from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta, load_eval_set, load_eval_set_meta
from rag_pipeline.evaluation.evaluate import summarize_outcomes
from rag_pipeline.evaluation.runner import ArmOutcome, run_arm
from rag_pipeline.evaluation.statistics import bootstrap_ci, paired_permutation_p
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.store import CollectionNames, VectorStore
from rag_pipeline.retrieval.entry import SearchModels, build_retriever
from rag_pipeline.retrieval.prf import PrfConfig
from rag_pipeline.retrieval.retriever import Retriever, RetrieverConfig
from rag_pipeline.settings import Settings
from rag_pipeline.text.chunking import ChunkingConfig
from rag_pipeline.vectors.cache import EmbeddingCache
from rag_pipeline.vectors.dense.base import DenseEncoder
from rag_pipeline.vectors.dense.load import load_or_defer
from rag_pipeline.vectors.sparse import BM25_TOKENIZERS, Bm25Encoder, Bm25Params

# name → PrfConfig fields. The first two are the two shapes the arm could take (Anserini's RM3 defaults:
# 10 documents, 10 terms, original weight 0.5); the others show how much the figures move with the knobs.
VARIANTS: dict[str, dict[str, Any]] = {
    "prf[bm25]": {"hybrid": False},
    "prf[hybrid]": {"hybrid": True},
    "prf[bm25,terms=20]": {"hybrid": False, "expansion_terms": 20},
    "prf[bm25,original=0.7]": {"hybrid": False, "original_weight": 0.7},
    "prf[hybrid,original=0.7]": {"hybrid": True, "original_weight": 0.7},
    # Classic RM3 (Anserini): the query's own terms compete for the kept places and are reinforced.
    "prf[bm25,query_terms]": {"hybrid": False, "query_terms": True},
    "prf[hybrid,query_terms]": {"hybrid": True, "query_terms": True},
    "prf[bm25,query_terms,terms=20]": {"hybrid": False, "query_terms": True, "expansion_terms": 20},
}
DEFAULT_VARIANTS = ("prf[bm25]", "prf[hybrid]")


class _NoEmbeddings:
    """The dense model's tokenizer and input limit (so chunks are cut as in the real bench) with one constant
    vector for every text: a BM25-only index of the same children, without the hours of embedding."""

    def __init__(self, model: DenseEncoder) -> None:
        self._model = model
        self.model_id = f"{model.model_id}[not embedded]"
        self.dimension = model.dimension
        self.max_tokens = model.max_tokens

    def count_tokens(self, text: str) -> int:
        return self._model.count_tokens(text)

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.full((len(texts), self.dimension), 1.0 / np.sqrt(self.dimension), dtype=np.float32)

    encode_queries = encode_documents


def _arms(
    base: Retriever,
    dense: object,
    queries: list[EvalQuery],
    meta: EvalSetMeta,
    variants: Sequence[str],
    bm25_only: bool,
) -> dict[str, ArmOutcome]:
    """bm25 and hybrid on ``base``, then each prf variant on a retriever sharing its index, models and query
    cache."""
    outcomes: dict[str, ArmOutcome] = {}
    for arm in ("bm25",) if bm25_only else ("bm25", "hybrid"):
        started = time.perf_counter()
        outcomes[arm] = run_arm(base, arm, queries, sources=meta.sources)  # type: ignore[arg-type]
        print(f"  {meta.name} {arm}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    for name in variants:
        fields = VARIANTS[name]
        if bm25_only and fields.get("hybrid"):
            continue
        config = base.config.model_copy(update={"prf": PrfConfig.model_validate(fields)})
        retriever = Retriever(base.store, base.bm25, dense=dense, config=config, query_cache=base.query_cache)  # type: ignore[arg-type]
        started = time.perf_counter()
        outcomes[name] = run_arm(retriever, "prf", queries, sources=meta.sources, name=name)
        print(f"  {meta.name} {name}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return outcomes


def _paired(
    meta: EvalSetMeta, queries: list[EvalQuery], outcomes: dict[str, ArmOutcome], arm: str, other: str
) -> dict[str, Any]:
    """nDCG@10 of ``arm`` minus ``other`` per judged query: mean, bootstrap CI, unadjusted paired p, wins/losses."""
    frame = summarize_outcomes(meta, queries, {a: outcomes[a] for a in (arm, other)}, baseline=other).per_query
    by_arm = {a: frame[frame["arm"] == a].set_index("query_id")["ndcg@10"] for a in (arm, other)}
    a, b = by_arm[arm], by_arm[other].loc[by_arm[arm].index]
    diff = (a - b).to_numpy(dtype=float)
    low, high = bootstrap_ci(diff)
    return {
        "mean": round(float(diff.mean()), 4),
        "ci95": [round(low, 4), round(high, 4)],
        "p": round(paired_permutation_p(a.to_numpy(dtype=float).tolist(), b.to_numpy(dtype=float).tolist()), 4),
        "better": int((diff > 1e-12).sum()),
        "worse": int((diff < -1e-12).sum()),
    }


def _figures(
    meta: EvalSetMeta,
    queries: list[EvalQuery],
    outcomes: dict[str, ArmOutcome],
    documents: int | None,
    variants: Sequence[str],
) -> dict[str, Any]:
    out: dict[str, Any] = {"queries": None, "documents": documents, "summaries": {}, "paired_ndcg@10": {}}
    for baseline in ("bm25", "hybrid"):
        if baseline not in outcomes:
            continue
        summary = summarize_outcomes(meta, queries, outcomes, baseline=baseline, documents=documents).summary
        out["queries"] = summary.queries
        out["summaries"][f"vs_{baseline}"] = summary.cli_json()["arms"]
    for name in variants:
        if name not in outcomes:
            continue
        out["paired_ndcg@10"][name] = {
            f"minus_{other}": _paired(meta, queries, outcomes, name, other)
            for other in ("bm25", "hybrid")
            if other in outcomes
        }
    out["degraded_queries"] = {name: len(o.warnings) for name, o in outcomes.items() if o.warnings}
    # Every query counts here, judged or not (the ACL set's outsiders included): returned documents the
    # query's principal may not read.
    out["leaks"] = {name: int(sum(o.run.leaks.values())) for name, o in outcomes.items()}
    return out


def _table(name: str, figures: dict[str, Any]) -> str:
    arms = figures["summaries"].get("vs_bm25") or {}
    hybrid = figures["summaries"].get("vs_hybrid") or {}
    lines = [
        f"\n## {name} ({figures['queries']} queries)\n",
        "| arm | nDCG@10 [95% CI] | p vs bm25 | p vs hybrid | p50 ms |",
    ]
    lines.append("|---|---|---|---|---|")
    for arm, s in arms.items():
        low, high = s["ci95"]["ndcg@10"]
        p_h = hybrid.get(arm, {}).get("p_vs_baseline")
        cells = [
            f"{s['ndcg@10']:.4f} [{low:.3f}, {high:.3f}]",
            "—" if s["p_vs_baseline"] is None else f"{s['p_vs_baseline']:.4f}",
            "—" if p_h is None else f"{p_h:.4f}",
            f"{s['p50_ms']:.1f}",
        ]
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _dev_sets(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    eval_dir = common.EVAL_SETS
    resolver = (
        person_resolver(settings.paths.directory, settings.identity_links_file)
        if settings.paths.directory.is_file()
        else None
    )
    sets = [
        (load_eval_set_meta(eval_dir / f"{n}.jsonl"), load_eval_set(eval_dir / f"{n}.jsonl", resolver))
        for n in common.DEV_SETS
    ]
    dense = load_or_defer(lambda: dense_encoder_of(settings))
    results: dict[str, Any] = {}
    with open_index(settings) as store:
        models = SearchModels(
            settings.dense_model,
            bm25_encoder(settings),
            dense=dense,
            cache=EmbeddingCache(settings.paths.embedding_cache),
        )
        base = build_retriever(store, models, RetrieverConfig.chosen(settings.sparse_query, settings.learned_fusion))
        documents = store.count(store.names.parents)
        for meta, queries in sets:
            outcomes = _arms(base, dense, queries, meta, args.variants, bm25_only=False)
            results[meta.name] = _figures(meta, queries, outcomes, documents, args.variants)
            results[meta.name]["index"] = f"{settings.data_dir} (demo index, {settings.bm25_tokenizer} BM25 terms)"
            print(_table(meta.name, results[meta.name]), flush=True)
    return results


def _beir(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    directory = common.require_beir(Path(args.beir))
    if args.sample:
        directory = sample_beir(directory, args.data_dir / f"{directory.name}_sample{args.sample}", args.sample)
    name = directory.name.removeprefix("beir_")
    dataset = load_beir(directory, "test")
    model = dense_encoder_of(settings)
    encoder: DenseEncoder = _NoEmbeddings(model) if args.bm25_only else model
    tokenizer = args.bm25_tokenizer or settings.bm25_tokenizer
    avg_len = corpus_avg_len(dataset, name, tokenizer)
    bm25 = Bm25Encoder(Bm25Params(avg_len=avg_len, tokenizer=tokenizer))
    chunking = ChunkingConfig(parent_tokens=2000, parent_overlap=200, child_tokens=400, child_overlap=50)
    cache = None if args.bm25_only else EmbeddingCache(settings.paths.embedding_cache)
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rag-prf-")))
        store: VectorStore = stack.enter_context(
            EdgeVectorStore(folder, CollectionNames.with_prefix(name), dense_search=settings.qdrant.dense_search)
        )
        started = time.perf_counter()
        report = build_beir_index(dataset, name, store, encoder, bm25, chunking, cache)
        store.optimize()
        built = time.perf_counter() - started
        print(f"{name}: {report.children} children indexed in {built:.0f} s", file=sys.stderr, flush=True)
        config = RetrieverConfig.chosen(settings.sparse_query, settings.learned_fusion)
        base = Retriever(store, bm25, dense=encoder, config=config, persistent_cache=cache)
        queries = beir_eval_queries(dataset, name)
        meta = EvalSetMeta(
            name=f"{name}-test",
            description=f"BEIR {name} (test split)",
            source=str(directory),
            license="see the dataset",
            attribution="BEIR (Thakur et al., 2021)",
            queries=len(queries),
        )
        outcomes = _arms(base, encoder, queries, meta, args.variants, bm25_only=args.bm25_only)
        figures = _figures(meta, queries, outcomes, report.documents, args.variants)
        figures["index"] = (
            f"temporary: {report.children} children of 400 tokens split at the model's input, BM25 {tokenizer} "
            f"avg_len {avg_len:.1f}" + (", dense not embedded (BM25 arms only)" if args.bm25_only else "")
        )
        figures["index_seconds"] = round(built, 1)
        print(_table(meta.name, figures), flush=True)
        return {meta.name: figures}


def main() -> int:
    parser = common.parser(__doc__)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--demo-dir", type=Path, help="data folder of the demo index (the bundled dev sets)")
    target.add_argument("--beir", type=Path, help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv)")
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/rag-bench-prf"), help="embedding cache (--beir)")
    parser.add_argument("--bm25-tokenizer", choices=BM25_TOKENIZERS, default=None, help="--beir: BM25 tokenizer")
    parser.add_argument("--bm25-only", action="store_true", help="--beir: no dense embeddings; BM25 arms only")
    parser.add_argument("--sample", type=int, default=0, help="--beir: queries sampled (0: the whole set)")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(DEFAULT_VARIANTS))
    parser.add_argument("--out", type=Path, default=common.EXPERIMENT_RESULTS / "prf.json")
    args = parser.parse_args()
    settings = Settings.from_env().with_data_dir(args.demo_dir or args.data_dir)
    if args.beir:
        settings.paths.root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results = _dev_sets(args, settings) if args.demo_dir else _beir(args, settings)
    # The encoder that ran: the model is loaded once per process, so this is the same one.
    run = {
        **common.run_record(dense_encoder_of(settings)),
        "dense_model": settings.dense_model,
        "seconds": round(time.perf_counter() - started, 1),
        "variants": {v: PrfConfig.model_validate(VARIANTS[v]).describe() for v in args.variants},
    }
    stored: dict[str, Any] = common.read_json(args.out)
    for name, figures in results.items():
        stored[name] = {**figures, "run": run}
    common.write_json(args.out, stored)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
