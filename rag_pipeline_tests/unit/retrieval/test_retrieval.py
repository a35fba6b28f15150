"""Retrieval arms over both engines: small-to-big grouping, ACLs, fallbacks, query cache, rerankers."""

from __future__ import annotations

import dataclasses
import tempfile
import uuid
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_pipeline.connectors.jira.resolution import resolution_class
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.store import ALL_PAYLOAD, Hit, StorePoint
from rag_pipeline.index.writer import DocumentPoints, write_documents
from rag_pipeline.retrieval.calibration import (
    Calibration,
    CalibrationFile,
    ModeCalibration,
    calibration_pairs,
    fit_calibration,
)
from rag_pipeline.retrieval.grouping import documents_from_hits
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.retrieval.query_cache import QueryEmbeddingCache
from rag_pipeline.retrieval.rerank.base import rerank
from rag_pipeline.retrieval.rerank.features import FEATURE_NAMES, candidate_features
from rag_pipeline.retrieval.rerank.learned import (
    BAG,
    MIN_TUNING_QUERIES,
    REG_LAMBDA,
    REG_LAMBDA_GRID,
    MultiSignalReranker,
    RerankExample,
    cross_fit,
    featurize,
    load_current_reranker,
    query_key,
    term_encoder,
    train_reranker,
)
from rag_pipeline.retrieval.results import MODES, SearchResult
from rag_pipeline.retrieval.retriever import Retriever, RetrieverConfig
from rag_pipeline.vectors.cache import EmbeddingCache
from rag_pipeline.vectors.sparse import Bm25Encoder

BM25 = Bm25Encoder()
TOPICS = {"kernel": [1.0, 0.0, 0.0, 0.0], "wifi": [0.0, 1.0, 0.0, 0.0], "printer": [0.0, 0.0, 1.0, 0.0]}
EVERYONE = Principal.all_documents_for_evaluation()


class TopicEncoder:
    """A 4-d 'model': a text's vector is the sum of the topic words it mentions (unit length)."""

    model_id = "topic-encoder"
    dimension = 4
    max_tokens = 512

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def _vec(self, text: str) -> np.ndarray:
        v = np.full(4, 0.05) + sum((np.array(TOPICS[w]) for w in TOPICS if w in text.lower()), np.zeros(4))
        return v / np.linalg.norm(v)

    def encode_queries(self, texts):
        self.calls.append(list(texts))
        return np.stack([self._vec(t) for t in texts])

    encode_documents = encode_queries

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def _pid(*parts: object) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(map(str, parts))))


def document(
    doc: str, parents: list[list[str]], acl: dict | None = None, title: str = "", source: str = "slack"
) -> DocumentPoints:
    encoder = TopicEncoder()
    base = {
        "document_id": doc,
        "source": source,
        "container": "C1",
        "title": title or doc,
        "url": f"https://example.test/{doc}",
        "version": 1.0,
        "updated": "2024-01-01T00:00:00+00:00",
        "acl": acl or {"public": True, "users": [], "groups": []},
    }
    parent_points, child_points = [], []
    for p, children in enumerate(parents):
        parent = StorePoint(_pid(doc, "p", p), {**base, "level": "parent", "text": " ".join(children)})
        parent_points.append(parent)
        for c, text in enumerate(children):
            child_points.append(
                StorePoint(
                    _pid(doc, "c", p, c),
                    {**base, "level": "child", "parent_id": parent.id, "text": text, "chunk": len(child_points)},
                    dense=list(encoder._vec(text)),
                    sparse=BM25.encode_documents([text])[0],
                    # As the pipeline writes it: the document's first child carries the title vector.
                    title=None if child_points else list(encoder._vec(base["title"])),
                )
            )
    return DocumentPoints(doc, 1.0, parent_points, child_points)


CORPUS = {
    "d1": [["kernel panic at boot", "kernel oops again"], ["unrelated chatter about lunch"]],
    "d2": [["wifi drops every minute", "wifi driver iwlwifi"]],
    "d3": [["printer offline in cups"]],
    "d4": [["kernel and wifi both broken after upgrade"]],
}


@pytest.fixture
def retriever(store) -> Retriever:
    write_documents(store, [document(d, parents) for d, parents in CORPUS.items()])
    return Retriever(store, BM25, dense=TopicEncoder())


def test_small_to_big_one_result_per_document_with_best_child_and_its_parent(retriever: Retriever) -> None:
    for mode in ("vector", "bm25", "hybrid"):
        response = retriever.search("kernel panic", mode, EVERYONE, top_k=10)
        ids = [r.document_id for r in response.results]
        assert len(ids) == len(set(ids)), mode
        best = response.results[0]
        assert best.document_id == "d1" and best.child_text.startswith("kernel"), mode
        # the parent of the best child, not the document's other parent
        assert best.parent_text == "kernel panic at boot kernel oops again", mode
        assert all(a.score >= b.score for a, b in zip(response.results, response.results[1:], strict=False))
    vector = retriever.search("kernel", "vector", EVERYONE, top_k=10).results[0]
    assert vector.matching_children == 3  # two kernel children + the lunch child under the same document


def test_exclude_and_top_k_and_min_score(retriever: Retriever) -> None:
    results = retriever.search("kernel wifi", "hybrid", EVERYONE, top_k=2, exclude=["d4"]).results
    assert [r.document_id for r in results] != [] and "d4" not in {r.document_id for r in results}
    assert len(results) == 2
    scored = retriever.search("kernel", "bm25", EVERYONE, top_k=10).results
    assert len(scored) >= 2 and all(r.relevance is None for r in scored)  # no calibration yet
    # Without a calibration, min_score drops nothing and says why.
    uncalibrated = retriever.search("kernel", "bm25", EVERYONE, top_k=10, min_score=0.5)
    assert len(uncalibrated.results) == len(scored) and "no calibration for mode bm25" in uncalibrated.warnings[0]


