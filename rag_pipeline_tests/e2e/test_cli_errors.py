"""User errors end with one ``error:`` line and a non-zero exit; tracebacks only with ``--debug``.

In-process cases call ``rag_pipeline.cli.main``; the subprocess cases check the whole stderr of a real
``rag-pipeline`` process (warning filters and Dagster's console logger included, which an in-process test
cannot see: conftest silences warnings for the whole test session).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.error
from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.cli import build_parser, main
from rag_pipeline.commands.errors import DEBUG_HINT, FAILURE, INTERRUPTED, USAGE, explain
from rag_pipeline.index.index_info import IndexModelMismatch
from rag_pipeline_tests.kit.data import jira_issue, write_jira_dump

# Variables that would point a command elsewhere than the test's folders.
_CONFIG_PREFIXES = ("RAG_", "SLACK_", "JIRA_", "QDRANT_", "OPENAI_", "DAGSTER_HOME")


def _one_error_line(err: str) -> str:
    """The only line of ``err``, which must be an ``error:`` line with nothing else around it."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    return lines[0]


# The embedding step's progress lines ("jira embedding (chunks): 1/1 (100%), 27.8/s") are the command's own
# output on stderr, printed before a later step fails.
_PROGRESS_LINE = re.compile(r"^\w+ embedding \(\w+\): \d+/\d+|^\w+: \d+/\d+ batches")  # the first index runs in batches


def _error_after_progress(err: str) -> str:
    """The last line of ``err``, an ``error:`` line, with only progress lines before it."""
    *before, last = err.strip().splitlines()
    assert all(_PROGRESS_LINE.match(line) for line in before), err
    assert last.startswith("error: "), err
    return last


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_CONFIG_PREFIXES)}
    return {**env, **extra}


def _run_cli(args: list[str], env: dict[str, str], prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    command = [*prefix, sys.executable, "-m", "rag_pipeline.cli", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def _assert_quiet(err: str) -> None:
    """No library warning, no traceback, no Dagster event line: only what the command printed."""
    assert "Warning" not in err and "Traceback" not in err, err
    assert " - dagster - " not in err, err


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _tiny_jira_dump(tmp_path: Path) -> Path:
    return write_jira_dump(
        tmp_path / "jira.jsonl.gz",
        [jira_issue("1", "AC-1", "2024-03-01T10:00:00.000+0000", description="Build fails on Windows")],
    )


# --- paths -----------------------------------------------------------------------------------------------


def test_search_with_a_data_folder_that_does_not_exist_names_it_and_creates_nothing(tmp_path: Path) -> None:
    """A mistyped --data-dir made the folder (an empty embedding cache in it) before failing on the index."""
    missing = tmp_path / "no" / "such" / "folder"
    done = _run_cli(["search", "--data-dir", str(missing), "wifi"], _clean_env())
    assert done.returncode == USAGE, done.stderr
    line = _one_error_line(done.stderr)
    assert line.startswith(f"error: no data folder at {missing} (--data-dir): "), line
    assert "`rag-pipeline demo`" in line and "`rag-pipeline index`" in line and "check --data-dir" in line, line
    assert not (tmp_path / "no").exists()
    # From RAG_DATA_DIR, the message names the variable.
    done = _run_cli(["search", "wifi"], _clean_env(RAG_DATA_DIR=str(missing)))
    assert done.returncode == USAGE and f"{missing} (RAG_DATA_DIR)" in _one_error_line(done.stderr), done.stderr
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["ask", "wifi"],
        ["tree", "--user", "U1"],
        ["tools", "wifi"],
        ["whois", "U1"],
        ["explain", "--user", "U1", "slack:T1:C1:1.0"],
        ["audit"],
        ["evaluate"],
        ["status"],
    ],
    ids=lambda argv: argv[0],
)
def test_read_only_commands_refuse_a_missing_data_folder_without_creating_it(
    argv: list[str], tmp_path: Path, capsys, monkeypatch
) -> None:
    for name in [k for k in os.environ if k.startswith(_CONFIG_PREFIXES)]:
        monkeypatch.delenv(name)
    missing = tmp_path / "missing"
    assert main([*argv, "--data-dir", str(missing)]) == USAGE
    assert _one_error_line(capsys.readouterr().err).startswith(f"error: no data folder at {missing} (--data-dir)")
    assert not missing.exists()


def test_a_search_sent_to_a_service_needs_no_local_data_folder(tmp_path: Path, capsys, monkeypatch) -> None:
    """`search --server` reads nothing local: a missing data folder must not stop it (CI found it on a clean clone)."""
    for name in [k for k in os.environ if k.startswith(_CONFIG_PREFIXES)]:
        monkeypatch.delenv(name)
    missing = tmp_path / "missing"
    url = f"http://127.0.0.1:{_closed_port()}"
    code = main(["search", "wifi", "--server", url, "--user", "U1", "--data-dir", str(missing)])
    line = _one_error_line(capsys.readouterr().err)
    assert code != 0 and line.startswith(f"error: cannot reach the search service at {url}"), line
    assert not missing.exists()


