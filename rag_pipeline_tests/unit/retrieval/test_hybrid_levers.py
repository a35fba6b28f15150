"""Hybrid-quality levers: query splitting and cleaning, weighted BM25 queries, fusion learned out of fold."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rag_pipeline.evaluation.fusion_tuning import (
    FusionSetting,
    QueryCandidates,
    cross_validate,
    fuse,
    grid,
    setting_scores,
    text_folds,
)
from rag_pipeline.index.store import TITLE_VECTOR, DensePrefetch, Fusion, Hit, SearchFilter, describe_fusion
from rag_pipeline.index.writer import write_documents
from rag_pipeline.retrieval.fusion import SourceFusion
from rag_pipeline.retrieval.grouping import documents_from_hits
from rag_pipeline.retrieval.query_text import prose, split_query
from rag_pipeline.retrieval.retriever import Retriever, RetrieverConfig
from rag_pipeline.retrieval.sparse_query import SparseQueryConfig, sparse_query
from rag_pipeline.vectors.sparse import Bm25Encoder
from rag_pipeline_tests.kit.paths import EVAL_SETS_DIR
from rag_pipeline_tests.unit.retrieval.test_retrieval import CORPUS, EVERYONE, TopicEncoder, document

BM25 = Bm25Encoder()
# Titles that disagree with the text: d1's text is about kernels, its title about printers.
TITLES = ("printer jams", "kernel wifi", "lunch menu", "wifi")
JIRA_DEV = EVAL_SETS_DIR / "jira_appcelerator_dev.jsonl"


def _jira_query(key: str) -> str:
    for line in JIRA_DEV.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["id"] == key:
            return str(record["query"])
    raise AssertionError(f"{key} not in the Jira dev set")


def _terms(text: str) -> set[int]:
    return set(BM25.encode_query(text).indices)


def test_a_jira_issue_splits_into_its_summary_and_description() -> None:
    parts = split_query(_jira_query("AC-1030"))
    assert parts.title == "Icon in actionBar on Android doesn't work with SDK 4.0.0RC2"
    assert parts.body.startswith("Details :")
    # A one-line question (every Slack query) has no title; a long first line is not one either.
    assert split_query("is anyone elses laptop spinning down the hard drive?").title == ""
    assert split_query(" ".join(["word"] * 40) + "\nmore").title == ""


def test_prose_drops_code_frames_urls_and_keeps_what_a_person_wrote() -> None:
    text = _jira_query("AC-1030")
    cleaned = prose(text)
    assert "ActionBar id=" not in cleaned and "fontSize" not in cleaned  # inside {code}…{code}
    assert "community.appcelerator.com" not in cleaned  # the link target goes …
    assert "Icon in actionBar on Android doesn't work with SDK 4.0.0RC2" in cleaned  # … its label stays
    assert "Please have a look on screen shot" in cleaned
    trace = (
        "Crash when opening the window\n"
        "[ERROR] :  TiExceptionHandler: Uncaught TypeError: undefined is not an object\n"
        "    at org.appcelerator.kroll.KrollRuntime.doRunModule(KrollRuntime.java:155)\n"
        '  File "/usr/lib/python3/app.py", line 12, in main\n'
        "3   Titanium   0x000000010a1b2c3d   -[TiApp start] + 42\n"
        "see https://example.test/x?y=1 for more\n"
        "{noformat}\nraw log line deadbeefdeadbeefdeadbeef\n{noformat}"
    )
    cleaned = prose(trace)
    assert "Uncaught TypeError: undefined is not an object" in cleaned and "[ERROR]" not in cleaned
    for gone in ("KrollRuntime", "app.py", "0x000000010a1b2c3d", "example.test", "raw log line"):
        assert gone not in cleaned, gone
    assert "see" in cleaned and "for more" in cleaned


def test_plain_sparse_query_is_qdrants_own() -> None:
    text = _jira_query("AC-1030")
    assert sparse_query(BM25, text) == BM25.encode_query(text)


def test_fielded_query_weighs_title_terms_above_body_terms_and_drops_code() -> None:
    text = _jira_query("AC-1030")
    config = SparseQueryConfig(mode="fielded", title_weight=2, body="prose")
    vector = sparse_query(BM25, text, config)
    weights = dict(zip(vector.indices, vector.values, strict=True))
    title = _terms("Icon in actionBar on Android doesn't work with SDK 4.0.0RC2")
    body = _terms(prose(split_query(text).body))  # the body repeats the title in a link label
    assert title and all(weights[t] == pytest.approx(2.0 + (t in body)) for t in title)
    (screen,) = _terms("screen")
    assert weights[screen] == pytest.approx(1.0)  # a body word, once
    for code_word in ("fontSize", "backgroundColor", "displayHomeAsUp"):
        (term,) = _terms(code_word)
        assert term not in weights, code_word
        assert term in BM25.encode_query(text).indices  # the plain query has it


def test_query_tf_saturates_at_k3_plus_one() -> None:
    config = SparseQueryConfig(mode="fielded", title_weight=0, k3=1.2)
    vector = sparse_query(BM25, "Boot report\n" + "kernel " * 30 + "printer", config)
    weights = dict(zip(vector.indices, vector.values, strict=True))
    (kernel,), (printer,) = _terms("kernel"), _terms("printer")
    assert weights[printer] == pytest.approx(1.0)
    assert 2.0 < weights[kernel] < 2.2  # 30·2.2/31.2, not 30
    # Nothing but markup left: the plain query rather than an empty one.
    only_code = "Title\n{code}x = 1{code}"
    assert sparse_query(BM25, only_code, SparseQueryConfig(mode="fielded", body="prose", title_weight=0)).indices
    # A one-line question has no fields: it is read plainly whatever the mode.
    one_line = "kernel kernel kernel panic {code}x{code}"
    assert sparse_query(BM25, one_line, config) == BM25.encode_query(one_line)


@pytest.mark.parametrize("weights", [None, (1.4, 0.6), (0.5, 1.5)])
@pytest.mark.parametrize("k", [2, 10, 60])
def test_fuse_reproduces_the_engines_fusion(store, k: int, weights: tuple[float, float] | None) -> None:
    write_documents(store, [document(d, parents) for d, parents in CORPUS.items()])
    query = "kernel wifi driver"
    dense = [float(x) for x in TopicEncoder().encode_queries([query])[0]]
    sparse = BM25.encode_query(query)
    flt = SearchFilter()
    engine = store.search_hybrid(dense, sparse, 50, 50, flt, Fusion(k=k, weights=weights))
    lists = [store.search_dense(dense, 50, flt), store.search_sparse(sparse, 50, flt)]
    ours = fuse(lists, weights or (1.0, 1.0), k)
    assert {h.id: pytest.approx(h.score, abs=1e-6) for h in engine} == {h.id: h.score for h in ours}
    assert [h.score for h in ours] == sorted((h.score for h in ours), reverse=True)


def _candidates(n: int, texts: list[str] | None = None) -> list[QueryCandidates]:
    hit = Hit("c", 1.0, {"document_id": "d", "parent_id": "p"})
    return [
        QueryCandidates(f"q{i}", texts[i] if texts else f"query {i}", {"a": [hit]}, {"d": 1}, length=i)
        for i in range(n)
    ]


def test_cross_validation_never_scores_a_query_with_a_setting_chosen_on_it() -> None:
    candidates = _candidates(60)
    folds = text_folds(candidates, 5)
    settings = [FusionSetting(60, (("a", 1.0),)), FusionSetting(10, (("a", 1.0),))]
    # Setting 0 is perfect on folds 1–4 and useless on fold 0; setting 1 the reverse, but weaker overall.
    matrix = np.vstack([np.where(folds == 0, 0.0, 1.0), np.where(folds == 0, 1.0, 0.5)])
    cv = cross_validate(candidates, settings, matrix=matrix, folds=5)
    # Fold 0 is scored with what folds 1–4 prefer (setting 0): 0 there, though setting 1 would score 1.
    assert np.all(cv.scores[folds == 0] == 0.0)
    assert np.all(cv.scores[folds != 0] == 1.0)
    assert cv.chosen[0]["all"] == settings[0]
    # In-sample the best setting (0) would claim the same; out of fold can never exceed the oracle.
    assert cv.mean <= matrix.max(axis=0).mean()


def test_repeated_query_texts_share_a_fold() -> None:
    texts = [f"question {i % 7}" for i in range(70)]
    folds = text_folds(_candidates(70, texts), 5)
    for i in range(70):
        assert folds[i] == folds[i % 7]


def test_length_aware_cross_validation_picks_per_bucket() -> None:
    candidates = _candidates(100)  # lengths 0..99
    settings = [FusionSetting(60, (("a", 1.0),)), FusionSetting(10, (("a", 1.0),))]
    lengths = np.arange(100)
    matrix = np.vstack([np.where(lengths < 50, 1.0, 0.0), np.where(lengths < 50, 0.0, 0.9)])
    plain = cross_validate(candidates, settings, matrix=matrix)
    aware = cross_validate(candidates, settings, matrix=matrix, length_aware=True)
    assert aware.mean > 0.9 > plain.mean
    assert all(p["short"] == settings[0] and p["long"] == settings[1] for p in aware.chosen)


def test_grid_weights_sum_to_two_and_scores_come_from_the_lists() -> None:
    settings = grid("dense", "bm25", ks=(60,), dense_shares=(0.3, 0.5, 0.8))
    assert [s.weights for s in settings] == [
        (("dense", 0.6), ("bm25", 1.4)),
        (("dense", 1.0), ("bm25", 1.0)),
        (("dense", 1.6), ("bm25", 0.4)),
    ]
    relevant = Hit("r", 1.0, {"document_id": "rel", "parent_id": "rp"})
    other = Hit("o", 1.0, {"document_id": "other", "parent_id": "op"})
    # Each list has one document on top: the weights decide which wins (equal weights: a tie, broken by id).
    candidates = [QueryCandidates("q", "q", {"dense": [other], "bm25": [relevant]}, {"rel": 1})]
    matrix = setting_scores(candidates, settings)[:, 0]
    assert matrix == pytest.approx([1.0, 1 / np.log2(3), 1 / np.log2(3)])


def test_the_retriever_searches_with_the_weighted_query_and_the_sources_learned_fusion(store, monkeypatch) -> None:
    write_documents(store, [document(d, parents) for d, parents in CORPUS.items()])
    query = "printer\nwifi driver iwlwifi"  # title line: printer; body: a wifi problem
    plain = Retriever(store, BM25, dense=TopicEncoder(), config=RetrieverConfig.chosen("plain", learned_fusion=False))
    assert plain.search(query, "bm25", EVERYONE, top_k=1).results[0].document_id == "d2"
    slack_fusion = SourceFusion(k=5, dense_weight=1.5, sparse_weight=0.5)
    config = RetrieverConfig(
        sparse_query=SparseQueryConfig(mode="fielded", title_weight=3), fusion_by_source={"slack": slack_fusion}
    )
    fielded = Retriever(store, BM25, dense=TopicEncoder(), config=config)
    # The title's term now outweighs the body's two: the printer document comes first.
    assert fielded.search(query, "bm25", EVERYONE, top_k=1).results[0].document_id == "d3"

    calls: list[tuple] = []
    original = store.search_hybrid
    monkeypatch.setattr(store, "search_hybrid", lambda *a, **k: calls.append(a) or original(*a, **k))
    response = fielded.search(query, "hybrid", EVERYONE, sources=["slack"])
    assert response.fusion == Fusion(method="rrf", k=5, weights=(1.5, 0.5)) == calls[-1][5]
    assert calls[-1][1] == sparse_query(BM25, query, config.sparse_query)
    # Several sources, or none named: the global fusion.
    for sources in (None, ["slack", "jira"]):
        response = fielded.search(query, "hybrid", EVERYONE, sources=sources)
        assert response.fusion == Fusion() == calls[-1][5]
    assert SourceFusion().fusion == Fusion()  # equal weights are plain RRF, not a weighted request


def test_rerank_features_compare_the_querys_title_line_with_the_candidates_title() -> None:
    from rag_pipeline.retrieval.rerank.features import FEATURE_NAMES, candidate_features
    from rag_pipeline_tests.unit.retrieval.test_retrieval import _candidate

    query = "Camera crashes on Android\nSteps: open the camera, rotate the device, the app exits with a stack trace."
    c = [
        _candidate("dup", 0.5, "Android camera crash", "x"),
        _candidate("other", 0.6, "Rotate the device in the simulator", "x"),
    ]
    f = candidate_features(query, c, BM25)
    coverage, jaccard = FEATURE_NAMES.index("query_title_coverage"), FEATURE_NAMES.index("query_title_jaccard")
    assert f[0, coverage] == pytest.approx(1.0) and f[1, coverage] == 0.0  # camera, crash, android
    assert f[0, jaccard] == pytest.approx(1.0) and f[1, jaccard] == 0.0
    # A one-line query has no title line: the features are 0, not noise from the body.
    g = candidate_features("android camera crash", c, BM25)
    assert g[0, coverage] == 0.0 and g[0, jaccard] == 0.0


def test_the_tuning_ranking_is_the_retrievers_document_ranking() -> None:
    from rag_pipeline.evaluation.fusion_tuning import ranking
    from rag_pipeline.retrieval.grouping import documents_from_hits

    rng = np.random.default_rng(0)
    hits = [
        Hit(
            f"c{i}",
            float(rng.choice([0.1, 0.2, 0.3, rng.random()])),
            {"document_id": f"d{i % 13 % 9}", "parent_id": f"p{i % 13}"},  # 13 parents in 9 documents
        )
        for i in range(200)
    ]
    expected = [(r.document_id, r.score) for r in documents_from_hits(hits, ["d3"])]
    assert ranking(hits, ["d3"]) == expected and len(expected) == 8


def test_rerank_signals_search_the_title_line_alone(store) -> None:
    write_documents(store, [document(d, parents) for d, parents in CORPUS.items()])
    retriever = Retriever(store, BM25, dense=TopicEncoder())
    # Title: a printer problem; body: kernel and wifi words. The title signals rank the printer document first.
    candidates = retriever.rerank_candidates("printer offline\nkernel wifi driver iwlwifi after upgrade", EVERYONE, 4)
    by_doc = {c.document_id: c.signals for c in candidates}
    assert by_doc["d3"]["title_bm25_rank"] == 0 and by_doc["d3"]["title_bm25_score"] > 0
    assert by_doc["d3"]["title_dense_rank"] == 0
    assert by_doc["d3"]["dense_rank"] > 0  # the whole query is mostly about kernel and wifi
    # One-line queries get no title signals (the reranker's title features stay 0).
    for c in retriever.rerank_candidates("kernel wifi", EVERYONE, 4):
        assert not any(name.startswith("title_") for name in c.signals)


def test_command_line_fusion_overrides_the_learned_one_and_settings_pick_the_query(tmp_path: Path) -> None:
    import argparse

    from rag_pipeline.commands.search import add_query_options, retriever_config
    from rag_pipeline.settings import Settings, SettingsError

    parser = argparse.ArgumentParser()
    add_query_options(parser)
    settings = Settings.from_env({"RAG_DATA_DIR": str(tmp_path)})

    def config(*argv: str, env_settings: Settings = settings) -> RetrieverConfig:
        return retriever_config(parser.parse_args(list(argv)), env_settings)

    default = config()
    assert default.sparse_query.mode == "fielded" and default.fusion_for(["slack"]) == Fusion(k=10, weights=(1.6, 0.4))
    assert default.fusion_for(["jira"]) == Fusion(k=10, weights=(1.0, 1.0, 0.5, 0.5, 0.5))
    assert default.fusion_for(None) == Fusion(weights=(1.0, 1.0, 0.5)) == default.fusion_for(["slack", "jira"])
    # Any fusion on the command line applies to every search, Slack included.
    assert config("--rrf-k", "30").fusion_for(["slack"]) == Fusion(k=30)
    assert config("--rrf-weights", "2,1").fusion_for(["slack"]) == Fusion(weights=(2.0, 1.0))
    assert config("--fusion", "dbsf").fusion_for(["slack"]).method == "dbsf"
    assert config("--no-learned-fusion").fusion_for(["slack"]) == Fusion()
    assert config("--sparse-query", "plain").sparse_query == SparseQueryConfig()
    # Candidates per hybrid list: by the index's size unless asked (the large-index knob), never zero.
    assert default.prefetch_limit is None and config("--prefetch-limit", "50").prefetch_limit == 50
    with pytest.raises(SystemExit):
        config("--prefetch-limit", "0")
    # The environment sets the defaults the flags override.
    env = Settings.from_env({"RAG_DATA_DIR": str(tmp_path), "RAG_SPARSE_QUERY": "plain", "RAG_LEARNED_FUSION": "0"})
    assert config(env_settings=env).sparse_query == SparseQueryConfig()
    assert config(env_settings=env).fusion_for(["slack"]) == Fusion()
    assert config("--sparse-query", "fielded", env_settings=env).sparse_query.mode == "fielded"
    with pytest.raises(SettingsError, match="RAG_SPARSE_QUERY"):
        Settings.from_env({"RAG_DATA_DIR": str(tmp_path), "RAG_SPARSE_QUERY": "bm42"})


def test_fuse_reproduces_the_engines_fusion_with_a_title_prefetch(store) -> None:
    write_documents(store, [document(d, parents) for d, parents in CORPUS.items()])
    encoder, flt = TopicEncoder(), SearchFilter()
    dense, title = ([float(x) for x in v] for v in encoder.encode_queries(["kernel wifi driver", "printer"]))
    sparse = BM25.encode_query("kernel wifi driver")
    fusion = Fusion(k=10, weights=(1.0, 1.0, 0.5))
    engine = store.search_hybrid(dense, sparse, 50, 50, flt, fusion, [DensePrefetch(title)])
    lists = [store.search_dense(dense, 50, flt), store.search_sparse(sparse, 50, flt)]
    lists.append(store.search_dense(title, 50, flt))
    ours = fuse(lists, (1.0, 1.0, 0.5), 10)
    assert {h.id: pytest.approx(h.score, abs=1e-6) for h in engine} == {h.id: h.score for h in ours}
    assert describe_fusion(fusion) == "rrf(k=10, weights=1/1/0.5)"


def test_the_title_line_is_embedded_and_searched_as_its_own_prefetch(store, monkeypatch) -> None:
    write_documents(store, [document(d, parents) for d, parents in CORPUS.items()])
    # Qdrant's weights divide ranks, so a list dominates when the others' weights are small.
    heavy_title = SourceFusion(k=2, dense_weight=0.05, sparse_weight=0.05, title_dense_weight=1.0)
    config = RetrieverConfig.chosen("plain", learned_fusion=False).model_copy(
        update={"fusion_by_source": {"*": heavy_title}}
    )
    retriever = Retriever(store, BM25, dense=TopicEncoder(), config=config)
    calls: list[tuple] = []
    original = store.search_hybrid
    monkeypatch.setattr(store, "search_hybrid", lambda *a, **k: calls.append(a) or original(*a, **k))
    query = "printer\nkernel wifi driver iwlwifi after the kernel upgrade"
    response = retriever.search(query, "hybrid", EVERYONE, top_k=1)
    assert calls[-1][5] == Fusion(k=2, weights=(0.05, 0.05, 1.0))
    assert [p.using for p in calls[-1][6]] == ["dense"]
    assert calls[-1][6][0].vector == pytest.approx(list(TopicEncoder().encode_queries(["printer"])[0]))
    assert response.results[0].document_id == "d3"  # the title's topic wins with its weight
    without = Retriever(store, BM25, dense=TopicEncoder(), config=RetrieverConfig.chosen("plain", False))
    assert without.search(query, "hybrid", EVERYONE, top_k=1).results[0].document_id != "d3"
    # A one-line query has no title: two prefetches, the title's weight dropped.
    retriever.search("kernel wifi", "hybrid", EVERYONE, top_k=1)
    assert calls[-1][5] == Fusion(k=2, weights=(0.05, 0.05)) and calls[-1][6] == []


def _title_list(store, vector: list[float], flt: SearchFilter | None = None) -> list[Hit]:
    """The title vector's own list: a hybrid search where the other two lists weigh (next to) nothing."""
    hits = store.search_hybrid(
        vector,
        BM25.encode_query("zzz"),
        100,
        100,
        flt,
        Fusion(k=1, weights=(1e-6, 1e-6, 1.0)),
        [DensePrefetch(vector, TITLE_VECTOR)],
    )
    return [h for h in hits if h.score > 1e-3]