def test_min_score_is_on_the_calibrated_relevance_scale(retriever: Retriever, tmp_path: Path) -> None:
    scored = retriever.search("kernel", "bm25", EVERYONE, top_k=10).results
    top, second = scored[0].score, scored[1].score
    assert top > second
    # A map that puts 0.5 between the two best scores: only the best is at least as likely relevant as not.
    middle = (top + second) / 2
    Calibration({"bm25": ModeCalibration((second, middle, top), (0.2, 0.5, 0.9), 10, 5)}).save(tmp_path / "c.json")
    retriever.calibration = CalibrationFile(tmp_path / "c.json")
    calibrated = retriever.search("kernel", "bm25", EVERYONE, top_k=10)
    assert calibrated.results[0].relevance == pytest.approx(0.9) and calibrated.results[1].relevance == pytest.approx(
        0.2
    )
    cut = retriever.search("kernel", "bm25", EVERYONE, top_k=10, min_score=0.5).results
    assert [r.document_id for r in cut] == [scored[0].document_id] and cut[0].to_dict()["relevance"] == 0.9
    # Another mode has no calibration in the file: nothing dropped, a warning.
    hybrid = retriever.search("kernel", "hybrid", EVERYONE, top_k=10, min_score=0.5)
    assert hybrid.results and "no calibration for mode hybrid" in hybrid.warnings[-1]
    # A reranker the evaluation did not calibrate (an LLM's grades) never goes through the learned one's map.
    Calibration({"reranked": ModeCalibration((0.0, 1.0), (0.1, 0.9), 10, 5)}).save(tmp_path / "c.json")

    class Grader:
        name = "llm:grader"

        def score(self, query: str, candidates: list[SearchResult]) -> list[float]:
            return [10.0 - i for i, _ in enumerate(candidates)]

    graded = retriever.search("kernel", "reranked", EVERYONE, top_k=5, min_score=0.5, reranker=Grader())
    assert graded.mode == "reranked" and all(r.relevance is None for r in graded.results)
    assert "no calibration for mode reranked:llm:grader" in graded.warnings[-1]


def test_calibration_is_monotone_bounded_and_kept_in_a_file(tmp_path: Path) -> None:
    rankings = {"q1": [("a", 9.0), ("b", 5.0), ("c", 1.0)], "q2": [("d", 8.0), ("e", 4.0)], "q3": [("f", 7.0)]}
    judged = {"q1": {"a": 1}, "q2": {"e": 2}, "q3": {}}  # q3 has no judgment: not counted
    pairs = calibration_pairs(rankings, judged)
    assert sorted(pairs) == [(1.0, False), (4.0, True), (5.0, False), (8.0, False), (9.0, True)]
    fitted = fit_calibration({"bm25": pairs, "vector": [(0.5, False)]}, ["set"])
    assert set(fitted.modes) == {"bm25"}  # a mode without a relevant result cannot be fitted
    curve = [fitted.relevance("bm25", s) for s in (0.0, 1.0, 4.0, 6.0, 9.0, 100.0)]
    assert all(0.0 <= p <= 1.0 for p in curve) and curve == sorted(curve)  # never less likely for a higher score
    assert curve[-1] == 1.0 and curve[0] == 0.0
    path = tmp_path / "calibration.json"
    fitted.save(path)
    watched = CalibrationFile(path)
    assert watched.current() is not None and watched.current().relevance("bm25", 9.0) == 1.0  # type: ignore[union-attr]
    Calibration({"bm25": ModeCalibration((0.0, 10.0), (0.3, 0.3), 2, 1)}).save(path)  # the evaluation rewrote it
    assert watched.current().relevance("bm25", 9.0) == pytest.approx(0.3)  # type: ignore[union-attr]
    path.write_text("not json")
    assert watched.current() is None  # unreadable: nothing calibrated, never an error in a search
    path.write_text('{"modes": []}')
    assert watched.current() is None


def test_a_search_needs_a_principal(retriever: Retriever) -> None:
    with pytest.raises(ValueError, match="principal"):
        retriever.search("kernel", "hybrid", None)
    with pytest.raises(ValueError, match="unknown search mode"):
        retriever.search("kernel", "semantic", EVERYONE)  # type: ignore[arg-type]


ACL_POOL = st.fixed_dictionaries(
    {
        "public": st.booleans(),
        "users": st.lists(st.sampled_from(["U1", "U2", "U3"]), max_size=2, unique=True),
        "groups": st.lists(st.sampled_from(["g1", "g2", "g3"]), max_size=2, unique=True),
        # A restricted Jira comment's restriction (most documents have none).
        "restricted_to": st.lists(st.sampled_from(["g1", "g2", "g3"]), max_size=1, unique=True),
    }
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    acls=st.lists(ACL_POOL, min_size=4, max_size=4),
    user=st.sampled_from([None, "U1", "U2", "U9"]),
    groups=st.lists(st.sampled_from(["g1", "g2", "g3", "g9"]), max_size=3, unique=True),
)
def test_no_arm_ever_leaks_and_every_readable_match_is_found(acls, user, groups) -> None:
    principal = Principal(user_id=user, groups=tuple(groups))
    with tempfile.TemporaryDirectory() as folder, EdgeVectorStore(Path(folder)) as store:
        store.create_collections(4)
        write_documents(
            store, [document(d, [["kernel wifi printer"]], acl) for d, acl in zip(CORPUS, acls, strict=True)]
        )
        retriever = Retriever(store, BM25, dense=TopicEncoder(), reranker=MultiSignalReranker())
        readable = {d for d, acl in zip(CORPUS, acls, strict=True) if principal.admits(acl)}
        for mode in MODES:
            results = retriever.search("kernel wifi printer", mode, principal, top_k=10).results
            assert {r.document_id for r in results} == readable, (mode, principal)
            assert all(principal.admits(r.acl) for r in results)


class BrokenDenseStore:
    """Wraps a store whose dense index fails (e.g. a server missing the dense vector)."""

    def __init__(self, store) -> None:
        self._store = store

    def __getattr__(self, name):
        return getattr(self._store, name)

    def search_dense(self, *a, **k):
        raise ConnectionError("dense index unavailable")

    search_hybrid = search_dense


def test_dense_failures_degrade_to_bm25_with_a_warning(store, caplog) -> None:
    write_documents(store, [document(d, parents) for d, parents in CORPUS.items()])
    bm25 = Retriever(store, BM25).search("wifi driver", "bm25", EVERYONE).results

    def no_model():
        raise OSError("model folder missing")

    for retriever in (
        Retriever(store, BM25, dense=no_model),
        Retriever(BrokenDenseStore(store), BM25, dense=TopicEncoder()),
    ):
        for mode in ("vector", "hybrid", "reranked"):
            response = retriever.search("wifi driver", mode, EVERYONE)
            assert response.mode == "bm25" and response.requested_mode == mode
            assert response.warnings and "fell back to bm25" in response.warnings[0]
            assert [r.document_id for r in response.results] == [r.document_id for r in bm25]
    assert "fell back to bm25" in caplog.text


