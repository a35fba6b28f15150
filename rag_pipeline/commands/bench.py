"""``rag-pipeline bench``: offline retrieval benchmark of the arms on eval sets or a BEIR dataset."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rich.console import Console

from rag_pipeline.commands.arguments import at_least, existing_file, existing_folder, positive_int, writable_folder
from rag_pipeline.commands.errors import CommandError, compact
from rag_pipeline.commands.progress import task_bars
from rag_pipeline.commands.search import add_query_options, retriever_config
from rag_pipeline.commands.tables import print_evaluation_table
from rag_pipeline.composition import bm25_encoder, dense_encoder_of, open_index
from rag_pipeline.directory.lookup import person_resolver
from rag_pipeline.evaluation.beir import beir_eval_queries, load_beir
from rag_pipeline.evaluation.beir_index import build_beir_index, corpus_avg_len
from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta, load_eval_set, load_eval_set_meta
from rag_pipeline.evaluation.evaluate import EvalResult, run_arms, summarize_outcomes
from rag_pipeline.evaluation.report import markdown_table, write_report
from rag_pipeline.evaluation.runner import REWRITTEN_ARM, ArmOutcome, rerank_examples, run_arm, run_rewritten_arm
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.store import CollectionNames, describe_fusion
from rag_pipeline.machine import describe_machine, machine
from rag_pipeline.retrieval.entry import SearchModels, build_retriever
from rag_pipeline.retrieval.rerank.base import Reranker
from rag_pipeline.retrieval.rerank.learned import FITS_FOLDER, MultiSignalReranker, train_reranker
from rag_pipeline.retrieval.results import MODES, SEARCH_MODES
from rag_pipeline.retrieval.retriever import Retriever
from rag_pipeline.retrieval.rewrite import QueryRewriter
from rag_pipeline.settings import Settings
from rag_pipeline.text.chunking import ChunkingConfig
from rag_pipeline.vectors.cache import EmbeddingCache
from rag_pipeline.vectors.dense.load import load_or_defer
from rag_pipeline.vectors.sparse import BM25_TOKENIZERS, Bm25Encoder, Bm25Params

Progressor = Callable[[str, int, int], None]


_RERANKER_SPECS = "'fixed', 'cross-encoder:<folder or hub name>' or 'llm:<chat model>'"


def reranker_spec(value: str) -> str:
    """An ``--extra-reranker`` value, checked at parsing: the arm is built after every other arm has run."""
    if value == "fixed" or value.startswith(("cross-encoder:", "llm:")):
        return value
    raise argparse.ArgumentTypeError(f"unknown reranker {value!r}: use {_RERANKER_SPECS}")


def _extra_reranker(spec: str, settings: Settings, bm25: Bm25Encoder) -> tuple[str, Reranker]:
    """``fixed`` → the fixed-weight default; ``cross-encoder:<folder or hub name>`` → a CrossEncoder;
    ``llm:<chat model>`` → an LLM grading each candidate (OPENAI_API_KEY, OPENAI_BASE_URL)."""
    if spec == "fixed":
        return "reranked[fixed-weights]", MultiSignalReranker(encoder=bm25)
    if spec.startswith("cross-encoder:"):
        from rag_pipeline.retrieval.rerank.cross_encoder import CrossEncoderReranker

        model = spec.split(":", 1)[1]
        return f"reranked[cross-encoder:{Path(model).name}]", CrossEncoderReranker(model)
    if spec.startswith("llm:"):
        from rag_pipeline.retrieval.rerank.llm import LlmReranker

        model = spec.split(":", 1)[1] or "gpt-4o-mini"
        return f"reranked[llm:{model}]", LlmReranker(model, cache_path=settings.paths.llm_grades)
    raise SystemExit(f"unknown --extra-reranker {spec!r}: use {_RERANKER_SPECS}")


def _evaluate(
    retriever: Retriever,
    queries: list[EvalQuery],
    meta: EvalSetMeta,
    args: argparse.Namespace,
    progress: Progressor,
    reranker: Reranker | None,
    documents: int | None,
    settings: Settings,
) -> EvalResult:
    arms = [a for a in args.arms if a != REWRITTEN_ARM]
    outcomes: dict[str, ArmOutcome] = run_arms(
        retriever,
        queries,
        arms,
        meta.sources,
        reranker,
        folds=args.folds,
        progress=progress,
        model_cache=settings.paths.reports / FITS_FOLDER,
    )
    if REWRITTEN_ARM in args.arms:
        if not settings.rewrite_model:
            raise CommandError("the rewritten arm plans each query with RAG_REWRITE_MODEL, which is not set")
        rewriter = QueryRewriter(settings.rewrite_model, cache_path=settings.paths.rewrite_plans)
        outcomes[REWRITTEN_ARM] = run_rewritten_arm(
            retriever, rewriter, queries, sources=meta.sources, progress=progress
        )
    for spec in args.extra_reranker or []:
        name, extra = _extra_reranker(spec, settings, retriever.bm25)
        outcomes[name] = run_arm(
            retriever, "reranked", queries, sources=meta.sources, rerankers=extra, name=name, progress=progress
        )
    return summarize_outcomes(meta, queries, outcomes, args.baseline, documents)


def _beir(args: argparse.Namespace, settings: Settings, progress: Progressor, console: Console) -> list[EvalResult]:
    directory = Path(args.beir)
    name = directory.name.removeprefix("beir_")
    if args.split == args.train_split:
        raise SystemExit(
            f"--split and --train-split are both {args.split!r}: the reranker would be scored on its training queries"
        )
    # The embedding cache lives there; SQLite would otherwise fail with "unable to open database file".
    writable_folder(settings.data_dir, "data folder", "--data-dir / RAG_DATA_DIR")
    dataset = load_beir(directory, args.split)
    encoder = dense_encoder_of(settings)
    tokenizer = args.bm25_tokenizer or settings.bm25_tokenizer
    avg_len = corpus_avg_len(dataset, name, tokenizer) if args.bm25_avg_len == "auto" else float(args.bm25_avg_len)
    bm25 = Bm25Encoder(Bm25Params(k1=args.bm25_k1, b=args.bm25_b, avg_len=avg_len, tokenizer=tokenizer))
    chunking = ChunkingConfig(
        parent_tokens=args.parent_tokens,
        parent_overlap=min(200, args.parent_tokens // 10),
        child_tokens=args.child_tokens,
        child_overlap=min(50, args.child_tokens // 8),
    )
    cache = EmbeddingCache(settings.paths.embedding_cache)
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rag-bench-")))
        store = stack.enter_context(
            EdgeVectorStore(folder, CollectionNames.with_prefix(name), dense_search=settings.qdrant.dense_search)
        )
        started = time.perf_counter()
        report = build_beir_index(
            dataset,
            name,
            store,
            encoder,
            bm25,
            chunking,
            cache,
            on_progress=lambda d, t: progress("embed", d, t),
            split_at_model_limit=not args.truncate_at_model_limit,
        )
        built = time.perf_counter()
        store.optimize()  # the HNSW graph, as the pipeline's points step builds it
        console.print(f"dense search: {store.dense_search.describe()} (built in {time.perf_counter() - built:.0f} s)")
        console.print(
            f"indexed {report.documents} documents → {report.children} child chunks in "
            f"{time.perf_counter() - started:.0f} s ({report.embeddings_computed} embedded, "
            f"{report.embeddings_cached} from cache); BM25 k1={args.bm25_k1} b={args.bm25_b} avg_len={avg_len:.1f} "
            f"tokenizer={tokenizer}",
            highlight=False,
        )
        models = SearchModels(encoder.model_id, bm25, dense=encoder, cache=cache)
        retriever = build_retriever(store, models, retriever_config(args, settings))
        queries = beir_eval_queries(dataset, name)
        reranker: Reranker | None = None
        if "reranked" in args.arms and (directory / "qrels" / f"{args.train_split}.tsv").exists():
            # Learned on the train split's labels, scored on the test split: never on the queries it saw.
            train = beir_eval_queries(load_beir(directory, args.train_split), name)
            examples = rerank_examples(retriever, train, progress=progress)
            reranker = train_reranker(examples, trained_on=f"{name}/{args.train_split}", encoder=bm25)
            console.print(
                f"trained {reranker.name} on {reranker.metadata['training_queries']} {args.train_split} queries"
            )
        meta = EvalSetMeta(
            name=f"{name}-{args.split}",
            description=f"BEIR {name} ({args.split} split)",
            source=str(directory),
            license="see the dataset",
            attribution="BEIR (Thakur et al., 2021)",
            queries=len(queries),
        )
        return [_evaluate(retriever, queries, meta, args, progress, reranker, report.documents, settings)]


def _load_eval_sets(paths: list[Path], settings: Settings) -> list[tuple[EvalSetMeta, list[EvalQuery]]]:
    """Every eval set, read before the index is opened and the model loaded, so a bad line stops at once;
    lines naming a person are resolved through the principal directory."""
    resolver = (
        person_resolver(settings.paths.directory, settings.identity_links_file)
        if settings.paths.directory.is_file()
        else None
    )
    sets = []
    for path in paths:
        try:
            sets.append((load_eval_set_meta(path), load_eval_set(path, resolver)))
        except ValueError as exc:  # the loaders name the file and line; pydantic's detail spans lines
            raise CommandError(compact(exc)) from exc
    return sets


def _eval_sets(args: argparse.Namespace, settings: Settings, progress: Progressor) -> list[EvalResult]:
    eval_sets = _load_eval_sets(args.eval_set, settings)
    # Loaded before the index is opened, so other processes wait for the queries only, not the model load.
    dense = load_or_defer(lambda: dense_encoder_of(settings))
    with open_index(settings) as store:
        models = SearchModels(
            settings.dense_model,
            bm25_encoder(settings),
            dense=dense,
            cache=EmbeddingCache(settings.paths.embedding_cache),
        )
        retriever = build_retriever(store, models, retriever_config(args, settings))
        results = []
        documents = store.count(store.names.parents)
        for meta, queries in eval_sets:
            results.append(_evaluate(retriever, queries, meta, args, progress, None, documents, settings))
        return results


def run(args: argparse.Namespace, settings: Settings) -> int:
    console = Console(stderr=True)
    if args.exact_dense:
        settings = settings.model_copy(update={"qdrant": settings.qdrant.model_copy(update={"exact_dense": True})})
    if args.out:  # checked first: the report is written after minutes of benchmarking
        writable_folder(Path(args.out), "report folder", "--out")
    with task_bars(console) as progress:
        results = _beir(args, settings, progress, console) if args.beir else _eval_sets(args, settings, progress)
    if args.out:
        for result in results:
            out = Path(args.out) / result.name if len(results) > 1 else Path(args.out)
            write_report(result.summary, result.per_query, out, title=f"Retrieval benchmark: {result.name}")
            console.print(f"report written to {out}", highlight=False)
    if args.json:
        config = retriever_config(args, settings)
        described = {
            "machine": _machine(settings),
            "dense_search": settings.qdrant.dense_search.describe(),
            "sparse_query": config.sparse_query.describe(),
            "prf": config.prf.describe(),
        }
        shapes = {
            r.name: {**r.summary.cli_json(), **described, "fusion": describe_fusion(config.fusion_for(r.meta.sources))}
            for r in results
        }
        print(json.dumps(next(iter(shapes.values())) if len(shapes) == 1 else shapes, indent=2))
        return 0
    out_console = Console()
    for result in results:
        print(f"\n## {result.name} ({result.summary.queries} queries)\n", flush=True)
        if out_console.is_terminal:  # tables the terminal's width holds; the report's markdown in a log or pipe
            print_evaluation_table(result.summary, out_console)
        else:
            print(markdown_table(result.summary))
    print(f"\nmachine: {describe_machine(_machine(settings))}")
    return 0


def _machine(settings: Settings) -> dict[str, Any]:
    """Where the latencies were measured (the encoder is loaded already: the arms embedded their queries)."""
    try:
        return machine(dense_encoder_of(settings))
    except Exception as exc:  # the arms reported the model's failure already
        return machine() | {"dense_encoder": f"{settings.dense_model} (not loaded: {type(exc).__name__})"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser(
        "bench",
        help="benchmark the retrieval arms on eval sets or a BEIR dataset",
        description="Runs every arm on each query, scores document rankings with ranx (nDCG@10, Recall@k, MRR@10, "
        "MAP@100, hit rate) and ragas ID-based context precision/recall, with bootstrap 95%% CIs and paired "
        "randomization tests against the baseline (Holm-corrected). --eval-set uses the demo index; --beir builds "
        "a temporary index of the corpus through the same chunking and vector code. The reranked arm is scored "
        "by a learned reranker that never saw the query (BEIR: trained on the train split; eval sets: k-fold "
        "cross-fitting).",
    )
    target = bench.add_mutually_exclusive_group(required=True)
    target.add_argument("--eval-set", action="append", type=existing_file, help="project-format eval set (repeatable)")
    target.add_argument("--beir", type=existing_folder, help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/)")
    bench.add_argument(
        "--arms",
        nargs="+",
        choices=[*SEARCH_MODES, REWRITTEN_ARM],
        default=list(MODES),
        help="arms to run (default: all but rewritten; prf is hybrid with an RM3-expanded BM25 side; rewritten "
        "plans each query with RAG_REWRITE_MODEL and searches the plan, hybrid)",
    )
    bench.add_argument("--baseline", default="bm25", help="arm the others are tested against (default: %(default)s)")
    bench.add_argument(
        "--extra-reranker",
        action="append",
        type=reranker_spec,
        help=f"also report a reranked arm with this reranker: {_RERANKER_SPECS}",
    )
    bench.add_argument("--json", action="store_true", help="print the figures as JSON")
    bench.add_argument("--out", type=Path, help="write report.md, summary.json, per_query.parquet and PNG plots here")
    bench.add_argument(
        "--folds", type=at_least(2), default=5, help="cross-fitting folds on eval sets (default: %(default)s)"
    )
    bench.add_argument(
        "--exact-dense",
        action="store_true",
        help="exact dense search instead of the index's HNSW graph (default: RAG_DENSE_EXACT, else HNSW)",
    )
    add_query_options(bench)
    bench.add_argument(
        "--rerank-depth", type=positive_int, default=50, help="hybrid documents reranked (default: %(default)s)"
    )
    beir = bench.add_argument_group("BEIR options")
    beir.add_argument("--split", default="test", help="split scored (default: %(default)s)")
    beir.add_argument("--train-split", default="train", help="split the reranker learns from (default: %(default)s)")
    beir.add_argument("--bm25-k1", type=float, default=1.2, help="BM25 k1 (default: %(default)s)")
    beir.add_argument("--bm25-b", type=float, default=0.75, help="BM25 b (default: %(default)s)")
    beir.add_argument(
        "--bm25-tokenizer",
        choices=BM25_TOKENIZERS,
        default=None,
        help="BM25 tokenizer (default: RAG_BM25_TOKENIZER, else word); cjk-bigram or multilingual for Japanese, "
        "Chinese, Korean",
    )
    beir.add_argument(
        "--bm25-avg-len", default="auto", help="BM25 average length in tokens, or 'auto' = corpus mean (default)"
    )
    beir.add_argument(
        "--parent-tokens", type=positive_int, default=2000, help="parent chunk size (default: %(default)s)"
    )
    beir.add_argument("--child-tokens", type=positive_int, default=400, help="child chunk size (default: %(default)s)")
    beir.add_argument(
        "--truncate-at-model-limit",
        action="store_true",
        help="keep children longer than the dense model's input whole (the model embeds their start, BM25 sees "
        "all of it) instead of splitting them to fit",
    )
    bench.add_argument("--data-dir", default=None, help="data folder: index and embedding cache (default: ./.rag_data)")
    bench.set_defaults(func=run)
