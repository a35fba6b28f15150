"""Korean first (issue 53): mecab-ko stems beside the bigrams in BM25, queries weighed by their term counts, the
folder's language chosen as Korean from the data, the CJK fusion with the documents' title vectors, the chat
eval sets built through the real Slack export reader, and the rewrite planner's Korean ↔ English expansion
finding a Korean thread for an English question."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import openai
import pytest

from rag_pipeline.connectors.slack.export import SlackExportReader
from rag_pipeline.evaluation.eval_set import load_eval_set, load_eval_set_meta
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.retrieval.fusion import QUERY_ON_TITLES, SHARED_FUSION, learned_fusion
from rag_pipeline.retrieval.planned_search import search_planned
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.retriever import Retriever, RetrieverConfig
from rag_pipeline.retrieval.rewrite import QueryRewriter
from rag_pipeline.settings import Settings
from rag_pipeline.stages import documents_frame, index_documents_directly
from rag_pipeline.text.chunking import Chunker
from rag_pipeline.text.korean import content_morphemes
from rag_pipeline.text.language import choose_language, is_korean_text, language_of_models
from rag_pipeline.vectors.sparse import Bm25Encoder, Bm25Params, cjk_bigrams, korean_terms
from rag_pipeline_tests.kit.data import D1, ts, write_slack_export
from rag_pipeline_tests.kit.emulators.openai_api import API_KEY, OpenAIFake
from rag_pipeline_tests.kit.paths import EVAL_SETS_DIR
from rag_pipeline_tests.kit.slack_index import HashEncoder
from tools.build_dialogue_eval_sets import MIN_QUESTION_CHARS, build

KO = "내 태블릿에서 설정 앱을 실행해 연결 → 블루투스를 선택한 후 Music Share의 스위치를 눌러 기능을 켜세요."
JA = "サーバーの再起動後にデータベース接続がタイムアウトします。"
ZH = "服务器重启后数据库连接超时。请检查配置文件中的连接池。"
EN = "The nightly backup job fails on the replica because the disk quota is exhausted."
KOREAN = Bm25Encoder(Bm25Params(tokenizer="ko-morpheme-bigram"))
BIGRAMS = Bm25Encoder(Bm25Params(tokenizer="cjk-bigram"))


def test_content_morphemes_are_stems_without_particles_and_endings_with_the_latin_words_of_mixed_text() -> None:
    terms = content_morphemes("갤럭시 S23에서 Wi-Fi 설정은 어디 있어? 에러 코드가 떠요")
    assert {"갤럭시", "설정", "에러", "코드", "s", "23", "wi", "fi"} <= set(terms)
    # Particles (에서, 은, 가) and endings (어요) are cut off; a fused verb form gives its stem (떠요 -> 뜨).
    assert "뜨" in terms and not {"에서", "은", "가", "떠요", "어요"} & set(terms)
    # A word's other forms share its stem: the question's 공유하는 and the answer's 공유됩니다.
    assert "공유" in content_morphemes("친구랑 공유하는 법") and "공유" in content_morphemes("스피커가 공유됩니다")
    assert content_morphemes(EN) == [] and content_morphemes(JA) == [] and content_morphemes("") == []


def test_korean_terms_are_the_bigrams_plus_stems_and_other_text_is_untouched() -> None:
    assert korean_terms(KO).startswith(cjk_bigrams(KO)) and korean_terms(KO) != cjk_bigrams(KO)
    for other in (EN, JA, ZH, f"{JA} {EN}"):
        assert korean_terms(other) == cjk_bigrams(other)
        # Documents without Hangul get exactly the cjk-bigram terms and weights.
        assert KOREAN.encode_documents([other]) == BIGRAMS.encode_documents([other])


def test_a_korean_query_weighs_a_word_by_its_count_so_real_words_outweigh_straddling_bigrams() -> None:
    query = "스피커를 친구랑 공유하는 법"
    weighted = dict(zip(*(lambda v: (v.indices, v.values))(KOREAN.encode_query(query)), strict=True))
    stem = BIGRAMS.encode_query("공유").indices[0]  # 공유 is a bigram and a stem: counted twice
    straddling = BIGRAMS.encode_query("유하").indices[0]  # the bigram across 공유|하는: once
    assert weighted[stem] == pytest.approx(2.0) and weighted[straddling] == pytest.approx(1.0)
    # The cjk-bigram query keeps Qdrant's weight 1 per distinct term.
    assert set(BIGRAMS.encode_query(query).values) == {1.0}
    # An inflected form in a document is found by the stem: the answer never says 공유하는.
    shared = set(KOREAN.encode_query(query).indices) & set(KOREAN.encode_documents(["스피커가 공유됩니다"])[0].indices)
    assert stem in shared


def test_the_folder_is_korean_when_most_of_its_cjk_documents_are_hangul() -> None:
    assert is_korean_text(KO) and not is_korean_text(JA) and not is_korean_text(ZH) and not is_korean_text(EN)
    # Korean with a few Han characters (an old word, a name) is still Korean.
    assert is_korean_text("本社 인사팀에 휴가 신청서를 제출하세요")
    picked = choose_language([KO] * 30 + [EN] * 70)
    assert (picked.language, picked.dense_model, picked.bm25_tokenizer) == (
        "korean", "multilingual-e5-small", "ko-morpheme-bigram",
    )  # fmt: skip
    assert choose_language([JA] * 60 + [KO] * 40).language == "cjk"  # mostly Japanese: bigrams won for it
    assert choose_language([ZH] * 50).language == "cjk" and choose_language([EN] * 50).language == "english"
    assert language_of_models("multilingual-e5-small", "ko-morpheme-bigram") == "korean"
    assert language_of_models("multilingual-e5-small", "cjk-bigram") == "cjk"


def test_searches_over_a_cjk_index_fuse_slack_with_the_document_titles(tmp_path: Path) -> None:
    english, korean = RetrieverConfig.chosen(), RetrieverConfig.chosen(language="korean")
    assert english.fusion_by_source == learned_fusion()
    assert (
        korean.fusion_by_source == learned_fusion("cjk") and korean.fusion_by_source["jira"] == learned_fusion()["jira"]
    )
    slack = korean.learned_for(["slack"])
    assert slack is not None and slack.document_title_weight == 1.0 and slack.dense_weight == slack.sparse_weight
    # A search naming no source (the service's default) fuses the titles too in a CJK index (Korean help-desk
    # hybrid 0.517 -> 0.71), and as before in an English one.
    anywhere = korean.learned_for(None)
    assert anywhere is not None and anywhere.document_title_weight == 1.0 and anywhere.k == 10
    assert QUERY_ON_TITLES in korean.plan_for(None, False, True).extra
    assert english.learned_for(None) == english.learned_for(["slack", "jira"]) == SHARED_FUSION
    # The settings name the language their models serve, which the CLI, the service and `ask` pass on.
    settings = Settings.from_env({"RAG_DATA_DIR": str(tmp_path), "RAG_LANGUAGE": "korean"})
    assert settings.bm25_tokenizer == "ko-morpheme-bigram" and settings.index_language == "korean"
    assert Settings.from_env({"RAG_DATA_DIR": str(tmp_path)}).index_language == "english"


def _hg_tods(dialogues: dict[str, list[tuple[str, list[str]]]]) -> dict[str, object]:
    data: dict[str, list[object]] = {}
    for domain, items in dialogues.items():
        data[domain] = [
            {
                "dial_id": dial_id,
                "turns": [
                    {"turn_id": i + 1, "role": ("user", "system")[i % 2], "utterance": text, "references": []}
                    for i, text in enumerate(turns)
                ],
            }
            for dial_id, turns in items
        ]
    return {"dial_data": data}


def test_a_dialogue_set_becomes_a_slack_export_whose_opening_question_is_deleted(tmp_path: Path) -> None:
    source = tmp_path / "hg"
    source.mkdir()
    (source / "LICENSE-MIT.txt").write_text("MIT License\n")
    dialogues = {
        "samsung": [
            (
                "d1",
                [
                    "내 스피커를 친구랑 공유하는 법을 알려줘.",
                    "Music Share 기능을 켜세요.",
                    "버즈 두 개도 돼?",
                    "네, 됩니다.",
                ],
            ),
            ("d2", ["짧아", "답", "또"]),  # opening question too short
            ("d3", ["화면  캡처는   어떻게 해?", "측면 버튼과 음량 버튼을 함께 누르세요.", "고마워"]),
            ("d4", ["화면 캡처는 어떻게 해?", "손바닥으로 밀어도 됩니다.", "그렇구나"]),  # same question as d3
            ("d6", ["두 턴만 있는 대화야", "네"]),  # fewer than 3 turns
        ],
        "iphone": [("d5", ["위치 서비스는 어떻게 켜?", "설정에서 개인 정보 보호로 이동하세요.", "고마워"])],
    }
    (source / "manual2dial_dial_test.json").write_text(json.dumps(_hg_tods(dialogues), ensure_ascii=False))
    assert len("짧아") < MIN_QUESTION_CHARS
    folder = build("ko-helpdesk", source, tmp_path / "sets")
    queries = load_eval_set(folder / "ko_helpdesk.jsonl")
    assert [q.id for q in queries] == ["d1", "d5"]  # d2 too short, d3/d4 share their question, d6 too short
    assert load_eval_set_meta(folder / "ko_helpdesk.jsonl").license == "MIT"
    assert (folder / "LICENSE-MIT.txt").is_file() and "499" not in (folder / "README.md").read_text()
    documents = {d.id: d for d in SlackExportReader(folder / "export.zip", "T0KOHELPDK").read().documents}
    for query in queries:
        (relevant,) = query.relevant
        document = documents[relevant]
        # The thread is found by its replies only: the opening question is a tombstone, not indexed text.
        assert query.query not in document.text and document.metadata["root_deleted"]
    assert "Music Share 기능을 켜세요." in documents[next(iter(queries[0].relevant))].text
    # Rebuilding gives the same bytes (fixed zip entry times, synthetic timestamps).
    first = (folder / "export.zip").read_bytes()
    build("ko-helpdesk", source, tmp_path / "sets")
    assert (folder / "export.zip").read_bytes() == first
    with zipfile.ZipFile(folder / "export.zip") as archive:
        assert {"channels.json", "users.json"} <= set(archive.namelist())


def test_the_committed_korean_set_reads_through_the_slack_export_reader() -> None:
    folder = EVAL_SETS_DIR / "ko_helpdesk"
    queries = load_eval_set(folder / "ko_helpdesk.jsonl")
    read = SlackExportReader(folder / "export.zip", "T0KOHELPDK").read()
    assert not read.problems and len(read.documents) == len(queries) == 499
    assert {d for q in queries for d in q.relevant} == {d.id for d in read.documents}
    assert choose_language([d.text for d in read.documents]).language == "korean"


@pytest.fixture
def fake() -> Iterator[OpenAIFake]:
    with OpenAIFake() as server:
        yield server


def test_the_planner_expands_an_english_question_into_korean_and_finds_the_korean_thread(
    fake: OpenAIFake, tmp_path: Path
) -> None:
    """The design's example: "HR" -> "인사팀". The English question shares no term with the Korean thread; the
    plan's Korean expansion (from the fake model, through the real openai client) finds it."""
    days = {
        "2024-03-01": [
            {"type": "message", "user": "U1", "text": "인사팀에 휴가 신청은 어떻게 하나요?", "ts": ts(D1 + 60),
             "thread_ts": ts(D1 + 60), "reply_count": 1},
            {"type": "message", "user": "U2", "text": "인사팀 포털에서 연차 휴가 신청서를 제출하세요.",
             "ts": ts(D1 + 120), "thread_ts": ts(D1 + 60)},
            {"type": "message", "user": "U1", "text": "The build server is down again after the upgrade",
             "ts": ts(D1 + 300)},
        ]
    }  # fmt: skip
    export = write_slack_export(tmp_path / "export", days)
    documents = SlackExportReader(export, "T1").read().documents
    store = EdgeVectorStore(tmp_path / "qdrant")
    store.create_collections(4)
    index_documents_directly(store, documents_frame(documents), Chunker(), HashEncoder(), KOREAN)
    retriever = Retriever(store, KOREAN, dense=HashEncoder())
    korean_thread = next(d.id for d in documents if "휴가" in d.text)
    question = "How do I request leave from HR?"
    reader = Principal.all_documents_for_evaluation()
    assert korean_thread not in {r.document_id for r in retriever.search(question, "bm25", reader).results}

    plan = {"refined_query": "request leave HR", "expansions": ["인사팀", "휴가 신청"], "confidence": 0.9}
    fake.respond(lambda body: json.dumps(plan) if "refined_query" in str(body) else None)
    client = openai.OpenAI(base_url=fake.base_url, api_key=API_KEY, max_retries=0, timeout=10.0)
    outcome = QueryRewriter("gpt-4o-mini", client=client).plan(question, datetime(2026, 11, 27, tzinfo=UTC))
    assert outcome.plan is not None and "인사팀" in outcome.plan.queries()[0]
    # The prompt asks for the other language's key terms.
    assert "other language (Korean, Japanese or English)" in str(fake.calls("/chat/completions")[0].body)
    done = search_planned(retriever, question, "bm25", reader, 5, outcome)
    assert done.response.results and done.response.results[0].document_id == korean_thread


