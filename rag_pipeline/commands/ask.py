"""``rag-pipeline ask "question" --user PERSON``: an answer written from the documents the person may read, citing
them, with the sources listed. The same entry point as the service's answers (:mod:`rag_pipeline.answers.ask`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rag_pipeline.commands.arguments import positive_int
from rag_pipeline.commands.errors import FAILURE, CommandError
from rag_pipeline.composition import dense_encoder_of, reranker_of
from rag_pipeline.settings import Settings

if TYPE_CHECKING:
    from rag_pipeline.answers.agent import AgentTools
    from rag_pipeline.retrieval.principal import Principal
    from rag_pipeline.retrieval.results import SearchResult


def add_parser(sub: argparse._SubParsersAction) -> None:
    ask = sub.add_parser(
        "ask",
        help="answer a question from the documents a person may read, citing them (RAG_ANSWER_MODEL)",
        description="Searches as the reader (--user through the principal directory, or --groups), keeps the top "
        "documents (RAG_ANSWER_DOCUMENTS, 5) with their parent text (RAG_ANSWER_CONTEXT_CHARS, 1,500 characters "
        "each) and asks the answer model (RAG_ANSWER_MODEL with OPENAI_API_KEY; OPENAI_BASE_URL for any "
        "OpenAI-compatible server) to answer only from them, citing [N]. Nothing found: says so without calling "
        "the model.",
    )
    ask.add_argument("question", help="the question")
    ask.add_argument("--user", default=None, help="the reader: an email or account id (see `whois`)")
    ask.add_argument("--groups", default="", help="the reader's groups, comma-separated (instead of the directory)")
    ask.add_argument("--mode", choices=["vector", "bm25", "hybrid", "reranked"], default="reranked",
                     help="how the context is searched (default: %(default)s)")  # fmt: skip
    ask.add_argument("--documents", type=positive_int, default=None, help="documents in the context (default: 5)")
    ask.add_argument("--model", default=None, help="the answer model (default: RAG_ANSWER_MODEL)")
    ask.add_argument("--data-dir", default=None, help="data folder (default: $RAG_DATA_DIR or ./.rag_data)")
    ask.add_argument("--json", action="store_true", help="print {question, answer, sources, usage} as JSON")
    ask.set_defaults(func=run, all_documents=False)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from rag_pipeline.answers.agent import run_agent
    from rag_pipeline.answers.ask import Asked, ContextLimits, ask
    from rag_pipeline.answers.generate import AnswerModel
    from rag_pipeline.commands.search import principal_from_args
    from rag_pipeline.composition import bm25_encoder, open_index
    from rag_pipeline.retrieval.calibration import CalibrationFile
    from rag_pipeline.retrieval.entry import SearchModels, build_retriever
    from rag_pipeline.retrieval.retriever import RetrieverConfig
    from rag_pipeline.vectors.cache import EmbeddingCache
    from rag_pipeline.vectors.dense.load import load_or_defer

    model_name = args.model or settings.answer_model
    if not model_name:
        raise CommandError("no answer model: set RAG_ANSWER_MODEL (e.g. gpt-4o-mini, with OPENAI_API_KEY) or --model")
    if not args.user and not args.groups:
        raise CommandError("ask answers as a reader: give --user (email or account id) or --groups")
    if not args.question.strip():
        raise CommandError("the question is empty")
    principal = principal_from_args(args, settings)
    limits = ContextLimits(args.documents or settings.answer_documents, settings.answer_context_chars)
    paths = settings.paths
    reranker = reranker_of(settings)
    cache = EmbeddingCache(paths.embedding_cache)
    model = AnswerModel(model_name, max_tokens=settings.answer_max_tokens, temperature=settings.answer_temperature)

    def search(question: str, source: str | None = None, top_k: int | None = None) -> list[SearchResult]:
        # The model loads before the index is opened: the embedded index admits one process at a time.
        dense = None if args.mode == "bm25" else load_or_defer(lambda: dense_encoder_of(settings))
        with open_index(settings) as store:
            models = SearchModels(settings.dense_model, bm25_encoder(settings), dense=dense, reranker=reranker,
                                  cache=cache, calibration=CalibrationFile(paths.calibration))  # fmt: skip
            # The service's defaults, so that `ask` and the chat endpoint search alike.
            config = RetrieverConfig.chosen(settings.sparse_query, settings.learned_fusion, settings.index_language)
            retriever = build_retriever(store, models, config)
            sources = [source] if source else None
            return retriever.search(question, args.mode, principal, top_k=top_k or limits.documents,
                                    sources=sources).results  # fmt: skip

    tool_calls: list[dict[str, Any]] | None = None
    try:
        if settings.agent:
            agent = run_agent(model, local_agent_tools(settings, principal, search), [("user", args.question)],
                              settings.agent_max_iterations, limits.max_chars)  # fmt: skip
            asked = Asked(agent.question, agent.results, agent.answer, agent.seconds)
            tool_calls = [c.as_dict() for c in agent.tool_calls]
        else:
            asked = ask(model, search, [("user", args.question)], limits)
    except CommandError:
        raise
    except Exception as exc:
        if type(exc).__module__.startswith("openai"):
            raise CommandError(f"the answer model {model_name} failed: {type(exc).__name__}", FAILURE) from None
        raise
    finally:
        cache.close()
    answer = asked.answer
    payload: dict[str, Any] = {
        "question": asked.question,
        "answer": None if answer.failure else answer.text,
        "answer_error": answer.failure,
        "notices": answer.notices,
        **({"tool_calls": tool_calls} if tool_calls is not None else {}),
        "sources": answer.sources_json(),
        "invalid_citations": list(answer.invalid_citations),
        "usage": answer.usage.as_dict(),
        "model": answer.model,
    }
    # A model that failed still leaves the documents found: they are printed, and the exit status says it failed.
    status = FAILURE if answer.failure else 0
    if args.json:
        print(json.dumps(payload, indent=2, ensure_ascii=False))
        return status
    for notice in answer.notices:
        print(f"note: {notice}", file=sys.stderr)
    if answer.failure:
        print(f"no answer: {answer.failure}; the documents found are listed below", file=sys.stderr)
    else:
        print(answer.text)
    if answer.sources:
        print("\nsources:")
        for source in answer.sources:
            print(f"  [{source.number}] {source.title}" + (f"  {source.url}" if source.url else ""))
    if answer.invalid_citations:
        print(f"note: dropped citation(s) to documents not in the context: {list(answer.invalid_citations)}",
              file=sys.stderr)  # fmt: skip
    return status


def local_agent_tools(settings: Settings, reader: Principal, search: Callable[..., list[SearchResult]]) -> AgentTools:
    """The agent's tools over this folder's index, as ``reader`` (``ask`` with RAG_AGENT=1)."""
    from rag_pipeline.answers.agent import AgentTools
    from rag_pipeline.composition import open_index
    from rag_pipeline.retrieval.tree import reader_tree, tree_json
    from rag_pipeline.serving.service import read_document

    def document(document_id: str) -> dict[str, Any] | None:
        with open_index(settings) as store:
            found = read_document(store, document_id, reader)
        return None if found is None else found.to_dict()

    def tree(prefix: str | None) -> list[dict[str, Any]]:
        with open_index(settings) as store:
            return tree_json(reader_tree(store, reader, prefix))

    return AgentTools(lambda query, source, top_k: search(query, source, top_k), document, tree)