def test_query_cache_is_lru_with_ttl_and_persists(tmp_path: Path) -> None:
    now = [0.0]
    encoder = TopicEncoder()
    cache = QueryEmbeddingCache(encoder, maxsize=2, ttl_seconds=10, timer=lambda: now[0])
    cache.get("kernel")
    cache.get("kernel")
    assert encoder.calls == [["kernel"]] and cache.hits == 1
    cache.get("wifi")
    cache.get("kernel")  # kernel is now the most recently used
    cache.get("printer")  # evicts wifi, the least recently used
    encoder.calls.clear()
    cache.get("kernel")
    cache.get("wifi")
    assert encoder.calls == [["wifi"]]
    now[0] = 11.0  # everything expired
    cache.get("kernel")
    assert encoder.calls[-1] == ["kernel"]
    # second level: a new process re-reads vectors instead of re-encoding
    persistent = EmbeddingCache(tmp_path / "cache.sqlite")
    first = QueryEmbeddingCache(encoder, persistent=persistent)
    vectors = first.get_many(["kernel", "wifi"])
    fresh = TopicEncoder()
    second = QueryEmbeddingCache(fresh, persistent=EmbeddingCache(tmp_path / "cache.sqlite"))
    assert np.allclose(second.get_many(["kernel", "wifi"]), vectors) and fresh.calls == []


def _candidate(doc: str, score: float, title: str, text: str, **signals: float) -> SearchResult:
    return SearchResult(doc, score, "jira", "P", title, None, f"{doc}-c", text, f"{doc}-p", text, signals=dict(signals))


def test_rerank_reorders_and_keeps_scores_for_audit() -> None:
    class ByTitleLength:
        name = "by-title-length"

        def score(self, query, candidates):
            return [float(len(c.title)) for c in candidates]

    out = rerank(ByTitleLength(), "q", [_candidate("a", 0.9, "x", "t"), _candidate("b", 0.1, "xxx", "t")])
    assert [r.document_id for r in out] == ["b", "a"] and out[0].signals["before_rerank"] == 0.1


def _synthetic_examples(n: int, seed: int = 0) -> list[RerankExample]:
    """Queries whose relevant candidate is the one whose title covers the query, not the top fused one."""
    rng = np.random.default_rng(seed)
    words = ["crash", "android", "build", "window", "label", "camera", "sdk", "module", "alloy", "studio"]
    examples = []
    for i in range(n):
        q = list(rng.choice(words, 2, replace=False))
        candidates = []
        relevant = int(rng.integers(0, 8))
        for j in range(8):
            title = " ".join(q) if j == relevant else " ".join(rng.choice(words, 2))
            while j != relevant and set(title.split()) == set(q):
                title = " ".join(rng.choice(words, 2))
            candidates.append(
                _candidate(f"q{i}d{j}", 1 / (60 + j), title, "body text", hybrid_score=1 / (60 + j), hybrid_rank=j)
            )
        examples.append(RerankExample(f"q{i}", " ".join(q), candidates, [int(j == relevant) for j in range(8)]))
    return examples


def test_learned_reranker_learns_a_signal_and_cross_fitting_never_sees_the_query(tmp_path: Path) -> None:
    examples = _synthetic_examples(60)
    model = train_reranker(examples[:40], params={"n_estimators": 50, "min_child_samples": 2})
    assert len(model.boosters) == BAG and model.version.startswith("lambdarank-")
    hits = 0
    for example in examples[40:]:
        scores = model.score(example.query, example.candidates)
        hits += int(np.argmax(scores) == example.labels.index(1))
    assert hits >= 18  # of 20; plain fusion order would find the relevant one ~1/8 of the time
    fixed = MultiSignalReranker()
    assert fixed.name == "multi-signal(fixed-weights)" and len(fixed.score("q", examples[0].candidates)) == 8
    # persisted and reloaded: same scores
    model.save(tmp_path / "reranker" / model.version)
    (tmp_path / "reranker" / "CURRENT").write_text(model.version)
    loaded = load_current_reranker(tmp_path / "reranker")
    assert np.allclose(
        loaded.score(examples[41].query, examples[41].candidates),
        model.score(examples[41].query, examples[41].candidates),
    )
    assert load_current_reranker(tmp_path / "none").boosters == []
    fitted = cross_fit(examples, folds=5, params={"n_estimators": 20, "min_child_samples": 2})
    assert len(fitted.models) == 5
    ids_by_text: dict[str, set[str]] = {}
    for e in examples:
        ids_by_text.setdefault(query_key(e.query), set()).add(e.query_id)
    assert any(len(ids) > 1 for ids in ids_by_text.values())  # repeated texts: the case that matters
    for e in examples:
        trained_on = set(fitted.for_query(e.query).metadata["training_query_ids"])
        # no example with the same text (whatever its id) trained the model that scores it
        assert not trained_on & ids_by_text[query_key(e.query)]
    sizes = sorted(len(m.metadata["training_query_ids"]) for m in fitted.models.values())
    assert 40 <= sizes[0] <= sizes[-1] <= 56  # each fold trains on about 4/5 of the queries


def test_features_have_the_declared_shape_and_title_coverage() -> None:
    c = [_candidate("a", 0.5, "camera crash on android", "x"), _candidate("b", 0.4, "studio build", "x")]
    f = candidate_features("android camera crash", c, BM25)
    assert f.shape == (2, len(FEATURE_NAMES))
    coverage = FEATURE_NAMES.index("title_coverage")
    assert f[0, coverage] == 1.0 and f[1, coverage] == 0.0


