"""ragas's answer metrics with a judge model: **faithfulness** (the answer's statements supported by its context)
and **answer relevancy** (questions the judge writes back from the answer, compared with the asked question by
the cosine of their embeddings; a noncommittal answer scores 0).

The judge is any OpenAI-compatible chat model (``RAG_JUDGE_MODEL``, reached through ``OPENAI_BASE_URL``); the
embeddings are the project's own dense encoder, so answer relevancy needs no embedding API and runs offline
with the bundled model. Imported only by its callers: ragas pulls in langchain and costs seconds.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from openai import AsyncOpenAI
from ragas.embeddings.base import BaseRagasEmbedding
from ragas.llms import llm_factory
from ragas.metrics.collections import AnswerRelevancy, Faithfulness

from rag_pipeline.evaluation.answer_checks import JudgeSample
from rag_pipeline.vectors.dense.base import DenseEncoder

# ragas posts usage telemetry from an atexit hook unless told not to; an explicit user setting wins.
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")


class EncoderEmbeddings(BaseRagasEmbedding):
    """A project dense encoder as ragas embeddings. Both sides are questions, so both are encoded as queries
    (E5's ``query:`` prompt), which keeps their cosine comparable."""

    def __init__(self, encoder: DenseEncoder) -> None:
        super().__init__()
        self.encoder = encoder

    def embed_text(self, text: str, **kwargs: Any) -> list[float]:
        return [float(x) for x in self.encoder.encode_queries([text])[0]]

    async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
        return self.embed_text(text)

    def embed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        return [[float(x) for x in row] for row in self.encoder.encode_queries(texts)]

    async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
        return self.embed_texts(texts)


@dataclass
class JudgeScores:
    """Each metric's mean over the answered samples, and for each metric left out, why."""

    means: dict[str, float] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    judged: int = 0


def judge_answers(
    judge_model: str,
    samples: Sequence[JudgeSample],
    encoder: DenseEncoder | None,
    client_factory: Callable[[], AsyncOpenAI] = AsyncOpenAI,
) -> JudgeScores:
    """Faithfulness and answer relevancy over the samples that had a context (an answer over nothing was
    never written by the model: there is nothing to judge). A metric the judge cannot score (unreachable,
    another reply format) is left out with the exception's type, never a made-up number; answer relevancy is
    left out when no ``encoder`` is given. ``client_factory`` makes the judge's client inside the call's event
    loop (an async client cannot outlive its loop): by default from ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``."""
    answered = [s for s in samples if s.contexts]
    scores = JudgeScores(judged=len(answered))
    if answered:
        # One event loop for every call: an async client's connections belong to the loop that opened them
        # (ragas's synchronous ``score`` runs a new loop per call, which breaks the second metric's calls).
        asyncio.run(_judge_all(judge_model, answered, encoder, client_factory, scores))
    return scores


async def _judge_all(
    judge_model: str,
    answered: Sequence[JudgeSample],
    encoder: DenseEncoder | None,
    client_factory: Callable[[], AsyncOpenAI],
    scores: JudgeScores,
) -> None:
    async with client_factory() as client:  # closed in this loop, not by the garbage collector after it
        llm = llm_factory(judge_model, client=client)
        metrics: dict[str, Any] = {"faithfulness": Faithfulness(llm=llm)}
        if encoder is None:
            scores.skipped["answer_relevancy"] = "no dense encoder to embed the questions with"
        else:
            metrics["answer_relevancy"] = AnswerRelevancy(llm=llm, embeddings=EncoderEmbeddings(encoder))
        for name, metric in metrics.items():
            try:
                values = [await _score(name, metric, s) for s in answered]
            except Exception as exc:  # the judge's failure leaves this figure out, with why
                scores.skipped[name] = f"ragas could not judge: {type(exc).__name__}"
                continue
            scores.means[name] = sum(values) / len(values)


async def _score(name: str, metric: Any, sample: JudgeSample) -> float:
    if name == "faithfulness":
        result = await metric.ascore(
            user_input=sample.question, response=sample.answer, retrieved_contexts=list(sample.contexts)
        )
    else:
        result = await metric.ascore(user_input=sample.question, response=sample.answer)
    return float(result.value)