def test_a_data_folder_given_as_a_file_to_a_read_only_command(tmp_path: Path, capsys) -> None:
    file = tmp_path / "data"
    file.write_text("")
    assert main(["search", "wifi", "--data-dir", str(file)]) == USAGE
    assert (
        _one_error_line(capsys.readouterr().err)
        == f"error: the data folder {file} (--data-dir) is a file, not a folder"
    )


def test_data_folder_that_is_a_file(tmp_path: Path, capsys) -> None:
    file = tmp_path / "data"
    file.write_text("not a folder")
    assert main(["demo", "--no-eval", "--data-dir", str(file)]) == USAGE
    line = _one_error_line(capsys.readouterr().err)
    assert line == f"error: the data folder {file} (--data-dir / RAG_DATA_DIR) is a file, not a folder"


def test_data_folder_under_a_file(tmp_path: Path, capsys) -> None:
    # Unwritable for root too (the other way to get a folder that cannot be created).
    (tmp_path / "file").write_text("x")
    folder = tmp_path / "file" / "data"
    assert main(["demo", "--no-eval", "--data-dir", str(folder)]) == USAGE
    line = _one_error_line(capsys.readouterr().err)
    assert str(folder) in line and line.endswith("cannot be written: not a directory")


def _writable(folder: Path) -> bool:
    try:
        (folder / "probe").touch()
    except PermissionError:
        return False
    (folder / "probe").unlink()
    return True


def test_read_only_data_folder(tmp_path: Path) -> None:
    folder = tmp_path / "read_only"
    folder.mkdir()
    folder.chmod(0o555)
    prefix: tuple[str, ...] = ()
    if _writable(folder):
        # Root ignores permission bits; without CAP_DAC_OVERRIDE it is held to them like anyone else.
        setpriv = shutil.which("setpriv")
        prefix = (setpriv, "--bounding-set", "-dac_override,-dac_read_search", "--") if setpriv else ()
        if not prefix or subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
            pytest.skip("running as root and capabilities cannot be dropped: the folder stays writable")
    try:
        done = _run_cli(["demo", "--no-eval", "--data-dir", str(folder)], _clean_env(), prefix)
    finally:
        folder.chmod(0o755)
    assert done.returncode == USAGE, done.stderr
    line = _one_error_line(done.stderr)
    assert line == f"error: the data folder {folder} (--data-dir / RAG_DATA_DIR) cannot be written: permission denied"
    _assert_quiet(done.stderr)


def test_demo_with_a_missing_slack_export(tmp_path: Path) -> None:
    missing = tmp_path / "no_such_export"
    env = _clean_env(RAG_SLACK_EXPORT=str(missing))
    done = _run_cli(["demo", "--source", "slack", "--no-eval", "--data-dir", str(tmp_path / "data")], env)
    assert done.returncode == USAGE, done.stderr
    assert _one_error_line(done.stderr) == f"error: the Slack export {missing} (RAG_SLACK_EXPORT) does not exist"
    _assert_quiet(done.stderr)


# --- values the parser refuses ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["bench", "--eval-set", "missing.jsonl"], "argument --eval-set: missing.jsonl: no such file"),
        (["search", ""], "argument query: the query is empty"),
        (["search", "   "], "argument query: the query is empty"),
        (["search", "x", "--top-k", "-1"], "argument --top-k: must be at least 1, got -1"),
        (["search", "x", "--top-k", "0"], "argument --top-k: must be at least 1, got 0"),
        (["sync", "--source", "jira", "--start", "2024-02-30"], "argument --start: must be a day as YYYY-MM-DD"),
        (["bench", "--beir", "/nonexistent/beir"], "argument --beir: /nonexistent/beir: no such folder"),
        (["demo", "--bridge-days", "-1"], "argument --bridge-days: must be at least 0, got -1"),
    ],
)
def test_bad_values_stop_at_parsing_with_one_line(argv: list[str], expected: str, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--data-dir", str(tmp_path)])
    assert stop.value.code == USAGE
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"error: {expected}") and "--help" in line


def test_bad_eval_set_line(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "q1", "query": "x", "relevant": {}}\n{"id": "q2"}\n')
    assert main(["bench", "--eval-set", str(bad), "--data-dir", str(tmp_path / "data")]) == USAGE
    line = _one_error_line(capsys.readouterr().err)
    assert line == f"error: {bad}:2: invalid eval query: query: Field required; relevant: Field required"


def test_a_command_stopping_with_a_message_prints_it_once(tmp_path: Path, capsys) -> None:
    beir = tmp_path / "beir_tiny"
    beir.mkdir()
    with pytest.raises(SystemExit) as stop:
        main(["bench", "--beir", str(beir), "--split", "test", "--train-split", "test", "--data-dir", str(tmp_path)])
    assert stop.value.code == USAGE and "--train-split are both 'test'" in str(stop.value)
    assert "--train-split are both 'test'" in _one_error_line(capsys.readouterr().err)


# --- services that cannot be reached ---------------------------------------------------------------------


