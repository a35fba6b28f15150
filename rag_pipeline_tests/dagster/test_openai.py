"""OpenAI embeddings and the LLM reranker through the real ``openai`` client against a local fake of the API."""

from __future__ import annotations

import json
import os
from pathlib import Path

import dagster as dg
import numpy as np
import pytest

from rag_pipeline.defs.chain.resources import DenseEmbedderResource
from rag_pipeline.retrieval.rerank.base import rerank
from rag_pipeline.retrieval.rerank.llm import LlmReranker, parse_grade
from rag_pipeline.retrieval.results import SearchResult
from rag_pipeline.vectors.dense.load import load_dense_encoder
from rag_pipeline.vectors.dense.openai import OpenAIEmbeddingEncoder, parse_openai_model
from rag_pipeline_tests.dagster.test_eval_assets import eval_sets, indexed  # noqa: F401  (module fixtures)
from rag_pipeline_tests.kit import pipeline
from rag_pipeline_tests.kit.data import jira_issue, write_jira_dump
from rag_pipeline_tests.kit.emulators.openai_api import API_KEY, OpenAIFake, fake_embedding
from rag_pipeline_tests.kit.pipeline import cell


@pytest.fixture
def openai(monkeypatch):
    with OpenAIFake() as fake:
        monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        yield fake


def test_embeddings_dimensions_and_model_names(openai: OpenAIFake) -> None:
    encoder = load_dense_encoder("openai:text-embedding-3-small@256")
    assert (encoder.model_id, encoder.dimension, encoder.max_tokens) == ("openai:text-embedding-3-small@256", 256, 8191)
    vectors = encoder.encode_documents(["deploy failed on arm64", "", "deploy failed on arm64"])
    assert vectors.shape == (3, 256) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert np.allclose(vectors[0], fake_embedding("deploy failed on arm64", dimensions=256), atol=1e-6)
    [request] = openai.calls("/embeddings")
    assert request.body["dimensions"] == 256 and request.body["input"][1] == " "  # no empty strings sent
    # The client's default wire format, base64 float32 (decoded with numpy), not a JSON float per dimension.
    assert request.body["encoding_format"] == "base64"
    full = OpenAIEmbeddingEncoder()
    assert full.encode_queries(["x"]).shape == (1, 1536) and "dimensions" not in openai.calls("/embeddings")[-1].body
    with pytest.raises(ValueError, match="dimensions"):
        parse_openai_model("openai:text-embedding-3-small@4000")
    with pytest.raises(ValueError, match="unknown OpenAI embedding model"):
        parse_openai_model("openai:text-embedding-4")


def test_batches_stay_within_the_api_limits_and_long_inputs_are_truncated(openai: OpenAIFake) -> None:
    encoder = OpenAIEmbeddingEncoder(dimensions=8)
    long_text = "lorem ipsum dolor sit amet " * 2000  # ~10,000 tokens
    many = [f"chunk {i}" for i in range(2100)]
    vectors = encoder.encode_documents([long_text, *many])
    assert vectors.shape == (2101, 8)
    sizes = [len(r.body["input"]) for r in openai.calls("/embeddings")]
    assert sizes == [2048, 53]  # the input-count limit splits the batch
    assert encoder.usage.truncated_inputs == 1 and encoder.usage.requests == 2
    heavy = ["word " * 8000] * 40  # 40 x 8,000 tokens > 300,000 per request
    OpenAIEmbeddingEncoder(dimensions=8).encode_documents(heavy)
    assert [len(r.body["input"]) for r in openai.calls("/embeddings")[2:]] == [37, 3]
    assert all(r.status == 200 for r in openai.requests)  # the fake would have answered 400 past a limit


def test_retries_on_429_and_500_give_the_same_vectors(openai: OpenAIFake) -> None:
    texts = ["alpha", "beta"]
    clean = OpenAIEmbeddingEncoder(dimensions=16).encode_documents(texts)
    openai.inject("429", path="/embeddings", times=2, retry_after=0)
    openai.inject("500", path="/embeddings", times=1)
    encoder = OpenAIEmbeddingEncoder(dimensions=16, max_retries=5)
    assert np.array_equal(encoder.encode_documents(texts), clean)
    assert encoder.usage.retried_responses == 3
    assert [r.status for r in openai.requests[-4:]] == [429, 429, 500, 200]


