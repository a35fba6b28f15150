"""Query rewriting: plans parsed from the model's JSON (through the real ``openai`` client against the OpenAI fake),
every kind of bad reply falling back to the question, relative dates resolved in UTC against a fixed clock,
plans cached per day, sub-queries merged by RRF, and a filter that would leave nothing dropped and reported."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import openai
import pytest

from rag_pipeline.retrieval.planned_search import Scope, merge_by_rrf, search_planned
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.results import SearchResponse, SearchResult
from rag_pipeline.retrieval.rewrite import Filters, PlanOutcome, QueryPlan, QueryRewriter, resolve_date
from rag_pipeline_tests.kit.emulators.openai_api import API_KEY, OpenAIFake

NOW = datetime(2026, 11, 27, 10, 30, tzinfo=UTC)  # a Friday
PLAN = {
    "refined_query": "postgres upgrade decision infra team",
    "sub_queries": ["postgres 16 upgrade date", "postgres upgrade replication"],
    "expansions": ["PostgreSQL", "인프라팀"],
    "filters": {"since": "last_month", "until": "last_month", "sources": ["slack"]},
    "confidence": 0.9,
}


@pytest.fixture
def fake() -> Iterator[OpenAIFake]:
    with OpenAIFake() as server:
        yield server


def rewriter(fake: OpenAIFake, cache: Path | None = None, timeout: float = 10.0) -> QueryRewriter:
    client = openai.OpenAI(base_url=fake.base_url, api_key=API_KEY, max_retries=0, timeout=timeout)
    return QueryRewriter("gpt-4o-mini", client=client, cache_path=cache)


@pytest.mark.parametrize(
    ("word", "since", "until"),
    [
        ("today", "2026-11-27", "2026-11-28"),
        ("yesterday", "2026-11-26", "2026-11-27"),
        ("this_week", "2026-11-23", "2026-11-30"),
        ("last_week", "2026-11-16", "2026-11-23"),
        ("last_month", "2026-10-01", "2026-11-01"),
        ("this_month", "2026-11-01", "2026-12-01"),
        ("last_year", "2025-01-01", "2026-01-01"),
        ("last_30_days", "2026-10-28", "2026-11-28"),
    ],
)
def test_relative_dates_resolve_in_utc_against_the_request_time(word: str, since: str, until: str) -> None:
    assert resolve_date(word, NOW, "since") == f"{since}T00:00:00Z"
    assert resolve_date(word, NOW, "until") == f"{until}T00:00:00Z"


def test_a_plan_is_parsed_and_cached_per_day(fake: OpenAIFake, tmp_path: Path) -> None:
    fake.respond(lambda body: json.dumps(PLAN) if "refined_query" in str(body) else None)
    planner = rewriter(fake, tmp_path / "plans.sqlite")
    outcome = planner.plan("what did the infra team decide about the postgres upgrade last month?", NOW)
    plan = outcome.plan
    assert plan is not None and outcome.fallback_reason is None and not outcome.cached
    assert plan.filters.since == "2026-10-01T00:00:00Z" and plan.filters.until == "2026-11-01T00:00:00Z"
    assert plan.filters.sources == ("slack",) and plan.confidence == 0.9
    assert plan.queries() == [
        "postgres upgrade decision infra team PostgreSQL 인프라팀",
        "postgres 16 upgrade date",
        "postgres upgrade replication",
    ]
    request = fake.calls("/chat/completions")[0].body
    assert request["response_format"] == {"type": "json_object"} and "Today is 2026-11-27" in str(request)
    # The model sees the question and the date, never a document.
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    again = rewriter(fake, tmp_path / "plans.sqlite").plan(
        "what did the infra team decide about the postgres upgrade last month?", NOW
    )
    assert again.cached and again.plan == plan and len(fake.calls("/chat/completions")) == 1
    rewriter(fake, tmp_path / "plans.sqlite").plan(
        "what did the infra team decide about the postgres upgrade last month?", NOW.replace(day=28)
    )
    assert len(fake.calls("/chat/completions")) == 2  # another day, another prompt


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("sure! the plan is to search postgres", "rewrite unusable: the reply is not JSON"),
        ('["postgres"]', "rewrite unusable: the reply is not a JSON object"),
        ('{"refined_query": "x", "filters": {"since": "the day after the party"}}', "neither an ISO date"),
        ('{"refined_query": "x", "filters": {"sources": ["notion"]}}', "filters.sources names 'notion'"),
        ('{"refined_query": "x", "confidence": "high"}', "confidence is not a number"),
    ],
)
def test_unusable_replies_fall_back_to_the_question(fake: OpenAIFake, reply: str, reason: str) -> None:
    fake.respond(lambda body: reply)
    outcome = rewriter(fake).plan("postgres upgrade", NOW)
    assert outcome.plan is None and reason in (outcome.fallback_reason or "")


def test_refusals_time_outs_and_errors_fall_back(fake: OpenAIFake) -> None:
    fake.inject("refusal")
    assert rewriter(fake).plan("q", NOW).fallback_reason == "rewrite refused by the model"
    fake.inject("slow", delay=2)
    assert rewriter(fake, timeout=0.5).plan("q", NOW).fallback_reason == "rewrite failed: APITimeoutError"
    fake.inject("500")
    assert rewriter(fake).plan("q", NOW).fallback_reason == "rewrite failed: InternalServerError"


def hit(doc: str, score: float = 1.0) -> SearchResult:
    return SearchResult(doc, score, "slack", "C1", doc, None, f"{doc}-c", f"text of {doc}", f"{doc}-p")


class RecordingRetriever:
    """Answers each query with fixed lists (none when a date filter is set: the filter empties the search)."""

    def __init__(self, lists: dict[str, list[str]]) -> None:
        self.lists = lists
        self.calls: list[dict[str, Any]] = []

    def search(self, query: str, mode: str, principal: Principal, **kw: Any) -> SearchResponse:
        self.calls.append({"query": query, "principal": principal, **kw})
        found = [] if kw.get("updated_from") else [hit(d) for d in self.lists.get(query, [])]
        return SearchResponse(found, "hybrid", "hybrid")


def test_sub_queries_merge_by_rrf_and_an_emptying_filter_is_dropped() -> None:
    last_month = Filters(since="2026-10-01T00:00:00Z", until="2026-11-01T00:00:00Z")
    plan = QueryPlan("postgres upgrade", ("postgres date",), ("PostgreSQL",), last_month, confidence=0.9)
    retriever = RecordingRetriever({"postgres upgrade PostgreSQL": ["a", "b", "c"], "postgres date": ["c", "d"]})
    reader = Principal(user_id="U1", groups=("g",))
    done = search_planned(retriever, "q?", "hybrid", reader, 10, PlanOutcome(plan), Scope())  # type: ignore[arg-type]
    # c is in both lists: first. Then a (rank 1 of one list), d (rank 2), b (rank 2), by RRF then id.
    assert [r.document_id for r in done.response.results] == ["c", "a", "b", "d"]
    assert done.dropped_filters == ["since=2026-10-01T00:00:00Z", "until=2026-11-01T00:00:00Z"]
    assert done.filters_applied == {} and done.queries == ["postgres upgrade PostgreSQL", "postgres date"]
    # Every search ran as the same reader; the filtered round first, then the unfiltered one.
    assert {c["principal"] for c in retriever.calls} == {reader} and len(retriever.calls) == 4
    assert [c["updated_from"] for c in retriever.calls] == ["2026-10-01T00:00:00Z"] * 2 + [None] * 2

    # The request's own filter wins over the plan's; a plan not sure enough of its filters uses none.
    unsure = QueryPlan(plan.refined_query, (), (), plan.filters, confidence=0.5)
    retriever.calls.clear()
    search_planned(retriever, "q?", "hybrid", reader, 10, PlanOutcome(unsure), Scope(sources=("jira",)))  # type: ignore[arg-type]
    assert retriever.calls[0]["updated_from"] is None and retriever.calls[0]["sources"] == ("jira",)
    # No plan (a fallback): the question as asked, once.
    retriever.calls.clear()
    fallback = search_planned(retriever, "q?", "hybrid", reader, 10, PlanOutcome(None, "rewrite failed: X"))  # type: ignore[arg-type]
    assert [c["query"] for c in retriever.calls] == ["q?"] and fallback.report()[
        "fallback_reason"
    ] == "rewrite failed: X"


def test_merge_keeps_each_documents_best_hit() -> None:
    merged = merge_by_rrf([[hit("a"), hit("b")], [hit("b")]], top_k=1)
    assert [r.document_id for r in merged] == ["b"] and merged[0].score == pytest.approx(1 / 62 + 1 / 61)


def test_the_rewritten_arm_scores_like_any_arm(fake: OpenAIFake, tmp_path: Path) -> None:
    """The arm over a small index: each query planned (the fake's plan adds an expansion), searched as its
    reader, ranked; a refused plan is the question as asked, recorded as the query's warning."""
    from rag_pipeline.connectors.slack.threads import thread_document_id
    from rag_pipeline.defs.evaluation.assets import eval_arm_names
    from rag_pipeline.evaluation.eval_set import EvalQuery
    from rag_pipeline.evaluation.runner import REWRITTEN_ARM, run_rewritten_arm
    from rag_pipeline.index.edge_store import EdgeVectorStore
    from rag_pipeline.retrieval.retriever import Retriever
    from rag_pipeline.vectors.sparse import Bm25Encoder
    from rag_pipeline_tests.kit import slack_fixtures as F
    from rag_pipeline_tests.kit.emulators.slack_api import SlackEmulator
    from rag_pipeline_tests.kit.slack_index import HashEncoder, index_threads, read_threads

    assert eval_arm_names(None) == ["vector", "bm25", "hybrid", "reranked", "prf"]
    assert eval_arm_names(None, "gpt-4o-mini")[-1] == REWRITTEN_ARM
    vpn = thread_document_id(F.CRAFTED_TEAM, F.PRIVATE_CHANNEL, F.PRIVATE_THREAD_ROOT_TS)
    store = EdgeVectorStore(tmp_path / "qdrant")
    store.create_collections(4)
    try:
        with SlackEmulator(F.crafted_workspace()) as emu:
            index_threads(store, read_threads(emu, F.GENERAL_CHANNEL, F.PRIVATE_CHANNEL))
        fake.respond(
            lambda body: json.dumps({"refined_query": "VPN", "expansions": ["certificates"], "confidence": 0.2})
            if "rotate" in str(body) else None
        )  # fmt: skip
        queries = [
            EvalQuery(id="carol", query="when do we rotate", relevant={vpn: 1}, principal=Principal(user_id=F.CAROL)),
            EvalQuery(id="bob", query="when do we rotate", relevant={vpn: 1}, principal=Principal(user_id=F.BOB)),
        ]
        retriever = Retriever(store, Bm25Encoder(), dense=HashEncoder())
        outcome = run_rewritten_arm(retriever, rewriter(fake), queries, depth=10)
        assert outcome.run.arm == REWRITTEN_ARM
        # The plan's query ("VPN certificates") finds the thread for Carol; Bob, no member, never sees it.
        assert outcome.run.rankings["carol"][0][0] == vpn
        assert vpn not in {d for d, _ in outcome.run.rankings["bob"]}
        assert outcome.run.leaks == {"carol": 0, "bob": 0} and not outcome.warnings
        fake.inject("refusal", times=1)
        refused = run_rewritten_arm(retriever, rewriter(fake), [EvalQuery(id="q", query="pizza", relevant={vpn: 1})])
        assert refused.warnings["q"][-1] == "rewrite refused by the model"
    finally:
        store.close()
