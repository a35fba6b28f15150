"""``rag_pipeline.http.routes.chat``: ``POST /v1/chat/completions`` (OpenAI's shape) answers from the caller's
documents only, citing them, as one body or as server-sent events; with answers off it is OpenAI's error naming
``model``. The answer model is the project's OpenAI fake on 127.0.0.1 through the real ``openai`` client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from fastapi.testclient import TestClient

from rag_pipeline.answers.generate import AnswerModel
from rag_pipeline.http.routes import chat
from rag_pipeline_tests.kit.emulators.openai_api import API_KEY, OpenAIFake
from rag_pipeline_tests.unit.http.conftest import DOCUMENTS, HR, HR_ONLY, PUBLIC, reader, served

QUESTION = {"messages": [{"role": "user", "content": "what is the postgres salary budget?"}]}
SECRET_WORDS = next(d.text for d in DOCUMENTS if d.id == HR_ONLY)


@pytest.fixture(scope="module")
def fake() -> Iterator[OpenAIFake]:
    with OpenAIFake() as server:
        yield server


@pytest.fixture
def client(index_folder: Path, fake: OpenAIFake) -> Iterator[TestClient]:
    client = openai.OpenAI(base_url=fake.base_url, api_key=API_KEY, max_retries=0)
    with served(index_folder, answers=AnswerModel("gpt-4o-mini", client=client)) as c:
        yield c


def test_the_route_is_post_chat_completions() -> None:
    assert [(r.path, r.methods) for r in chat.router.routes] == [(chat.ROUTE, {"POST"})]  # type: ignore[attr-defined]


def test_the_answer_cites_only_documents_the_caller_may_read(client: TestClient, fake: OpenAIFake) -> None:
    allowed = client.post(chat.ROUTE, json=QUESTION, headers=reader("U1", HR))
    assert allowed.status_code == 200, allowed.text
    body = allowed.json()
    assert body["object"] == "chat.completion" and body["choices"][0]["message"]["role"] == "assistant"
    assert HR_ONLY in {s["document_id"] for s in body["sources"]}
    assert "[" in body["choices"][0]["message"]["content"]  # the fake cites the documents sharing words
    before = len(fake.chat_prompts())
    denied = client.post(chat.ROUTE, json=QUESTION, headers=reader("U2"))
    assert denied.status_code == 200
    assert {s["document_id"] for s in denied.json()["sources"]} <= {PUBLIC}
    # The hidden document's text never reached the model for the caller who may not read it.
    assert not any(SECRET_WORDS in prompt for prompt in fake.chat_prompts()[before:])


def test_a_streamed_answer_is_server_sent_events_ending_with_done(client: TestClient) -> None:
    with client.stream("POST", chat.ROUTE, json={**QUESTION, "stream": True}, headers=reader("U1", HR)) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert all(e["object"] == "chat.completion.chunk" for e in events)
    text = "".join(e["choices"][0]["delta"].get("content", "") for e in events if e["choices"])
    assert text.strip() and events[-1]["choices"][0]["finish_reason"] == "stop"
    assert HR_ONLY in {s["document_id"] for s in events[-1]["sources"]}


def test_answers_off_is_openais_error_naming_the_model(index_folder: Path) -> None:
    with served(index_folder) as client:
        response = client.post(chat.ROUTE, json=QUESTION, headers=reader("U1"))
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["param"] == "model" and error["type"] == "server_error" and "RAG_ANSWER_MODEL" in error["message"]
