"""Resources: where data lives, which models run, which Qdrant engine holds the index."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Literal, cast

import dagster as dg
from pydantic import Field

from rag_pipeline.index.opening import StoreLocation, open_vector_store
from rag_pipeline.index.store import CollectionNames, DenseSearch, VectorStore
from rag_pipeline.index.store_lock import log as store_lock_log
from rag_pipeline.index.store_lock import process_label
from rag_pipeline.settings import DEFAULT_STORE_WAIT_SECONDS, Settings
from rag_pipeline.text.chunking import Chunker, ChunkingConfig
from rag_pipeline.text.language import MODELS as LANGUAGE_MODELS
from rag_pipeline.text.language import LanguageChoice, choose_language, read_choice, record_first_choice
from rag_pipeline.vectors.cache import EmbeddingCache
from rag_pipeline.vectors.dense.base import DenseEncoder
from rag_pipeline.vectors.dense.load import DEFAULT_DENSE_MODEL, load_dense_encoder
from rag_pipeline.vectors.sparse import Bm25Encoder, Bm25Params, Bm25Tokenizer

# A model named "auto": the data folder's recorded language's, chosen by its first index.
AUTO = "auto"


class DenseEmbedderResource(dg.ConfigurableResource):
    """The dense model (bundled name or local folder) and its persistent embedding cache."""

    model: str = Field(
        default=DEFAULT_DENSE_MODEL, description="Bundled model name or local sentence-transformers folder"
    )
    cache_path: str = Field(description="SQLite file of the embedding cache")
    backend: str = Field(
        default="auto", description="auto (OpenVINO on the CPU, torch elsewhere), openvino or torch (RAG_DENSE_BACKEND)"
    )
    device: str = Field(default="auto", description="auto, cpu, cuda or mps (RAG_DENSE_DEVICE)")
    trust_remote_code: bool = Field(
        default=False,
        description="Load a model folder that ships its own modeling code (RAG_DENSE_TRUST_REMOTE_CODE)",
    )
    model_cache: str | None = Field(
        default=None, description="Folder of converted models (RAG_MODEL_CACHE; default: the user's cache folder)"
    )
    language_file: str | None = Field(
        default=None,
        description="Where the data folder records its language (set while it has none: the first child_chunks "
        "step chooses it from its documents, and 'auto' models resolve through it)",
    )

    def model_name(self) -> str:
        """The model in force: ``auto`` resolves to the recorded language's (English until one is recorded)."""
        if self.model != AUTO:
            return self.model
        recorded = read_choice(Path(self.language_file)) if self.language_file else None
        return recorded.dense_model if recorded else LANGUAGE_MODELS["english"][0]

    def choose_language(self, texts: Callable[[], Sequence[str]]) -> LanguageChoice | None:
        """Where the data folder has no language yet, choose it from ``texts()`` (the documents a step is about
        to chunk) and record it; the choice in force (None where nothing is left to choose)."""
        if not self.language_file:
            return None
        path = Path(self.language_file)
        if (recorded := read_choice(path)) is not None:
            return recorded
        choice = choose_language(texts())
        if self.model != AUTO:  # a dense model set explicitly is what the index is written with
            choice = replace(choice, dense_model=self.model)
        return record_first_choice(path, choice)

    def encoder(self) -> DenseEncoder:
        return load_dense_encoder(
            self.model_name(), self.backend, self.device, self.model_cache, trust_remote_code=self.trust_remote_code
        )

    def cache(self) -> EmbeddingCache:
        return EmbeddingCache(self.cache_path)


class ChunkingResource(dg.ConfigurableResource):
    """Chunk sizes in cl100k tokens; children are also clamped to the dense model's input limit."""

    parent_tokens: int = 2000
    parent_overlap: int = 200
    child_tokens: int = 400
    child_overlap: int = 50

    def config(self) -> ChunkingConfig:
        return ChunkingConfig(
            parent_tokens=self.parent_tokens,
            parent_overlap=self.parent_overlap,
            child_tokens=self.child_tokens,
            child_overlap=self.child_overlap,
        )

    def chunker(self, encoder: DenseEncoder | None = None) -> Chunker:
        config = self.config()
        if encoder is None:
            return Chunker(config)
        return Chunker(config, encoder.count_tokens, encoder.max_tokens)


class Bm25Resource(dg.ConfigurableResource):
    """BM25 parameters for the sparse vectors (IDF is applied by Qdrant at query time)."""

    k1: float = 1.2
    b: float = 0.75
    avg_len: float = 256.0
    # One Literal: Dagster's config types take no union of Literals. Bm25Tokenizer's names, plus auto.
    tokenizer: Literal["word", "multilingual", "cjk-bigram", "ko-morpheme-bigram", "auto"] = Field(
        default="word",
        description="word; cjk-bigram (or multilingual) for Japanese or Chinese text, ko-morpheme-bigram for "
        "Korean; auto: the data folder's recorded language's",
    )
    language_file: str | None = Field(default=None, description="Where the data folder records its language")

    def tokenizer_name(self) -> Bm25Tokenizer:
        """The tokenizer in force: ``auto`` resolves to the recorded language's (word until one is recorded)."""
        if self.tokenizer != "auto":
            return self.tokenizer
        recorded = read_choice(Path(self.language_file)) if self.language_file else None
        return cast(Bm25Tokenizer, recorded.bm25_tokenizer if recorded else LANGUAGE_MODELS["english"][1])

    def encoder(self) -> Bm25Encoder:
        return Bm25Encoder(Bm25Params(k1=self.k1, b=self.b, avg_len=self.avg_len, tokenizer=self.tokenizer_name()))