def test_term_features_count_the_index_tokenizers_terms_and_a_model_keeps_the_tokenizer_it_learned(
    tmp_path: Path,
) -> None:
    # Japanese has no spaces: the word tokenizer makes a whole clause one term, so a title that contains the
    # query's clause shares no term with it; the index's cjk-bigram terms see the overlap.
    c = [_candidate("a", 0.5, "カメラが起動しない問題", "x"), _candidate("b", 0.4, "ビルドの設定", "x")]
    coverage = FEATURE_NAMES.index("title_coverage")
    word = candidate_features("カメラが起動しない", c, term_encoder("word"))
    bigram = candidate_features("カメラが起動しない", c, term_encoder("cjk-bigram"))
    assert word[0, coverage] == 0.0
    assert bigram[0, coverage] == 1.0 and bigram[1, coverage] == 0.0

    params = {"n_estimators": 20, "min_child_samples": 2}
    examples = _synthetic_examples(30)
    model = train_reranker(examples, params=params, bag=1, encoder=term_encoder("cjk-bigram"))
    assert model.metadata["bm25_terms"] == "cjk-bigram/english" and model.encoder.params.tokenizer == "cjk-bigram"
    # features counted with bigrams are recounted, never reused, when word terms are asked for
    japanese = RerankExample("j", "カメラが起動しない", c, [1, 0])
    featurize([japanese], term_encoder("cjk-bigram"))
    assert japanese.features is not None and japanese.features[0, coverage] == 1.0
    featurize([japanese], term_encoder("word"))
    assert japanese.features_terms == "word/english" and japanese.features[0, coverage] == 0.0
    word_model = train_reranker(_synthetic_examples(30), params=params, bag=1)
    assert word_model.metadata["bm25_tokenizer"] == "word"
    assert word_model.version != model.version  # other features, another model
    model.save(tmp_path / "reranker" / model.version)
    (tmp_path / "reranker" / "CURRENT").write_text(model.version)
    # serving counts terms as the model was trained to, whatever the caller's default
    assert load_current_reranker(tmp_path / "reranker").encoder.params.tokenizer == "cjk-bigram"
    assert load_current_reranker(tmp_path / "none", "cjk-bigram").encoder.params.tokenizer == "cjk-bigram"
    fitted = cross_fit(_synthetic_examples(30), folds=3, params=params, encoder=term_encoder("cjk-bigram"))
    assert {m.metadata["bm25_tokenizer"] for m in fitted.models.values()} == {"cjk-bigram"}
    # a model saved before the terms were recorded counted word terms, and still does
    saved = tmp_path / "reranker" / model.version / "reranker.json"
    saved.write_text(saved.read_text().replace('"bm25_terms"', '"unrecorded"'))
    assert load_current_reranker(tmp_path / "reranker", "cjk-bigram").encoder.terms_id == "word/english"
    # terms this code cannot make: refused, naming the model's folder
    saved.write_text(saved.read_text().replace('"unrecorded": "cjk-bigram/english"', '"bm25_terms": "bogus/english"'))
    with pytest.raises(ValueError, match=f"reranker at .*{model.version}.*'bogus/english'"):
        load_current_reranker(tmp_path / "reranker")


def test_equal_scores_are_ordered_the_same_whatever_order_the_engine_returns() -> None:
    from rag_pipeline.index.store import Hit
    from rag_pipeline.retrieval.grouping import documents_from_hits

    hits = [
        Hit(f"c{i}", 1 / 61 if i < 4 else 1 / 62, {"document_id": f"d{i}", "parent_id": f"p{i}", "text": ""})
        for i in range(6)
    ]
    orders = {
        tuple(r.document_id for r in documents_from_hits(shuffled))
        for shuffled in (hits, hits[::-1], hits[2:] + hits[:2])
    }
    assert orders == {("d0", "d1", "d2", "d3", "d4", "d5")}


def test_all_documents_cannot_come_from_data() -> None:
    with pytest.raises(ValueError, match="all_documents cannot be set from data"):
        Principal.model_validate_json('{"user_id": "U1", "all_documents": true}')
    assert Principal.all_documents_for_evaluation().acl_condition() is None
    assert Principal(user_id="U1").acl_condition() is not None


def test_depth_grows_until_enough_documents(store) -> None:
    from rag_pipeline.retrieval.retriever import RetrieverConfig

    chatty = document("d1", [[f"kernel message {i}" for i in range(30)]])
    write_documents(store, [chatty, document("d2", [["kernel once"]]), document("d3", [["kernel twice kernel"]])])
    config = RetrieverConfig(child_depth=1, children_per_result=2)
    for mode in ("bm25", "vector", "hybrid"):
        results = Retriever(store, BM25, dense=TopicEncoder(), config=config).search("kernel", mode, EVERYONE, top_k=3)
        assert {r.document_id for r in results.results} == {"d1", "d2", "d3"}, mode


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (None, None),
        ("Unresolved", "unresolved"),
        ("Duplicate", "duplicate"),
        (" duplicate ", "duplicate"),
        ("Fixed", "fixed"),
        ("Done", "fixed"),
        ("Won't Fix", "other"),
        ("Cannot Reproduce", "other"),
        ("Shipped in 7.2", "other"),  # a site's own name: no guess
    ],
)
def test_resolution_names_fold_into_classes(name: str | None, expected: str | None) -> None:
    assert resolution_class(name) == expected


def test_the_resolution_travels_from_payload_to_features() -> None:
    def hit(doc: str, resolution: str | None) -> Hit:
        payload = {"document_id": doc, "source": "jira", "parent_id": f"{doc}-p", "text": "checkout timeout"}
        if resolution is not None:
            payload["resolution"] = resolution
        return Hit(f"{doc}-c", 1.0, payload)

    results = documents_from_hits(
        [hit("dup", "Duplicate"), hit("fix", "Fixed"), hit("open", "Unresolved"), hit("s", None)]
    )
    by_id = {r.document_id: r for r in results}
    assert by_id["dup"].resolution == "Duplicate" and by_id["s"].resolution is None
    features = candidate_features("checkout timeout", [by_id[d] for d in ("dup", "fix", "open", "s")], BM25)
    columns = [FEATURE_NAMES.index(n) for n in ("is_resolved_duplicate", "is_resolved_fixed", "is_unresolved")]
    assert features[:, columns].tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 0]]


def test_the_learned_reranker_learns_that_a_closed_duplicate_is_rarely_the_answer() -> None:
    """Two equally matching issues, one closed as a duplicate of the other: the labels always pick the
    canonical one, and a model trained on that ranks it first on queries it never saw, whatever the fused order."""
    rng = np.random.default_rng(1)
    examples = []
    for i in range(60):
        first_is_duplicate = bool(rng.integers(0, 2))
        candidates = []
        for j in range(6):
            c = _candidate(f"q{i}d{j}", 1 / (60 + j), "checkout timeout", "checkout timeout", hybrid_score=1 / (60 + j))
            c.signals["hybrid_rank"] = float(j)
            c.resolution = ("Duplicate" if first_is_duplicate else "Fixed") if j == 0 else "Won't Fix"
            if j == 1:
                c.resolution = "Fixed" if first_is_duplicate else "Duplicate"
            candidates.append(c)
        labels = [int(c.resolution == "Fixed") for c in candidates]
        examples.append(RerankExample(f"q{i}", f"checkout timeout {i}", candidates, labels))
    model = train_reranker(examples[:40], params={"n_estimators": 50, "min_child_samples": 2})
    for example in examples[40:]:
        order = np.argsort(-np.asarray(model.score(example.query, example.candidates)))
        assert example.candidates[order[0]].resolution == "Fixed"


