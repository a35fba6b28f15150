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
from rag_pipeline.answers.generate import (
    Answer,
    AnswerModel,
    Usage,
    condense_question,
    model_failure,
    stream_answer,
    unanswered,
    write_answer,
)
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
    """The answer from results already found (``/v1/search`` with ``"answer": true``); when the model fails, an
    :func:`unanswered` one naming why, with the documents found as its sources."""
    context = build_context(results, limits.documents, limits.max_chars)
    usage = usage or Usage()
    try:
        return write_answer(model, question, context, usage)
    except Exception as exc:  # the model's client error or timeout; a caller still gets the documents
        return unanswered(model.model, context, model_failure(exc), usage)


def _condensed_search(
    model: AnswerModel, search: Callable[[str], list[SearchResult]], turns: Sequence[tuple[str, str]], usage: Usage
) -> tuple[str, list[SearchResult], float, list[str]]:
    """The standalone question, what searching it found, the seconds the condensing call took, and a notice when
    the condensing call failed (the last question is then searched as typed)."""
    started = time.perf_counter()
    notices = []
    try:
        question = condense_question(model, turns, usage)
    except ValueError:
        raise  # no user message: the caller's mistake
    except Exception as exc:
        question = next(text for role, text in reversed(turns) if role == "user")
        notices.append(
            f"{model_failure(exc)} while condensing the conversation: the last question was searched as typed"
        )
    condensing = time.perf_counter() - started
    return question, search(question), condensing, notices


def ask(
    model: AnswerModel,
    search: Callable[[str], list[SearchResult]],
    turns: Sequence[tuple[str, str]],
    limits: ContextLimits = DEFAULT_LIMITS,
) -> Asked:
    """Condense the conversation's last question, search it, answer it."""
    usage = Usage()
    question, results, condensing, notices = _condensed_search(model, search, turns, usage)
    started = time.perf_counter()
    answer = answer_results(model, question, results, limits, usage)
    answer.notices[:0] = notices
    return Asked(question, results, answer, condensing + time.perf_counter() - started)


def ask_streaming(
    model: AnswerModel,
    search: Callable[[str], list[SearchResult]],
    turns: Sequence[tuple[str, str]],
    limits: ContextLimits = DEFAULT_LIMITS,
) -> Iterator[str | Asked]:
    """:func:`ask`, the answer's text yielded as it comes, then the :class:`Asked` (an :func:`unanswered` one when
    the model fails, before or after its first words)."""
    usage = Usage()
    question, results, condensing, notices = _condensed_search(model, search, turns, usage)
    started = time.perf_counter()
    context = build_context(results, limits.documents, limits.max_chars)
    written: list[str] = []
    try:
        for piece in stream_answer(model, question, context, usage):
            if isinstance(piece, Answer):
                piece.notices[:0] = notices
                yield Asked(question, results, piece, condensing + time.perf_counter() - started)
            else:
                written.append(piece)
                yield piece
    except Exception as exc:  # the model's client error or timeout, mid-stream or before its first piece
        answer = unanswered(model.model, context, model_failure(exc), usage)
        answer.text = "".join(written)  # what the caller already has, so a notice after it starts on its own line
        answer.notices[:0] = notices
        yield Asked(question, results, answer, condensing + time.perf_counter() - started)
