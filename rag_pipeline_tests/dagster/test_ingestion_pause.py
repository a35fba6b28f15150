"""The one switch for scheduled ingestion (issue 51, part 7): ``rag-pipeline pause``/``resume`` (and
``RAG_INGESTION_PAUSED``) make every sync sensor and reconciliation schedule skip, through the real Dagster sensor
and schedule machinery, with nothing lost: the first tick after ``resume`` plans what the pause held back. And a
``.env`` file read under the explicit environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from rag_pipeline.cli import main
from rag_pipeline.defs.builders import build_definitions
from rag_pipeline.defs.parts import source_specs
from rag_pipeline.defs.sync.sensor import build_sync_sensor
from rag_pipeline.pipeline.policy import sync_policy
from rag_pipeline.settings import Settings, SettingsError, load_env_file
from rag_pipeline_tests.kit.pipeline import settings_for
from rag_pipeline_tests.kit.sync_harness import plan_of

NOW = datetime(2026, 3, 11, 10, 0, 30, tzinfo=UTC)


def _live(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Settings:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    monkeypatch.setenv("SLACK_API_BASE_URL", "http://127.0.0.1:9/api/")  # never called: only planning here
    monkeypatch.delenv("JIRA_URL", raising=False)
    monkeypatch.setenv("SLACK_REQUESTS_PER_MINUTE", "100000")
    return settings_for(tmp_path / "data")


def test_pause_skips_every_scheduled_ingestion_and_resume_catches_up(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = _live(monkeypatch, tmp_path)
    spec = source_specs(settings)["slack"]
    clock = {"now": NOW}
    sensor = build_sync_sensor(spec, settings.automation.sync("slack").cron, sync_policy(settings, "slack"),
                               clock=lambda: clock["now"], paused=settings.ingestion_pause)  # fmt: skip
    defs = build_definitions(settings)
    schedule = defs.resolve_schedule_def("slack_reconciliation_schedule")
    monkeypatch.setenv("RAG_DATA_DIR", str(settings.data_dir))

    assert main(["pause", "--reason", "Slack migration weekend"]) == 0
    assert "ingestion paused by" in capsys.readouterr().out
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(spec.containers_name, ["C0001", "C0002"])
        with dg.build_sensor_context(instance=instance, definitions=defs) as context:
            tick = sensor.evaluate_tick(context)
        assert not tick.run_requests and "Slack migration weekend" in (tick.skip_message or "")
        # The schedule the daemon runs (the one in the definitions) skips too.
        with dg.build_schedule_context(instance=instance, scheduled_execution_time=NOW) as context:
            assert not schedule.evaluate_tick(context).run_requests

        assert main(["resume"]) == 0
        assert "resumed" in capsys.readouterr().out
        clock["now"] = NOW + timedelta(days=2)  # the pause held two days back: nothing of them is lost
        with dg.build_sensor_context(instance=instance, definitions=defs) as context:
            resumed = sensor.evaluate_tick(context)
        assert len(resumed.run_requests or []) == 1
        assert sorted(plan_of(resumed.run_requests[0])) == ["C0001", "C0002"]
        with dg.build_schedule_context(instance=instance, scheduled_execution_time=NOW) as context:
            assert schedule.evaluate_tick(context).run_requests

    # The configuration's switch: the same skip, and `resume` says it cannot lift it.
    monkeypatch.setenv("RAG_INGESTION_PAUSED", "1")
    configured = Settings.from_env()
    pause = configured.ingestion_pause()
    assert pause is not None and "RAG_INGESTION_PAUSED" in pause.describe()
    assert main(["resume"]) == 0 and "still set" in capsys.readouterr().out


def test_an_env_file_is_read_under_the_explicit_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(
        "# a comment\nRAG_SERVE_CACHE_ENTRIES=7\nRAG_SERVE_CACHE_SECONDS=11\nRAG_TEST_SECRET='quoted value'\n"
    )
    monkeypatch.setenv("RAG_SERVE_CACHE_SECONDS", "99")  # set explicitly: the file never overrides it
    for name in ("RAG_SERVE_CACHE_ENTRIES", "RAG_TEST_SECRET", "RAG_ENV_FILE"):
        monkeypatch.delenv(name, raising=False)
    loaded = load_env_file(tmp_path)
    assert sorted(loaded) == ["RAG_SERVE_CACHE_ENTRIES", "RAG_TEST_SECRET"]
    assert os.environ["RAG_TEST_SECRET"] == "quoted value"
    serve = Settings.from_env({**os.environ, "RAG_DATA_DIR": str(tmp_path)}).serve
    assert (serve.cache_entries, serve.cache_seconds) == (7, 99)
    monkeypatch.setenv("RAG_ENV_FILE", str(tmp_path / "missing.env"))
    with pytest.raises(SettingsError, match=r"RAG_ENV_FILE names .*missing\.env"):
        load_env_file(tmp_path)


def test_the_cli_reads_dot_env_from_its_working_directory(tmp_path: Path) -> None:
    data = tmp_path / "from_dotenv"
    (tmp_path / ".env").write_text(f"RAG_DATA_DIR={data}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "SLACK_", "JIRA_"))}
    done = subprocess.run([sys.executable, "-m", "rag_pipeline.cli", "pause", "--json"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["by"] and (data / "ingestion_paused.json").exists()
