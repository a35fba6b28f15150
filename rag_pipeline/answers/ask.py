"""One question to one answer, the same for ``rag-pipeline ask``, ``POST /v1/search`` with ``"answer": true`` and
``POST /v1/chat/completions``: search as the reader, keep the top documents as the context, write the answer.

The search is handed in as a function (the CLI's retriever, the service's shared index), so this module never
opens an index and never decides who the reader is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from rag_pipeline.answers.context import DEFAULT_CONTEXT_CHARS, DEFAULT_CONTEXT_DOCUMENTS, build_context
from rag_pipeline.answers.generate import Answer, AnswerModel, Usage, condense_question, stream_answer, write_answer
from rag_pipeline.retrieval.results import SearchResult


@dataclass(frozen=True)
class ContextLimits:
    """How much of the search goes to the model: the top ``documents``, each cut at ``max_chars``."""

    documents: int = DEFAULT_CONTEXT_DOCUMENTS
    max_chars: int = DEFAULT_CONTEXT_CHARS


DEFAULT_LIMITS = ContextLimits()


@dataclass
class Asked:
    """An answered question: the question searched (standalone), the search's results, the answer, seconds."""

    question: str
    results: list[SearchResult]
    answer: Answer
    answer_seconds: float


def answer_results(
    model: AnswerModel,
    question: str,
    results: Sequence[SearchResult],
    limits: ContextLimits,
    usage: Usage | None = None,
) -> Answer:
    """The answer from results already found (``/v1/search`` with ``"answer": true``)."""
    return write_answer(model, question, build_context(results, limits.documents, limits.max_chars), usage)


def _condensed_search(
    model: AnswerModel, search: Callable[[str], list[SearchResult]], turns: Sequence[tuple[str, str]], usage: Usage
) -> tuple[str, list[SearchResult], float]:
    """The standalone question, what searching it found, and the seconds the condensing call took."""
    started = time.perf_counter()
    question = condense_question(model, turns, usage)
    condensing = time.perf_counter() - started
    return question, search(question), condensing


def ask(
    model: AnswerModel,
    search: Callable[[str], list[SearchResult]],
    turns: Sequence[tuple[str, str]],
    limits: ContextLimits = DEFAULT_LIMITS,
) -> Asked:
    """Condense the conversation's last question, search it, answer it."""
    usage = Usage()
    question, results, condensing = _condensed_search(model, search, turns, usage)
    started = time.perf_counter()
    answer = answer_results(model, question, results, limits, usage)
    return Asked(question, results, answer, condensing + time.perf_counter() - started)


def ask_streaming(
    model: AnswerModel,
    search: Callable[[str], list[SearchResult]],
    turns: Sequence[tuple[str, str]],
    limits: ContextLimits = DEFAULT_LIMITS,
) -> Iterator[str | Asked]:
    """:func:`ask`, the answer's text yielded as it comes, then the :class:`Asked`."""
    usage = Usage()
    question, results, condensing = _condensed_search(model, search, turns, usage)
    started = time.perf_counter()
    context = build_context(results, limits.documents, limits.max_chars)
    for piece in stream_answer(model, question, context, usage):
        if isinstance(piece, Answer):
            yield Asked(question, results, piece, condensing + time.perf_counter() - started)
        else:
            yield piece