def test_l2_is_fixed_or_chosen_by_inner_cross_validation_and_the_bag_is_reproducible(tmp_path: Path) -> None:
    examples = _synthetic_examples(60, seed=3)
    params = {"n_estimators": 30, "min_child_samples": 2}
    # By default L2 is the value bench.reranker_tuning chose (issue 48): no inner search, only the bag's fits.
    fixed = train_reranker(examples, params=params, bag=1)
    assert fixed.metadata["params"]["reg_lambda"] == REG_LAMBDA and fixed.metadata["reg_lambda_inner_ndcg10"] == {}
    model = train_reranker(examples, params=params, bag=3, tune_reg_lambda=True)
    scores = model.metadata["reg_lambda_inner_ndcg10"]
    assert set(scores) == {str(v) for v in REG_LAMBDA_GRID} and all(0.0 < v <= 1.0 for v in scores.values())
    chosen = model.metadata["params"]["reg_lambda"]
    assert scores[str(chosen)] == max(scores.values())
    assert len(model.boosters) == 3 and model.metadata["bag"] == 3
    # Seeds differ, so the boosters do; their mean is the score, and a retrain gives the same model.
    features = candidate_features(examples[0].query, examples[0].candidates, BM25)
    each = [b.predict(features) for b in model.boosters]
    assert not np.allclose(each[0], each[1])
    assert np.allclose(model.score_features(features), np.mean(each, axis=0))
    again = train_reranker(examples, params=params, bag=3, tune_reg_lambda=True)
    assert again.version == model.version and np.allclose(
        again.score_features(features), model.score_features(features)
    )
    model.save(tmp_path / "m")
    assert np.allclose(
        MultiSignalReranker.load(tmp_path / "m").score_features(features), model.score_features(features)
    )
    # A value given, or too few queries to tell values apart: no inner search.
    given = train_reranker(examples, params={**params, "reg_lambda": 5.0}, bag=1, tune_reg_lambda=True)
    assert given.metadata["reg_lambda_inner_ndcg10"] == {} and given.metadata["params"]["reg_lambda"] == 5.0
    few = train_reranker(examples[: MIN_TUNING_QUERIES - 1], params=params, bag=1, tune_reg_lambda=True)
    assert few.metadata["reg_lambda_inner_ndcg10"] == {} and few.metadata["params"]["reg_lambda"] == REG_LAMBDA


def test_the_reranker_scores_the_candidates_it_was_trained_on_whatever_top_k(store) -> None:
    """A deep evaluation search (top 100) fuses longer prefetch lists than a top-10 search, so its first
    ``rerank_depth`` documents and their hybrid signals differ; the reranked head must be the training one."""
    words = ["kernel", "wifi", "printer", "boot", "driver", "cups", "panic", "upgrade", "lunch", "minute"]
    rng = np.random.default_rng(7)
    corpus = {f"doc{i:02d}": [[" ".join(rng.choice(words, 4))]] for i in range(40)}
    write_documents(store, [document(d, parents) for d, parents in corpus.items()])
    config = RetrieverConfig(child_depth=1, children_per_result=1, prefetch_limit=1, rerank_depth=4)
    retriever = Retriever(store, BM25, dense=TopicEncoder(), config=config)

    class Spy:
        name = "spy"

        def __init__(self) -> None:
            self.seen: list[tuple[str, float, float]] = []

        def score(self, query, candidates):
            self.seen = [(c.document_id, c.signals["hybrid_rank"], c.signals["hybrid_score"]) for c in candidates]
            return [0.0] * len(candidates)

    query = "kernel panic after wifi driver upgrade"
    trained = retriever.rerank_candidates(query, EVERYONE)
    expected = [(c.document_id, c.signals["hybrid_rank"], c.signals["hybrid_score"]) for c in trained]
    for top_k in (2, 4, 30):
        spy = Spy()
        response = retriever.search(query, "reranked", EVERYONE, top_k=top_k, reranker=spy)
        assert response.mode == "reranked" and spy.seen == expected, top_k
        ids = [r.document_id for r in response.results]
        assert len(ids) == min(top_k, 40) and len(set(ids)) == len(ids)


def test_fits_run_side_by_side_with_one_thread_each_and_give_the_same_models(monkeypatch) -> None:
    """The inner cross-validation and the bag fit several models at a time (one LightGBM thread each) where there
    are cores: the chosen L2, its scores and every booster are what one fit after another gives."""
    import rag_pipeline.retrieval.rerank.learned as learned

    examples = _synthetic_examples(80, seed=5)
    params = {"n_estimators": 40, "min_child_samples": 2, "num_threads": 2}
    threads_seen: list[int] = []
    real_run_fits = learned.run_fits

    def recording(fits, params):
        threads_seen.append(learned.fit_workers())
        return real_run_fits(fits, params)

    monkeypatch.setattr(learned, "run_fits", recording)
    monkeypatch.setattr(learned, "fit_workers", lambda: 1)
    one_by_one = train_reranker(examples, params=params, bag=3, tune_reg_lambda=True)
    monkeypatch.setattr(learned, "fit_workers", lambda: 2)
    side_by_side = train_reranker(examples, params=params, bag=3, tune_reg_lambda=True)
    assert threads_seen == [1, 1, 2, 2]  # the inner search and the bag, each way
    assert side_by_side.metadata["reg_lambda_inner_ndcg10"] == one_by_one.metadata["reg_lambda_inner_ndcg10"]
    assert side_by_side.version == one_by_one.version
    features = np.vstack([candidate_features(e.query, e.candidates, BM25) for e in examples[:10]])
    for mine, theirs in zip(side_by_side.boosters, one_by_one.boosters, strict=True):
        assert np.array_equal(mine.predict(features), theirs.predict(features))
        # The trees themselves, not only their predictions here (the parameters section names the threads).
        assert mine.model_to_string().split("parameters:")[0] == theirs.model_to_string().split("parameters:")[0]
        # ...and the fits really ran with one thread each side by side, two one after another.
        assert "[num_threads: 1]" in mine.model_to_string() and "[num_threads: 2]" in theirs.model_to_string()


