"""``answer_quality``: answers over an eval set checked (citation validity, coverage, and with a judge ragas
faithfulness and answer relevancy), defined only where an answer model is configured (RAG_ANSWER_MODEL), like
the live sources' assets.

Thin wiring: each query is answered through :func:`rag_pipeline.answers.ask.ask` as its eval-set reader, on a
retriever built by :func:`rag_pipeline.retrieval.entry.build_retriever`, and scored by
:mod:`rag_pipeline.evaluation.answer_checks`.
"""

import time
from typing import Any

import dagster as dg
from pydantic import Field

from rag_pipeline.answers.ask import ContextLimits, ask
from rag_pipeline.answers.generate import AnswerModel
from rag_pipeline.defs.chain.resources import Bm25Resource, DenseEmbedderResource, QdrantResource
from rag_pipeline.defs.evaluation.resources import EvaluationResource
from rag_pipeline.defs.executors import QDRANT_QUEUE, step_tags
from rag_pipeline.evaluation.answer_checks import AnswerScores, JudgeSample, score_answer
from rag_pipeline.evaluation.eval_set import load_eval_set
from rag_pipeline.index.store import SearchFilter
from rag_pipeline.retrieval.entry import SearchModels, build_retriever
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.results import SearchResult
from rag_pipeline.settings import Settings
from rag_pipeline.vectors.dense.load import load_or_defer


class AnswerResource(dg.ConfigurableResource):
    """The answer model (RAG_ANSWER_MODEL), its context size, and the optional judge (RAG_JUDGE_MODEL)."""

    model: str = Field(description="chat model that writes answers")
    judge_model: str | None = Field(
        default=None, description="chat model ragas judges faithfulness and answer relevancy with"
    )
    documents: int = Field(default=5, description="documents in an answer's context")
    context_chars: int = Field(default=1500, description="characters of each document's parent text")

    def answer_model(self) -> AnswerModel:
        return AnswerModel(self.model)


def answer_resource(settings: Settings) -> AnswerResource | None:
    if not settings.answer_model:
        return None
    return AnswerResource(
        model=settings.answer_model,
        judge_model=settings.judge_model,
        documents=settings.answer_documents,
        context_chars=settings.answer_context_chars,
    )


class AnswerQualityConfig(dg.Config):
    """Which eval set, how many of its queries (each costs LLM calls), and how the context is searched."""

    eval_set: str = Field(default="acl_bundled_dev", description="eval set name under the eval folder")
    limit: int = Field(default=25, description="queries answered (the first ones of the set)")
    mode: str = Field(default="hybrid", description="search mode of the context: vector, bm25, hybrid, reranked")


def judge(
    judge_model: str, samples: list[JudgeSample], dense_embedder: DenseEmbedderResource, context: Any
) -> tuple[dict[str, float], dict[str, str]]:
    """ragas's means over the answered samples, and why any metric was left out. Answer relevancy embeds with
    the index's dense model; one that cannot load leaves that figure out, not the run."""
    from rag_pipeline.evaluation.ragas_judge import judge_answers  # ragas costs seconds to import

    try:
        encoder = dense_embedder.encoder()
    except Exception as exc:
        encoder = None
        reason = f"the dense model could not load: {type(exc).__name__}"
    context.log.info(f"judging {sum(bool(s.contexts) for s in samples)} answers with {judge_model}")
    scores = judge_answers(judge_model, samples, encoder)
    skipped = dict(scores.skipped)
    if encoder is None:
        skipped["answer_relevancy"] = reason
    return scores.means, skipped


