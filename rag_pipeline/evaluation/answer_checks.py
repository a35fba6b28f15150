"""How good the answers over an eval set are, without a judge and with one.

Without a judge: **citation validity** (every cited source was in the answer's context and is readable by the
query's reader, per the index's own ACL payload: it must be 100 %), **coverage** (a relevant document reached
the context, cited or not) and **cited relevant** (a relevant document was cited). With a judge model
(``RAG_JUDGE_MODEL``): ragas **faithfulness** and **answer relevancy** (:mod:`rag_pipeline.evaluation.ragas_judge`).
A judge that cannot be reached or answers in another format leaves a figure out with the reason, never a made-up
number.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rag_pipeline.answers.generate import Answer
from rag_pipeline.evaluation.eval_set import EvalQuery


@dataclass(frozen=True)
class JudgeSample:
    """One answered question: what was asked, the answer, and the texts of its context."""

    question: str
    answer: str
    contexts: tuple[str, ...]


@dataclass(frozen=True)
class AnswerRow:
    """One query's answer, scored."""

    query_id: str
    context_ids: tuple[str, ...]
    cited_ids: tuple[str, ...]
    citations_valid: bool
    covered: bool
    cited_relevant: bool
    invalid_citations: int
    answered: bool  # False: nothing was found, no model call


@dataclass
class AnswerScores:
    """The scores of an eval set's answers; ``judge`` holds the ragas means or why there are none."""

    rows: list[AnswerRow] = field(default_factory=list)
    judge: dict[str, float] = field(default_factory=dict)
    judge_skipped: dict[str, str] = field(default_factory=dict)  # metric -> why it was left out
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None

    def _mean(self, values: Sequence[bool]) -> float:
        return round(sum(values) / len(values), 4) if values else 0.0

    def citation_validity(self) -> float:
        """Answers whose every citation was in the context and readable by the reader (1.0 with none)."""
        return self._mean([r.citations_valid for r in self.rows]) if self.rows else 1.0

    def summary(self) -> dict[str, object]:
        rows = self.rows
        return {
            "queries": len(rows),
            "answered": sum(r.answered for r in rows),
            "citation_validity": self.citation_validity(),
            "coverage": self._mean([r.covered for r in rows]),
            "cited_relevant": self._mean([r.cited_relevant for r in rows]),
            "invalid_citations": sum(r.invalid_citations for r in rows),
            **{f"ragas_{k}": round(v, 4) for k, v in self.judge.items()},
            **{f"ragas_{k}_skipped": why for k, why in self.judge_skipped.items()},
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6),
        }


def score_answer(query: EvalQuery, answer: Answer, readable: Callable[[str], bool]) -> AnswerRow:
    """``readable(document_id)``: whether the query's reader may read it (the index's ACL payload)."""
    context = tuple(d.document_id for d in answer.context)
    cited = tuple(s.document_id for s in answer.sources)
    relevant = {d for d, grade in query.relevant.items() if grade > 0}
    return AnswerRow(
        query_id=query.id,
        context_ids=context,
        cited_ids=cited,
        citations_valid=all(d in context and readable(d) for d in cited),
        covered=bool(relevant & set(context)),
        cited_relevant=bool(relevant & set(cited)),
        invalid_citations=len(answer.invalid_citations),
        answered=bool(answer.context),
    )
