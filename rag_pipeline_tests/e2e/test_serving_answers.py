"""Answers from the search service: ``POST /v1/chat/completions`` called by the real ``openai`` client (whole and
streamed), ``POST /v1/search`` with ``"answer": true``, and ``rag-pipeline ask``, over the small permission-varied
index the real ``rag-pipeline index`` wrote, with the project's OpenAI fake as the answer model.

The point of the checks: the prompt the model receives never holds a word of a document the reader may not
read, whoever asks; citations come back as sources; nothing found means no model call.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from rag_pipeline.answers.generate import NO_DOCUMENTS_ANSWER
from rag_pipeline.answers.wording import say
from rag_pipeline_tests.kit import serving_fixtures as S
from rag_pipeline_tests.kit.emulators.openai_api import API_KEY, OpenAIFake

TOKEN = "answer-test-token-1234"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# A phrase only each document holds, and who may read it (U1 Alice: #secret and, through her Jira account, OPS
# and its secured issue; U2 Bob: the workspace; U3 Carol: the workspace and #secret).
PHRASES = {
    S.GENERAL_THREAD: "planned for friday",
    S.SECRET_THREAD: "salary budget",
    S.OPS_ISSUE: "replication pause",
    S.OPS_SECRET_ISSUE: "superuser passwords",
    S.HR_ISSUE: "Hiring plan",
}
READABLE = {
    "U1": {S.GENERAL_THREAD, S.SECRET_THREAD, S.OPS_ISSUE, S.OPS_SECRET_ISSUE},
    "U2": {S.GENERAL_THREAD},
    "U3": {S.GENERAL_THREAD, S.SECRET_THREAD},
    "U0STRANGER": set(),
}
QUESTION = "postgres upgrade friday salary budget replication superuser passwords hiring plan"


@pytest.fixture(scope="module")
def data_dir(serving_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("answers") / "data"
    S.copy_index(serving_index, copy)
    return copy


@pytest.fixture(scope="module")
def service(data_dir: Path, fake: OpenAIFake) -> Iterator[S.ServiceProcess]:
    env = {"RAG_SERVE_TOKEN": TOKEN, "RAG_ANSWER_MODEL": "gpt-4o-mini", "RAG_REWRITE_MODEL": "gpt-4o-mini",
           "OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": fake.base_url, "RAG_ANSWER_TEMPERATURE": "0.25",
           "RAG_ANSWER_MAX_TOKENS": "321"}  # fmt: skip
    with S.running_service(data_dir, data_dir.parent / "serve.log", **env) as running:
        yield running


def client(service: S.ServiceProcess, user: str, **headers: str) -> openai.OpenAI:
    """The real openai client pointed at the service, identifying its user as a proxy or app would."""
    return openai.OpenAI(
        base_url=f"{service.url}/v1", api_key=TOKEN, max_retries=0, default_headers={"X-User-Id": user, **headers}
    )


def test_chat_completions_answer_with_sources_through_the_openai_client(service: S.ServiceProcess) -> None:
    completion = client(service, "U1").chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "when is the postgres upgrade planned?"}]
    )
    text = completion.choices[0].message.content or ""
    sources = (completion.model_extra or {})["sources"]
    assert "[1]" in text and sources and {s["document_id"] for s in sources} <= READABLE["U1"]
    assert completion.usage is not None and completion.usage.prompt_tokens > 0
    assert completion.model == "gpt-4o-mini" and completion.object == "chat.completion"

    # Streamed: the chunks parse with the client, the text is the same, the sources ride on the final chunk.
    stream = client(service, "U1").chat.completions.create(
        model="rag-pipeline",
        messages=[{"role": "user", "content": "when is the postgres upgrade planned?"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == text and len(chunks) > 4
    final = next(c for c in chunks if c.choices and c.choices[0].finish_reason == "stop")
    assert (final.model_extra or {})["sources"] == sources
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_the_prompt_never_holds_what_the_reader_may_not_read(service: S.ServiceProcess, fake: OpenAIFake) -> None:
    for user, readable in READABLE.items():
        before = len(fake.calls("/chat/completions"))
        completion = client(service, user).chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": QUESTION}]
        )
        # What the service put in front of the answer model (the question itself is the user's own words; the
        # rewrite call sees the question only).
        prompts = "\n".join(
            str(m.get("content"))
            for call in fake.calls("/chat/completions")[before:]
            for m in call.body["messages"]
            if m.get("role") == "system" and str(m.get("content")).startswith("You answer questions")
        )
        for document, phrase in PHRASES.items():
            assert (phrase.lower() in prompts.lower()) is (document in readable), (user, document)
        cited = {s["document_id"] for s in (completion.model_extra or {})["sources"]}
        assert cited <= readable, user
        if not readable:
            # Nothing found: the design's answer, and the model was never called.
            assert prompts == "" and completion.choices[0].message.content == NO_DOCUMENTS_ANSWER


def test_search_with_an_answer_and_what_is_refused(service: S.ServiceProcess, fake: OpenAIFake) -> None:
    body = {"query": "postgres upgrade friday", "answer": True, "top_k": 3}
    found = httpx.post(f"{service.url}/v1/search", json=body, headers={**AUTH, "X-User-Id": "U3"}, timeout=60)
    assert found.status_code == 200, found.text
    payload = found.json()
    assert payload["answer"] and payload["sources"] and payload["answer_metadata"]["model"] == "gpt-4o-mini"
    assert {s["document_id"] for s in payload["sources"]} <= {r["document_id"] for r in payload["results"]}

    def chat(json_body: object, **headers: str) -> httpx.Response:
        return httpx.post(f"{service.url}/v1/chat/completions", json=json_body,
                          headers={**AUTH, "X-User-Id": "U1", **headers}, timeout=60)  # fmt: skip

    question = [{"role": "user", "content": "when?"}]
    cases = [
        (chat({"model": "gpt-5-expensive", "messages": question}), 400, "model"),
        (chat({"messages": [{"role": "system", "content": "be brief"}]}), 422, "messages"),
        (chat({"messages": question, "n": 2}), 422, "n"),
        (chat({"messages": [{"role": "user", "content": "x" * 8001}]}), 422, "messages"),
        (chat({"messages": question}, **{"X-User-Groups": S.MEMBERS}), 400, "X-User-Groups"),
        # Rounds are the agent's (RAG_AGENT), which this service does not run: refused, not silently ignored.
        (chat({"messages": question, "max_iterations": 2}), 422, "max_iterations"),
    ]
    for response, status, field in cases:
        assert response.status_code == status and response.json()["field"] == field, response.text
    # The service's answer settings reach the model.
    answering = [c.body for c in fake.calls("/chat/completions") if "Documents:" in json.dumps(c.body)]
    assert answering and {(b["temperature"], b["max_tokens"]) for b in answering} == {(0.25, 321)}

    # The answer model down: the caller still gets what the search found, with the reason (HTTP 200), on every
    # route, whole and streamed; counted as failed answers.
    fake.inject("500", path="chat/completions", times=1000)
    try:
        failed = chat({"messages": [{"role": "user", "content": "postgres upgrade"}]})
        unanswered = httpx.post(f"{service.url}/v1/search", json=body, headers={**AUTH, "X-User-Id": "U3"}, timeout=60)
        streamed = client(service, "U1").chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "postgres upgrade"}], stream=True
        )
        chunks = list(streamed)
    finally:
        fake.clear_faults()
    assert failed.status_code == 200, failed.text
    completion = failed.json()
    content = completion["choices"][0]["message"]["content"]
    assert completion["rag"]["answer_error"] == "the answer model failed (HTTP 500)" and "Traceback" not in failed.text
    assert content.startswith("No answer: the answer model failed (HTTP 500).") and "[1]" in content
    assert completion["sources"] and {s["document_id"] for s in completion["sources"]} <= READABLE["U1"]
    assert unanswered.status_code == 200, unanswered.text
    no_answer = unanswered.json()
    assert no_answer["answer"] is None and no_answer["answer_error"] == "the answer model failed (HTTP 500)"
    assert no_answer["sources"] and no_answer["results"]
    streamed_text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed_text.startswith("No answer: the answer model failed (HTTP 500).")
    final = [c.model_extra for c in chunks if c.model_extra and c.model_extra.get("rag")]
    assert final and final[-1]["rag"]["answer_error"] == "the answer model failed (HTTP 500)"
    models = httpx.get(f"{service.url}/v1/models", headers=AUTH, timeout=10).json()
    assert [m["id"] for m in models["data"]] == ["gpt-4o-mini"]

    metrics = httpx.get(f"{service.url}/metrics", headers=AUTH, timeout=10).text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(metrics)
        for s in family.samples
    }
    assert samples[("rag_answer_tokens_total", (("kind", "prompt"),))] > 0
    assert samples[("rag_answers_total", (("outcome", "answered"), ("route", "/v1/search")))] >= 1
    assert samples[("rag_answers_total", (("outcome", "failed"), ("route", "/v1/chat/completions")))] >= 2
    assert samples[("rag_answers_total", (("outcome", "failed"), ("route", "/v1/search")))] >= 1


def test_a_rewrite_plan_filters_and_expands_the_search(service: S.ServiceProcess, fake: OpenAIFake) -> None:
    plan = {"refined_query": "postgres", "sub_queries": ["credentials rotation"], "expansions": ["PostgreSQL"],
            "filters": {"sources": ["jira"]}, "confidence": 0.9}  # fmt: skip
    fake.respond(lambda body: json.dumps(plan) if "refined_query" in str(body) and "JIRA ONLY" in str(body) else None)
    body = {"query": "postgres things, JIRA ONLY", "rewrite": True, "top_k": 10}
    found = httpx.post(f"{service.url}/v1/search", json=body, headers={**AUTH, "X-User-Id": "U1"}, timeout=60)
    assert found.status_code == 200, found.text
    payload = found.json()
    assert payload["rewrite"]["filters_applied"] == {"sources": ["jira"]}
    assert payload["rewrite"]["queries"] == ["postgres PostgreSQL", "credentials rotation"]
    assert {r["document_id"] for r in payload["results"]} == {S.OPS_ISSUE, S.OPS_SECRET_ISSUE}
    # A filter that would leave nothing (Jira only, for Carol, who may read no issue) is dropped and reported.
    plan["filters"] = {"sources": ["jira"]}
    carol = httpx.post(f"{service.url}/v1/search", json=body, headers={**AUTH, "X-User-Id": "U3"}, timeout=60).json()
    assert carol["rewrite"]["dropped_filters"] == ["sources=['jira']"] and carol["results"]


@pytest.mark.slow  # a second service process (~15 s to start)
def test_a_service_without_an_answer_model_says_how_to_turn_answers_on(serving_index: Path, tmp_path: Path) -> None:
    copy = tmp_path / "data"
    S.copy_index(serving_index, copy)
    with S.running_service(copy, tmp_path / "serve.log", RAG_SERVE_TOKEN=TOKEN) as plain:
        response = httpx.post(f"{plain.url}/v1/chat/completions", headers={**AUTH, "X-User-Id": "U1"}, timeout=30,
                              json={"messages": [{"role": "user", "content": "when?"}]})  # fmt: skip
        rewrite = httpx.post(f"{plain.url}/v1/search", headers={**AUTH, "X-User-Id": "U1"}, timeout=30,
                             json={"query": "postgres", "rewrite": True})  # fmt: skip
    assert response.status_code == 503 and response.json()["field"] == "model"
    assert "RAG_ANSWER_MODEL" in response.json()["error"]["message"]  # OpenAI's error shape on its routes
    assert rewrite.status_code == 503 and rewrite.json()["field"] == "rewrite"


@pytest.mark.slow  # a CLI process loading the dense model (~15 s)
def test_ask_answers_from_the_command_line(serving_index: Path, fake: OpenAIFake, tmp_path: Path) -> None:
    copy = tmp_path / "data"
    S.copy_index(serving_index, copy)
    env = S.service_env(copy, RAG_ANSWER_MODEL="gpt-4o-mini", OPENAI_API_KEY=API_KEY, OPENAI_BASE_URL=fake.base_url)
    done = subprocess.run(
        S.rag_pipeline_command("ask", "when is the postgres upgrade planned?", "--user", "carol@serve.test", "--json"),
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert "[1]" in payload["answer"] and payload["sources"]
    assert {s["document_id"] for s in payload["sources"]} <= READABLE["U3"]
    fake.inject("500", path="chat/completions", times=1000)
    try:
        failed = subprocess.run(
            S.rag_pipeline_command("ask", "when is the postgres upgrade planned?", "--user", "carol@serve.test",
                                   "--json"),
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        fake.clear_faults()
    assert failed.returncode == 1, failed.stderr  # the sources, and a status that says the model failed
    unanswered = json.loads(failed.stdout)
    assert unanswered["answer"] is None and unanswered["answer_error"] == "the answer model failed (HTTP 500)"
    assert unanswered["sources"] and {s["document_id"] for s in unanswered["sources"]} <= READABLE["U3"]
    off = subprocess.run(S.rag_pipeline_command("ask", "when?", "--user", "U3"), env=S.service_env(copy),
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert off.returncode == 2 and "RAG_ANSWER_MODEL" in off.stderr
    # A Korean question with nothing the reader may read is told so in Korean, without a model call (issue 65).
    calls = len(fake.requests)
    korean = subprocess.run(
        S.rag_pipeline_command("ask", "프린터 드라이버는 어떻게 설치하나요?", "--user", "U0STRANGER", "--json"),
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert korean.returncode == 0, korean.stderr
    assert json.loads(korean.stdout)["answer"] == say("no_documents", "ko") and len(fake.requests) == calls


def test_a_korean_question_with_nothing_readable_is_told_so_in_korean(service: S.ServiceProcess) -> None:
    """The sentence the service writes itself follows the question's language (issue 65): whole, streamed, and the
    search's answer; the model is never called for it."""
    korean = say("no_documents", "ko")
    question = [{"role": "user", "content": "프린터 드라이버는 어떻게 설치하나요?"}]
    whole = client(service, "U0STRANGER").chat.completions.create(model="gpt-4o-mini", messages=question)
    assert whole.choices[0].message.content == korean and korean.startswith("검색된 문서가 없습니다")
    stream = client(service, "U0STRANGER").chat.completions.create(model="gpt-4o-mini", messages=question, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == korean
    body = {"query": "프린터 드라이버는 어떻게 설치하나요?", "answer": True}
    found = httpx.post(f"{service.url}/v1/search", json=body, headers={**AUTH, "X-User-Id": "U0STRANGER"}, timeout=60)
    assert found.status_code == 200 and found.json()["answer"] == korean
    english = client(service, "U0STRANGER").chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "how do I install the printer driver?"}]
    )
    assert english.choices[0].message.content == NO_DOCUMENTS_ANSWER


