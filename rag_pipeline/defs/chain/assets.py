"""The per-source asset chain: raw documents -> parent chunks -> child chunks -> dense vectors ->
sparse vectors -> Qdrant points, with identical weekly partitions at every step.

Every asset has a single-run backfill policy and receives/returns ``{week: frame}``, so a backfill of
years is one step per asset with large batches. Each step processes only the cells (container x day) its
run covers (:mod:`rag_pipeline.defs.chain.coverage`): a sync of some channels rewrites their rows of a week
and leaves the other channels' rows as they are.
"""

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import dagster as dg
import pandas as pd

from rag_pipeline.defs.automation import INDEX_FRESHNESS
from rag_pipeline.defs.chain.coverage import run_coverage
from rag_pipeline.defs.chain.frames import (
    BOOKKEEPING,
    PARTITION_COLUMN,
    CoveredFrames,
    concat_partitions,
    covered_rows,
    label_like_documents,
    split_partitions,
)
from rag_pipeline.defs.chain.metadata import length_stats
from rag_pipeline.defs.chain.resources import Bm25Resource, ChunkingResource, DenseEmbedderResource, QdrantResource
from rag_pipeline.defs.executors import EMBED_QUEUE, QDRANT_QUEUE, step_tags
from rag_pipeline.index.index_info import claim_chunking, claim_dense_model, claim_sparse_terms
from rag_pipeline.index.store import TITLE_VECTOR
from rag_pipeline.pipeline.keys import ChainKeys
from rag_pipeline.sources.document import DOCUMENT_COLUMNS
from rag_pipeline.stages import (
    CHILD_COLUMNS,
    DENSE_COLUMNS,
    PARENT_COLUMNS,
    SPARSE_COLUMNS,
    IndexInputs,
    chunk_documents,
    embed_children,
    embed_titles,
    index_documents,
    sparse_children,
)
from rag_pipeline.vectors.dense.base import encoder_backend, usage_since, usage_snapshot
from rag_pipeline.vectors.progress import ThroughputReporter
from rag_pipeline.vectors.sparse import (
    THREAD_AVG_LEN,
    Bm25Encoder,
    cjk_tokenizer_advice,
    contains_cjk,
    scores_whole_threads,
)

IO_MANAGER_KEY = "parquet_io_manager"
QDRANT_POOL = "qdrant"


class _Step:
    """One run of a chain step: the cells its run covers (the raw asset's run config), its inputs' rows in those
    cells, and its output as ``{week: frame}`` with the metadata every step records."""

    def __init__(self, context: dg.AssetExecutionContext, raw_asset: str) -> None:
        self.started = time.perf_counter()
        self.context = context
        self.coverage = run_coverage(context, raw_asset)

    def rows(self, frames: dict[str, pd.DataFrame], columns: Sequence[str]) -> pd.DataFrame:
        """An input's rows in the cells the run covers."""
        return covered_rows(concat_partitions(frames, columns), self.coverage)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def metadata(self, values: dict[str, Any]) -> dict[str, Any]:
        """``values`` between the run's partition count and its seconds."""
        return {"partitions": len(self.context.partition_keys), **values, "elapsed_seconds": round(self.elapsed(), 3)}

    def output(self, frame: pd.DataFrame, columns: Sequence[str], values: dict[str, Any]) -> dg.Output:
        """``frame`` split into the run's weeks (only its cells: the IO manager keeps the others' rows)."""
        weeks = split_partitions(frame, self.context.partition_keys, columns)
        return dg.Output(CoveredFrames(weeks, self.coverage), metadata=self.metadata(values))


def build_source_chain(keys: ChainKeys, partitions_def: dg.PartitionsDefinition) -> list[dg.AssetsDefinition]:
    """The five downstream assets of one source's raw documents asset."""
    common: dict[str, Any] = dict(
        partitions_def=partitions_def,
        backfill_policy=dg.BackfillPolicy.single_run(),
        group_name=keys.source,
        owners=["team:rag-platform"],
        automation_condition=dg.AutomationCondition.eager(),
    )
    factories = (
        parent_chunks_asset,
        child_chunks_asset,
        dense_vectors_asset,
        sparse_vectors_asset,
        qdrant_points_asset,
    )
    return [factory(keys, common) for factory in factories]


