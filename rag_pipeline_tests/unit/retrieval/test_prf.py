"""The prf arm (RM3 over the BM25 arm's first results): expansion terms are the index's own BM25 terms (English
and Japanese), nothing a reader may not read feeds them, and the arm is deterministic on both engines."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from rag_pipeline.retrieval.prf import FeedbackDocument, PrfConfig, relevance_model, rm3
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.results import MODES
from rag_pipeline.retrieval.retriever import Retriever, RetrieverConfig
from rag_pipeline.sources.document import Acl, Document
from rag_pipeline.stages import documents_frame, index_documents_directly
from rag_pipeline.text.chunking import Chunker
from rag_pipeline.vectors.sparse import Bm25Encoder, Bm25Params, SparseVector
from rag_pipeline_tests.kit.slack_index import HashEncoder

WORD = Bm25Encoder()
CJK = Bm25Encoder(Bm25Params(tokenizer="cjk-bigram"))
EVERYONE = Principal.all_documents_for_evaluation()
WHEN = datetime(2024, 3, 1, tzinfo=UTC)

ENGLISH = {
    "k1": "kernel panic after the upgrade; regenerating the initramfs fixed it, initramfs was stale",
    "k2": "kernel panic on boot again. update-initramfs then reboot, the initramfs image was missing modules",
    "k3": "kernel panic with nvidia driver, rebuilt initramfs and dkms modules",
    # Never mentions the query's words: only an expanded query finds it.
    "k4": "how do I rebuild the initramfs image so the new modules load",
    "w1": "wifi drops every minute with iwlwifi",
    "p1": "printer offline in cups after upgrade",
}

JAPANESE = {
    "j1": "カーネルパニックが起動時に発生しました。イニシャルラムディスクを再生成すると直りました。",
    "j2": "アップグレード後にカーネルパニック。イニシャルラムディスクの再生成で解決。",
    "j3": "カーネルパニックの原因はドライバでした。イニシャルラムディスクを作り直しました。",
    "j4": "イニシャルラムディスクを再生成する手順を教えてください。",
    "j5": "無線LANが毎分切断されます。",
}


def _document(doc_id: str, text: str, acl: Acl | None = None) -> Document:
    return Document(
        id=doc_id,
        source="slack",
        container="C1",
        title=doc_id,
        text=text,
        created=WHEN,
        updated=WHEN,
        version=1.0,
        content_hash=doc_id,
        acl=acl or Acl(public=True),
    )


def _index(store, encoder: Bm25Encoder, texts: dict[str, str], acls: dict[str, Acl] | None = None) -> None:
    documents = [_document(d, t, (acls or {}).get(d)) for d, t in texts.items()]
    index_documents_directly(store, documents_frame(documents), Chunker(), HashEncoder(), encoder)


def _retriever(store, encoder: Bm25Encoder, **prf: object) -> Retriever:
    return Retriever(store, encoder, dense=HashEncoder(), config=RetrieverConfig(prf=PrfConfig.model_validate(prf)))


def _term(encoder: Bm25Encoder, word: str) -> int:
    (term,) = encoder.encode_query(word).indices
    return term


def _in_index(store, term: int) -> bool:
    """Whether a one-term BM25 query matches any child: the term is one the index holds."""
    return bool(store.search_sparse(SparseVector([term], [1.0]), 1))


def test_prf_is_an_arm() -> None:
    assert "prf" in MODES


def test_english_expansion_terms_are_the_indexs_word_terms(store) -> None:
    _index(store, WORD, ENGLISH)
    # BM25 alone with the expanded query, so what the expansion finds is not dense noise (the stand-in encoder).
    response = _retriever(store, WORD, hybrid=False).search("kernel panic", "prf", EVERYONE, top_k=10)
    expansion = response.expansion
    assert expansion is not None and expansion.terms and response.mode == "prf"
    assert all(_in_index(store, t) for t in expansion.terms)
    assert _term(WORD, "initramfs") in expansion.terms
    # Never the query's own terms, stopwords or tokens under three characters.
    assert not set(expansion.terms) & set(WORD.encode_query("kernel panic").indices)
    assert not set(expansion.terms) & set(WORD.term_counts("on do I so it"))
    # The expanded query finds the document that shares no word with the query; plain BM25 cannot.
    assert "k4" not in {r.document_id for r in _retriever(store, WORD).search("kernel panic", "bm25", EVERYONE).results}
    assert "k4" in {r.document_id for r in response.results}
    assert set(expansion.feedback) >= {"k1", "k2", "k3"}


def test_japanese_feedback_gives_cjk_bigram_terms_the_index_holds(store) -> None:
    _index(store, CJK, JAPANESE)
    response = _retriever(store, CJK, hybrid=False).search("カーネルパニック", "prf", EVERYONE, top_k=10)
    expansion = response.expansion
    assert expansion is not None and expansion.terms
    # Bigrams, exactly as the index wrote them: each matches indexed chunks.
    assert all(_in_index(store, t) for t in expansion.terms)
    assert {_term(CJK, "ラム"), _term(CJK, "ディ")} <= set(expansion.terms)
    # The word tokenizer's sentence-long "terms" of the same text are not what the index holds.
    sentence = WORD.encode_query(JAPANESE["j1"]).indices
    assert not set(expansion.terms) & set(sentence)
    assert "j4" in {r.document_id for r in response.results}  # no query bigram, found through the expansion


def test_expansion_never_reads_a_document_the_reader_may_not(store) -> None:
    secret = " ".join(["kernel panic zorblax"] * 30)
    # The shipped shape (hybrid): the dense prefetch runs under the reader's ACL as well.
    _index(store, WORD, {**ENGLISH, "s1": secret}, {"s1": Acl(users=("U1",))})
    retriever = _retriever(store, WORD)
    zorblax = _term(WORD, "zorblax")

    outsider = retriever.search("kernel panic", "prf", Principal(user_id="U2"), top_k=10)
    assert outsider.expansion is not None and "s1" not in outsider.expansion.feedback
    assert zorblax not in outsider.expansion.terms and zorblax not in outsider.expansion.query.indices
    assert "s1" not in {r.document_id for r in outsider.results}

    insider = retriever.search("kernel panic", "prf", Principal(user_id="U1"), top_k=10)
    assert insider.expansion is not None and "s1" in insider.expansion.feedback
    assert zorblax in insider.expansion.terms  # the test would notice a leak

    # A document the search leaves out (an eval query's own issue) feeds nothing either.
    excluded = retriever.search("kernel panic", "prf", Principal(user_id="U1"), top_k=10, exclude=["s1"])
    assert excluded.expansion is not None and zorblax not in excluded.expansion.terms


@pytest.mark.parametrize("hybrid", [False, True], ids=["bm25", "hybrid"])
def test_prf_returns_results_and_is_deterministic(store, hybrid: bool) -> None:
    _index(store, WORD, ENGLISH)
    first = _retriever(store, WORD, hybrid=hybrid).search("kernel panic", "prf", EVERYONE, top_k=5)
    again = _retriever(store, WORD, hybrid=hybrid).search("kernel panic", "prf", EVERYONE, top_k=5)
    assert first.results and len(first.results) <= 5 and first.mode == "prf" and not first.warnings
    assert [(r.document_id, r.score) for r in first.results] == [(r.document_id, r.score) for r in again.results]
    assert first.expansion == again.expansion


def test_hybrid_prf_degrades_to_the_expanded_bm25_query_without_a_dense_model(store) -> None:
    _index(store, WORD, ENGLISH)

    def no_model():
        raise OSError("model folder missing")

    retriever = Retriever(store, WORD, dense=no_model, config=RetrieverConfig(prf=PrfConfig(hybrid=True)))
    response = retriever.search("kernel panic", "prf", EVERYONE, top_k=10)
    assert response.mode == "bm25" and response.warnings
    assert "k4" in {r.document_id for r in response.results}  # still the expanded query


def test_rm3_interpolates_the_query_with_the_relevance_model() -> None:
    query = SparseVector(indices=sorted(WORD.encode_query("kernel panic").indices), values=[4.0, 1.0])
    feedback = [
        FeedbackDocument("a", 10.0, "kernel panic initramfs initramfs modules"),
        FeedbackDocument("b", 5.0, "kernel panic initramfs grub"),
    ]
    config = PrfConfig(expansion_terms=2, original_weight=0.6)
    expansion = rm3(WORD, query, feedback, config)
    weights = dict(zip(expansion.query.indices, expansion.query.values, strict=True))
    assert sum(weights.values()) == pytest.approx(1.0)
    # The query keeps its own proportions within its share; the two heaviest new terms share the rest.
    assert [weights[t] for t in query.indices] == pytest.approx([0.6 * 0.8, 0.6 * 0.2])
    assert set(expansion.terms) == {_term(WORD, "initramfs"), _term(WORD, "modules")}
    assert sum(expansion.terms.values()) == pytest.approx(1.0)
    # P(w|R): score-weighted tf/|d| (a: 2/5 of 2/3; b: 1/4 of 1/3).
    model = relevance_model(WORD, feedback, config)
    assert model[_term(WORD, "initramfs")] == pytest.approx(2 / 3 * 2 / 5 + 1 / 3 * 1 / 4)
    assert expansion.feedback == ("a", "b")
    # Classic RM3 (query_terms): the query's own terms compete for the places and gain weight from the model.
    classic = rm3(WORD, query, feedback, PrfConfig(expansion_terms=3, original_weight=0.6, query_terms=True))
    assert set(classic.terms) == set(query.indices) | {_term(WORD, "initramfs")}
    reinforced = dict(zip(classic.query.indices, classic.query.values, strict=True))
    assert all(reinforced[t] > weights[t] for t in query.indices)
    # No feedback, or no terms to add: the query unchanged.
    assert rm3(WORD, query, [], config).query == query
    assert rm3(WORD, query, feedback, PrfConfig(expansion_terms=0)).query == query


def test_content_terms_are_long_enough_index_terms() -> None:
    text = "The id is ok at 10:30, x86 kernel panics; 設定ファイルを読む の"
    for encoder in (WORD, CJK, Bm25Encoder(Bm25Params(tokenizer="multilingual"))):
        whole, content = encoder.term_counts(text), encoder.content_term_counts(text)
        assert content and set(content) <= set(whole)
        assert all(content[t] == whole[t] for t in content)
        assert not set(content) & set(WORD.term_counts("id ok 10 30"))
    # CJK bigrams are two characters and stay; a lone kana does not.
    assert _term(CJK, "設定") in CJK.content_term_counts(text)
    assert _term(CJK, "の") not in CJK.content_term_counts(text)
    assert _term(WORD, "kernel") in WORD.content_term_counts(text)
