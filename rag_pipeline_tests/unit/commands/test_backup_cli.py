"""``rag-pipeline backup`` and ``restore`` through the command line's ``main`` (in this process, on a small folder
without an index or instance: the e2e test runs them on a real one): JSON summaries, exit statuses, and the damaged
file named on the one error line."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from rag_pipeline.cli import build_parser, main


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for variable in ("DAGSTER_HOME", "QDRANT_URL", "RAG_DATA_DIR"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)  # no ./.env of the checkout read by main
    monkeypatch.delenv("RAG_ENV_FILE", raising=False)
    data = tmp_path / "data"
    (data / "parquet" / "slack_threads").mkdir(parents=True)
    (data / "parquet" / "slack_threads" / "2024-W09.parquet").write_bytes(b"PAR1" * 100)
    db = sqlite3.connect(data / "directory.sqlite")
    db.execute("CREATE TABLE accounts (id)")
    db.commit()
    db.close()
    return data


def test_backup_and_restore_print_json_summaries(folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["backup", str(tmp_path / "backup"), "--data-dir", str(folder), "--json"]) == 0
    backup = json.loads(capsys.readouterr().out)
    assert backup["files"] == 2 and backup["backup"] == str(tmp_path / "backup") and backup["watermarks"] == {}
    assert any("no embedded index" in note for note in backup["notes"])
    assert main(["restore", str(tmp_path / "backup"), "--data-dir", str(tmp_path / "restored"), "--json"]) == 0
    restored = json.loads(capsys.readouterr().out)
    assert restored["files"] == 2 and restored["replaced"] == []
    assert (tmp_path / "restored" / "parquet" / "slack_threads" / "2024-W09.parquet").read_bytes() == b"PAR1" * 100
    assert main(["restore", str(tmp_path / "backup"), "--check", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verified"] is True


def test_refusals_exit_2_and_a_damaged_file_exits_1_naming_it(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["backup", str(tmp_path / "backup"), "--data-dir", str(folder)]) == 0
    assert "backed up" in capsys.readouterr().out
    # Restoring into the folder it came from: not empty.
    assert main(["restore", str(tmp_path / "backup"), "--data-dir", str(folder)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert main(["restore", str(tmp_path / "nothing"), "--data-dir", str(tmp_path / "r")]) == 2
    assert "no backup at" in capsys.readouterr().err
    damaged = tmp_path / "backup" / "data" / "parquet" / "slack_threads" / "2024-W09.parquet"
    damaged.write_bytes(b"PAR2" * 100)
    assert main(["restore", str(tmp_path / "backup"), "--data-dir", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: the backup's file data/parquet/slack_threads/2024-W09.parquet does not match"), err
    assert not any((tmp_path / "r").iterdir())


def test_the_command_list_names_both() -> None:
    text = build_parser().format_help()
    assert "backup" in text and "restore" in text