def test_cross_fitting_fits_every_folds_bag_in_one_pool_with_the_models_of_fold_by_fold_training(monkeypatch) -> None:
    """Issue 48: a bag of 3 per fold on 2 cores left a core idle one fit in two; every fold's boosters now share one
    pool, and each fold's model is the one training that fold alone gives."""
    import rag_pipeline.retrieval.rerank.learned as learned

    examples = _synthetic_examples(60, seed=2)
    params = {"n_estimators": 20, "min_child_samples": 2}
    pools: list[int] = []
    real_run_fits = learned.run_fits
    monkeypatch.setattr(
        learned, "run_fits", lambda fits, params: pools.append(len(fits)) or real_run_fits(fits, params)
    )
    fitted = cross_fit(examples, folds=3, params=params)
    assert pools == [3 * learned.BAG]
    for fold, model in fitted.models.items():
        train = [e for e in examples if fitted.fold_of_text[learned.query_key(e.query)] != fold]
        alone = train_reranker(train, params=params, trained_on=f"cross-fit fold {fold + 1}/3")
        assert model.version == alone.version
        for mine, theirs in zip(model.boosters, alone.boosters, strict=True):
            assert mine.model_to_string().split("parameters:")[0] == theirs.model_to_string().split("parameters:")[0]


def test_cross_fitted_models_are_cached_by_their_training_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 48: an unchanged index re-evaluates without a fit; the cached models score exactly as the trained
    ones; other training data (one label changed) trains again."""
    from rag_pipeline.retrieval.rerank import learned

    params = {"n_estimators": 20, "min_child_samples": 2}
    examples = _synthetic_examples(90)  # 60 per training fold: L2 is chosen by an inner cross-validation too
    assert learned.MIN_TUNING_QUERIES <= 60
    cache = tmp_path / "fits"
    first = cross_fit(examples, folds=3, params=params, cache_dir=cache)
    assert len([p for p in cache.iterdir() if p.is_dir()]) == 3

    def no_fit(*_args: object, **_kwargs: object) -> object:
        raise AssertionError("a cached fit was trained again")

    with monkeypatch.context() as patched:
        patched.setattr(learned, "run_fits", no_fit)
        again = cross_fit(_synthetic_examples(90), folds=3, params=params, cache_dir=cache)
    features = np.random.default_rng(3).random((8, len(learned.FEATURE_NAMES)))
    for fold, model in first.models.items():
        np.testing.assert_array_equal(model.score_features(features), again.models[fold].score_features(features))
        assert model.version == again.models[fold].version
    changed = _synthetic_examples(90)
    changed[0] = RerankExample(changed[0].query_id, changed[0].query, changed[0].candidates,
                               [1 - label for label in changed[0].labels])  # fmt: skip
    cross_fit(changed, folds=3, params=params, cache_dir=cache)
    assert len([p for p in cache.iterdir() if p.is_dir()]) > 3  # the folds that trained on the changed query


class CountingStore:
    """The store, counting the searches the arms make (``calls``) and their reads of payloads by id (``reads``)."""

    def __init__(self, store) -> None:
        self._store = store
        self.calls = 0
        self.reads = 0

    def __getattr__(self, name):
        found = getattr(self._store, name)
        if name.startswith("search_") or name == "retrieve":

            def counted(*args, **kwargs):
                if name == "retrieve":
                    self.reads += 1
                else:
                    self.calls += 1
                return found(*args, **kwargs)

            return counted
        return found


def test_an_eval_sets_arms_share_their_searches_with_identical_results(store) -> None:
    """Issue 48: inside ``shared_work`` the reranked arm reuses its training candidates (and their signals and
    parent texts) and the hybrid arm's deeper list; every arm's ranking and score is what it is without sharing,
    in fewer engine calls."""
    import contextlib

    from rag_pipeline.evaluation.eval_set import EvalQuery
    from rag_pipeline.evaluation.evaluate import run_arms

    corpus = {f"n{i}": [[f"kernel wifi printer note {i} " + " ".join(["kernel"] * (i % 4))]] for i in range(24)}
    write_documents(store, [document(d, parents) for d, parents in {**CORPUS, **corpus}.items()])
    queries = [
        EvalQuery(id=f"q{i}", query=q, relevant={d: 1})
        for i, (q, d) in enumerate(
            [("kernel panic", "d1"), ("wifi drops", "d2"), ("printer offline", "d3"), ("kernel wifi", "d4")] * 3
        )
    ]
    queries = [q.model_copy(update={"query": f"{q.query} {i}"}) for i, q in enumerate(queries)]

    def run(shared: bool):
        counting = CountingStore(store)
        retriever = Retriever(counting, BM25, dense=TopicEncoder())
        if not shared:
            retriever.shared_work = lambda **_: contextlib.nullcontext()  # type: ignore[method-assign]  # sharing off
        outcomes = run_arms(retriever, queries, folds=3, depth=20)
        return {arm: o.run.rankings for arm, o in outcomes.items()}, counting.calls

    shared, shared_calls = run(True)
    alone, alone_calls = run(False)
    assert shared == alone
    assert shared_calls < alone_calls * 0.8, (shared_calls, alone_calls)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", "d"]), st.sampled_from(["p1", "p2", "p3"]), st.sampled_from([0.1, 0.5, 0.9])
        ),
        max_size=20,
    )
)
def test_document_scores_from_ids_alone_rank_as_documents_from_whole_payloads(rows) -> None:
    """The rerank signals read only ``document_id`` (issue 48): their ranks and scores are those the whole payloads
    gave through ``documents_from_hits``."""
    from rag_pipeline.retrieval.grouping import document_scores

    hits = [
        Hit(f"h{i}", score, {"document_id": doc, "parent_id": f"{doc}-{parent}"})
        for i, (doc, parent, score) in enumerate(rows)
    ]
    whole = [(r.document_id, r.score) for r in documents_from_hits(hits)]
    ids_only = document_scores([Hit(h.id, h.score, {"document_id": h.payload["document_id"]}) for h in hits])
    assert ids_only == whole


@pytest.mark.parametrize("remember", [(), (ALL_PAYLOAD,)], ids=["grouping-fields", "whole-payloads"])
def test_searches_reading_remembered_fields_match_payload_reads_and_see_later_writes(store, remember) -> None:
    """Issue 48: within an evaluation the embedded engine answers grouping-only searches from fields it keeps in
    memory (or, as the evaluation keeps them, whole payloads); every arm's results (ids, scores, payload fields,
    ACLs) are those of reading payloads in the engine, and a document written after the memory was built is found
    with its fields."""
    write_documents(store, [document(d, parents) for d, parents in CORPUS.items()])
    reader = Principal(user_id="U1", groups=("team",))

    def every_arm(retriever: Retriever) -> dict:
        return {
            (mode, who.user_id): [r.to_dict() | {"acl": r.acl} for r in retriever.search(
                "kernel wifi", mode, who, top_k=10, exclude=("d3",)).results]
            for mode in MODES if mode != "reranked" for who in (EVERYONE, reader)
        }  # fmt: skip

    plain = every_arm(Retriever(store, BM25, dense=TopicEncoder()))
    remembering = Retriever(store, BM25, dense=TopicEncoder())
    with remembering.shared_work(remember=remember):
        assert every_arm(remembering) == plain
        assert all(r["child_text"] and r["title"] for rows in plain.values() for r in rows)
        write_documents(store, [document("d9", [["kernel wifi printer all at once"]])])
        found = remembering.search("kernel wifi printer", "bm25", EVERYONE, top_k=10).results
    assert "d9" in {r.document_id for r in found}
    assert next(r for r in found if r.document_id == "d9").child_text == "kernel wifi printer all at once"


def test_an_edge_store_serves_remembered_fields_without_reading_payloads(tmp_path: Path) -> None:
    """The hits of a search asking only for remembered fields carry those fields as the engine reads them (and at
    most the other remembered ones); by id too; asking for more reads the engine."""
    store = EdgeVectorStore(tmp_path / "qdrant")
    store.create_collections(4)
    write_documents(store, [document(d, parents) for d, parents in CORPUS.items()])
    vector = BM25.encode_query("kernel wifi")
    read = store.search_sparse(vector, 10, fields=("document_id", "parent_id"))
    store.remember_fields(("document_id", "parent_id", "source"))
    kept = store.search_sparse(vector, 10, fields=("document_id", "parent_id"))
    whole = store.search_sparse(vector, 10)  # more than memory holds: read from the engine
    by_id = store.retrieve(store.names.children, [h.id for h in whole], fields=("document_id",))
    store.close()
    asked = ("document_id", "parent_id")
    assert [(h.id, h.score, {f: h.payload[f] for f in asked}) for h in kept] == [
        (h.id, h.score, h.payload) for h in read
    ]
    assert all(set(h.payload) <= {"document_id", "parent_id", "source"} for h in kept)
    assert all("text" in h.payload for h in whole)
    ids = [h.id for h in whole]
    assert [h.payload["document_id"] for h in by_id] == [h.payload["document_id"] for h in whole]
    assert {h.id for h in by_id} == set(ids)


class CountingShard:
    """An engine shard that counts the searches and reads by id made through it."""

    def __init__(self, shard) -> None:
        self.shard, self.queries, self.retrieves = shard, 0, 0

    def query(self, request):
        self.queries += 1
        return self.shard.query(request)

    def retrieve(self, *args):
        self.retrieves += 1
        return self.shard.retrieve(*args)

    def __getattr__(self, name):
        return getattr(self.shard, name)


def test_an_edge_store_keeping_whole_payloads_reads_none_from_the_engine_after_one_scroll(tmp_path: Path) -> None:
    """Issue 48: an evaluation keeps every child's whole payload; searches and reads by id (whole or some fields)
    then give exactly the engine's payloads without reading one from it, and a write drops the memory."""
    store = EdgeVectorStore(tmp_path / "qdrant")
    store.create_collections(4)
    write_documents(store, [document(d, parents) for d, parents in CORPUS.items()])
    vector = BM25.encode_query("kernel wifi")
    engine = store.search_sparse(vector, 10)
    by_id = store.retrieve(store.names.children, [h.id for h in engine])
    counting = CountingShard(store._shards[store.names.children])
    store._shards[store.names.children] = counting
    store.remember_fields((ALL_PAYLOAD,))
    kept = store.search_sparse(vector, 10)
    kept_by_id = store.retrieve(store.names.children, [h.id for h in engine])
    some = store.retrieve(store.names.children, [h.id for h in engine], fields=("acl",))
    assert counting.retrieves == 0 and counting.queries == 1
    assert [(h.id, h.score, h.payload) for h in kept] == [(h.id, h.score, h.payload) for h in engine]
    assert [(h.id, h.payload) for h in kept_by_id] == [(h.id, h.payload) for h in by_id]
    assert all(h.payload["acl"] == e.payload["acl"] for h, e in zip(some, by_id, strict=True))
    assert all("text" in h.payload for h in kept)
    write_documents(store, [document("d9", [["kernel wifi printer all at once"]])])
    assert "d9" in {h.payload["document_id"] for h in store.search_sparse(vector, 20)}
    store.close()


