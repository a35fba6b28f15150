"""The sentences the project writes in an answer follow the question's language (or the operator's fixed one),
from one catalogue; prompts and tool descriptions name every registered source, Confluence included."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from rag_pipeline.answers.agent import agent_tools
from rag_pipeline.answers.generate import AnswerModel, answer_messages, stream_answer, write_answer
from rag_pipeline.answers.wording import MESSAGES, READER_LANGUAGES, reader_language, say
from rag_pipeline.mcp.app import tool_description
from rag_pipeline.mcp.tools import search_documents
from rag_pipeline.retrieval.rewrite import QueryRewriter


class NoCalls:
    """A client whose every call fails the test: nothing found means no model call."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the model was called ({name})")


class Recording:
    """An OpenAI-shaped client that records the messages and answers with ``reply``."""

    def __init__(self, reply: str) -> None:
        self.messages: list[list[dict[str, Any]]] = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self._create))
        self.reply = reply

    def _create(self, **kwargs: Any) -> Any:
        self.messages.append(kwargs["messages"])
        message = SimpleNamespace(content=self.reply, refusal=None)
        return SimpleNamespace(choices=[SimpleNamespace(message=message)], usage=None)


@pytest.mark.parametrize(
    ("question", "language"),
    [("프린터 드라이버는 어떻게 설치하나요?", "ko"), ("プリンタのドライバはどこ?", "ja"), ("ﾌﾟﾘﾝﾀ ﾄﾞﾗｲﾊﾞ", "ja"),
     ("배포 pipeline 실패", "ko"), ("printer driver", "en"), ("打印机驱动", "en")],
)  # fmt: skip
def test_the_language_is_the_questions_script(question: str, language: str) -> None:
    assert reader_language(question) == language
    assert reader_language(question, "auto") == language
    assert reader_language(question, "en") == "en"  # the operator's RAG_ANSWER_LANGUAGE wins


def test_every_sentence_is_in_every_language() -> None:
    for key, sentences in MESSAGES.items():
        assert set(sentences) == set(READER_LANGUAGES), key
        assert len(set(sentences.values())) == len(READER_LANGUAGES), key  # not an English copy
    assert say("no_documents", "ko").startswith("검색된 문서가 없습니다")
    assert say("no_answer", "ko", reason="timeout").startswith("답변을 만들지 못했습니다: timeout")


def test_nothing_found_is_said_in_the_questions_language_without_a_model_call() -> None:
    model = AnswerModel("gpt-4o-mini", client=NoCalls())
    korean = write_answer(model, "프린터 드라이버는 어떻게 설치하나요?", [])
    assert korean.text == say("no_documents", "ko") and korean.sources == []
    pieces = list(stream_answer(model, "プリンタのドライバはどこ?", []))
    assert pieces[0] == say("no_documents", "ja") and pieces[-1].text == pieces[0]
    fixed = AnswerModel("gpt-4o-mini", client=NoCalls(), language="en")
    assert write_answer(fixed, "프린터 드라이버", []).text == say("no_documents", "en")


def test_prompts_and_tool_descriptions_name_every_registered_source() -> None:
    prompt = answer_messages("q", [])[0]["content"]
    assert "Slack, Jira and Confluence" in prompt and "{sources}" not in prompt
    search = next(t["function"] for t in agent_tools() if t["function"]["name"] == "search_documents")
    assert "Confluence" in search["description"]
    assert "confluence" in search["parameters"]["properties"]["source"]["enum"]
    described = tool_description(search_documents)
    assert "(Slack, Jira and Confluence)" in described and "source: one of slack, jira, confluence" in described
    client = Recording(json.dumps({"refined_query": "printer", "sub_queries": [], "expansions": [], "filters": {},
                                   "confidence": 0.9}))  # fmt: skip
    QueryRewriter("gpt-4o-mini", client=client).plan("프린터")
    system = client.messages[0][0]["content"]
    assert "Slack, Jira and Confluence" in system and "{titles}" not in system
