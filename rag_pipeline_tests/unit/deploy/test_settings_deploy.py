"""The deployment files against the settings catalogue (``rag_pipeline/setting_catalog.py``), offline.

What is checked:

- Nothing ``tools/settings_docs.py`` writes is stale: ``deploy/.env.example``, the table of
  ``docs/guides/configuration.md`` and the settings blocks of ``deploy/compose.yaml``,
  ``deploy/helm/dagster-values.yaml`` and ``deploy/k8s/search-service.yaml``; a catalogue entry added without running
  the generator is shown to make them stale.
- Every container that runs project code gets every setting its process reads (the catalogue's ``read_by``), except
  the fixed ones (paths of the container, which the image or the file sets) and ``NOT_DEPLOYED``: each Compose service
  (which process it runs is read from its command), the Helm code location (secrets through its ``envSecrets``, whose
  Secret template names them) and the Kubernetes search service (secrets through ``secretKeyRef``).
- No secret's value is written: secrets are empty in ``deploy/.env.example``, passed through or required
  interpolations in the compose file, absent from the Helm ``env``, ``valueFrom`` in the search manifest; an empty
  value in Helm or Kubernetes is given only to a setting that reads it as unset; a fixed setting is never passed
  through from the shell or deploy/.env.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from rag_pipeline.setting_catalog import SETTINGS, Setting, by_name
from rag_pipeline_tests.kit.paths import REPO_ROOT
from tools import settings_docs
from tools.settings_docs import (
    COMPOSE,
    COMPOSE_SERVICES,
    ENV_EXAMPLE,
    HELM_VALUES,
    NOT_DEPLOYED,
    SEARCH_MANIFEST,
    compose_interpolations,
    deployed,
    stale,
)

SECRETS_MANIFEST = REPO_ROOT / "deploy" / "k8s" / "secrets.yaml"
REQUIRED = re.compile(r"\$\{[A-Z][A-Z0-9_]*:\?[^}]+\}")
TOKEN_SHAPES = re.compile(r"xox[abprs]-[0-9A-Za-z-]+|\bsk-[A-Za-z0-9_-]{16,}|\bghp_[A-Za-z0-9]{20,}|AKIA[0-9A-Z]{16}")
# The process a project command runs, by its first words.
COMMAND_PROCESS = {
    ("rag-pipeline", "serve"): "serve",
    ("rag-pipeline", "metrics"): "metrics",
    ("rag-pipeline", "worker"): "dagster",
    ("dagster", "code-server"): "dagster",
}


def _yaml(path: Path) -> list[Any]:
    return list(yaml.safe_load_all(path.read_text(encoding="utf-8")))


def _environment(service: dict[str, Any]) -> dict[str, str | None]:
    return {k: None if v is None else str(v) for k, v in (service.get("environment") or {}).items()}


def _names(settings: list[Setting]) -> set[str]:
    return {s.name for s in settings}


def _search_container() -> dict[str, Any]:
    (deployment,) = [d for d in _yaml(SEARCH_MANIFEST) if d and d.get("kind") == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def _code_location() -> dict[str, Any]:
    return _yaml(HELM_VALUES)[0]["dagster-user-deployments"]["deployments"][0]


# --- generated files ---------------------------------------------------------------------------------------------
def test_the_generated_files_are_current() -> None:
    outdated = [str(p.relative_to(REPO_ROOT)) for p in stale()]
    assert outdated == [], f"stale: {outdated}; run .venv/bin/python -m tools.settings_docs"


def test_a_new_setting_makes_them_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = Setting("RAG_NEW_KNOB", "flag", "0", ("dagster", "serve", "metrics"), "a new knob", SETTINGS[0].group)
    monkeypatch.setattr(settings_docs, "SETTINGS", (*SETTINGS, extra))
    assert set(stale()) == {COMPOSE, HELM_VALUES, SEARCH_MANIFEST, ENV_EXAMPLE, settings_docs.CONFIGURATION}


# --- every setting reaches the processes that read it ------------------------------------------------------------
def test_compose_runs_the_processes_the_generator_assumes() -> None:
    services = _yaml(COMPOSE)[0]["services"]
    running = {}
    for name, service in services.items():
        command = tuple(service.get("command") or ())
        process = COMMAND_PROCESS.get(command[:2])
        if process is not None:
            running[name] = process
        elif command[:1] == ("rag-pipeline",):
            pytest.fail(f"{name} runs {command[:2]}: say which process that is (COMMAND_PROCESS)")
    assert running == COMPOSE_SERVICES


@pytest.mark.parametrize("service", sorted(COMPOSE_SERVICES))
def test_every_compose_service_gets_every_setting_its_process_reads(service: str) -> None:
    env = _environment(_yaml(COMPOSE)[0]["services"][service])
    missing = sorted(_names(deployed(COMPOSE_SERVICES[service])) - set(env))
    assert missing == [], f"{service} ({COMPOSE_SERVICES[service]}) misses {missing}"


def test_the_helm_code_location_gets_every_setting_the_pipeline_reads() -> None:
    location = _code_location()
    settings = deployed("dagster")
    missing = sorted(_names([s for s in settings if not s.secret]) - set(location["env"]))
    assert missing == [], f"the code location's env misses {missing}"
    # Secrets arrive with the whole Secret (envSecrets); its template names each one the pipeline reads.
    assert {"name": "rag-pipeline-secrets"} in location["envSecrets"]
    template = SECRETS_MANIFEST.read_text(encoding="utf-8")
    unnamed = sorted(s.name for s in settings if s.secret and s.name not in template)
    assert unnamed == [], f"deploy/k8s/secrets.yaml does not name {unnamed}"


def test_the_kubernetes_search_service_gets_every_setting_it_reads() -> None:
    env = {e["name"]: e for e in _search_container()["env"]}
    missing = sorted(_names(deployed("serve")) - set(env))
    assert missing == [], f"rag-search misses {missing}"
    for s in deployed("serve"):
        if s.secret:
            assert "value" not in env[s.name] and env[s.name]["valueFrom"]["secretKeyRef"], s.name


def test_what_no_deployment_passes() -> None:
    search = _environment(_yaml(COMPOSE)[0]["services"]["search"])
    kubernetes = {e["name"] for e in _search_container()["env"]}
    for name in NOT_DEPLOYED:
        assert name in by_name(), name
        assert name not in search and name not in kubernetes, name


# --- no secret written, no empty value misread ---------------------------------------------------------------------
def test_no_secret_value_is_written() -> None:
    secrets = {s.name for s in SETTINGS if s.secret}
    for path in (COMPOSE, HELM_VALUES, SEARCH_MANIFEST, ENV_EXAMPLE, settings_docs.CONFIGURATION):
        assert not TOKEN_SHAPES.search(path.read_text(encoding="utf-8")), f"{path}: something shaped like a token"
    for name, service in _yaml(COMPOSE)[0]["services"].items():
        for variable, value in _environment(service).items():
            if variable in secrets:
                assert value is None or REQUIRED.search(value), f"{name}: {variable} has a value"
    assert not secrets & set(_code_location()["env"]), "secrets come from envSecrets, not the values"
    for entry in _search_container()["env"]:
        if entry["name"] in secrets:
            assert "value" not in entry, entry["name"]
    for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        assignment = re.fullmatch(r"(?:# )?([A-Z][A-Z0-9_]*)=(.*)", line)
        if assignment and (assignment[1] in secrets or not line.startswith("#")):
            assert assignment[2] == "", f"deploy/.env.example: {line}"


def test_an_empty_value_is_only_given_where_it_reads_as_unset() -> None:
    catalogue = by_name()
    values = dict(_code_location()["env"])
    values |= {e["name"]: e["value"] for e in _search_container()["env"] if "value" in e}
    for name, value in values.items():
        if value == "":
            assert catalogue[name].empty_is_unset, f"{name}: an empty value is read as a value"


def test_fixed_settings_are_never_passed_through() -> None:
    fixed = {s.name for s in SETTINGS if s.fixed}
    for name, service in _yaml(COMPOSE)[0]["services"].items():
        for variable, value in _environment(service).items():
            if variable in fixed:
                assert value is not None and "${" not in value, f"{name}: {variable} is the container's own"


def test_the_env_example_lists_exactly_what_compose_takes_from_deploy_env() -> None:
    text = COMPOSE.read_text(encoding="utf-8")
    services = yaml.safe_load(text)["services"]
    taken = set(compose_interpolations(text))
    taken |= {v for n in COMPOSE_SERVICES for v, value in _environment(services[n]).items() if value is None}
    listed = set(re.findall(r"^(?:# )?([A-Z][A-Z0-9_]*)=", ENV_EXAMPLE.read_text(encoding="utf-8"), re.MULTILINE))
    assert listed == taken
