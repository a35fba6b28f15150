"""Tool-using answers (issue 52, part 1): with ``RAG_AGENT=1`` a real ``rag-pipeline serve`` gives the answer model
``search_documents``, ``get_document`` and ``list_containers`` through the OpenAI tool-calling protocol, and the
project's OpenAI fake, scripted to call tools, decides: one call, several, none, a bad argument, a document the
reader may not read, and the iteration bound. Asked through the real ``openai`` client, whole and streamed."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from rag_pipeline_tests.kit import serving_fixtures as S
from rag_pipeline_tests.kit.emulators.openai_api import API_KEY, OpenAIFake

TOKEN = "agent-test-token-1234"


@pytest.fixture(scope="module")
def service(serving_index: Path, tmp_path_factory: pytest.TempPathFactory, fake: OpenAIFake) -> Iterator[Any]:
    copy = tmp_path_factory.mktemp("agent") / "data"
    S.copy_index(serving_index, copy)
    env = {"RAG_SERVE_TOKEN": TOKEN, "RAG_ANSWER_MODEL": "gpt-4o-mini", "OPENAI_API_KEY": API_KEY,
           "OPENAI_BASE_URL": fake.base_url, "RAG_AGENT": "1", "RAG_AGENT_MAX_ITERATIONS": "2",
           "RAG_SERVE_CACHE_ENTRIES": "0"}  # fmt: skip
    with S.running_service(copy, copy.parent / "serve.log", **env) as running:
        yield running


def _question(body: dict[str, Any]) -> str:
    return next(str(m.get("content")) for m in reversed(body["messages"]) if m.get("role") == "user")


def _tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(m["content"]) for m in body["messages"] if m.get("role") == "tool"]


def ask(service: Any, user: str, question: str, stream: bool = False) -> Any:
    client = openai.OpenAI(base_url=f"{service.url}/v1", api_key=TOKEN, max_retries=0,
                           default_headers={"X-User-Id": user})  # fmt: skip
    return client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": question}], stream=stream
    )


@pytest.fixture(scope="module", autouse=True)
def scripted(fake: OpenAIFake) -> None:
    """The fake model's decisions, by a word in the question."""

    def calls(body: dict[str, Any]) -> list[tuple[str, Any]] | None:
        question, done = _question(body), _tool_results(body)
        if "ONESEARCH" in question and not done:
            return [("search_documents", {"query": "postgres upgrade friday", "top_k": 3})]
        if "SEVERAL" in question and len(done) == 0:
            return [("list_containers", {}), ("search_documents", {"query": "postgres upgrade", "source": "slack"})]
        if "SEVERAL" in question and len(done) == 2:
            return [("get_document", {"document_id": S.SECRET_THREAD}), ("search_documents", "{not json")]
        if "FOREVER" in question:
            return [("search_documents", {"query": f"postgres round {len(done)}"})]
        return None

    def answer(body: dict[str, Any]) -> str | None:
        question, done = _question(body), _tool_results(body)
        if not any(word in question for word in ("ONESEARCH", "SEVERAL", "FOREVER", "NOTOOLS")):
            return None
        if not done:
            return "I can answer without looking."
        return "The upgrade is planned for Friday [1]; see also [9]."

    fake.respond_with_tools(calls)
    fake.respond(answer)


def test_one_search_then_an_answer_citing_what_the_tool_returned(service: Any, fake: OpenAIFake) -> None:
    reply = ask(service, "U3", "ONESEARCH when is the postgres upgrade?")
    extra = reply.model_extra or {}
    assert reply.choices[0].message.content.startswith("The upgrade is planned for Friday [1]")
    [call] = extra["rag"]["tool_calls"]
    assert call["name"] == "search_documents" and call["document_ids"] and call["error"] is None
    assert [s["document_id"] for s in extra["sources"]] == [call["document_ids"][0]]
    assert extra["rag"]["invalid_citations"] == [9]  # a number no tool returned is dropped, and said


def test_several_calls_a_forbidden_document_and_a_bad_argument_are_reported_to_the_model(
    service: Any, fake: OpenAIFake
) -> None:
    before = len(fake.chat_prompts())
    reply = ask(service, "U2", "SEVERAL what about the postgres upgrade?")  # Bob may not read #secret
    calls = (reply.model_extra or {})["rag"]["tool_calls"]
    assert [c["name"] for c in calls] == ["list_containers", "search_documents", "get_document", "search_documents"]
    assert calls[2]["error"] == f"document {S.SECRET_THREAD!r} not found"  # as if it did not exist
    assert calls[3]["error"] == "the arguments are not JSON"
    assert S.SECRET_THREAD not in calls[1]["document_ids"]
    # Nothing of the private thread ever reached the model, whatever it asked for.
    assert not any("salary budget" in p for p in fake.chat_prompts()[before:])
    assert reply.choices[0].message.content.startswith("The upgrade is planned for Friday")