def test_the_title_vector_is_one_point_per_document_on_its_first_child(store) -> None:
    write_documents(
        store, [document(d, parents, title=t) for (d, parents), t in zip(CORPUS.items(), TITLES, strict=True)]
    )
    assert TITLE_VECTOR in store.dense_vector_names()
    printer = [float(x) for x in TopicEncoder().encode_queries(["printer"])[0]]
    title_hits = _title_list(store, printer)
    # d1 has three children, but only its first carries the title: the title list holds one point per document.
    assert sorted(h.payload["document_id"] for h in title_hits) == ["d1", "d2", "d3", "d4"]
    assert all(h.payload["chunk"] == 0 for h in title_hits)
    # The document titled about printers leads the title list, though its text is about kernels.
    assert title_hits[0].payload["document_id"] == "d1"


def test_the_document_title_prefetch_joins_jira_searches_with_the_engines_arithmetic(store, monkeypatch) -> None:
    write_documents(
        store,
        [document(d, parents, title=t, source="jira") for (d, parents), t in zip(CORPUS.items(), TITLES, strict=True)],
    )
    encoder = TopicEncoder()
    jira = SourceFusion(k=10, title_dense_weight=0.5, document_title_weight=0.5)
    config = RetrieverConfig.chosen("plain", learned_fusion=False).model_copy(
        update={"fusion_by_source": {"jira": jira}}
    )
    retriever = Retriever(store, BM25, dense=encoder, config=config)
    calls: list[tuple] = []
    original = store.search_hybrid
    monkeypatch.setattr(store, "search_hybrid", lambda *a, **k: calls.append(a) or original(*a, **k))
    query = "printer\nkernel wifi driver iwlwifi after the kernel upgrade"
    response = retriever.search(query, "hybrid", EVERYONE, top_k=4, sources=["jira"])
    whole, title = ([float(x) for x in v] for v in encoder.encode_queries([query, "printer"]))
    # Dense, BM25, the title line on the chunks, then the query and the title line on the document titles.
    assert calls[-1][5] == Fusion(k=10, weights=(1.0, 1.0, 0.5, 0.5, 0.5)) == response.fusion
    assert [(p.using, p.vector) for p in calls[-1][6]] == [
        ("dense", pytest.approx(title)),
        ("title", pytest.approx(whole)),
        ("title", pytest.approx(title)),
    ]
    flt = SearchFilter(sources=("jira",), acl=EVERYONE.acl_condition())
    lists = [
        store.search_dense(whole, 100, flt),
        store.search_sparse(sparse_query(BM25, query, config.sparse_query), 100, flt),
        store.search_dense(title, 100, flt),
        _title_list(store, whole, flt),
        _title_list(store, title, flt),
    ]
    expected = fuse(lists, (1.0, 1.0, 0.5, 0.5, 0.5), 10)
    assert [r.document_id for r in response.results] == [r.document_id for r in documents_from_hits(expected)]
    # One-line queries search the document titles with the whole query only.
    retriever.search("printer", "hybrid", EVERYONE, top_k=1, sources=["jira"])
    assert calls[-1][5] == Fusion(k=10, weights=(1.0, 1.0, 0.5)) and [p.using for p in calls[-1][6]] == ["title"]
    # Other sources' searches keep their fusion: no title-vector list.
    retriever.search(query, "hybrid", EVERYONE, top_k=1, sources=["slack"])
    assert calls[-1][6] == []


