"""``rag-pipeline ask "question" --user PERSON``: an answer written from the documents the person may read, citing
them, with the sources listed. The same entry point as the service's answers (:mod:`rag_pipeline.answers.ask`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rag_pipeline.commands.arguments import add_data_dir, positive_int
from rag_pipeline.commands.errors import FAILURE, CommandError
from rag_pipeline.commands.tools import agent_tool_finder_of
from rag_pipeline.composition import dense_encoder_of, reranker_of
from rag_pipeline.settings import Settings


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
    ask.add_argument("--max-iterations", type=positive_int, default=None, dest="max_iterations",
                     help="with RAG_AGENT: the model's tool rounds at most (1 to RAG_AGENT_MAX_ITERATIONS, its "
                     "default)")  # fmt: skip
    add_data_dir(ask)
    ask.add_argument("--json", action="store_true", help="print {question, answer, sources, usage} as JSON")
    ask.set_defaults(func=run, reads_data_folder=True, all_documents=False)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from rag_pipeline.answers.ask import Asked, ContextLimits, ask
    from rag_pipeline.answers.generate import AnswerModel
    from rag_pipeline.commands.search import principal_from_args
    from rag_pipeline.composition import one_shot_index
    from rag_pipeline.serving.answers import (
        RoundsRefused,
        agent_answer,
        agent_rounds,
        answer_text,
        question_search,
        reader_tools,
    )
    from rag_pipeline.vectors.cache import EmbeddingCache
    from rag_pipeline.vectors.dense.load import load_or_defer

    model_name = args.model or settings.answer_model
    if not model_name:
        raise CommandError("no answer model: set RAG_ANSWER_MODEL (e.g. gpt-4o-mini, with OPENAI_API_KEY) or --model")
    if not args.user and not args.groups:
        raise CommandError("ask answers as a reader: give --user (email or account id) or --groups")
    if not args.question.strip():
        raise CommandError("the question is empty")
    try:
        rounds = agent_rounds(args.max_iterations, settings.agent_max_iterations if settings.agent else None)
    except RoundsRefused as refused:
        raise CommandError(str(refused).replace("max_iterations", "--max-iterations", 1)) from None
    principal = principal_from_args(args, settings)
    limits = ContextLimits(args.documents or settings.answer_documents, settings.answer_context_chars)
    cache = EmbeddingCache(settings.paths.embedding_cache)
    model = AnswerModel(
        model_name,
        max_tokens=settings.answer_max_tokens,
        temperature=settings.answer_temperature,
        language=settings.answer_language,
    )
    # The models load before the index is opened (the embedded index admits one process at a time); the searches
    # are the service's use cases with the service's defaults, so that `ask` and the chat endpoint search alike.
    dense = None if args.mode == "bm25" else load_or_defer(lambda: dense_encoder_of(settings))
    index = one_shot_index(settings, dense=dense, reranker=reranker_of(settings), cache=cache)

    tool_calls: list[dict[str, Any]] | None = None
    try:
        search = question_search(index, principal, args.mode, limits.documents)
        if rounds is not None:
            finder = agent_tool_finder_of(settings, index, principal)  # None unless RAG_AGENT_TOOL_SEARCH
            tools = reader_tools(index, principal, args.mode, find_tools=finder)
            agent = agent_answer(model, tools, [("user", args.question)], rounds, limits, search)
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
        **answer_text(answer),
        **({"tool_calls": tool_calls, "max_iterations": rounds} if tool_calls is not None else {}),
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
    if answer.reasoning:
        print(f"reasoning: {answer.reasoning}", file=sys.stderr)
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
