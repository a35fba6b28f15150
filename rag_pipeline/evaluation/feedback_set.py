"""Readers' judgements as an eval set of real questions (``readers_feedback``), and the gate that decides whether the
served reranker may learn from them.

A question is one reader's text (normalized: case and spaces); its documents are graded by that reader's latest
judgement of each (0 not relevant, 1 relevant, 2 exactly what was needed); it runs as that reader, is dated by its
first judgement's week (so the time split and the weekly quality see it), and judges only documents the reader may
still read. Only questions with a relevant document are kept.

The gate (:func:`feedback_gate`): the feedback's earlier weeks are added to the reranker's training and the model is
tested against the one without them on the later weeks' questions, paired; feedback is used only when that test
says it helps (mean nDCG@10 higher, p < ``alpha``). The result is reported either way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import date
from typing import Any

from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta
from rag_pipeline.evaluation.metrics import per_query_metrics
from rag_pipeline.evaluation.mining.corpus import Corpus
from rag_pipeline.evaluation.mining.mine import MINED_TAG, MiningReport, ResolvePerson, language_of
from rag_pipeline.evaluation.runner import rerank_examples, run_arm, week_blocks
from rag_pipeline.evaluation.statistics import paired_permutation_p
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.rerank.learned import RerankExample, train_reranker
from rag_pipeline.retrieval.retriever import Retriever
from rag_pipeline.scheduling.coverage import week_start

FEEDBACK_SET = "readers_feedback"
FEEDBACK_TAG = "feedback"
# Later-week questions the gate needs before it can say anything.
MIN_GATE_QUERIES = 10


def _key(text: str) -> str:
    return " ".join(text.lower().split())


def add_feedback(
    report: MiningReport,
    corpus: Corpus,
    entries: Iterable[Mapping[str, Any]],
    resolve_person: ResolvePerson,
    indexed: Callable[[set[str]], set[str]] | None = None,
    since: date | None = None,
    until: date | None = None,
) -> None:
    """``entries`` (:func:`~rag_pipeline.serving.feedback.read_feedback`) as the ``readers_feedback`` set of
    ``report``; what cannot be kept is counted in ``report.skipped`` under ``feedback``."""
    questions: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in entries:
        readers = [str(r) for r in entry.get("reader") or [] if r]
        if not readers:
            report.skipped[(FEEDBACK_TAG, "no reader recorded")] += 1
            continue
        asked = date.fromisoformat(str(entry["at"])[:10])
        question = questions.setdefault(
            (readers[0], _key(str(entry["query"]))), {"query": str(entry["query"]).strip(), "grades": {}, "day": asked}
        )
        question["grades"][str(entry["document"])] = int(entry["grade"])  # the latest judgement wins
    principals: dict[str, Principal | None] = {}
    queries: list[EvalQuery] = []
    for (reader, _text), question in sorted(questions.items(), key=lambda kv: kv[1]["day"]):
        day: date = question["day"]
        if (since and day < since) or (until and day >= until):
            continue
        if reader not in principals:
            principals[reader] = resolve_person(reader)
        principal = principals[reader]
        if principal is None:
            report.skipped[(FEEDBACK_TAG, "reader not in the principal directory")] += 1
            continue
        grades: dict[str, int] = question["grades"]
        present = indexed(set(grades)) if indexed is not None else set(grades)
        readable = {}
        for doc_id, grade in grades.items():
            info = corpus.info(doc_id)
            if doc_id in present and info is not None and principal.admits(info.acl):
                readable[doc_id] = grade
        if not any(g > 0 for g in readable.values()):
            report.skipped[(FEEDBACK_TAG, "no relevant document the reader may still read")] += 1
            continue
        language = language_of(question["query"])
        digest = hashlib.sha256(f"{reader}\x1f{_key(question['query'])}".encode()).hexdigest()[:16]
        queries.append(
            EvalQuery(
                id=f"{FEEDBACK_TAG}:{digest}",
                query=question["query"],
                relevant=readable,
                person=reader,
                tags=[MINED_TAG, FEEDBACK_TAG, "readers", f"lang:{language}", f"week:{week_start(day)}"],
            )
        )
        report.languages[language] += 1
        report.kept[(FEEDBACK_TAG, "readers")] += 1
        report.found[(FEEDBACK_TAG, "readers")] += 1
    if queries:
        meta = EvalSetMeta(
            name=FEEDBACK_SET,
            description="Readers' own judgements (POST /v1/feedback, the MCP rate_document tool): the question they "
            "asked -> the documents they graded (0-2), run as that reader.",
            source="this workspace's readers (RAG_FEEDBACK_DAYS)",
            license="the workspace's own",
            attribution="the workspace's own readers",
            queries=len(queries),
            tags=[MINED_TAG, FEEDBACK_TAG],
        )
        report.eval_sets[FEEDBACK_SET] = (meta, queries)


@dataclass
class GateResult:
    """What the feedback gate measured and decided."""

    used: bool
    reason: str
    train_queries: int = 0
    test_queries: int = 0
    ndcg_without: float | None = None
    ndcg_with: float | None = None
    p_value: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def _ndcg(retriever: Retriever, queries: Sequence[EvalQuery], model: Any, sources: Sequence[str] | None) -> list[float]:
    outcome = run_arm(retriever, "reranked", queries, sources=sources, rerankers=model)
    frame = per_query_metrics({q.id: dict(q.relevant) for q in queries}, outcome.run.run(), ("ndcg@10",))
    scores = frame["ndcg@10"].to_dict()
    return [float(scores.get(q.id, 0.0)) for q in queries]


def feedback_gate(
    retriever: Retriever,
    base: Sequence[RerankExample],
    feedback: Sequence[EvalQuery],
    alpha: float = 0.05,
    sources: Sequence[str] | None = None,
) -> GateResult:
    """Whether training on the feedback helps: earlier weeks' feedback added to ``base``, tested on the later weeks'."""
    judged = [q for q in feedback if q.judged]
    blocks = week_blocks(judged, 2)
    if len(blocks) < 2 or len(blocks[1]) < MIN_GATE_QUERIES:
        tested = len(blocks[1]) if len(blocks) > 1 else 0
        return GateResult(False, f"{tested} later-week questions with feedback; the gate needs {MIN_GATE_QUERIES}")
    earlier, later = blocks
    extra = rerank_examples(retriever, earlier, sources=sources)
    without = train_reranker(base, trained_on="eval sets", encoder=retriever.bm25)
    with_feedback = train_reranker([*base, *extra], trained_on="eval sets + earlier feedback", encoder=retriever.bm25)
    a, b = _ndcg(retriever, later, without, sources), _ndcg(retriever, later, with_feedback, sources)
    p = paired_permutation_p(a, b)
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    used = mean_b > mean_a and p < alpha
    reason = (
        f"helps on later weeks: nDCG@10 {mean_a:.3f} -> {mean_b:.3f}, p={p:.4f}"
        if used
        else f"no significant help on later weeks: nDCG@10 {mean_a:.3f} -> {mean_b:.3f}, p={p:.4f} (alpha {alpha})"
    )
    return GateResult(used, reason, len(earlier), len(later), mean_a, mean_b, p)