def build_answer_quality(index_deps: list[dg.AssetDep]) -> dg.AssetsDefinition:
    @dg.asset(
        deps=index_deps,
        group_name="evaluation",
        kinds={"openai"},
        op_tags=step_tags(QDRANT_QUEUE),
        owners=["team:rag-platform"],
        check_specs=[
            dg.AssetCheckSpec(
                "citations_valid",
                asset="answer_quality",
                description="Every cited source was in the answer's context and readable by the query's reader",
            )
        ],
        description="Answers the first queries of an eval set as their readers with the answer model and scores "
        "them: citation validity (must be 100 %), coverage of a relevant document in the context, a relevant "
        "document cited, invalid citations, tokens and cost; ragas faithfulness and answer relevancy (embedded "
        "with the index's dense model) when RAG_JUDGE_MODEL is set.",
    )
    def answer_quality(
        context: dg.AssetExecutionContext,
        config: AnswerQualityConfig,
        answers: AnswerResource,
        evaluation: EvaluationResource,
        qdrant: QdrantResource,
        dense_embedder: DenseEmbedderResource,
        bm25: Bm25Resource,
    ) -> dg.MaterializeResult:
        started = time.perf_counter()
        paths = [p for p in evaluation.eval_set_paths() if p.name == f"{config.eval_set}.jsonl"]
        if not paths:
            raise dg.Failure(f"no eval set {config.eval_set!r} under {evaluation.eval_dir}", allow_retries=False)
        queries = [q for q in load_eval_set(paths[0], evaluation.person_resolver()) if q.judged][: config.limit]
        model = answers.answer_model()
        limits = ContextLimits(answers.documents, answers.context_chars)
        dense = None if config.mode == "bm25" else load_or_defer(dense_embedder.encoder)
        scores = AnswerScores()
        samples: list[JudgeSample] = []
        with qdrant.open() as store:
            models = SearchModels(dense_embedder.model_name(), bm25.encoder(), dense=dense)
            retriever = build_retriever(store, models, evaluation.retriever_config(models))
            for number, query in enumerate(queries, start=1):
                reader = query.principal or Principal.all_documents_for_evaluation()

                def search(question: str, reader: Principal = reader) -> list[SearchResult]:
                    return retriever.search(question, config.mode, reader, top_k=limits.documents).results  # type: ignore[arg-type]

                asked = ask(model, search, [("user", query.query)], limits)
                if asked.answer.failure:  # a reader gets the sources instead; an evaluation has nothing to score
                    raise dg.Failure(f"query {number} of {config.eval_set}: {asked.answer.failure}")
                cited = [s.document_id for s in asked.answer.sources]
                acls = store.indexed_documents(SearchFilter(document_ids=tuple(cited))) if cited else {}

                def readable(doc: str, reader: Principal = reader, acls: Any = acls) -> bool:
                    acl = acls.get(doc).acl if doc in acls else None
                    return acl is not None and reader.admits(acl.as_payload())

                scores.rows.append(score_answer(query, asked.answer, readable))
                usage = asked.answer.usage
                scores.prompt_tokens += usage.prompt_tokens
                scores.completion_tokens += usage.completion_tokens
                if usage.cost_usd is not None:
                    scores.cost_usd = (scores.cost_usd or 0.0) + usage.cost_usd
                samples.append(
                    JudgeSample(asked.question, asked.answer.text, tuple(d.text for d in asked.answer.context))
                )
                if number % 10 == 0 or number == len(queries):
                    context.log.info(f"answered {number}/{len(queries)} queries of {config.eval_set}")
        if answers.judge_model:
            scores.judge, scores.judge_skipped = judge(answers.judge_model, samples, dense_embedder, context)
        else:
            scores.judge_skipped = {"faithfulness": "no judge model (RAG_JUDGE_MODEL)",
                                    "answer_relevancy": "no judge model (RAG_JUDGE_MODEL)"}  # fmt: skip
        summary = scores.summary()
        validity = scores.citation_validity()
        metadata: dict[str, Any] = {k: v for k, v in summary.items() if v is not None}
        metadata |= {
            "eval_set": config.eval_set,
            "model": answers.model,
            "seconds": round(time.perf_counter() - started, 2),
        }
        return dg.MaterializeResult(
            metadata=metadata,
            check_results=[
                dg.AssetCheckResult(
                    check_name="citations_valid",
                    passed=validity == 1.0,
                    metadata={"citation_validity": validity},
                )
            ],
        )

    return answer_quality
