"""The reranker a reader's ``reranked`` searches use, chosen by the settings (``RAG_RERANKER``).

One function for every reader (``search``, ``ask``, ``serve`` and the stdio MCP server), so a choice made in the
environment holds everywhere. The evaluation does not come here: it measures every reranker as its own arm.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from rag_pipeline.retrieval.rerank.base import Reranker
from rag_pipeline.retrieval.rerank.learned import load_current_reranker
from rag_pipeline.vectors.sparse import Bm25Tokenizer

RerankerChoice = Literal["learned", "llm", "none"]


def configured_reranker(
    choice: RerankerChoice,
    learned_dir: str | Path,
    tokenizer: Bm25Tokenizer,
    llm_model: str | None = None,
    llm_grades: str | Path | None = None,
) -> Reranker | None:
    """``learned``: the multi-signal reranker last trained under ``learned_dir`` (fixed weights before one);
    ``llm``: ``llm_model`` grading each candidate 0–10 (grades cached in ``llm_grades``); ``none``: no reranker
    (a reranked search answers the hybrid ranking with a warning)."""
    if choice == "none":
        return None
    if choice == "llm":
        if not llm_model:
            raise ValueError("the llm reranker needs a model: set RAG_LLM_RERANK_MODEL")
        from rag_pipeline.retrieval.rerank.llm import LlmReranker  # the openai client only when chosen

        return LlmReranker(llm_model, cache_path=llm_grades, max_retries=2)
    return load_current_reranker(learned_dir, tokenizer)