def test_the_iteration_bound_and_a_model_that_never_calls_a_tool(service: Any) -> None:
    bounded = ask(service, "U3", "FOREVER postgres?")
    rag = (bounded.model_extra or {})["rag"]
    assert len(rag["tool_calls"]) == 2 and any("all 2 tool rounds" in n for n in rag["notices"])
    assert bounded.choices[0].message.content.startswith("The upgrade is planned")
    direct = ask(service, "U3", "NOTOOLS hello there")
    extra = direct.model_extra or {}
    assert direct.choices[0].message.content == "I can answer without looking."
    assert extra["rag"]["tool_calls"] == [] and extra["sources"] == []
    assert any("without searching" in n for n in extra["rag"]["notices"])


def test_streamed_agent_answers_carry_the_tool_calls(service: Any) -> None:
    chunks = list(ask(service, "U3", "ONESEARCH when?", stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    final = [c.model_extra for c in chunks if c.model_extra and c.model_extra.get("rag")]
    assert text.startswith("The upgrade is planned for Friday [1]")
    assert final and final[-1]["rag"]["tool_calls"][0]["name"] == "search_documents"


@pytest.mark.slow  # a CLI process loading the dense model (~15 s)
def test_ask_lets_the_model_search_from_the_command_line(serving_index: Path, fake: OpenAIFake, tmp_path: Path) -> None:
    copy = tmp_path / "data"
    S.copy_index(serving_index, copy)
    env = S.service_env(copy, RAG_ANSWER_MODEL="gpt-4o-mini", OPENAI_API_KEY=API_KEY, OPENAI_BASE_URL=fake.base_url,
                        RAG_AGENT="1")  # fmt: skip
    command = S.rag_pipeline_command("ask", "ONESEARCH when?", "--user", "carol@serve.test", "--json")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["answer"].startswith("The upgrade is planned for Friday [1]")
    assert [c["name"] for c in payload["tool_calls"]] == ["search_documents"] and payload["sources"]


def test_a_model_failing_on_its_first_round_still_gives_the_plain_answers_documents(
    service: Any, fake: OpenAIFake
) -> None:
    """The agent's fallback: the model's first call fails (HTTP 500 through the client's retries), so the question
    is searched as the plain chat answer searches it, and the documents come back with the reason, as the reader's
    own (Bob never gets #secret), whole and streamed."""
    fake.inject("500", path="chat/completions", times=1000)
    try:
        whole = ask(service, "U2", "postgres upgrade friday salary budget")
        chunks = list(ask(service, "U2", "postgres upgrade friday salary budget", stream=True))
    finally:
        fake.clear_faults()
    extra = whole.model_extra or {}
    rag = extra["rag"]
    assert rag["answer_error"] == "the answer model failed (HTTP 500)" and rag["fell_back"] is True
    assert rag["tool_calls"] == [] and any("searched as a plain answer" in n for n in rag["notices"])
    found = [s["document_id"] for s in extra["sources"]]
    assert found and S.SECRET_THREAD not in found
    content = whole.choices[0].message.content
    assert content.startswith("No answer: the answer model failed (HTTP 500).") and "[1]" in content
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    final = [c.model_extra for c in chunks if c.model_extra and c.model_extra.get("rag")][-1]
    assert text.startswith("No answer: the answer model failed (HTTP 500).") and final["rag"]["fell_back"] is True
    assert [s["document_id"] for s in final["sources"]] == found


def test_a_model_failing_after_its_tools_ran_keeps_what_they_found(service: Any, fake: OpenAIFake) -> None:
    def search_then_fail(body: dict[str, Any]) -> list[tuple[str, Any]] | None:
        if "FAILLATER" not in _question(body) or _tool_results(body):
            return None
        fake.inject("500", path="chat/completions", times=1000)  # every call after this round's fails
        return [("search_documents", {"query": "postgres upgrade friday", "top_k": 2})]

    fake.respond_with_tools(search_then_fail)
    try:
        reply = ask(service, "U3", "FAILLATER when is the postgres upgrade?")
    finally:
        fake.clear_faults()
    extra = reply.model_extra or {}
    [call] = extra["rag"]["tool_calls"]
    assert extra["rag"]["answer_error"] == "the answer model failed (HTTP 500)" and extra["rag"]["fell_back"] is False
    assert [s["document_id"] for s in extra["sources"]] == call["document_ids"] and call["document_ids"]


def test_a_request_asks_for_fewer_rounds_never_more(service: Any) -> None:
    client = openai.OpenAI(base_url=f"{service.url}/v1", api_key=TOKEN, max_retries=0,
                           default_headers={"X-User-Id": "U3"})  # fmt: skip
    question = [{"role": "user", "content": "FOREVER postgres?"}]
    one = client.chat.completions.create(model="gpt-4o-mini", messages=question, extra_body={"max_iterations": 1})
    rag = (one.model_extra or {})["rag"]
    assert len(rag["tool_calls"]) == 1 and rag["max_iterations"] == 1
    assert any("all 1 tool rounds" in n for n in rag["notices"])
    default = client.chat.completions.create(model="gpt-4o-mini", messages=question)
    assert (default.model_extra or {})["rag"]["max_iterations"] == 2  # RAG_AGENT_MAX_ITERATIONS
    for value in (3, 0, "2"):  # over the setting's bound, under 1, not a whole number
        with pytest.raises(openai.UnprocessableEntityError) as refused:
            client.chat.completions.create(model="gpt-4o-mini", messages=question, extra_body={"max_iterations": value})
        body = refused.value.response.json()
        assert body["field"] == "max_iterations" and body["error"]["param"] == "max_iterations", body
        assert value != 3 or "from 1 to 2" in body["error"]["message"]


def test_the_models_reasoning_comes_back_where_it_gives_one(service: Any, fake: OpenAIFake) -> None:
    """A reasoning model (``reasoning_content`` on each reply): every round's reasoning, in order, on the message
    where OpenAI-compatible clients look for it and in ``rag``; a model without any gives none."""

    def reasoning(body: dict[str, Any]) -> str | None:
        if "REASONING" not in _question(body):
            return None
        return f"round {len(_tool_results(body))}: " + ("search first" if not _tool_results(body) else "answer now")

    fake.reason_with(reasoning)
    reply = ask(service, "U3", "ONESEARCH REASONING when is the postgres upgrade?")
    expected = "round 0: search first\n\nround 1: answer now"
    assert (reply.choices[0].message.model_extra or {})["reasoning_content"] == expected
    assert (reply.model_extra or {})["rag"]["reasoning"] == expected
    chunks = list(ask(service, "U3", "ONESEARCH REASONING when?", stream=True))
    streamed = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks
                       if c.choices)  # fmt: skip
    assert streamed == expected
    plain = ask(service, "U3", "ONESEARCH when is the postgres upgrade?")
    assert (plain.model_extra or {})["rag"]["reasoning"] is None
    assert "reasoning_content" not in (plain.choices[0].message.model_extra or {})


def test_ask_refuses_more_rounds_than_the_setting_allows(serving_index: Path, fake: OpenAIFake) -> None:
    env = S.service_env(serving_index, RAG_ANSWER_MODEL="gpt-4o-mini", OPENAI_API_KEY=API_KEY,
                        OPENAI_BASE_URL=fake.base_url, RAG_AGENT="1", RAG_AGENT_MAX_ITERATIONS="2")  # fmt: skip
    calls = len(fake.requests)
    over = subprocess.run(S.rag_pipeline_command("ask", "when?", "--user", "U3", "--max-iterations", "3"),
                          env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert over.returncode == 2 and "--max-iterations: a whole number from 1 to 2" in over.stderr, over.stderr
    env.pop("RAG_AGENT")
    off = subprocess.run(S.rag_pipeline_command("ask", "when?", "--user", "U3", "--max-iterations", "1"),
                         env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert off.returncode == 2 and "RAG_AGENT is off" in off.stderr, off.stderr
    assert len(fake.requests) == calls  # refused before any model call


@pytest.mark.slow  # two CLI processes loading the dense model (~15 s each)
def test_ask_falls_back_to_the_plain_search_and_shows_the_reasoning(
    serving_index: Path, fake: OpenAIFake, tmp_path: Path
) -> None:
    copy = tmp_path / "data"
    S.copy_index(serving_index, copy)
    env = S.service_env(copy, RAG_ANSWER_MODEL="gpt-4o-mini", OPENAI_API_KEY=API_KEY, OPENAI_BASE_URL=fake.base_url,
                        RAG_AGENT="1", RAG_AGENT_MAX_ITERATIONS="2")  # fmt: skip
    fake.inject("500", path="chat/completions", times=1000)
    try:
        failed = subprocess.run(
            S.rag_pipeline_command("ask", "postgres upgrade friday", "--user", "bob@serve.test", "--json"),
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        fake.clear_faults()
    assert failed.returncode == 1, failed.stderr  # the documents, and a status that says the model failed
    payload = json.loads(failed.stdout)
    assert payload["answer"] is None and payload["answer_error"] == "the answer model failed (HTTP 500)"
    assert payload["tool_calls"] == [] and any("searched as a plain answer" in n for n in payload["notices"])
    assert payload["sources"] and S.SECRET_THREAD not in {s["document_id"] for s in payload["sources"]}

    fake.reason_with(lambda body: "REASONED" if "FOREVER" in _question(body) else None)
    bounded = subprocess.run(
        S.rag_pipeline_command("ask", "FOREVER postgres?", "--user", "carol@serve.test", "--max-iterations", "1"),
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert bounded.returncode == 0, bounded.stderr
    assert bounded.stdout.startswith("The upgrade is planned for Friday [1]")
    assert "all 1 tool rounds" in bounded.stderr and "reasoning: REASONED\n\nREASONED" in bounded.stderr
