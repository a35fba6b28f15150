"""``RAG_RERANKER`` chooses what a reader's ``reranked`` search uses (issue 51, part 6): the learned reranker, the
LLM reranker (a chat model grading each candidate 0–10, here the project's OpenAI fake through the real ``openai``
client) or none; a reranker that fails degrades the search to the hybrid ranking with a warning, never fails it.

``rag-pipeline search`` runs in this process (``cli.main``) over a copy of the small permission-varied index the
real ``rag-pipeline index`` wrote, so the dense model loads once for the module.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rag_pipeline.cli import main
from rag_pipeline.composition import reranker_of
from rag_pipeline.settings import Settings, SettingsError
from rag_pipeline_tests.kit import serving_fixtures as S
from rag_pipeline_tests.kit.emulators.openai_api import API_KEY, OpenAIFake

QUERY = "postgres upgrade"


@pytest.fixture(scope="module")
def data_dir(serving_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("reranker_choice") / "data"
    S.copy_index(serving_index, copy)
    return copy


def search(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], **env: str
) -> dict[str, Any]:
    """``rag-pipeline search QUERY --mode reranked --all-documents --json`` with ``env`` set; its JSON."""
    for name, value in S.service_env(data_dir, **env).items():
        if name.startswith(("RAG_", "OPENAI_")):
            monkeypatch.setenv(name, value)
    capsys.readouterr()
    code = main(["search", QUERY, "--mode", "reranked", "--all-documents", "--json", "--top-k", "5"])
    out = capsys.readouterr().out
    assert code == 0, out
    return dict(json.loads(out))


def test_the_llm_reranker_orders_by_the_models_grades(
    data_dir: Path, fake: OpenAIFake, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"RAG_RERANKER": "llm", "RAG_LLM_RERANK_MODEL": "grader-1", "OPENAI_BASE_URL": fake.base_url,
           "OPENAI_API_KEY": API_KEY}  # fmt: skip
    learned = search(data_dir, monkeypatch, capsys)
    assert learned["mode"] == "reranked" and learned["reranker"] != "llm:grader-1"
    ids = [r["document_id"] for r in learned["results"]]
    assert len(ids) >= 2
    # The grader likes only the document the learned reranker put last: the LLM reranker must put it first.
    last = learned["results"][-1]
    marker = last["title"]
    fake.respond(lambda body: json.dumps({"score": 9 if marker in str(body) else 1}) if "grade" in str(body) else None)
    graded = search(data_dir, monkeypatch, capsys, **env)
    assert graded["mode"] == "reranked" and graded["reranker"] == "llm:grader-1", graded
    assert graded["results"][0]["document_id"] == last["document_id"]
    assert sorted(r["document_id"] for r in graded["results"]) == sorted(ids)
    asked = [c for c in fake.calls("/chat/completions") if c.body.get("model") == "grader-1"]
    assert len(asked) >= len(ids)

    # The model down: the search answers the hybrid ranking and says why, naming the reranker, not the query.
    fake.inject("500", path="chat/completions", times=1000)
    try:
        degraded = search(data_dir, monkeypatch, capsys, **{**env, "RAG_LLM_RERANK_MODEL": "grader-2"})
    finally:
        fake.clear_faults()
    assert degraded["mode"] == "hybrid" and degraded["requested_mode"] == "reranked"
    assert degraded["results"], degraded
    assert any("reranker llm:grader-2 failed" in w for w in degraded["warnings"]), degraded["warnings"]
    assert not any(QUERY in w for w in degraded["warnings"])


def test_no_reranker_answers_the_hybrid_ranking(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = search(data_dir, monkeypatch, capsys, RAG_RERANKER="none")
    assert plain["mode"] == "hybrid" and plain["reranker"] is None
    assert any("no reranker configured" in w for w in plain["warnings"])


def test_reranker_and_answer_settings_are_validated(tmp_path: Path) -> None:
    base = {"RAG_DATA_DIR": str(tmp_path)}
    with pytest.raises(SettingsError, match="RAG_LLM_RERANK_MODEL"):
        Settings.from_env({**base, "RAG_RERANKER": "llm"})
    with pytest.raises(SettingsError, match="RAG_RERANKER"):
        Settings.from_env({**base, "RAG_RERANKER": "cohere"})
    with pytest.raises(SettingsError, match="RAG_ANSWER_TEMPERATURE must be between 0 and 2"):
        Settings.from_env({**base, "RAG_ANSWER_TEMPERATURE": "3"})
    with pytest.raises(SettingsError, match="RAG_ANSWER_TEMPERATURE must be a number"):
        Settings.from_env({**base, "RAG_ANSWER_TEMPERATURE": "warm"})
    with pytest.raises(SettingsError, match="RAG_INGEST_TOKEN must differ from RAG_SERVE_TOKEN"):
        Settings.from_env({**base, "RAG_SERVE_TOKEN": "same-token-123", "RAG_INGEST_TOKEN": "same-token-123"})
    with pytest.raises(SettingsError, match="RAG_ANSWER_MAX_TOKENS must be at least 16"):
        Settings.from_env({**base, "RAG_ANSWER_MAX_TOKENS": "3"})
    chosen = Settings.from_env({**base, "RAG_RERANKER": "llm", "RAG_LLM_RERANK_MODEL": "m",
                                "RAG_ANSWER_TEMPERATURE": "0.4", "RAG_ANSWER_MAX_TOKENS": "321"})  # fmt: skip
    assert (chosen.reranker, chosen.answer_temperature, chosen.answer_max_tokens) == ("llm", 0.4, 321)
    assert reranker_of(Settings.from_env(base)) is not None  # learned: fixed weights before any training
    assert reranker_of(Settings.from_env({**base, "RAG_RERANKER": "none"})) is None
