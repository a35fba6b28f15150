"""The eval-set format: round trip, bundled sets, and errors that name the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_pipeline.evaluation.eval_set import EvalQuery, EvalSetMeta, Principal, load_eval_set, write_eval_set
from rag_pipeline_tests.kit.paths import EVAL_SETS_DIR

EVAL_DIR = EVAL_SETS_DIR


def test_round_trip_keeps_unicode_line_separators(tmp_path: Path) -> None:
    queries = [
        EvalQuery(
            id="q1", query="crash\u2028when\x85saving", relevant={"jira:s:1": 2}, exclude=["jira:s:9"], tags=["t"]
        ),
        EvalQuery(id="q2", query="acl", relevant={"slack:T:C:1.0": 1}, principal=Principal(user_id="U1", groups=["g"])),
    ]
    meta = EvalSetMeta(name="tiny", description="d", source="s", license="l", attribution="a", queries=2)
    path = write_eval_set(tmp_path, meta, queries)
    assert load_eval_set(path) == queries
    assert (tmp_path / "tiny.meta.json").exists()


def test_bad_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a", "query": "x", "relevant": {"d": 1}}\n{"id": "b", "query": "  ", "relevant": {}}\n')
    with pytest.raises(ValueError, match=r"(?s)bad\.jsonl:2: .*query text is empty"):
        load_eval_set(path)


def test_bundled_eval_sets_point_at_bundled_documents() -> None:
    slack = load_eval_set(EVAL_DIR / "slack_ubuntu_dev.jsonl")
    jira = load_eval_set(EVAL_DIR / "jira_appcelerator_dev.jsonl")
    assert len(slack) == 94 and len(jira) == 560
    assert all(d.startswith("slack:T0UBUNTU:C0UBUNTU00:") for q in slack for d in q.relevant)
    assert all(q.exclude and q.exclude[0] not in q.relevant for q in jira)