def test_dense_vectors_asset_records_tokens_and_cost_and_uses_the_cache(openai: OpenAIFake, tmp_path: Path) -> None:
    dump = write_jira_dump(
        tmp_path / "issues.jsonl.gz",
        [jira_issue("1", "AI-1", "2024-03-01T10:00:00.000+0000", "the embedder runs on the OpenAI API")],
    )
    resources = pipeline.resources(tmp_path / "data", live=False)
    resources["jira_dump"] = resources["jira_source"] = type(resources["jira_dump"])(path=str(dump), site="ai.test")
    resources["dense_embedder"] = DenseEmbedderResource(
        model="openai:text-embedding-3-small@256", cache_path=str(tmp_path / "data" / "cache.sqlite")
    )
    chain = pipeline.chain("jira")
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("jira_projects", ["AI"])
        first = dg.materialize(chain, instance=instance, resources=resources, **cell("jira_issues", "AI", "2024-03-01"))
        second = dg.materialize(
            chain, instance=instance, resources=resources, **cell("jira_issues", "AI", "2024-03-01")
        )
    meta = {k: v.value for k, v in first.asset_materializations_for_node("jira_dense_vectors")[0].metadata.items()}
    assert meta["model"] == "openai:text-embedding-3-small@256" and meta["dimension"] == 256
    # One batch of child chunks, one of document titles.
    assert meta["openai_requests"] == 2 and meta["openai_tokens"] > 0
    assert meta["openai_cost_usd"] == pytest.approx(meta["openai_tokens"] * 0.02 / 1e6)
    again = {k: v.value for k, v in second.asset_materializations_for_node("jira_dense_vectors")[0].metadata.items()}
    assert again["embeddings_cached"] == meta["embeddings_computed"] and again["openai_requests"] == 0
    assert API_KEY not in json.dumps({k: str(v) for k, v in meta.items()})


def _candidate(doc: str, text: str) -> SearchResult:
    return SearchResult(doc, 1.0, "jira", "AI", doc, None, f"{doc}-c", text[:50], f"{doc}-p", parent_text=text)


def test_llm_reranker_grades_concurrently_caches_and_parses(openai: OpenAIFake, tmp_path: Path) -> None:
    candidates = [
        _candidate("a", "release notes for the android build"),
        _candidate("b", "deploy pipeline fails on arm64 runners: deploy logs attached " + "x" * 3000),
        _candidate("c", "the arm64 deploy is fixed"),
    ]
    reranker = LlmReranker("gpt-4o-mini", cache_path=tmp_path / "grades.sqlite", concurrency=3)
    ranked = rerank(reranker, "deploy fails on arm64", candidates)
    assert [r.document_id for r in ranked] == ["b", "c", "a"]  # 3, 2 and 0 query words found
    assert [round(r.score) for r in ranked] == [3, 2, 0]
    prompts = [r.body["messages"][1]["content"] for r in openai.calls("/chat/completions")]
    assert len(prompts) == 3 and all(p.startswith("Query: deploy fails on arm64") for p in prompts)
    assert max(len(p.split("Candidate:\n", 1)[1]) for p in prompts) == 1500  # parent text cut to 1,500 chars
    assert all(r.body["response_format"] == {"type": "json_object"} for r in openai.calls("/chat/completions"))
    again = LlmReranker("gpt-4o-mini", cache_path=tmp_path / "grades.sqlite")
    assert [round(s) for s in again.score("deploy fails on arm64", candidates)] == [0, 3, 2]
    assert again.usage.cached == 3 and again.usage.requests == 0 and len(openai.calls("/chat/completions")) == 3
    assert parse_grade('{"score": 7}') == 7 and parse_grade("I'd say 12") == 10 and parse_grade("none") is None


def test_llm_reranker_is_an_extra_bench_arm(openai: OpenAIFake, tmp_path: Path, monkeypatch, capsys) -> None:
    from rag_pipeline.cli import main
    from rag_pipeline_tests.kit.beir import write_tiny_beir

    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    beir = write_tiny_beir(tmp_path / "beir_tiny")
    argv = ["bench", "--beir", str(beir), "--json", "--data-dir", str(tmp_path / "data"), "--arms", "hybrid"]
    assert main([*argv, "--extra-reranker", "llm:gpt-4o-mini"]) == 0
    figures = json.loads(capsys.readouterr().out)
    arm = figures["arms"]["reranked[llm:gpt-4o-mini]"]
    assert 0.0 <= arm["ndcg@10"] <= 1.0 and arm["recall@100"] == 1.0
    assert openai.calls("/chat/completions")  # the arm really asked the model


LLM_ARM_SCRIPT = """
import json, sys
import dagster as dg
from rag_pipeline.defs.evaluation.resources import EvaluationResource
from rag_pipeline_tests.kit import pipeline
from rag_pipeline_tests.kit.pipeline import cell

data, evals = sys.argv[1], sys.argv[2]
evaluation = pipeline.evaluation()
res = pipeline.resources(data)
res["evaluation"] = EvaluationResource(eval_dir=evals, reports_dir=data + "/reports", folds=3,
                                       llm_reranker_model="gpt-4o-mini")
out = {"arms": evaluation.arms.get_partition_keys()}
retrieval_eval, retrieval_eval_report = evaluation.retrieval_eval, evaluation.retrieval_eval_report
with dg.instance_for_test() as instance:
    for arm in ("hybrid", "llm_reranked"):
        result = dg.materialize([retrieval_eval], instance=instance, resources=res, partition_key=arm)
        out[arm] = {k: v.value for k, v in result.asset_materializations_for_node("retrieval_eval")[0].metadata.items()
                    if isinstance(v.value, (int, float, str))}
    report = dg.materialize([retrieval_eval_report], instance=instance, resources=res, raise_on_error=False)
    meta = report.asset_materializations_for_node("retrieval_eval_report")[0].metadata
    out["report_arms"] = [r.data["arm"] for r in meta["slice/arms"].value.records]
print(json.dumps(out))
"""


