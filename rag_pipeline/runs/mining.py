"""Mine a data folder's eval sets from the command line: the same corpus, checks and files as the
``mined_eval_sets`` asset (:mod:`rag_pipeline.defs.evaluation.mining`), for ``rag-pipeline evaluate``."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from rag_pipeline.composition import bm25_encoder, dense_encoder_of, open_index
from rag_pipeline.directory.lookup import DirectoryLookup
from rag_pipeline.evaluation.feedback_set import FEEDBACK_TAG, add_feedback
from rag_pipeline.evaluation.mining.copies import replace_masked_copies
from rag_pipeline.evaluation.mining.mine import MiningReport, mine_workspace
from rag_pipeline.evaluation.mining.store import MinedSets
from rag_pipeline.pipeline.sources import document_sources as mined_sources
from rag_pipeline.runs.code_location import source_specs, whole_thread_sources, workspace_corpus
from rag_pipeline.serving.feedback import read_feedback
from rag_pipeline.settings import Settings
from rag_pipeline.text.chunking import Chunker
from rag_pipeline.vectors.cache import EmbeddingCache


class NothingToMine(ValueError):
    """The data folder has no stored documents or no principal directory (the message says which and what to run)."""


def mine_data_folder(
    settings: Settings,
    miners: list[str] | None = None,
    max_queries: int | None = None,
    since: date | None = None,
    until: date | None = None,
    save_to: Path | None = None,
    run_as: str = "authors",
) -> tuple[MiningReport, MinedSets]:
    """Mine the folder's stored documents (and readers' feedback, as the ``feedback`` miner); the sets become the
    folder's current mined sets (and are copied to ``save_to`` as ordinary eval-set files when given)."""
    specs = source_specs(settings)
    corpus = workspace_corpus(settings.paths.parquet, specs, mined_sources(specs))
    if not corpus.raw_files:
        raise NothingToMine(
            f"no stored documents under {settings.paths.parquet}: index the workspace first "
            "(rag-pipeline index --data-dir ...)"
        )
    if run_as == "authors" and not settings.paths.directory.is_file():
        raise NothingToMine(
            f"no principal directory at {settings.paths.directory}: mined queries run as their authors; build it "
            "with rag-pipeline index or rag-pipeline directory"
        )
    with open_index(settings) as store:
        present = set(store.indexed_documents())
    whole_threads = whole_thread_sources(settings.bm25_tokenizer, mined_sources(specs))
    lookup = DirectoryLookup(settings.paths.directory, settings.identity_links_file)
    report = mine_workspace(
        corpus,
        lookup,
        miners=[m for m in miners if m != FEEDBACK_TAG] if miners is not None else None,
        max_queries=max_queries or settings.mined_max_queries,
        since=since,
        until=until,
        indexed=lambda wanted: wanted & present,
        run_as=run_as,
        whole_threads=whole_threads,
    )
    if miners is None or FEEDBACK_TAG in miners:
        add_feedback(
            report, corpus, read_feedback(settings.paths.feedback), lookup, lambda w: w & present, since, until
        )
    sets = MinedSets(settings.paths.mined_eval_sets)
    sets.write_sets(report)
    if report.masked_copies or whole_threads:
        write_copies(settings, report, sets)
    if save_to is not None:
        sets.write_sets(report, save_to)
    return report, sets


def write_copies(settings: Settings, report: MiningReport, sets: MinedSets) -> dict[str, int]:
    """The masked copies the sets judge, written with the index's own models; copies no set judges go."""
    encoder = dense_encoder_of(settings)
    chunker = Chunker(settings.chunking, encoder.count_tokens, encoder.max_tokens)
    with open_index(settings) as store:
        return replace_masked_copies(
            store, report.masked_copies, sets.judged_copies(), chunker, encoder, bm25_encoder(settings),
            EmbeddingCache(settings.paths.embedding_cache),
        )  # fmt: skip
