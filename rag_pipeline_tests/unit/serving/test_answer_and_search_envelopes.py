"""Issue 67's application-layer rules, without a service: the search envelope's ``status`` (the design's
success / no_results, and degraded when another mode ran than the one asked for), the rounds an agent answer may
take (a request asks for fewer, never more; refused where the agent is off), and the agent's fallback to the plain
answer's search when its model fails before any tool ran."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from rag_pipeline.answers.agent import AgentTools, run_agent
from rag_pipeline.answers.ask import ContextLimits
from rag_pipeline.answers.generate import Usage, reasoning_of
from rag_pipeline.retrieval.results import SearchResult
from rag_pipeline.serving.answers import RoundsRefused, agent_answer, agent_rounds
from rag_pipeline.serving.search import search_status


def test_the_search_status_says_found_nothing_or_degraded() -> None:
    assert search_status("routed", "routed", 3) == "success"
    assert search_status("routed", "routed", 0) == "no_results"
    assert search_status("reranked", "hybrid", 3) == "degraded"  # no reranker: the hybrid ranking, with a warning
    assert search_status("hybrid", "bm25", 0) == "no_results"


def test_a_request_may_ask_for_fewer_rounds_never_more() -> None:
    assert agent_rounds(None, 4) == 4 and agent_rounds(2, 4) == 2 and agent_rounds(4, 4) == 4
    assert agent_rounds(None, None) is None  # no agent, nothing asked: the plain answer
    with pytest.raises(RoundsRefused, match="from 1 to 4") as over:
        agent_rounds(5, 4)
    assert over.value.field == "max_iterations"
    with pytest.raises(RoundsRefused, match="from 1 to 4"):
        agent_rounds(0, 4)
    with pytest.raises(RoundsRefused, match="RAG_AGENT is off"):
        agent_rounds(2, None)


class FailingModel:
    """An answer model whose every call fails as the ``openai`` client's errors do (a status code)."""

    model = "gpt-4o-mini"

    def reply(self, messages: Any, usage: Usage, **tools: Any) -> Any:
        raise RuntimeError("boom") from None


class Failure(Exception):
    status_code = 503


class UnavailableModel(FailingModel):
    def reply(self, messages: Any, usage: Usage, **tools: Any) -> Any:
        raise Failure()


def _result(document_id: str) -> SearchResult:
    return SearchResult(document_id=document_id, score=1.0, source="slack", container="C1", title=f"#c: {document_id}",
                        url=None, child_id=f"{document_id}#0", child_text="text", parent_id=f"{document_id}#p",
                        parent_text="the parent text", authors=["a"])  # fmt: skip


def _tools() -> AgentTools:
    def never(*_: Any) -> Any:
        raise AssertionError("no tool runs when the model fails first")

    return AgentTools(never, never, never)


def test_a_model_failing_first_gets_the_plain_answers_documents_with_the_reason() -> None:
    searched: list[str] = []

    def plain_search(question: str) -> list[SearchResult]:
        searched.append(question)
        return [_result(f"d{i}") for i in range(5)]

    agent = agent_answer(UnavailableModel(), _tools(), [("user", "when is the upgrade?")], 3,  # type: ignore[arg-type]
                         ContextLimits(documents=2, max_chars=5), plain_search)  # fmt: skip
    assert searched == ["when is the upgrade?"] and agent.fell_back and agent.tool_calls == []
    answer = agent.answer
    assert answer.failure == "the answer model failed (HTTP 503)" and answer.text == ""
    assert [d.document_id for d in answer.sources] == ["d0", "d1"]  # the plain answer's top documents, capped
    assert all(d.text.endswith(" …") for d in answer.context)  # each cut at the limit, as the plain answer cuts
    assert any("searched as a plain answer" in n for n in answer.notices)


def test_without_a_fallback_a_failing_model_still_says_why() -> None:
    agent = run_agent(FailingModel(), _tools(), [("user", "when?")], 2)  # type: ignore[arg-type]
    assert agent.answer.failure == "the answer model failed (RuntimeError)" and not agent.fell_back
    assert agent.answer.sources == []
    with pytest.raises(ValueError, match="max_iterations"):
        run_agent(FailingModel(), _tools(), [("user", "when?")], 0)  # type: ignore[arg-type]


def test_reasoning_is_read_where_compatible_servers_put_it() -> None:
    assert reasoning_of(SimpleNamespace(content="x", model_extra={"reasoning_content": " think "})) == "think"
    assert reasoning_of(SimpleNamespace(content="x", model_extra={"reasoning": "routed"})) == "routed"
    assert reasoning_of(SimpleNamespace(content="x", model_extra={})) is None
    assert reasoning_of(SimpleNamespace(content="x", model_extra={"reasoning_content": ""})) is None
    assert reasoning_of(SimpleNamespace(content="x", model_extra=None)) is None