# Slow suite (35 s): five eval-arm materializations; the other OpenAI tests cover the client in the default suite.
@pytest.mark.slow
def test_llm_reranked_is_a_fifth_dagster_eval_arm_when_configured(openai: OpenAIFake, request) -> None:
    import subprocess
    import sys

    data, evals = request.getfixturevalue("indexed"), request.getfixturevalue("eval_sets")

    # The arm list is fixed when the code location loads, so configure it in a fresh process.
    env = {**os.environ, "RAG_LLM_RERANK_MODEL": "gpt-4o-mini"}
    env.pop("DAGSTER_HOME", None)
    done = subprocess.run(
        [sys.executable, "-c", LLM_ARM_SCRIPT, str(data), str(evals)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["arms"] == ["vector", "bm25", "hybrid", "reranked", "prf", "llm_reranked"]
    llm = out["llm_reranked"]
    assert llm["llm_requests"] > 0 and llm["llm_unparseable"] == 0 and 0.0 <= llm["slice/ndcg@10"] <= 1.0
    assert {"hybrid", "llm_reranked"} <= set(out["report_arms"])
    assert len(openai.calls("/chat/completions")) == llm["llm_requests"]


def test_search_bench_and_evaluation_use_the_model_the_index_was_built_with(
    openai: OpenAIFake, tmp_path: Path, monkeypatch, capsys
) -> None:
    from rag_pipeline.cli import main
    from rag_pipeline.defs.evaluation.resources import EvaluationResource
    from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta, write_eval_set

    model = "openai:text-embedding-3-small@256"
    data = tmp_path / "data"
    dump = write_jira_dump(
        tmp_path / "issues.jsonl.gz",
        [jira_issue("1", "AI-1", "2024-03-01T10:00:00.000+0000", "the embedder runs on the OpenAI API")],
    )
    monkeypatch.setenv("RAG_JIRA_DUMP", str(dump))
    monkeypatch.setenv("JIRA_SITE", "ai.test")
    monkeypatch.setenv("RAG_DENSE_MODEL", model)
    evals = tmp_path / "eval_sets"
    meta = EvalSetMeta(name="ai", description="", source="t", license="-", attribution="-", queries=1, sources=["jira"])
    write_eval_set(evals, meta, [EvalQuery(id="q1", query="embedder on the API", relevant={"jira:ai.test:1": 1})])
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("jira_projects", ["AI"])

        def index(res: dict) -> dg.ExecuteInProcessResult:
            res["jira_dump"] = res["jira_source"] = type(res["jira_dump"])(path=str(dump), site="ai.test")
            chain = pipeline.chain("jira")
            return dg.materialize(chain, instance=instance, resources=res, **cell("jira_issues", "AI", "2024-03-01"),
                                  raise_on_error=False)  # fmt: skip

        def evaluate() -> dg.ExecuteInProcessResult:
            res = pipeline.resources(data, live=False)
            res["evaluation"] = EvaluationResource(eval_dir=str(evals), reports_dir=str(data / "reports"))
            retrieval_eval = pipeline.evaluation().retrieval_eval
            return dg.materialize([retrieval_eval], instance=instance, resources=res, partition_key="vector",
                                  raise_on_error=False)  # fmt: skip

        assert index(pipeline.resources(data, live=False)).success
        search = ["search", "embedder on the API", "--all-documents", "--json", "--data-dir", str(data)]
        bench = ["bench", "--eval-set", str(evals / "ai.jsonl"), "--arms", "vector", "--json", "--data-dir", str(data)]

        # Configured with the index's model: every reader embeds the query with it (the fake sees the calls).
        before = len(openai.calls("/embeddings"))
        assert main(search) == 0
        assert json.loads(capsys.readouterr().out)["results"][0]["document_id"] == "jira:ai.test:1"
        assert main(bench) == 0
        assert json.loads(capsys.readouterr().out)["arms"]["vector"]["ndcg@10"] == 1.0
        assert evaluate().success
        assert len(openai.calls("/embeddings")) > before

        # Unset, the data folder's recorded language holds the model its first index was written with.
        monkeypatch.delenv("RAG_DENSE_MODEL")
        assert json.loads((data / "language.json").read_text())["dense_model"] == model
        capsys.readouterr()
        assert main(search) == 0
        assert json.loads(capsys.readouterr().out)["results"][0]["document_id"] == "jira:ai.test:1"

        # Another model configured: searches, the benchmark, the evaluation and writes all refuse, naming both.
        monkeypatch.setenv("RAG_DENSE_MODEL", "all-MiniLM-L6-v2")
        for argv in (search, bench):
            capsys.readouterr()  # the materializations' own log lines
            assert main(argv) == 2
            refused = capsys.readouterr().err.strip()
            assert refused.startswith("error: ") and model in refused and "all-MiniLM-L6-v2" in refused
        for result in (evaluate(), index(pipeline.resources(data, live=False))):
            assert not result.success
            error = next(e for e in result.all_events if e.is_step_failure).step_failure_data.error
            assert error.cause.cls_name == "IndexModelMismatch" and model in error.cause.message