def test_sync_with_an_unreachable_jira_names_the_url(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    env = _clean_env(JIRA_URL=url, JIRA_USERNAME="someone@example.com", JIRA_API_TOKEN="not-a-real-token")
    done = _run_cli(["sync", "--source", "jira", "--start", "2024-03-01", "--data-dir", str(tmp_path)], env)
    assert done.returncode == FAILURE, done.stderr
    line = _one_error_line(done.stderr)
    assert url in line and "not-a-real-token" not in line
    _assert_quiet(done.stderr)


def test_sync_with_an_unreachable_slack_names_the_url(tmp_path: Path, monkeypatch, capsys) -> None:
    import rag_pipeline.runs.live_sync as live_sync

    def refused(*args: object, **kwargs: object) -> None:
        # What slack-sdk raises (urllib), after its own retry, when nothing listens at the base URL.
        raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))

    monkeypatch.setattr(live_sync, "run_sync", refused)
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-not-a-real-token")
    monkeypatch.setenv("SLACK_API_BASE_URL", "http://127.0.0.1:9/api/")
    assert main(["sync", "--source", "slack", "--start", "2024-03-01", "--data-dir", str(tmp_path)]) == FAILURE
    line = _one_error_line(capsys.readouterr().err)
    assert line == (
        "error: the Slack Web API at http://127.0.0.1:9/api/ could not be reached (Connection refused): "
        "check SLACK_API_BASE_URL and the network"
    )


def test_bench_with_an_unreachable_qdrant_server_names_the_variable(tmp_path: Path, monkeypatch, capsys) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("QDRANT_URL", url)
    eval_set = tmp_path / "tiny.jsonl"
    eval_set.write_text('{"id": "q1", "query": "wifi", "relevant": {"slack:T:C:1": 1}}\n')
    assert main(["bench", "--eval-set", str(eval_set), "--data-dir", str(tmp_path / "data")]) == FAILURE
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"error: could not connect to {url}/") and "(QDRANT_URL): Connection refused" in line


# --- failures inside a Dagster run -----------------------------------------------------------------------


def test_a_step_failure_in_the_demo_is_one_line(tmp_path: Path) -> None:
    # The index claims another dense model, so the points step of the demo's run refuses to write: the
    # user error surfaces from inside an in-process run (raise_on_error=True), where Dagster's console
    # logger would print the step failure with its stack trace.
    data = tmp_path / "data"
    (data / "qdrant").mkdir(parents=True)
    (data / "qdrant" / "rag_children.index.json").write_text(json.dumps({"dense_model": "another-model"}))
    env = _clean_env(RAG_JIRA_DUMP=str(_tiny_jira_dump(tmp_path)), JIRA_SITE="jira.example.com")
    done = _run_cli(["demo", "--source", "jira", "--no-eval", "--data-dir", str(data)], env)
    assert done.returncode == USAGE, done.stderr
    line = _error_after_progress(done.stderr)
    assert "built with dense model 'another-model'" in line and "RAG_DENSE_MODEL" in line
    _assert_quiet(done.stderr)


def test_dagster_step_wrappers_are_unwrapped_to_the_user_error() -> None:
    mismatch = IndexModelMismatch("the index was built with dense model 'a' but 'b' is configured")
    try:
        raise mismatch
    except IndexModelMismatch:
        wrapped = dg.DagsterExecutionStepExecutionError(
            'Error occurred while executing op "jira_qdrant_points"',
            user_exception=mismatch,
            original_exc_info=sys.exc_info(),
            step_key="jira_qdrant_points",
            op_name="jira_qdrant_points",
            op_def_name="jira_qdrant_points",
        )
    explained = explain(wrapped)
    assert explained.code == USAGE and explained.expected
    assert explained.message == f"{mismatch} (step jira_qdrant_points)"
    failure = explain(dg.Failure(description="Slack not_in_channel: invite the bot"))
    assert (failure.message, failure.code, failure.expected) == ("Slack not_in_channel: invite the bot", FAILURE, True)


# --- the unexpected ---------------------------------------------------------------------------------------


def test_an_unexpected_error_is_one_line_with_a_hint_and_a_traceback_with_debug(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    import rag_pipeline.commands.index as index

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(index, "run_backfill", broken)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    argv = ["demo", "--no-eval", "--data-dir", str(tmp_path)]
    assert main(argv) == FAILURE
    line = _one_error_line(capsys.readouterr().err)
    assert line == f"error: unexpected RuntimeError: boom second line ({DEBUG_HINT})"

    for debug_argv in (["--debug", *argv], [*argv, "--debug"]):
        assert main(debug_argv) == FAILURE
        err = capsys.readouterr().err
        assert err.startswith("Traceback (most recent call last):") and 'raise RuntimeError("boom' in err
        assert err.strip().splitlines()[-1] == "error: unexpected RuntimeError: boom second line"


def test_an_interrupt_is_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    import rag_pipeline.commands.index as index

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(index, "run_backfill", interrupted)
    assert main(["demo", "--no-eval", "--data-dir", str(tmp_path)]) == INTERRUPTED
    assert _one_error_line(capsys.readouterr().err) == "error: interrupted"


def test_help_documents_the_exit_status() -> None:
    text = build_parser().format_help()
    assert "exit status:" in text and "--debug" in text
    assert "1  runtime failure" in text and "2  usage or configuration error" in text
