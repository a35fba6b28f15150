"""What a reader reads in an answer, in the question's language: one catalogue of the sentences the project writes
itself (the model writes the rest, told to answer in the question's language). What prompts and tool descriptions
call the searched documents comes from the source registry (``searched_sources_phrase``), never a fixed list.

The language is the question's script: Hangul is Korean, kana is Japanese, anything else English (Han alone is read
as Japanese only with kana beside it: Chinese questions get English, the model's answer still follows them).
"""

from __future__ import annotations

import re
from typing import Literal, get_args

ReaderLanguage = Literal["en", "ko", "ja"]
READER_LANGUAGES: tuple[str, ...] = get_args(ReaderLanguage)

_HANGUL = re.compile("[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]")
_KANA = re.compile("[\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f]")

MESSAGES: dict[str, dict[ReaderLanguage, str]] = {
    # Said instead of an answer when the reader may read nothing the search found (no model call is made).
    "no_documents": {
        "en": "No documents were found that you may read for this question, so there is nothing to answer from.",
        "ko": "검색된 문서가 없습니다. 이 질문에 대해 읽을 수 있는 문서를 찾지 못해 답변할 내용이 없습니다.",
        "ja": "該当する文書が見つかりませんでした。この質問について閲覧できる文書がないため、回答できません。",
    },
    # The answer model failed: the reason (an operator's words), then what was found.
    "no_answer": {
        "en": "No answer: {reason}.",
        "ko": "답변을 만들지 못했습니다: {reason}.",
        "ja": "回答を作成できませんでした: {reason}。",
    },
    "documents_found": {
        "en": "The documents found for the question:",
        "ko": "질문에 대해 찾은 문서:",
        "ja": "質問に対して見つかった文書:",
    },
    # A search (the MCP tool's result) that found nothing the reader may read.
    "no_results": {
        "en": "No documents were found that you may read for this search.",
        "ko": "검색된 문서가 없습니다.",
        "ja": "該当する文書が見つかりませんでした。",
    },
    "no_documents_either": {
        "en": "No documents were found either.",
        "ko": "검색된 문서도 없습니다.",
        "ja": "文書も見つかりませんでした。",
    },
}


def reader_language(question: str, fixed: str | None = None) -> ReaderLanguage:
    """The language of the sentences written for ``question``'s reader: ``fixed`` where the operator set one
    (``RAG_ANSWER_LANGUAGE``), else the question's script."""
    if fixed in READER_LANGUAGES:
        return fixed  # type: ignore[return-value]
    if _HANGUL.search(question):
        return "ko"
    if _KANA.search(question):
        return "ja"
    return "en"


def say(key: str, language: ReaderLanguage, **values: str) -> str:
    """The catalogue's sentence ``key`` in ``language``, with ``values`` filled in."""
    return MESSAGES[key][language].format(**values)
