"""A query's Unicode form never changes its results (issue 65, item 1): NFD Korean (what macOS file names, some
IMEs and copy-paste from them produce), half-width katakana and mixed-script queries find what their usual form
finds, on an index whose text was written from either form, on every engine."""

from __future__ import annotations

import unicodedata

import pytest

from rag_pipeline.index.store import StorePoint
from rag_pipeline.index.writer import DocumentPoints, write_documents
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.retriever import Retriever
from rag_pipeline.text.clean import clean_text, query_form
from rag_pipeline.vectors.sparse import Bm25Encoder, Bm25Params
from rag_pipeline_tests.unit.retrieval.test_retrieval import TopicEncoder, _pid

EVERYONE = Principal.all_documents_for_evaluation()
TEXTS = {
    "printer": "프린터 드라이버가 설치되지 않아요. 제어판에서 다시 설치하세요.",
    "deploy": "배포 pipeline 실패: 테스트 단계에서 멈춥니다.",
    "manual": "プリンタ ドライバ の 設定 を 確認 して ください",
    "lunch": "점심 메뉴 추천 받아요",
}


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


def _points(doc: str, text: str, bm25: Bm25Encoder) -> DocumentPoints:
    # As the pipeline writes a document: its text cleaned (clean_text) whatever form the source gave it.
    text = clean_text(text)
    base = {"document_id": doc, "source": "slack", "container": "C1", "title": doc, "url": None, "version": 1.0,
            "updated": "2024-01-01T00:00:00+00:00", "acl": {"public": True, "users": [], "groups": []}}  # fmt: skip
    parent = StorePoint(_pid(doc, "p"), {**base, "level": "parent", "text": text})
    child = StorePoint(
        _pid(doc, "c"),
        {**base, "level": "child", "parent_id": parent.id, "text": text, "chunk": 0},
        dense=list(TopicEncoder()._vec(text)),
        sparse=bm25.encode_documents([text])[0],
    )
    return DocumentPoints(doc, 1.0, [parent], [child])


@pytest.mark.parametrize("written_as", ["NFC", "NFD"])
@pytest.mark.parametrize("tokenizer", ["word", "cjk-bigram"])
def test_a_query_finds_the_same_documents_whatever_form_it_was_typed_in(store, written_as, tokenizer) -> None:
    bm25 = Bm25Encoder(Bm25Params(tokenizer=tokenizer))
    write_documents(store, [_points(d, unicodedata.normalize(written_as, t), bm25) for d, t in TEXTS.items()])
    retriever = Retriever(store, bm25, dense=TopicEncoder())

    def found(query: str) -> list[str]:
        return [r.document_id for r in retriever.search(query, "bm25", EVERYONE, top_k=3).results]

    for query, expected in (("프린터 드라이버", "printer"), ("배포 pipeline 실패", "deploy")):
        usual = found(query)
        assert usual and usual[0] == expected, (query, usual)
        assert found(nfd(query)) == usual, query  # the Mac's form: nothing was found before
        assert nfd(query) != query  # the test means something: the two forms differ
    if tokenizer == "cjk-bigram":
        # Half-width katakana (ﾌﾟﾘﾝﾀ) folds to the usual width, in its composed or decomposed form alike.
        usual = found("プリンタ ドライバ")
        assert usual[0] == "manual"
        assert found("ﾌﾟﾘﾝﾀ ﾄﾞﾗｲﾊﾞ") == usual and found(nfd("プリンタ ドライバ")) == usual


def test_the_query_form_is_nfc_and_leaves_ascii_alone() -> None:
    assert query_form(nfd("프린터")) == "프린터" and len(nfd("프린터")) == 7
    assert query_form("\u1111\u1173") == "프"  # a conjoining jamo sequence becomes its syllable
    assert query_form("TIMOB-1234 crash") == "TIMOB-1234 crash"
    assert query_form(nfd("café")) == "café"
