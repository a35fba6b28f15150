"""The source registry: built-in sources, plugins found through the ``rag_pipeline.sources`` entry-point group,
and the errors that name a broken registration."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_pipeline.connectors.jira.settings import JiraSettings
from rag_pipeline.connectors.slack.settings import SlackSettings
from rag_pipeline.settings import Settings
from rag_pipeline.sources import registry


@pytest.fixture
def plugin_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path where a test writes plugin distributions; the registry is read afresh around it."""
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.registered_sources.cache_clear()
    yield tmp_path
    registry.registered_sources.cache_clear()


def _register(site: Path, name: str, entries: str) -> None:
    info = site / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{registry.ENTRY_POINT_GROUP}]\n{entries}\n")


def test_the_built_in_sources_come_first_with_their_settings_sections() -> None:
    assert registry.source_names()[:2] == ("slack", "jira")
    settings = Settings.from_env({"RAG_JIRA_CSV_DELIMITER": ";", "SLACK_TEAM_ID": "T0ACME"})
    assert isinstance(settings.source("slack"), SlackSettings) and isinstance(settings.source("jira"), JiraSettings)
    assert settings.section("jira", JiraSettings).csv_delimiter == ";"
    assert settings.section("slack", SlackSettings).offline_team == "T0ACME"
    with pytest.raises(ValueError, match="unknown source 'notion': choose from slack, jira, confluence"):
        settings.source("notion")
    with pytest.raises(TypeError, match="the slack settings are a SlackSettings, not a JiraSettings"):
        settings.section("slack", JiraSettings)


def test_command_line_values_replace_one_sources_settings_only(tmp_path: Path) -> None:
    settings = Settings.from_env({})
    given = settings.with_source("jira", csv=(tmp_path / "a.csv",), site="jira.acme.com", dump=None)
    jira = given.section("jira", JiraSettings)
    assert jira.csv == (tmp_path / "a.csv",) and jira.site == "jira.acme.com"
    assert jira.dump == settings.section("jira", JiraSettings).dump  # None keeps the current value
    assert jira.offline_site == "jira.acme.com" and given.source("slack") == settings.source("slack")
    with pytest.raises(TypeError, match="not settings of JiraSettings: channel"):
        settings.with_source("jira", channel="x")


def test_a_plugin_registered_by_an_installed_package_is_a_source(plugin_path: Path) -> None:
    _register(plugin_path, "toy", "toy = rag_pipeline_tests.kit.toy_source.source:SOURCE")
    assert registry.source_names() == ("slack", "jira", "confluence", "tools", "toy")
    settings = Settings.from_env({"TOY_FOLDER": str(plugin_path)})
    assert settings.source("toy").inputs()[0].path == plugin_path
    # Its scheduled-sync variables are read by name like the built-in sources' (RAG_<SOURCE>_SYNC_ENABLED...).
    assert Settings.from_env({"TOY_INITIAL_HISTORY_DAYS": "3"}).automation.sync("toy").initial_history_days == 3


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ("slack2 = rag_pipeline.connectors.slack.source:SLACK", r"registers 'slack' a second time"),
        ("bad = rag_pipeline.sources.registry:BUILT_IN", r"'bad = rag_pipeline.sources.registry:BUILT_IN' is a tuple"),
        ("gone = no_such_module:SOURCE", r"gone = no_such_module:SOURCE"),
    ],
)
def test_a_broken_registration_is_named(plugin_path: Path, entries: str, message: str) -> None:
    _register(plugin_path, "broken", entries)
    with pytest.raises(registry.SourceRegistryError, match=message):
        registry.registered_sources()


def test_the_payload_hook_is_the_sources_own() -> None:
    metadata = {"resolution": None, "links": [{"relation": "duplicates", "key": "AC-30", "type": "Duplicate"}]}
    assert registry.document_payload("jira", metadata) == {
        "resolution": "Unresolved",
        "links": ["duplicates:AC-30"],
        "link_types": ["Duplicate"],
    }
    assert registry.document_payload("slack", metadata) == {}
    assert registry.document_payload("not-registered", metadata) == {}


def test_no_shared_module_names_a_built_in_sources_settings() -> None:
    """The settings module holds no Slack or Jira field: each source's section lives in its own folder."""
    fields = set(Settings.model_fields)
    assert not {f for f in fields if "slack" in f or "jira" in f}


def test_a_push_receivers_variable_sets_its_secret_field() -> None:
    """``PushedChanges.variable`` is derived from the field's name: it must be a catalogued variable that really
    sets that ServeSettings field (a renamed field or variable would otherwise name a dead variable in the 404)."""
    from rag_pipeline.setting_catalog import by_name

    pushes = {n: s.live_api.push for n, s in registry.registered_sources().items() if s.live_api and s.live_api.push}
    assert set(pushes) >= {"slack", "jira", "confluence"}
    for push in pushes.values():
        assert push.variable in by_name(), push
        serve = Settings.from_env({push.variable: "a-secret"}).serve
        assert getattr(serve, push.secret).get_secret_value() == "a-secret", push
