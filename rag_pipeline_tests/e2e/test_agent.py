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