class QdrantResource(dg.ConfigurableResource):
    """The index: embedded qdrant-edge under ``path`` by default, a Qdrant server when ``url`` is set."""

    path: str = Field(description="Folder of the embedded engine (ignored when url is set)")
    url: str | None = Field(default=None, description="Qdrant server URL (QDRANT_URL)")
    api_key: str | None = Field(default=None, description="Qdrant API key (QDRANT_API_KEY)")
    collection_prefix: str = "rag"
    shard_number: int | None = Field(
        default=None, description="Shards per collection on a server/cluster (QDRANT_SHARDS)"
    )
    replication_factor: int | None = Field(
        default=None, description="Copies of each shard on a cluster (QDRANT_REPLICAS); needs as many nodes"
    )
    hnsw_m: int = Field(default=DenseSearch.m, description="HNSW edges per node for new collections (RAG_HNSW_M)")
    hnsw_ef_construct: int = Field(
        default=DenseSearch.ef_construct,
        description="HNSW build candidates for new collections (RAG_HNSW_EF_CONSTRUCT)",
    )
    hnsw_ef: int = Field(default=DenseSearch.hnsw_ef, description="HNSW candidates per query (RAG_HNSW_EF)")
    exact_dense: bool = Field(default=False, description="Exact dense search instead of HNSW (RAG_DENSE_EXACT)")
    store_wait_seconds: float = Field(
        default=DEFAULT_STORE_WAIT_SECONDS,
        description="How long a step waits for another process holding the embedded index (RAG_STORE_WAIT_SECONDS)",
    )

    @property
    def engine(self) -> str:
        return "qdrant-client:server" if self.url else "qdrant-edge"

    def location(self) -> StoreLocation:
        """Where the index is, for :func:`~rag_pipeline.index.opening.open_vector_store` (the key resolved)."""
        return StoreLocation(
            path=Path(self.path),
            url=self.url,
            api_key=self.api_key,
            names=CollectionNames.with_prefix(self.collection_prefix),
            shard_number=self.shard_number,
            replication_factor=self.replication_factor,
            dense_search=DenseSearch(
                exact=self.exact_dense, hnsw_ef=self.hnsw_ef, m=self.hnsw_m, ef_construct=self.hnsw_ef_construct
            ),
            wait_seconds=self.store_wait_seconds,
        )

    @contextmanager
    def open(
        self, on_wait: Callable[[str], None] | None = None, label: str | None = None, exact: bool | None = None
    ) -> Iterator[VectorStore]:
        """Open the store for one step and always close it; ``exact`` overrides ``exact_dense`` (an evaluation
        that wants exact dense search).

        The embedded engine admits one opener per folder: while a search or another run holds it, this
        waits up to ``store_wait_seconds`` and reports the wait every few seconds (``on_wait``; by default the
        step's log, shown in the UI, and stderr), then fails naming the holder. A server (``url``) has no
        such lock.
        """
        location = self.location()
        if exact is not None:
            location = replace(location, dense_search=replace(location.dense_search, exact=exact))
        store: VectorStore
        if location.embedded:
            step_label, step_log = _current_step()
            store = open_vector_store(location, on_wait=on_wait or step_log, label=label or step_label)
        else:
            store = open_vector_store(location)
        try:
            yield store
        finally:
            store.close()


def _current_step() -> tuple[str, Callable[[str], None] | None]:
    """This opener's name in other processes' wait messages, and where its own wait messages go.

    In a step: the step's log (the run's event log, shown in the UI) and the store lock's Python logger, which
    reaches the process's stderr even where the run's console logger is turned down (the demo's runners show
    only their own progress). Elsewhere: the Python logger alone (the default)."""
    try:
        context = dg.OpExecutionContext.get()
    except dg.DagsterInvariantViolationError:  # outside a step: the CLI, a sensor, a test
        return process_label(), None

    def report(message: str) -> None:
        context.log.warning(message)
        store_lock_log.warning(f"{context.op.name}: {message}")  # unlike the step log, stderr has no step column

    return f"{process_label()}, Dagster run {context.run_id[:8]}, step {context.op.name}", report


def qdrant_resource(settings: Settings) -> QdrantResource:
    """The index: the Qdrant server at QDRANT_URL (key from QDRANT_API_KEY), else the embedded engine."""
    q = settings.qdrant
    return QdrantResource(
        path=str(settings.paths.qdrant),
        url=q.url,
        api_key=dg.EnvVar("QDRANT_API_KEY") if q.api_key_set else None,
        collection_prefix=q.collection_prefix,
        shard_number=q.shards,
        replication_factor=q.replicas,
        hnsw_m=q.hnsw_m,
        hnsw_ef_construct=q.hnsw_ef_construct,
        hnsw_ef=q.hnsw_ef,
        exact_dense=q.exact_dense,
        store_wait_seconds=settings.store_wait_seconds,
    )