def _frames_asset(
    common: dict[str, Any],
    *,
    name: str,
    ins: dict[str, str],
    kinds: set[str],
    description: str,
    op_tags: dict[str, str] | None = None,
    checks: Sequence[tuple[str, str]] = (),
) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """The decorator of a chain step that writes ``{week: frame}`` through the parquet IO manager: its inputs by
    parameter (``ins``: parameter -> asset), an embedding-queue step unless ``op_tags`` says otherwise, and blocking
    checks (``checks``: name, description) evaluated for the run's partitions, as Dagster plans them (else they stay
    planned)."""
    return dg.asset(
        name=name,
        ins={parameter: dg.AssetIn(asset) for parameter, asset in ins.items()},
        io_manager_key=IO_MANAGER_KEY,
        kinds=kinds,
        op_tags=op_tags or step_tags(EMBED_QUEUE),
        description=description,
        check_specs=[
            dg.AssetCheckSpec(
                check, asset=name, blocking=True, description=words, partitions_def=common["partitions_def"]
            )
            for check, words in checks
        ]
        or None,
        **common,
    )


def parent_chunks_asset(keys: ChainKeys, common: dict[str, Any]) -> dg.AssetsDefinition:
    """Parent chunks: the text a search result returns."""
    source = keys.source

    @_frames_asset(
        common,
        name=keys.parents,
        ins={"documents": keys.raw},
        kinds={"tiktoken", "parquet"},
        description=f"Parent chunks of {source} documents (cl100k tokens; default 2000 with 200 overlap): "
        "the text a search result returns.",
        checks=[("parents_have_text", "No parent chunk is empty")],
    )
    def parent_chunks(
        context: dg.AssetExecutionContext, chunking: ChunkingResource, documents: dict[str, pd.DataFrame]
    ) -> Iterator[dg.Output | dg.AssetCheckResult]:
        step = _Step(context, keys.raw)
        docs = step.rows(documents, DOCUMENT_COLUMNS)
        parents, _ = chunk_documents(docs, chunking.chunker())
        label_like_documents(parents, docs)
        empty = int((parents["text"].str.strip() == "").sum())
        yield step.output(
            parents,
            PARENT_COLUMNS,
            {
                "documents": len(docs),
                "parent_chunks": len(parents),
                "dagster/row_count": len(parents),
                "tokens": int(parents["token_count"].sum()) if len(parents) else 0,
                **length_stats(parents["token_count"], "tokens"),
            },
        )
        yield dg.AssetCheckResult(check_name="parents_have_text", passed=empty == 0, metadata={"empty_parents": empty})

    return parent_chunks


def child_chunks_asset(keys: ChainKeys, common: dict[str, Any]) -> dg.AssetsDefinition:
    """Child chunks, each pointing at its parent: the units that are embedded and matched."""
    source = keys.source

    @_frames_asset(
        common,
        name=keys.children,
        ins={"documents": keys.raw, "parents": keys.parents},
        kinds={"tiktoken", "parquet"},
        description=f"Child chunks of {source} documents (default 400 cl100k tokens, 50 overlap, shortened to fit the "
        "dense model's input limit), each pointing at its parent: the units that are embedded and matched.",
        checks=[
            ("children_have_text", "No child chunk is empty"),
            ("children_have_parents", "Every child's parent_id exists among the parent chunks"),
        ],
    )
    def child_chunks(
        context: dg.AssetExecutionContext,
        chunking: ChunkingResource,
        dense_embedder: DenseEmbedderResource,
        documents: dict[str, pd.DataFrame],
        parents: dict[str, pd.DataFrame],
    ) -> Iterator[dg.Output | dg.AssetCheckResult]:
        step = _Step(context, keys.raw)
        docs = step.rows(documents, DOCUMENT_COLUMNS)
        # A data folder's first index chooses its language (and with it the dense model, whose tokenizer
        # bounds the children) from the documents about to be chunked, where nobody chose one.
        choice = dense_embedder.choose_language(lambda: docs["text"].tolist())
        if choice is not None:
            context.log.info(f"language: {choice.describe()}")
        chunker = chunking.chunker(dense_embedder.encoder())
        _, children = chunk_documents(docs, chunker)
        label_like_documents(children, docs)
        parent_ids = set(step.rows(parents, PARENT_COLUMNS)["chunk_id"])
        orphans = int((~children["parent_id"].isin(parent_ids)).sum())
        empty = int((children["text"].str.strip() == "").sum())
        if chunker.stats.clamped_children:
            context.log.warning(
                f"{chunker.stats.clamped_children} child chunks were shortened to fit the dense model's limit of "
                f"{chunker.stats.model_limit} tokens (shortest: {chunker.stats.shortest_clamped} cl100k tokens)"
            )
        yield step.output(
            children,
            CHILD_COLUMNS,
            {
                "child_chunks": len(children),
                "dagster/row_count": len(children),
                "tokens": int(children["token_count"].sum()) if len(children) else 0,
                **length_stats(children["token_count"], "tokens"),
                "clamped_to_model_limit": chunker.stats.clamped_children,
                "model_token_limit": chunker.stats.model_limit or 0,
            },
        )
        yield dg.AssetCheckResult(
            check_name="children_have_text", passed=empty == 0, metadata={"empty_children": empty}
        )
        yield dg.AssetCheckResult(
            check_name="children_have_parents", passed=orphans == 0, metadata={"orphans": orphans}
        )

    return child_chunks


