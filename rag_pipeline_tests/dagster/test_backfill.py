"""The demo command end to end on small crafted sources, and how it groups partitions into runs."""

from __future__ import annotations

import ast
import json
from datetime import UTC, date, datetime
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
from dagster._core.instance.ref import InstanceRef

from rag_pipeline.cli import build_parser, main
from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta, write_eval_set
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.runs.backfill import run_backfill
from rag_pipeline.scheduling.coverage import weeks_between
from rag_pipeline_tests.kit.data import jira_issue, write_jira_dump
from rag_pipeline_tests.kit.paths import PACKAGE_DIR
from rag_pipeline_tests.kit.pipeline import settings_for


@pytest.fixture
def small_sources(tmp_path: Path, slack_export: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    dump = write_jira_dump(
        tmp_path / "jira.jsonl.gz",
        [
            jira_issue("1", "AC-1", "2024-03-01T10:00:00.000+0000", description="Build fails on Windows"),
            jira_issue("2", "AC-2", "2024-03-04T10:00:00.000+0000", description="Crash when opening a window"),
        ],
        extra_lines=["not json"],
    )
    site = "jira.appcelerator.org"
    write_eval_set(
        tmp_path / "eval_sets",
        EvalSetMeta(
            name="tiny", description="", source="test", license="-", attribution="-", queries=3, sources=["jira"]
        ),
        [
            EvalQuery(id="q1", query="build fails on windows", relevant={f"jira:{site}:1": 1}),
            EvalQuery(id="q2", query="crash when opening a window", relevant={f"jira:{site}:2": 1}),
            EvalQuery(id="q3", query="crash", relevant={}, principal=Principal(user_id="U_OUT")),
        ],
    )
    monkeypatch.setenv("RAG_EVAL_DIR", str(tmp_path / "eval_sets"))
    monkeypatch.setenv("RAG_SLACK_EXPORT", str(slack_export))
    monkeypatch.setenv("RAG_JIRA_DUMP", str(dump))
    # Crafted data names no workspace or site: give the ones the expected ids use.
    monkeypatch.setenv("SLACK_TEAM_ID", "T0UBUNTU")
    monkeypatch.setenv("JIRA_SITE", site)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    return tmp_path / "data"


# A whole demo run (26 s): in the slow suite, which `make test` (and CI) runs after the default one.
@pytest.mark.slow
def test_demo_indexes_every_partition_with_data_and_reruns_for_free(small_sources: Path, capsys) -> None:
    assert main(["demo", "--json", "--data-dir", str(small_sources)]) == 0
    first = json.loads(capsys.readouterr().out)
    for key in (
        "documents",
        "parent_chunks",
        "child_chunks",
        "points",
        "embeddings_computed",
        "embeddings_cached",
        "seconds",
    ):
        assert key in first
    # Slack: 3 public threads + 1 private; Jira: 2 issues (the bad line is reported, not fatal).
    assert first["per_source"]["slack"]["documents"] == 4 and first["per_source"]["jira"]["documents"] == 2
    # Every child chunk and every document's title (6 documents, each with a title), embedded once.
    assert first["embeddings_computed"] == first["child_chunks"] + 6 and first["child_chunks"] > 0
    assert first["points"] == first["parent_chunks"] + first["child_chunks"]
    # One run per source over every week from its first document through this week: nothing shows as missing.
    weeks = weeks_between(date(2024, 3, 1), datetime.now(UTC).date())
    assert first["per_source"]["jira"]["runs"] == 1 and first["per_source"]["jira"]["partitions"] == len(weeks)
    assert first["per_source"]["slack"]["runs"] == 1

    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(first["dagster_home"])) as instance:
        assert instance.get_materialized_partitions(dg.AssetKey("jira_qdrant_points")) == set(weeks)
        assert "2024-02-26" in instance.get_materialized_partitions(dg.AssetKey("slack_qdrant_points"))
        assert instance.get_materialized_partitions(dg.AssetKey("retrieval_eval")) == {
            "vector",
            "bm25",
            "hybrid",
            "reranked",
            "prf",
        }
    # Only the weeks with issues have a file (the others cost their Dagster events and nothing else); each row
    # names its day and project.
    parquet = small_sources / "parquet" / "jira_issues"
    assert sorted(p.name for p in parquet.glob("*.parquet")) == ["2024-02-26.parquet", "2024-03-04.parquet"]
    week = pd.read_parquet(parquet / "2024-02-26.parquet")
    assert week[["_day", "_container"]].values.tolist() == [["2024-03-01", "AC"]]
    # The demo ends with the evaluation, run through the Dagster eval assets on the same instance.
    evaluation = first["evaluation"]
    assert evaluation["ran"] and evaluation["checks"]["acl_no_leaks"]
    arms = evaluation["eval_sets"]["tiny"]["arms"]
    assert set(arms) == {"vector", "bm25", "hybrid", "reranked", "prf"}
    assert arms["bm25"]["ndcg@10"] == 1.0  # both issues are found first by their own words

    assert main(["demo", "--json", "--data-dir", str(small_sources)]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["embeddings_computed"] == 0 and second["runs"] == 0
    assert second["runs_skipped_unchanged"] == first["runs"]
    assert not second["evaluation"]["ran"]  # index unchanged: the last report is shown, not recomputed
    assert second["evaluation"]["eval_sets"] == evaluation["eval_sets"]

    assert main(["demo", "--json", "--full-refresh", "--data-dir", str(small_sources)]) == 0
    refresh = json.loads(capsys.readouterr().out)
    assert refresh["embeddings_computed"] == 0 and refresh["embeddings_cached"] == first["embeddings_computed"]
    assert refresh["points"] == first["points"]


# Slow suite (22 s): a second full demo run for its table; the JSON demo test above stays in the default suite.
@pytest.mark.slow
def test_demo_table_output_and_help(small_sources: Path, capsys) -> None:
    summary = run_backfill(settings_for(small_sources), sources=("jira",))
    assert summary.as_dict()["documents"] == 2
    assert main(["demo", "--source", "jira", "--data-dir", str(small_sources)]) == 0
    out = capsys.readouterr().out
    assert "jira" in out and "Dagster instance" in out
    assert "### tiny" in out and "| bm25 (baseline)" in out
    # It says what it does before each phase, the index's language and the machine the seconds came from.
    assert out.index("Indexing the data") < out.index("Evaluating 5 arms on 1 eval sets") < out.index("### tiny")
    assert "\nlanguage: english (dense all-MiniLM-L6-v2, BM25 word; chosen from the data: 0 of 2 sampled" in out
    assert "\nmachine: " in out and " cores; dense encoder " in out
    # A Slack-only demo is not scored on an eval set scoped to Jira.
    assert main(["demo", "--source", "slack", "--json", "--data-dir", str(small_sources)]) == 0
    slack_only = json.loads(capsys.readouterr().out)["evaluation"]
    assert slack_only["eval_sets"] == {} and "no eval set is scoped to slack" in slack_only["failures"][0]

    # Search the demo index as a reader of project AC, and as someone who may read nothing.
    group = "jira:jira.appcelerator.org:project:AC"
    for mode in ("vector", "bm25", "hybrid", "reranked", "prf"):
        argv = ["search", "crash opening a window", "--mode", mode, "--groups", group, "--json"]
        assert main([*argv, "--data-dir", str(small_sources)]) == 0
        found = json.loads(capsys.readouterr().out)
        assert found["mode"] == mode and found["warnings"] == []
        assert found["results"][0]["title"].startswith("AC-2") and found["results"][0]["parent_text"]
    assert main(["search", "crash opening a window", "--json", "--data-dir", str(small_sources)]) == 0
    assert json.loads(capsys.readouterr().out)["results"] == []
    assert main(["search", "crash", "--data-dir", str(small_sources), "--groups", group]) == 0
    assert "AC-2" in capsys.readouterr().out
    help_text = build_parser().format_help()
    assert "demo" in help_text
    with pytest.raises(SystemExit):
        main(["demo", "--source", "notion"])  # not a registered source


def test_domain_code_never_imports_dagster() -> None:
    package = PACKAGE_DIR
    # The Dagster layer: the code location, its wiring, the in-process runners and the commands on them.
    orchestration = {package / "definitions.py", package / "cli.py"}
    dagster_layer = {package / name for name in ("defs", "runs", "commands")}
    offenders = []
    for path in package.rglob("*.py"):
        if path in orchestration or dagster_layer & set(path.parents):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            )
            if any(n == "dagster" or n.startswith("dagster.") or n.startswith("dagster_") for n in names):
                offenders.append(str(path.relative_to(package)))
    assert offenders == []


def test_documents_dated_outside_the_partitions_are_reported_not_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    dump = write_jira_dump(
        tmp_path / "jira.jsonl.gz",
        [
            jira_issue("1", "AC-1", "2024-03-01T10:00:00.000+0000", description="inside the partitions"),
            jira_issue("2", "AC-2", "1999-03-01T10:00:00.000+0000", description="before the first partition day"),
            jira_issue("3", "AC-3", "2999-03-01T10:00:00.000+0000", description="dated in the future"),
        ],
    )
    monkeypatch.setenv("RAG_JIRA_DUMP", str(dump))
    monkeypatch.setenv("JIRA_SITE", "jira.example.com")
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    summary = run_backfill(settings_for(tmp_path / "data"), sources=("jira",)).as_dict()["per_source"]["jira"]
    assert summary["documents"] == 1 and summary["documents_outside_partitions"] == 2
    assert "2 document(s) dated outside the partitions (2004-01-01.." in capsys.readouterr().err