def test_the_answer_models_reasoning_comes_back_on_the_one_search_answer(
    service: S.ServiceProcess, fake: OpenAIFake
) -> None:
    """Issue 67: a reasoning model's ``reasoning_content`` reaches the caller on the plain (one-search) chat answer
    and on ``/v1/search`` with ``"answer": true``; a model that gives none leaves it out."""

    def reasoning(body: dict[str, object]) -> str | None:
        prompt = json.dumps(body.get("messages"))
        return "the documents say friday" if "REASONPLAIN" in prompt and "Documents:" in prompt else None

    fake.reason_with(reasoning)
    reply = client(service, "U3").chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "REASONPLAIN when is the postgres upgrade?"}]
    )
    assert (reply.choices[0].message.model_extra or {})["reasoning_content"] == "the documents say friday"
    assert (reply.model_extra or {})["rag"]["reasoning"] == "the documents say friday"
    body = {"query": "REASONPLAIN postgres upgrade friday", "answer": True, "top_k": 3}
    found = httpx.post(f"{service.url}/v1/search", json=body, headers={**AUTH, "X-User-Id": "U3"}, timeout=60).json()
    assert found["reasoning"] == "the documents say friday" and found["answer"]
    plain = client(service, "U3").chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "when is the postgres upgrade?"}]
    )
    assert (plain.model_extra or {})["rag"]["reasoning"] is None
    assert "reasoning_content" not in (plain.choices[0].message.model_extra or {})