def dense_vectors_asset(keys: ChainKeys, common: dict[str, Any]) -> dg.AssetsDefinition:
    """Dense embeddings of the child chunks and of the document titles, through the embedding cache."""
    source = keys.source

    @_frames_asset(
        common,
        name=keys.dense,
        ins={"children": keys.children, "documents": keys.raw},
        kinds={"pytorch", "parquet"},
        op_tags=step_tags(EMBED_QUEUE, embedding=True),
        description=f"Dense embeddings of {source} child chunks (local model by default), plus one per document "
        "title (the title vector hybrid search can prefetch), via the persistent embedding cache keyed by "
        "(model, sha256 of text).",
    )
    def dense_vectors(
        context: dg.AssetExecutionContext,
        dense_embedder: DenseEmbedderResource,
        children: dict[str, pd.DataFrame],
        documents: dict[str, pd.DataFrame],
    ) -> dg.Output:
        step = _Step(context, keys.raw)
        frame = step.rows(children, CHILD_COLUMNS)
        docs = step.rows(documents, DOCUMENT_COLUMNS)
        encoder = dense_embedder.encoder()
        cache = dense_embedder.cache()
        usage_before = usage_snapshot(encoder)
        # Progress in the run log at least every tenth or 30 s (and for an in-process CLI, on its logger).
        progress = ThroughputReporter(f"{source} embedding (chunks)", lambda update: context.log.info(update.line()))
        title_progress = ThroughputReporter(
            f"{source} embedding (titles)", lambda update: context.log.info(update.line())
        )
        try:
            dense, stats = embed_children(frame, encoder, cache, on_progress=progress)
            titles, title_stats = embed_titles(docs, encoder, cache, on_progress=title_progress)
        finally:
            cache.close()
        usage = usage_since(encoder, usage_before)
        for column in (PARTITION_COLUMN, *BOOKKEEPING):
            dense[column] = frame[column].to_numpy()
        label_like_documents(titles, docs)
        dense = pd.concat([dense, titles], ignore_index=True) if len(titles) else dense
        elapsed = step.elapsed()
        computed = stats.computed + title_stats.computed
        return step.output(
            dense,
            DENSE_COLUMNS,
            {
                "model": encoder.model_id,
                "backend": encoder_backend(encoder),
                "dimension": encoder.dimension,
                "vectors": len(dense),
                "dagster/row_count": len(dense),
                "title_vectors": len(titles),
                "embeddings_computed": computed,
                "embeddings_cached": stats.cached + title_stats.cached,
                "chunks_per_second": round(stats.computed / elapsed, 2) if stats.computed else 0.0,
                **usage,
            },
        )

    return dense_vectors


def sparse_vectors_asset(keys: ChainKeys, common: dict[str, Any]) -> dg.AssetsDefinition:
    """BM25 term-frequency weights of the child chunks."""
    source = keys.source

    @_frames_asset(
        common,
        name=keys.sparse,
        ins={"children": keys.children, "parents": keys.parents},
        kinds={"bm25", "parquet"},
        description=f"BM25 term-frequency weights of {source} child chunks (hashed term ids; IDF is applied by "
        "Qdrant at query time, so nothing is refit as partitions arrive).",
    )
    def sparse_vectors(
        context: dg.AssetExecutionContext,
        bm25: Bm25Resource,
        children: dict[str, pd.DataFrame],
        parents: dict[str, pd.DataFrame],
    ) -> dg.Output:
        step = _Step(context, keys.raw)
        frame = step.rows(children, CHILD_COLUMNS)
        encoder = bm25.encoder()
        whole_threads = scores_whole_threads(encoder.params.tokenizer, source)
        if whole_threads:
            # CJK chat: each child carries its thread's vector (vectors/sparse.py, THREAD_LEVEL_*).
            encoder = Bm25Encoder(encoder.params.model_copy(update={"avg_len": THREAD_AVG_LEN}))
            parent_frame = step.rows(parents, PARENT_COLUMNS)
            texts = dict(zip(parent_frame["chunk_id"], parent_frame["text"], strict=True))
            sparse = sparse_children(frame, encoder, texts)
        else:
            sparse = sparse_children(frame, encoder)
        cjk = int(frame["text"].map(contains_cjk).sum()) if len(frame) else 0
        advice = cjk_tokenizer_advice(encoder.params.tokenizer, cjk, len(frame), source)
        if advice:
            context.log.warning(advice)
        for column in (PARTITION_COLUMN, *BOOKKEEPING):
            sparse[column] = frame[column].to_numpy()
        terms = sparse["indices"].map(len) if len(sparse) else pd.Series(dtype=int)
        return step.output(
            sparse,
            SPARSE_COLUMNS,
            {
                "vectors": len(sparse),
                "dagster/row_count": len(sparse),
                "cjk_child_chunks": cjk,
                "tokenizer": encoder.params.tokenizer,
                # What each vector scores: the child chunk, or (CJK chat) its whole thread.
                "scored_text": "thread" if whole_threads else "child chunk",
                **length_stats(terms, "terms"),
            },
        )

    return sparse_vectors