def test_in_a_cjk_index_a_slack_threads_children_carry_the_whole_threads_vector() -> None:
    from rag_pipeline.sources.document import Acl, Document
    from rag_pipeline.stages import chunk_documents, documents_frame, sparse_children
    from rag_pipeline.text.chunking import ChunkingConfig
    from rag_pipeline.vectors.sparse import THREAD_AVG_LEN, scores_whole_threads

    assert scores_whole_threads("ko-morpheme-bigram", "slack") and scores_whole_threads("cjk-bigram", "slack")
    assert not scores_whole_threads("word", "slack") and not scores_whole_threads("cjk-bigram", "jira")
    assert Bm25Params().avg_len < THREAD_AVG_LEN
    moment = datetime(2024, 3, 1, tzinfo=UTC)
    thread = Document(
        id="slack:T:C:1", source="slack", container="C", title="t",
        text="\n".join(f"사용자: {KO} {i}번째 답변입니다" for i in range(12)), url=None, authors=("a",),
        created=moment, updated=moment, version=1.0, content_hash="h", acl=Acl(groups=("g",)), metadata={},
    )  # fmt: skip
    chunker = Chunker(ChunkingConfig(child_tokens=60, child_overlap=5))
    parents, children = chunk_documents(documents_frame([thread]), chunker)
    assert len(children) > 1 and len(parents) == 1
    texts = dict(zip(parents["chunk_id"], parents["text"], strict=True))
    whole = sparse_children(children, KOREAN, texts)
    expected = KOREAN.encode_documents([texts[parents["chunk_id"][0]]])[0]
    for indices, values in zip(whole["indices"], whole["values"], strict=True):
        assert list(indices) == expected.indices and list(values) == pytest.approx(expected.values)
    per_child = sparse_children(children, KOREAN)
    assert len(whole["indices"][0]) > len(per_child["indices"][0])  # the thread holds every child's terms
    with pytest.raises(ValueError, match="parents are not among"):
        sparse_children(children, KOREAN, {})
