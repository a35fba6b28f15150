"""The ``mined_eval_sets`` asset: every week's questions mined from the workspace's own documents (links, Jira
links, chat threads), written as ordinary eval sets that ``retrieval_eval`` runs with every arm beside the bundled
ones. Thin: the mining is :func:`rag_pipeline.evaluation.mining.mine.mine_workspace`; the files and the merge of the
weeks are :mod:`rag_pipeline.evaluation.mining.store`."""

from collections.abc import Mapping, Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from rag_pipeline.defs.chain.assets import QDRANT_POOL
from rag_pipeline.defs.chain.partitions import weekly_partitions
from rag_pipeline.defs.chain.resources import Bm25Resource, ChunkingResource, DenseEmbedderResource, QdrantResource
from rag_pipeline.defs.chain.source_spec import SourceSpec
from rag_pipeline.defs.executors import QDRANT_QUEUE, step_tags
from rag_pipeline.directory.lookup import DirectoryLookup
from rag_pipeline.evaluation.feedback_set import FEEDBACK_TAG, add_feedback
from rag_pipeline.evaluation.mining.copies import replace_masked_copies
from rag_pipeline.evaluation.mining.corpus import Corpus
from rag_pipeline.evaluation.mining.mine import DEFAULT_MAX_QUERIES, MiningReport, mine_workspace
from rag_pipeline.evaluation.mining.store import MinedSets
from rag_pipeline.serving.feedback import read_feedback
from rag_pipeline.vectors.sparse import scores_whole_threads


def workspace_corpus(parquet_dir: Path, specs: Mapping[str, SourceSpec], sources: Sequence[str]) -> Corpus:
    """The stored raw documents (and child chunk spans) of these document sources."""
    raw: list[Path] = []
    children: list[Path] = []
    for name in sources:
        keys = specs[name].keys
        raw += sorted((parquet_dir / keys.raw).glob("*.parquet"))
        children += sorted((parquet_dir / keys.children).glob("*.parquet"))
    return Corpus(raw, children)


def whole_thread_sources(tokenizer: str, sources: Sequence[str]) -> frozenset[str]:
    """The sources whose chunks carry their thread's BM25 vector in an index with this tokenizer (CJK chat)."""
    return frozenset(name for name in sources if scores_whole_threads(tokenizer, name))


class MiningResource(dg.ConfigurableResource):
    """Where the workspace's stored documents and directory are, and how much to mine."""

    parquet_dir: str = Field(description="The chain's parquet files (RAG_DATA_DIR/parquet)")
    mined_dir: str = Field(description="Where mined eval sets are written (RAG_DATA_DIR/reports/mined)")
    directory_path: str = Field(description="The principal directory: each mined query runs as its author")
    identity_links: str | None = Field(default=None, description="Links file joining a person's accounts")
    feedback_dir: str | None = Field(
        default=None, description="Readers' judgements (RAG_FEEDBACK_DAYS), mined as the readers_feedback set"
    )
    miners: list[str] = Field(default_factory=list, description="Miners to run; empty = every registered one")
    run_as: str = Field(
        default="authors",
        description="Who mined queries search as (RAG_MINED_RUN_AS): authors, through the directory; or everyone, "
        "where the directory knows no memberships",
    )
    max_queries: int = Field(
        default=DEFAULT_MAX_QUERIES, description="Queries kept per source and miner (a sample spread over weeks)"
    )

    def resolver(self) -> DirectoryLookup:
        return DirectoryLookup(self.directory_path, self.identity_links)


def report_metadata(report: MiningReport, sets: MinedSets) -> dict[str, Any]:
    """What the UI shows of a mining: queries per miner and source, languages, skipped candidates and why, examples."""
    summary = report.summary()
    examples = "\n\n".join(
        f"**{name}**\n\n" + "\n".join(f"- `{e['query']}` → {', '.join(e['relevant'])}" for e in shown)
        for name, shown in report.examples().items()
    )
    return {
        "documents_read": report.documents,
        "queries_this_run": sum(len(q) for _m, q in report.eval_sets.values()),
        "queries_by_miner_and_source": dg.MetadataValue.json(summary["kept"]),
        "languages": dg.MetadataValue.json(summary["languages"]),
        "skipped": dg.MetadataValue.json(summary["skipped"]),
        "current_sets": dg.MetadataValue.json(sets.current_counts()),
        "examples": dg.MetadataValue.md(examples or "no queries mined"),
        "mined_dir": dg.MetadataValue.path(str(sets.root)),
    }