def qdrant_points_asset(keys: ChainKeys, common: dict[str, Any]) -> dg.AssetsDefinition:
    """Child and parent points in Qdrant."""
    source = keys.source

    @dg.asset(
        name=keys.points,
        ins={
            "documents": dg.AssetIn(keys.raw),
            "parents": dg.AssetIn(keys.parents),
            "children": dg.AssetIn(keys.children),
            "dense": dg.AssetIn(keys.dense),
            "sparse": dg.AssetIn(keys.sparse),
        },
        kinds={"qdrant"},
        pool=QDRANT_POOL,
        op_tags=step_tags(QDRANT_QUEUE),
        freshness_policy=INDEX_FRESHNESS,
        description=f"{source} child points (dense + BM25 + payload) and parent points (text) in Qdrant. Never "
        "regresses a document to an older version; new points land before stale ones are removed.",
        **common,
    )
    def qdrant_points(
        context: dg.AssetExecutionContext,
        qdrant: QdrantResource,
        dense_embedder: DenseEmbedderResource,
        bm25: Bm25Resource,
        chunking: ChunkingResource,
        documents: dict[str, pd.DataFrame],
        parents: dict[str, pd.DataFrame],
        children: dict[str, pd.DataFrame],
        dense: dict[str, pd.DataFrame],
        sparse: dict[str, pd.DataFrame],
    ) -> dg.MaterializeResult:
        step = _Step(context, keys.raw)
        inputs = IndexInputs(
            documents=step.rows(documents, DOCUMENT_COLUMNS),
            parents=step.rows(parents, PARENT_COLUMNS),
            children=step.rows(children, CHILD_COLUMNS),
            dense=step.rows(dense, DENSE_COLUMNS),
            sparse=step.rows(sparse, SPARSE_COLUMNS),
        )
        dimension = len(inputs.dense["vector"].iloc[0]) if len(inputs.dense) else dense_embedder.encoder().dimension
        with qdrant.open() as store:
            store.create_collections(dimension)
            # Sparse terms and chunk sizes first: on an index that records a dense model but neither, they are the
            # legacy ones (what indexes written before they were recorded used).
            claim_sparse_terms(store, bm25.encoder().terms_id)
            claim_chunking(store, chunking.config().signature())
            claim_dense_model(store, dense_embedder.model_name())
            if TITLE_VECTOR not in store.dense_vector_names():
                context.log.warning(
                    "this index was created before document title vectors: titles are not written and hybrid "
                    "search skips its title prefetches until the collections are re-created (remove the index "
                    "folder, then re-index with --full-refresh)"
                )
            report = index_documents(store, inputs, dimension)
            # The HNSW graph over what was written (and deleted points out of BM25's statistics): blocking, so
            # the next search finds the index built; quick while the new points fit the plain segment.
            optimize_started = time.perf_counter()
            context.log.info(f"optimizing the index (HNSW graph, {store.dense_search.describe()})")
            if store.optimize():
                context.log.info(f"index optimized in {time.perf_counter() - optimize_started:.1f} s")
            optimize_seconds = time.perf_counter() - optimize_started
            children_total = store.count(store.names.children)
            parents_total = store.count(store.names.parents)
        if report.documents_skipped_older:
            context.log.info(
                f"skipped {report.documents_skipped_older} documents the index holds in a newer version "
                f"(e.g. {report.skipped_document_ids[:3]})"
            )
        return dg.MaterializeResult(
            metadata=step.metadata(
                {
                    "engine": qdrant.engine,
                    "documents_written": report.documents_written,
                    "documents_skipped_older": report.documents_skipped_older,
                    "points_written": report.points_upserted,
                    "points_removed": report.points_removed,
                    "dense_search": store.dense_search.describe(),
                    "title_vectors": TITLE_VECTOR in store.dense_vector_names(),
                    "optimize_seconds": round(optimize_seconds, 3),
                    "collection_children_points": children_total,
                    "collection_parents_points": parents_total,
                }
            )
        )

    return qdrant_points
