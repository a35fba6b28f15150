"""A company's own workspace evaluates itself: a crafted Slack export and Jira dump indexed with ``rag-pipeline
index``, then mined and evaluated by ``rag-pipeline evaluate`` and by the real ``mined_eval_sets`` asset, each query
running as its author (Slack and Jira accounts joined by email through the principal directory)."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.cli import main
from rag_pipeline.composition import dense_encoder_of, open_index, retriever, search_models
from rag_pipeline.defs.builders import build_definitions
from rag_pipeline.defs.evaluation.mining import build_mined_eval_sets
from rag_pipeline.defs.evaluation.sensors import build_mined_queries_sensor
from rag_pipeline.defs.parts import build_resources, evaluation_resource, source_specs
from rag_pipeline.directory.lookup import DirectoryLookup
from rag_pipeline.evaluation.eval_set import load_eval_set
from rag_pipeline.evaluation.runner import principal_of
from rag_pipeline.pipeline.sources import document_sources as mined_sources
from rag_pipeline.settings import Settings
from rag_pipeline_tests.kit.data import jira_issue, write_jira_dump

TEAM, HOST, SITE = "T0ACME", "acme.slack.com", "jira.acme.com"
D0 = 1709251200  # 2024-03-01
WEEK = "2024-02-26"
ROTATE = "how do I rotate the ingest credentials without any downtime for the workers"
KOREAN = "프린터 드라이버가 설치되지 않아요. 어떻게 해야 하나요?"


def _ts(seconds: float) -> str:
    return f"{seconds:.6f}"


def _user(uid: str, name: str, email: str) -> dict:
    profile = {"display_name": name, "email": email}
    flags = {"deleted": False, "is_bot": False, "is_restricted": False, "is_ultra_restricted": False}
    return {"id": uid, "team_id": TEAM, "name": name, "real_name": name.title(), "profile": profile, **flags}


def _thread(root_ts: float, root: tuple[str, str], replies: list[tuple[str, str]]) -> list[dict]:
    messages = [{"type": "message", "user": root[0], "text": root[1], "ts": _ts(root_ts), "thread_ts": _ts(root_ts),
                 "reply_count": len(replies)}]  # fmt: skip
    for i, (user, text) in enumerate(replies, start=1):
        messages.append(
            {"type": "message", "user": user, "text": text, "ts": _ts(root_ts + i), "thread_ts": _ts(root_ts)}
        )
    return messages


def _workspace(root: Path) -> tuple[Path, Path, Path]:
    export = root / "export"
    (export / "general").mkdir(parents=True)
    (export / "channels.json").write_text(json.dumps([{"id": "C0GEN", "name": "general", "members": ["U1", "U2"]}]))
    (export / "users.json").write_text(json.dumps([_user("U1", "alice", "alice@acme.com"),
                                                   _user("U2", "bob", "bob@acme.com")]))  # fmt: skip
    steps = " ".join(
        f"step {i}: update the vault secret, restart worker pool {i} and watch the queue drain" for i in range(20)
    )
    korean = " ".join("제어판에서 장치 관리자를 열고 프린터 드라이버를 삭제한 뒤 다시 설치하세요." for _ in range(12))
    day = [
        *_thread(D0 + 100, ("U2", ROTATE), [("U1", steps), ("U2", "thanks, that worked")]),
        *_thread(D0 + 200, ("U1", KOREAN), [("U2", korean)]),
        *_thread(D0 + 300, ("U1", "is OPS-1 the reason the worker stalls after every deploy?"), [("U2", "yes")]),
        # bob may not read OPS-9 (a security level): never a query judging it relevant for him.
        *_thread(D0 + 400, ("U2", "did the fix for OPS-9 land in the release branch already?"), [("U1", "no")]),
    ]
    (export / "general" / "2024-03-01.json").write_text(json.dumps(day))
    reporter = {"accountId": "alice", "displayName": "Alice", "emailAddress": "alice@acme.com"}
    duplicate = {"type": {"name": "Duplicate", "inward": "is duplicated by", "outward": "duplicates"},
                 "outwardIssue": {"id": "1", "key": "OPS-1"}}  # fmt: skip
    issues = [
        jira_issue("1", "OPS-1", "2024-03-01T09:00:00.000+0000", summary="Ingest worker stalls after deploy",
                   description="The ingest worker stops picking jobs after each deploy.", reporter=reporter),
        jira_issue("2", "OPS-2", "2024-03-01T10:00:00.000+0000", summary="Workers stuck after release",
                   description="Queue grows without bound once the release is out.", reporter=reporter,
                   issuelinks=[duplicate]),
        jira_issue("9", "OPS-9", "2024-03-01T11:00:00.000+0000", summary="Security fix for the worker",
                   description="Private findings.", reporter=reporter, security={"id": "10", "name": "Internal"}),
    ]  # fmt: skip
    dump = write_jira_dump(root / "issues.jsonl.gz", issues)
    directory = root / "jira_users.csv"
    directory.write_text("account_id,email,groups\nalice,alice@acme.com,project:OPS\n")
    return export, dump, directory


# Small chunks, so a long thread has replies beyond the chunk that holds its question; one evaluation process.
CHUNKS = {"CHILD_CHUNK_SIZE": "60", "CHILD_CHUNK_OVERLAP": "10", "PARENT_CHUNK_SIZE": "300",
          "PARENT_CHUNK_OVERLAP": "30", "RAG_EVAL_WORKERS": "1"}  # fmt: skip


def _evaluation_env(env: pytest.MonkeyPatch, data: Path) -> None:
    for name, value in CHUNKS.items():
        env.setenv(name, value)
    # Each folder its own Dagster instance (the runners export DAGSTER_HOME for the process).
    env.setenv("DAGSTER_HOME", str(data / "dagster_home"))


def _index(root: Path, language: str) -> Path:
    export, dump, directory = _workspace(root)
    data = root / "data"
    with pytest.MonkeyPatch.context() as env:
        _evaluation_env(env, data)
        code = main(["index", "--slack-export", str(export), "--slack-team", TEAM, "--slack-domain", HOST,
                     "--jira-dump", str(dump), "--jira-site", SITE, "--jira-directory", str(directory),
                     "--language", language, "--data-dir", str(data), "--json"])  # fmt: skip
    assert code == 0
    return data


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An English index (BM25 per child chunk): thread questions are masked by their chunks."""
    return _index(tmp_path_factory.mktemp("own_workspace"), "english")