def _documents_by_parent_first(hits, exclude=()):
    """The grouping before issue 48's single pass: each parent's best child (ties: smaller child id), parents best
    first, each document from its first parent, documents best first (ties: smaller document id)."""
    best = {}
    for hit in hits:
        parent = hit.payload.get("parent_id", hit.id)
        current = best.get(parent)
        if current is None or (hit.score, current.id) > (current.score, hit.id):
            best[parent] = hit
    results = {}
    for hit in sorted(best.values(), key=lambda h: (-h.score, h.id)):
        doc_id = hit.payload["document_id"]
        if doc_id not in results and doc_id not in exclude:
            results[doc_id] = (doc_id, hit.score, hit.id, hit.payload["parent_id"])
    counts = {}
    for hit in hits:
        counts[hit.payload["document_id"]] = counts.get(hit.payload["document_id"], 0) + 1
    return sorted(((*r, counts[r[0]]) for r in results.values()), key=lambda r: (-r[1], r[0]))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from([0.1, 0.5, 0.5, 0.9]), max_size=30), st.integers(1, 32), st.randoms())
def test_a_cut_keeps_the_best_hits_with_boundary_ties_to_the_smaller_id(scores, limit, rng) -> None:
    """Issue 48: cutting a deep list to its depth sorts only the ties at the boundary; the hits kept are those a
    full sort by (score, id) keeps, whatever order the engine returned them in."""
    from rag_pipeline.retrieval.retriever import _cut

    hits = [Hit(f"h{rng.randint(0, 99):02d}-{i}", score, {}) for i, score in enumerate(scores)]
    rng.shuffle(hits)
    expected = sorted(hits, key=lambda h: (-h.score, h.id))[:limit]
    assert sorted(_cut(hits, limit), key=lambda h: (-h.score, h.id)) == expected


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", "d"]), st.sampled_from(["p1", "p2", "p3"]), st.sampled_from([0.1, 0.5, 0.9])
        ),
        max_size=24,
    ),
    st.randoms(use_true_random=False),
)
def test_grouping_in_one_pass_gives_the_parent_first_results_in_any_hit_order(rows, rng) -> None:
    """Issue 48: documents are grouped in one pass over the hits; every document, score, representing child,
    parent and matching-children count is what grouping by parent first gave, whatever order the hits come in
    (equal scores go to the smaller child id, equal documents to the smaller document id)."""
    hits = [
        Hit(f"h{rng.randint(0, 9)}{i}", score, {"document_id": doc, "parent_id": f"{doc}-{parent}"})
        for i, (doc, parent, score) in enumerate(rows)
    ]
    expected = _documents_by_parent_first(hits, exclude=("d",))
    rng.shuffle(hits)
    got = documents_from_hits(hits, exclude=("d",), complete=False)
    assert [(r.document_id, r.score, r.child_id, r.parent_id, r.matching_children) for r in got] == expected


