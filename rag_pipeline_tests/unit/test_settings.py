"""One configuration: read once, from the environment, by ``Settings.from_env`` alone."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from rag_pipeline.connectors.jira.settings import BUNDLED_JIRA_DUMP, JiraSettings
from rag_pipeline.connectors.slack.settings import SlackSettings
from rag_pipeline.settings import Settings, SettingsError
from rag_pipeline_tests.kit.paths import PACKAGE_DIR

PACKAGE = PACKAGE_DIR


def _environment_reads(path: Path) -> list[str]:
    """Lines of ``path`` that read the environment (writes such as ``os.environ.setdefault`` are allowed)."""
    tree = ast.parse(path.read_text())
    writes = {
        id(node.func.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "setdefault"
    }
    writes |= {
        id(target.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Subscript)
    }
    found = []
    for node in ast.walk(tree):
        is_environ = isinstance(node, ast.Attribute) and node.attr == "environ" and id(node) not in writes
        is_getenv = isinstance(node, ast.Attribute) and node.attr == "getenv"
        if is_environ or is_getenv:
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return found


def test_only_settings_reads_the_environment() -> None:
    reads = [r for p in sorted(PACKAGE.rglob("*.py")) if p.name != "settings.py" for r in _environment_reads(p)]
    assert reads == []


def test_importing_the_code_location_reads_no_configuration() -> None:
    # Values that would fail if anything read them at import time; building the settings then names the variable.
    env = {
        "PATH": "/usr/bin:/bin",
        "RAG_PARTITION_START": "not-a-day",
        "SLACK_BOT_TOKEN": "x",
        "SLACK_PAGE_SIZE": "lots",
    }
    script = (
        "import rag_pipeline.definitions, rag_pipeline.cli, rag_pipeline.runs.backfill, rag_pipeline.runs.live_sync\n"
        "from rag_pipeline.settings import Settings, SettingsError\n"
        "try:\n    Settings.from_env()\nexcept SettingsError as exc:\n    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "SLACK_PAGE_SIZE must be a whole number, got 'lots'"


def test_defaults_are_the_offline_demo(tmp_path: Path) -> None:
    settings = Settings.from_env({})
    assert settings.data_dir == Path(".rag_data").resolve() and settings.eval_dir.name == "eval_sets"
    assert settings.live_sources == () and settings.notifications is None and settings.qdrant.engine == "qdrant-edge"
    assert (
        settings.section("jira", JiraSettings).dump == BUNDLED_JIRA_DUMP and settings.dense_model == "all-MiniLM-L6-v2"
    )
    moved = settings.with_data_dir(tmp_path)
    assert (
        moved.paths.qdrant == tmp_path / "qdrant"
        and moved.paths.llm_grades == tmp_path / "reports" / "llm_grades.sqlite"
    )
    assert settings.with_data_dir(None) is settings
    # The evaluation's search arms: one process per core unless RAG_EVAL_WORKERS says how many.
    assert settings.eval_workers == 0 and Settings.from_env({"RAG_EVAL_WORKERS": "3"}).eval_workers == 3


def test_live_sources_and_their_options() -> None:
    env = {
        "SLACK_BOT_TOKEN": "xoxb-secret-value",
        "SLACK_PAGE_SIZE": "15",
        "JIRA_URL": "https://jira.internal",
        "JIRA_PAT": "pat-secret-value",
        "QDRANT_URL": "http://qdrant:6333",
        "QDRANT_API_KEY": "qdrant-secret-value",
        "QDRANT_SHARDS": "4",
        "RAG_NOTIFY_SLACK_CHANNEL": "#alerts",
        "RAG_RAW_SYNC_CRON": "*/30 * * * *",
    }
    settings = Settings.from_env(env)
    assert settings.live_sources == ("slack", "jira")
    slack, jira = settings.section("slack", SlackSettings), settings.section("jira", JiraSettings)
    assert slack.api is not None and slack.api.page_size == 15
    # Only a personal access token: Server/Data Center.
    assert jira.api is not None and not jira.api.cloud and jira.api.pat_set
    assert settings.qdrant.engine == "qdrant-client:server" and settings.qdrant.shards == 4
    assert settings.notifications is not None and settings.notifications.token_env == "SLACK_BOT_TOKEN"
    assert settings.automation.raw_sync_cron == "*/30 * * * *"
    # Each source's sync cron defaults to the shared one; 15 per page is Slack's 1-request-a-minute regime.
    assert settings.automation.sync("jira").cron == settings.automation.sync("slack").cron == "*/30 * * * *"
    sync = settings.automation.sync
    assert sync("slack").requests_per_minute == 1 and sync("jira").requests_per_minute is None
    assert settings.synced_sources == ("slack", "jira")
    own = Settings.from_env(
        {**env, "SLACK_SYNC_CRON": "0 */6 * * *", "RAG_JIRA_SYNC_ENABLED": "off", "SLACK_PAGE_SIZE": "200",
         "JIRA_INITIAL_HISTORY_DAYS": "7", "RAG_SYNC_SETTLE_HOURS": "0"}
    )  # fmt: skip
    assert own.automation.sync("slack").cron == "0 */6 * * *" and own.automation.sync("jira").cron == "*/30 * * * *"
    assert own.synced_sources == ("slack",) and own.live_sources == ("slack", "jira")
    assert own.automation.sync("slack").requests_per_minute == 50
    assert own.automation.sync("jira").initial_history_days == 7
    assert own.automation.settle_hours == 0
    # Secrets are never copied into the settings, only whether they are set.
    assert "secret-value" not in settings.model_dump_json()
    assert settings.offline().live_sources == ()
    cloud = Settings.from_env({**env, "JIRA_API_TOKEN": "t"}).section("jira", JiraSettings).api
    assert cloud is not None and cloud.cloud  # a Cloud token wins


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SLACK_BOT_TOKEN": "x", "SLACK_LOOKBACK_DAYS": "-1"}, "SLACK_LOOKBACK_DAYS must be at least 0, got -1"),
        ({"QDRANT_SHARDS": "0"}, "QDRANT_SHARDS must be at least 1, got 0"),
        ({"JIRA_URL": "https://j", "JIRA_CLOUD": "maybe"}, "JIRA_CLOUD must be one of"),
        ({"JIRA_URL": "https://j", "JIRA_PAGE_SIZE": "1.5"}, "JIRA_PAGE_SIZE must be a whole number, got '1.5'"),
        ({"JIRA_SYNC_CRON": "every hour"}, "JIRA_SYNC_CRON must be a cron expression"),
        ({"SLACK_INITIAL_HISTORY_DAYS": "0"}, "SLACK_INITIAL_HISTORY_DAYS must be at least 1, got 0"),
        ({"RAG_EVAL_WORKERS": "-1"}, "RAG_EVAL_WORKERS must be at least 0, got -1"),
        ({"RAG_SLACK_SYNC_ENABLED": "sometimes"}, "RAG_SLACK_SYNC_ENABLED must be one of"),
        (
            {"RAG_BM25_TOKENIZER": "kuromoji"},
            "RAG_BM25_TOKENIZER must be one of word, multilingual, cjk-bigram, ko-morpheme-bigram, got 'kuromoji'",
        ),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message.replace("(", r"\(")):
        Settings.from_env(env)


def test_the_command_line_reports_a_bad_variable_in_one_line(monkeypatch, capsys) -> None:
    from rag_pipeline.cli import main

    monkeypatch.setenv("QDRANT_REPLICAS", "two")
    assert main(["search", "anything"]) == 2
    assert capsys.readouterr().err.strip() == "error: QDRANT_REPLICAS must be a whole number, got 'two'"


def _offline_identity(settings: Settings) -> tuple[str | None, str | None, str | None]:
    slack, jira = settings.section("slack", SlackSettings), settings.section("jira", JiraSettings)
    return slack.offline_team, slack.offline_domain, jira.offline_site


def test_offline_identity_is_the_bundled_one_only_for_the_bundled_data(tmp_path: Path) -> None:
    bundled = Settings.from_env({})
    assert _offline_identity(bundled) == ("T0UBUNTU", "ubuntu.slack.com", "jira.appcelerator.org")
    own = Settings.from_env({"RAG_SLACK_EXPORT": str(tmp_path / "x"), "RAG_JIRA_DUMP": str(tmp_path / "y.gz")})
    assert _offline_identity(own) == (None, None, None)
    given = Settings.from_env(
        {
            "RAG_SLACK_EXPORT": str(tmp_path / "x"),
            "SLACK_TEAM_ID": "T0ACME",
            "SLACK_WORKSPACE_DOMAIN": "acme.slack.com",
            "JIRA_SITE": "jira.acme.com",
            "RAG_JIRA_CSV": f"{tmp_path / 'a.csv'}:{tmp_path / 'b.csv'}",
            "RAG_JIRA_CSV_DELIMITER": ";",
        }
    )
    assert _offline_identity(given) == ("T0ACME", "acme.slack.com", "jira.acme.com")
    jira = given.section("jira", JiraSettings)
    assert jira.csv == (tmp_path / "a.csv", tmp_path / "b.csv") and jira.csv_delimiter == ";"
    # A CSV export replaces the bundled dump, so the bundled site is no longer implied.
    assert _offline_identity(Settings.from_env({"RAG_JIRA_CSV": str(tmp_path / "a.csv")}))[2] is None
    with pytest.raises(SettingsError, match="RAG_JIRA_CSV_DELIMITER must be one character"):
        Settings.from_env({"RAG_JIRA_CSV_DELIMITER": ";;"})
    assert Settings.from_env({"RAG_JIRA_CSV_DELIMITER": "\\t"}).section("jira", JiraSettings).csv_delimiter == "\t"


def test_the_operator_partition_start_is_the_settings_one(tmp_path: Path) -> None:
    """The week spill's line (read without a Settings) and Settings.partition_start read RAG_PARTITION_START alike."""
    from rag_pipeline.settings import DEFAULT_PARTITION_START, operator_partition_start

    for value in (None, "", " 2023-01-02 ", "2019-07-01"):
        env = {"RAG_DATA_DIR": str(tmp_path)} | ({} if value is None else {"RAG_PARTITION_START": value})
        assert operator_partition_start(env) == Settings.from_env(env).partition_start
    assert operator_partition_start({"RAG_PARTITION_START": " 2023-01-02 "}) == "2023-01-02"
    assert operator_partition_start({}) == DEFAULT_PARTITION_START