def test_an_index_created_before_title_vectors_is_written_and_searched_without_them(tmp_path: Path) -> None:
    import qdrant_edge as qe

    from rag_pipeline.index.edge_store import EdgeVectorStore
    from rag_pipeline.index.store import DENSE_VECTOR, SPARSE_VECTOR, CollectionNames

    names = CollectionNames()
    # The child collection as an older release created it: dense and BM25 only.
    folder = tmp_path / "qdrant" / names.children
    folder.mkdir(parents=True)
    old = qe.EdgeShard.create(
        str(folder),
        qe.EdgeConfig(
            vectors={DENSE_VECTOR: qe.EdgeVectorParams(size=4, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE_VECTOR: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        ),
    )
    old.close()
    with EdgeVectorStore(tmp_path / "qdrant") as store:
        store.create_collections(4)
        assert store.dense_vector_names() == {DENSE_VECTOR}
        write_documents(store, [document(d, p, source="jira") for d, p in CORPUS.items()])  # titles dropped
        jira = SourceFusion(k=10, title_dense_weight=0.5, document_title_weight=0.5)
        config = RetrieverConfig.chosen("plain", False).model_copy(update={"fusion_by_source": {"jira": jira}})
        retriever = Retriever(store, BM25, dense=TopicEncoder(), config=config)
        response = retriever.search("printer\nkernel wifi", "hybrid", EVERYONE, top_k=4, sources=["jira"])
        assert response.mode == "hybrid" and not response.warnings and len(response.results) == 4


def test_the_title_vector_has_its_own_full_scan_threshold(store) -> None:
    # A filtered title search would otherwise walk every point the filter matches: the title vectors (one
    # point in several) stay under the collection's threshold long after a graph pays off.
    from rag_pipeline.index.edge_store import EdgeVectorStore

    threshold = store.dense_search.title_full_scan_threshold_kb
    assert threshold < store.dense_search.full_scan_threshold_kb
    if isinstance(store, EdgeVectorStore):
        config = json.loads((store.path / store.names.children / "edge_config.json").read_text())
        assert config["vectors"]["title"]["hnsw_config"]["full_scan_threshold"] == threshold
        assert config["hnsw_config"]["full_scan_threshold"] == store.dense_search.full_scan_threshold_kb
    else:
        vectors = store.client.get_collection(store.names.children).config.params.vectors
        assert vectors["title"].hnsw_config.full_scan_threshold == threshold
        assert vectors["dense"].hnsw_config is None


def test_the_pipeline_embeds_each_title_once_query_side_and_puts_it_on_the_first_child(store, tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from rag_pipeline.sources.document import Acl, Document
    from rag_pipeline.stages import documents_frame, embed_titles, index_documents_directly, title_vector_id
    from rag_pipeline.text.chunking import Chunker, ChunkingConfig
    from rag_pipeline.vectors.cache import EmbeddingCache
    from rag_pipeline_tests.kit.slack_index import HashEncoder

    when = datetime(2024, 3, 1, tzinfo=UTC)

    def doc(doc_id: str, title: str, words: int) -> Document:
        text = " ".join(f"{doc_id}word{i}" for i in range(words))
        return Document(
            id=doc_id,
            source="jira",
            container="AC",
            title=title,
            text=text,
            created=when,
            updated=when,
            version=1.0,
            content_hash=doc_id,
            acl=Acl(public=True),
        )

    documents = documents_frame([doc("AC-1", "Camera crashes on rotate", 900), doc("AC-2", "  ", 50)])
    encoder = HashEncoder()
    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    titles, stats = embed_titles(documents, encoder, cache)
    # The untitled document gets no row; the title is encoded as a query would be (and cached as one).
    assert list(titles["chunk_id"]) == [title_vector_id("AC-1")] and stats.computed == 1
    assert np.allclose(titles["vector"].iloc[0], encoder.encode_queries(["Camera crashes on rotate"])[0])
    assert embed_titles(documents, encoder, cache)[1].cached == 1

    report = index_documents_directly(
        store, documents, Chunker(ChunkingConfig(parent_tokens=400, child_tokens=100)), encoder, BM25, cache
    )
    assert report.children > 3  # AC-1 has several children; only its first carries the title
    hits = _title_list(store, [float(x) for x in encoder.encode_queries(["Camera crashes on rotate"])[0]])
    assert [h.payload["document_id"] for h in hits] == ["AC-1"] and hits[0].payload["chunk_index"] == 0