def test_features_kept_computes_a_candidate_lists_features_once_and_never_for_changed_candidates(monkeypatch) -> None:
    """Issue 48: an evaluation featurizes the reranked arm's training candidates and then scores the same candidates;
    inside ``features_kept`` the second time reuses the matrix, and any changed input (a signal, a text) recomputes."""
    from rag_pipeline.retrieval.rerank import features

    candidates = [
        SearchResult(f"d{i}", 1.0 / (i + 1), "slack", "C1", f"title {i}", None, f"c{i}", f"kernel wifi {i}", f"p{i}",
                     parent_text=f"kernel panic wifi {i}", signals={"bm25_score": float(i)})
        for i in range(4)
    ]  # fmt: skip
    computed = []
    original = features._features
    monkeypatch.setattr(features, "_features", lambda *a: computed.append(a[0]) or original(*a))
    plain = candidate_features("kernel wifi", candidates, BM25)
    with features.features_kept():
        first = candidate_features("kernel wifi", candidates, BM25)
        again = candidate_features("kernel wifi", list(candidates), BM25)
        first[0, 0] = -1.0  # a caller's changes never reach the kept matrix
        changed = [*candidates[:3], dataclasses.replace(candidates[3], signals={"bm25_score": 9.0})]
        differs = candidate_features("kernel wifi", changed, BM25)
        other_text = [*candidates[:3], dataclasses.replace(candidates[3], parent_text="printer offline")]
        candidate_features("kernel wifi", other_text, BM25)
    assert np.array_equal(again, plain) and len(computed) == 1 + 1 + 2
    assert not np.array_equal(differs, plain)


def test_features_kept_counts_each_texts_terms_once_with_the_same_features(monkeypatch) -> None:
    """Issue 48: an eval set's candidate lists share titles and parent texts; inside ``features_kept`` each text
    is tokenized once, and the features are those computed without it."""
    from rag_pipeline.retrieval.rerank import features

    lists = [
        [
            SearchResult(f"d{i}", 1.0 / (i + 1), "slack", "C1", f"title {i % 3}", None, f"c{i}", f"kernel wifi {i % 2}",
                         f"p{i}", parent_text=f"kernel panic wifi {i % 3}", signals={"bm25_score": float(q + i)})
            for i in range(6)
        ]
        for q in range(3)
    ]  # fmt: skip
    plain = [candidate_features("kernel wifi", c, BM25) for c in lists]
    counted: list[str] = []
    original = features._count_terms
    monkeypatch.setattr(features, "_count_terms", lambda encoder, text: counted.append(text) or original(encoder, text))
    with features.features_kept():
        kept = [candidate_features("kernel wifi", c, BM25) for c in lists]
    assert all(np.array_equal(a, b) for a, b in zip(kept, plain, strict=True))
    assert sorted(counted) == sorted(set(counted))  # no text twice
    assert len(counted) == len(
        {"kernel wifi", "", *(t for c in lists[0] for t in (c.title, c.parent_text, c.child_text))}
    )


def test_a_search_reusing_shared_work_counts_what_that_work_first_cost(retriever: Retriever) -> None:
    """Issue 48: inside ``shared_work`` the reranked arm reuses the hybrid arm's list, so its measured latency would
    leave the search out; the reuse ledger gives back the seconds the reused list took when it was searched."""
    from rag_pipeline.retrieval.reuse_ledger import counting_reused, note_reused

    note_reused(5.0)  # outside a ledger: nobody counts
    with retriever.shared_work():
        with counting_reused() as first:
            retriever.search("kernel wifi", "hybrid", EVERYONE, top_k=10)
        assert first() == 0.0  # computed, not reused
        [(_kept, seconds)] = retriever._shared.documents.values()  # type: ignore[union-attr]
        assert seconds > 0.0
        with counting_reused() as again:
            retriever.search("kernel wifi", "hybrid", EVERYONE, top_k=10)
            with counting_reused() as inner:  # a block inside counts on its own
                note_reused(0.25)
        assert again() == seconds and inner() == 0.25


def test_a_large_index_fetches_fewer_candidates_per_hybrid_list_unless_told(store, monkeypatch) -> None:
    """Above ``large_index_children`` child chunks each hybrid list fetches LARGE_INDEX_PREFETCH candidates
    (docs/notes/search_at_scale.md); a configured limit is kept whatever the size."""
    from rag_pipeline.retrieval.retriever import DEFAULT_PREFETCH, LARGE_INDEX_PREFETCH

    write_documents(store, [document(d, parents) for d, parents in CORPUS.items()])
    children = store.count(store.names.children)
    asked: list[int] = []
    search_hybrid = store.search_hybrid

    def spy(*args, **kwargs):
        asked.append(args[3] if len(args) > 3 else kwargs["prefetch_limit"])  # (vector, sparse, limit, prefetch, ...)
        return search_hybrid(*args, **kwargs)

    monkeypatch.setattr(store, "search_hybrid", spy)
    count = store.count
    counted: list[str] = []

    def counting(collection, *args, **kwargs):
        counted.append(collection)
        return count(collection, *args, **kwargs)

    monkeypatch.setattr(store, "count", counting)

    def prefetch(**config) -> int:
        asked.clear()
        shallow = RetrieverConfig(child_depth=1, children_per_result=1, **config)  # lists not deepened by top_k
        response = Retriever(store, BM25, dense=TopicEncoder(), config=shallow).search(
            "kernel wifi", "hybrid", EVERYONE, top_k=2
        )
        assert response.mode == "hybrid" and response.results
        return asked[-1]

    assert prefetch() == DEFAULT_PREFETCH  # a small index: the evaluated default
    assert prefetch(large_index_children=children - 1) == LARGE_INDEX_PREFETCH
    assert prefetch(large_index_children=children) == DEFAULT_PREFETCH  # "more than"
    assert prefetch(large_index_children=children - 1, prefetch_limit=100) == 100
    counted.clear()
    assert prefetch(prefetch_limit=7) == 7
    assert counted == []  # a configured limit needs no count of the index
    retriever = Retriever(store, BM25, dense=TopicEncoder())
    for _ in range(3):
        retriever.search("kernel wifi", "hybrid", EVERYONE, top_k=2)
    assert counted == [store.names.children]  # once per retriever, not per search