def test_a_routed_search_follows_the_questions_route_with_a_rewrite_plan(
    service: S.ServiceProcess, fake: OpenAIFake
) -> None:
    """Issue 67: the router takes the rewrite plan as input. The plan drops the issue key the question named; the
    routed search still looks it up first (for a reader of it only), and the response's route says so."""
    plan = {"refined_query": "planned for friday", "sub_queries": [], "expansions": [], "filters": {},
            "confidence": 0.2}  # fmt: skip
    fake.respond(lambda body: json.dumps(plan) if "refined_query" in str(body) and "PLANROUTE" in str(body) else None)
    body = {"query": "PLANROUTE what happened with OPS-1 and the postgres upgrade", "rewrite": True, "top_k": 5,
            "mode": "routed"}  # fmt: skip

    def search(user: str) -> dict[str, Any]:
        found = httpx.post(f"{service.url}/v1/search", json=body, headers={**AUTH, "X-User-Id": user}, timeout=60)
        assert found.status_code == 200, found.text
        return dict(found.json())

    alice, bob = search("U1"), search("U2")
    assert alice["rewrite"]["queries"] == ["planned for friday"]  # the key (and its issue) gone from the search ...
    assert alice["route"]["issue_keys"] == ["OPS-1"] and "routed with the rewrite plan" in alice["route"]["reasons"]
    assert alice["results"][0]["document_id"] == S.OPS_ISSUE  # ... and still looked up first
    assert S.OPS_ISSUE not in {r["document_id"] for r in bob["results"]}  # Bob reads no Jira project