def build_mined_eval_sets(
    specs: Mapping[str, SourceSpec], sources: Sequence[str], partition_start: str
) -> dg.AssetsDefinition:
    """The weekly mined eval sets over the sources' raw documents (every week of them: a link may point back)."""
    deps = [dg.AssetDep(specs[name].keys.raw, partition_mapping=dg.AllPartitionMapping()) for name in sources]

    @dg.asset(
        name="mined_eval_sets",
        partitions_def=weekly_partitions(partition_start),
        deps=deps,
        backfill_policy=dg.BackfillPolicy.single_run(),
        # It opens the index (and writes masked copies): one writer at a time, where the index is.
        pool=QDRANT_POOL,
        op_tags=step_tags(QDRANT_QUEUE),
        group_name="evaluation",
        owners=["team:rag-platform"],
        kinds={"python"},
        automation_condition=dg.AutomationCondition.eager(),
        description="Questions the workspace's own people asked and answered, mined per week (the week the question "
        "was asked): documents naming others (links, keys, permalinks), Jira issue links (duplicates grade 2, "
        "relates/causes/clones 1) and chat threads (the opening message, the thread found from its replies). Each "
        "runs as its author and judges only what the author may read. Written as eval sets that retrieval_eval "
        "runs beside the bundled ones (a sample of at most max_queries per source and miner, spread over weeks).",
    )
    def mined_eval_sets(
        context: dg.AssetExecutionContext,
        mining: MiningResource,
        qdrant: QdrantResource,
        bm25: Bm25Resource,
        dense_embedder: DenseEmbedderResource,
        chunking: ChunkingResource,
    ) -> dg.MaterializeResult:
        weeks = sorted(context.partition_keys)
        since, until = date.fromisoformat(weeks[0]), date.fromisoformat(weeks[-1]) + timedelta(days=7)
        corpus = workspace_corpus(Path(mining.parquet_dir), specs, sources)
        whole_threads = whole_thread_sources(bm25.tokenizer_name(), sources)
        with qdrant.open() as store:
            present = set(store.indexed_documents())
        report = mine_workspace(
            corpus,
            mining.resolver(),
            miners=[m for m in mining.miners if m != FEEDBACK_TAG] if mining.miners else None,
            max_queries=mining.max_queries,
            since=since,
            until=until,
            indexed=lambda wanted: wanted & present,
            run_as=mining.run_as,
            whole_threads=whole_threads,
        )
        if mining.feedback_dir and (not mining.miners or FEEDBACK_TAG in mining.miners):
            entries = read_feedback(Path(mining.feedback_dir))
            add_feedback(report, corpus, entries, mining.resolver(), lambda w: w & present, since, until)
        sets = MinedSets(Path(mining.mined_dir))
        sets.write_weeks(report, weeks)
        sets.merge(mining.max_queries)
        copies: dict[str, int] = {}
        if report.masked_copies or whole_threads:
            # Where BM25 scores threads whole, thread questions are masked by copies written for the evaluation.
            encoder = dense_embedder.encoder()
            with qdrant.open() as store:
                copies = replace_masked_copies(
                    store, report.masked_copies, sets.judged_copies(), chunking.chunker(encoder), encoder,
                    bm25.encoder(), dense_embedder.cache(),
                )  # fmt: skip
        context.log.info(f"mined {sum(len(q) for _m, q in report.eval_sets.values())} queries over {len(weeks)} weeks")
        metadata = report_metadata(report, sets)
        if copies:
            metadata["masked_copies"] = dg.MetadataValue.json(copies)
        return dg.MaterializeResult(metadata=metadata)

    return mined_eval_sets
