"""Evaluation settings: which eval sets, where reports go, quality floors and regression tolerance."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import dagster as dg
from pydantic import Field

from rag_pipeline.directory.lookup import person_resolver
from rag_pipeline.evaluation.eval_set import EvalQuery, load_eval_set, load_eval_set_meta
from rag_pipeline.evaluation.mining.mine import MINED_TAG
from rag_pipeline.evaluation.quality_over_time import DEFAULT_ALPHA, DEFAULT_RECENT_WEEKS, DEFAULT_TOLERANCE
from rag_pipeline.retrieval.entry import SearchModels
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.rerank.learned import FITS_FOLDER
from rag_pipeline.retrieval.rerank.llm import LlmReranker
from rag_pipeline.retrieval.retriever import RetrieverConfig
from rag_pipeline.retrieval.rewrite import QueryRewriter
from rag_pipeline.text.language import language_of_models

# nDCG@10 every arm must reach per eval set; set below the bundled figures measured with the
# default model (Slack ≥ 0.55, Jira ≥ 0.44, ACL ≥ 0.54 for the weakest arm, BM25) so that a broken
# index or model fails the check while normal variation does not.
DEFAULT_QUALITY_FLOORS = {"slack_ubuntu_dev": 0.45, "jira_appcelerator_dev": 0.35, "acl_bundled_dev": 0.45}


class EvaluationResource(dg.ConfigurableResource):
    """Eval sets under ``eval_dir`` (all ``*.jsonl`` unless ``eval_sets`` names some) and report settings."""

    eval_dir: str = Field(description="Folder of eval sets in the project format")
    eval_sets: list[str] = Field(default_factory=list, description="Eval set names to run; empty = every one")
    reports_dir: str = Field(description="Where arm runs, reports, plots and the reranker model are written")
    depth: int = Field(default=100, description="Documents retrieved per query (Recall@100, MAP@100 need 100)")
    folds: int = Field(default=5, description="Cross-fitting folds for the learned reranker")
    baseline: str = Field(default="bm25", description="Arm the others are tested against")
    quality_floors: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_QUALITY_FLOORS), description="Eval set → minimum nDCG@10 of every arm"
    )
    default_quality_floor: float = Field(default=0.0, description="Floor for eval sets not in quality_floors")
    regression_tolerance: float = Field(default=0.03, description="Allowed nDCG@10 drop per arm vs the previous report")
    rerank_depth: int = Field(default=50, description="Hybrid documents the reranker rescores")
    rrf_k: int = Field(default=60, description="RRF constant (Qdrant's default is 2)")
    exact_dense: bool = Field(
        default=False,
        description="Score the dense and hybrid arms with exact dense search instead of the index's HNSW "
        "(RAG_EVAL_EXACT_DENSE): the quality of the model alone, without the graph's approximation",
    )
    sparse_query: str = Field(
        default="fielded",
        description="How BM25 reads a query (RAG_SPARSE_QUERY): fielded (title line weighted up, code and stack "
        "frames dropped) or plain (one weight per term)",
    )
    learned_fusion: bool = Field(
        default=True,
        description="Hybrid arms fuse with the learned RRF of the eval set's source and, for multi-line queries, "
        "the title line's dense prefetch (RAG_LEARNED_FUSION); off: plain RRF k=60",
    )
    llm_reranker_model: str | None = Field(
        default=None,
        description="Chat model of the llm_reranked arm (RAG_LLM_RERANK_MODEL; OPENAI_API_KEY, OPENAI_BASE_URL)",
    )

    rewrite_model: str | None = Field(
        default=None, description="Chat model of the rewritten arm (RAG_REWRITE_MODEL); None: no such arm"
    )
    directory_path: str | None = Field(
        default=None, description="The principal directory, for eval-set lines naming a person (RAG_DATA_DIR)"
    )
    identity_links: str | None = Field(default=None, description="Links file joining a person's accounts")
    mined_dir: str | None = Field(
        default=None,
        description="Eval sets mined from this workspace (mined_eval_sets, rag-pipeline evaluate), run beside the "
        "bundled ones when present",
    )
    recent_weeks: int = Field(
        default=DEFAULT_RECENT_WEEKS,
        description="retrieval_quality_over_time: the last weeks of mined questions tested against earlier ones",
    )
    drop_alpha: float = Field(default=DEFAULT_ALPHA, description="p-value below which a drop counts")
    drop_tolerance: float = Field(default=DEFAULT_TOLERANCE, description="nDCG@10 drop a check tolerates")
    workers: int = Field(
        default=1,
        description="Processes the search arms run in (RAG_EVAL_WORKERS; 0: one per core, at most 4): each other "
        "process searches its own copy of the embedded index; rankings are the same as in one process",
    )

    def rewriter(self) -> QueryRewriter:
        """The rewritten arm's planner, its plans cached beside the reports (shared with the search service)."""
        if not self.rewrite_model:
            raise dg.Failure("the rewritten arm needs RAG_REWRITE_MODEL", allow_retries=False)
        return QueryRewriter(self.rewrite_model, cache_path=Path(self.reports_dir) / "rewrite_plans.sqlite")

    def person_resolver(self) -> Callable[[str], Principal] | None:
        """Resolves eval-set lines that name a person, where a directory exists."""
        if self.directory_path is None or not Path(self.directory_path).is_file():
            return None
        return person_resolver(self.directory_path, self.identity_links)

    def load(self, path: Path) -> list[EvalQuery]:
        """An eval set's queries, people resolved through the directory; a mined set leaves out the lines of people
        the directory no longer knows (a bundled or hand-written set names them as an error)."""
        mined = MINED_TAG in load_eval_set_meta(path).tags
        return load_eval_set(path, self.person_resolver(), skip_unknown_people=mined)

    def eval_set_paths(self) -> list[Path]:
        """The eval sets under ``eval_dir``, then those mined from this workspace (``mined_dir``), by name."""
        folders = [Path(self.eval_dir), *([Path(self.mined_dir)] if self.mined_dir else [])]
        found = {p.stem: p for folder in reversed(folders) for p in sorted(folder.glob("*.jsonl"))}
        if self.eval_sets:
            missing = [name for name in self.eval_sets if name not in found]
            if missing:
                where = " or ".join(str(f) for f in folders)
                raise FileNotFoundError(f"eval sets not found: {', '.join(missing)} (in {where})")
            return [found[name] for name in self.eval_sets]
        if not found:
            raise FileNotFoundError(f"no eval sets (*.jsonl) in {folders[0]}")
        bundled = sorted(Path(self.eval_dir).glob("*.jsonl"))
        return bundled + [p for name, p in sorted(found.items()) if p not in bundled]

    def retriever_config(self, models: SearchModels) -> RetrieverConfig:
        """The searches' settings over an index written with ``models``: its language picks the learned fusions."""
        language = language_of_models(models.dense_model, models.bm25.params.tokenizer)
        return RetrieverConfig.chosen(
            self.sparse_query, self.learned_fusion, language, rerank_depth=self.rerank_depth, rrf_k=self.rrf_k
        )

    @property
    def runs_dir(self) -> Path:
        return Path(self.reports_dir) / "runs"

    @property
    def reranker_fits_dir(self) -> Path:
        """Cross-fitted reranker models by the digest of their training data: an unchanged index re-evaluates
        without training (issue 48)."""
        return Path(self.reports_dir) / FITS_FOLDER

    def llm_reranker(self) -> LlmReranker:
        """The LLM reranker of the llm_reranked arm; grades are cached next to the reports."""
        if not self.llm_reranker_model:
            raise ValueError("the llm_reranked arm needs llm_reranker_model (RAG_LLM_RERANK_MODEL)")
        return LlmReranker(self.llm_reranker_model, cache_path=Path(self.reports_dir) / "llm_grades.sqlite")

    @property
    def reranker_dir(self) -> Path:
        return Path(self.reports_dir) / "reranker"

    def floor(self, eval_set: str) -> float:
        return self.quality_floors.get(eval_set, self.default_quality_floor)
