"""``rag-pipeline push FILE --source NAME`` through the command line's ``main`` (in this process, without an index:
the e2e test ``rag_pipeline_tests/e2e/test_push_documents.py`` writes through it): a file with a bad document is
refused whole with exit 2, each problem named; an unregistered source too; a good file reaches the index and is
told there is none yet (exit 2, one line), and the file is kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_pipeline.cli import main

GOOD = {"id": "pto", "container": "HR", "text": "25 days a year", "updated": "2024-03-01T10:00:00Z",
        "acl": {"groups": ["hr"]}}  # fmt: skip


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for variable in ("DAGSTER_HOME", "QDRANT_URL", "RAG_DATA_DIR", "RAG_ENV_FILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)  # no ./.env of the checkout read by main
    monkeypatch.setenv("RAG_PUSH_SOURCES", "hr_wiki")
    return tmp_path / "data"


def _lines(path: Path, *rows: dict[str, object]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_a_bad_file_is_refused_whole_naming_each_problem(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    file = _lines(tmp_path / "docs.jsonl", GOOD, {**GOOD, "id": "../x"}, {k: v for k, v in GOOD.items() if k != "acl"})
    assert main(["push", str(file), "--source", "hr_wiki", "--data-dir", str(data)]) == 2
    err = capsys.readouterr().err
    assert "documents[1].id" in err and "documents[2].acl" in err and "Traceback" not in err
    assert main(["push", str(file), "--source", "payroll", "--data-dir", str(data)]) == 2
    assert "source: " in capsys.readouterr().err


def test_a_good_file_without_an_index_is_one_error_line(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    file = _lines(tmp_path / "docs.jsonl", GOOD, {"id": "gone", "deleted": True})
    code = main(["push", str(file), "--source", "hr_wiki", "--data-dir", str(data), "--remove-when-written"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: no index at"), err
    assert file.exists()  # not written: kept for the next try


def test_a_refused_or_failed_write_is_not_recorded_and_replay_says_when_nothing_is(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    file = _lines(tmp_path / "docs.jsonl", GOOD)
    assert main(["push", str(file), "--source", "hr_wiki", "--data-dir", str(data)]) == 2  # no index yet
    assert not (data / "pushed_sources").exists()  # only a batch the index took is recorded
    capsys.readouterr()
    assert main(["push", "--replay", "--data-dir", str(data)]) == 0
    assert "no pushed source is recorded" in capsys.readouterr().out
    assert main(["push", "--replay", str(file), "--data-dir", str(data)]) == 2
    assert main(["push", str(file), "--data-dir", str(data)]) == 2  # a file needs its source
    assert "--source" in capsys.readouterr().err