@pytest.fixture(scope="module")
def korean_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Korean index (BM25 scores chat threads whole): thread questions judge masked copies."""
    return _index(tmp_path_factory.mktemp("korean_workspace"), "korean")


def _settings(data: Path) -> Settings:
    return Settings.from_env().with_data_dir(data)


def test_evaluate_mines_runs_every_arm_as_the_authors_and_saves_the_sets(
    workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _evaluation_env(monkeypatch, workspace)
    capsys.readouterr()
    saved = tmp_path / "acme_sets"
    assert main(["evaluate", "--data-dir", str(workspace), "--save-eval-set", str(saved), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    mining = out["mining"]
    assert mining["queries"] == {"mined_links": 1, "mined_jira_links": 1, "mined_threads": 2}, mining
    assert mining["languages"] == {"latin": 3, "ko": 1}
    assert mining["skipped"]["links: author may not read the judged documents"] == 1  # bob and OPS-9
    links = {
        q.id: q for q in load_eval_set(saved / "mined_links.jsonl", DirectoryLookup(workspace / "directory.sqlite"))
    }
    (question,) = links.values()
    assert question.person == "slack:U1" and list(question.relevant) == [f"jira:{SITE}:1"]
    assert "OPS-1" not in question.query
    # Alice's Slack and Jira accounts are one person (email): her Slack question may judge a Jira issue.
    assert f"jira:{SITE}:project:OPS" in question.principal.groups
    threads = load_eval_set(saved / "mined_threads.jsonl", DirectoryLookup(workspace / "directory.sqlite"))
    korean = next(q for q in threads if "lang:ko" in q.tags)
    assert korean.query == KOREAN and korean.exclude  # the question's chunks left out
    figures = out["evaluation"]["eval_sets"]
    assert set(figures) == {"mined_links", "mined_jira_links", "mined_threads"}
    arms = figures["mined_threads"]["arms"]
    assert {"vector", "bm25", "hybrid", "reranked", "prf", "reranked_by_week"} <= set(arms)
    assert all(a["leaks"] == 0 for f in figures.values() for a in f["arms"].values())
    # Found by the replies alone: the rotate question's thread still ranks (its question's chunk is gone).
    assert arms["bm25"]["recall@10"] > 0


def test_the_question_is_never_read_back_by_the_reranked_arm(workspace: Path) -> None:
    settings = _settings(workspace)
    threads = load_eval_set(workspace / "reports" / "mined" / "sets" / "mined_threads.jsonl",
                            DirectoryLookup(workspace / "directory.sqlite"))  # fmt: skip
    rotate = next(q for q in threads if q.query == ROTATE)
    dense = dense_encoder_of(settings)
    with open_index(settings) as store:
        search = retriever(store, search_models(settings, dense))
        candidates = search.rerank_candidates(rotate.query, rotate.principal, exclude=rotate.exclude)
        assert any(c.document_id in rotate.relevant for c in candidates)
        for c in candidates:
            for text in (c.title, c.parent_text, c.child_text):
                assert "rotate the ingest credentials" not in text, (c.document_id, text)
            assert c.child_id not in rotate.exclude
        # Unmasked, the same search reads the question (the mask, not the data, keeps it out).
        plain = search.rerank_candidates(rotate.query, rotate.principal)
        assert any("rotate the ingest credentials" in c.parent_text for c in plain)


def test_the_weekly_asset_writes_sets_the_evaluation_runs_and_the_sensor_wakes(workspace: Path) -> None:
    settings = _settings(workspace)
    # The code location defines it (one weekly partition set, the raw assets of every document source upstream).
    defs = build_definitions(settings)
    assert defs.resolve_assets_def("mined_eval_sets").partitions_def is not None
    specs = source_specs(settings)
    asset = build_mined_eval_sets(specs, mined_sources(specs), settings.partition_start)
    resources = build_resources(settings, specs)
    with dg.instance_for_test() as instance:
        result = dg.materialize([asset], instance=instance, resources=resources, partition_key=WEEK)
    assert result.success
    metadata = {k: v.value for k, v in result.asset_materializations_for_node("mined_eval_sets")[0].metadata.items()}
    assert metadata["queries_by_miner_and_source"] == {"jira_links/jira": 1, "links/slack": 1, "threads/slack": 2}
    assert metadata["languages"] == {"latin": 3, "ko": 1}
    assert "author may not read the judged documents" in json.dumps(metadata["skipped"])
    assert "프린터" in metadata["examples"]
    sets = workspace / "reports" / "mined" / "sets"
    assert (workspace / "reports" / "mined" / "weeks" / WEEK / "mined_threads.jsonl").exists()
    # The evaluation runs the mined sets beside the bundled ones.
    paths = evaluation_resource(settings).eval_set_paths()
    assert {p.stem for p in paths} >= {"mined_links", "mined_jira_links", "mined_threads", "slack_ubuntu_dev"}
    # A sync that mined enough new questions starts an evaluation; the same questions again do not.
    sensor = build_mined_queries_sensor(["bm25", "vector"], ["retrieval_eval"], sets, min_new=3)
    first = sensor(dg.build_sensor_context(cursor=None))
    assert len(first.run_requests) == 1 and first.run_requests[0].tags["rag/mined_new_queries"] == "4"
    again = sensor(dg.build_sensor_context(cursor=first.cursor))
    assert isinstance(again, dg.SkipReason)


def test_where_threads_are_scored_whole_questions_judge_copies_no_reader_sees(
    korean_workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _evaluation_env(monkeypatch, korean_workspace)
    capsys.readouterr()
    assert main(["evaluate", "--data-dir", str(korean_workspace), "--miners", "threads", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mining"]["queries"] == {"mined_threads": 4}  # every thread: no chunk has to be left over
    arms = out["evaluation"]["eval_sets"]["mined_threads"]["arms"]
    assert all(a["leaks"] == 0 for a in arms.values()) and arms["hybrid"]["recall@100"] > 0
    settings = _settings(korean_workspace)
    lookup = DirectoryLookup(korean_workspace / "directory.sqlite")
    threads = load_eval_set(korean_workspace / "reports" / "mined" / "sets" / "mined_threads.jsonl", lookup)
    korean = next(q for q in threads if q.query == KOREAN)
    (copy,) = korean.relevant
    dense = dense_encoder_of(settings)
    with open_index(settings) as store:
        indexed = store.indexed_documents()
        assert {d for d in indexed if d.endswith("#masked-question")} == {c for q in threads for c in q.relevant}
        search = retriever(store, search_models(settings, dense))
        # The copy holds the thread without its question and is found by the question's reader alone.
        found = search.search(KOREAN, "hybrid", principal_of(korean), top_k=10, exclude=korean.exclude)
        assert copy in [r.document_id for r in found.results]
        assert all(KOREAN not in (r.parent_text or "") for r in found.results if r.document_id == copy)
        # A reader (the same person, without the evaluation's group) never sees a copy, in any mode.
        for mode in ("hybrid", "bm25", "vector"):
            plain = search.search(KOREAN, mode, korean.principal, top_k=50)
            assert not [r for r in plain.results if r.document_id.endswith("#masked-question")], mode
    # Mining again with fewer queries removes the copies no set judges any more; nothing else is touched.
    before = set(indexed)
    assert main(["evaluate", "--data-dir", str(korean_workspace), "--miners", "threads", "--max-queries", "1",
                 "--no-eval", "--json"]) == 0  # fmt: skip
    with open_index(settings) as store:
        after = set(store.indexed_documents())
    kept = {d for d in after if d.endswith("#masked-question")}
    assert len(kept) == 1 and {d for d in before if not d.endswith("#masked-question")} == {
        d for d in after if not d.endswith("#masked-question")
    }
