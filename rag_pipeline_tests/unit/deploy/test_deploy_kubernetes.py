"""The Kubernetes deployment (deploy/k8s/, deploy/helm/), validated offline: no cluster, no helm, no chart.

What is validated:

- Every manifest in ``deploy/k8s/`` against the Kubernetes 1.33 OpenAPI schemas, in strict mode (an unknown or
  misspelt field fails), with ``kubernetes-validate``'s Python API; a kind it has no schema for fails too.
- Secrets hold placeholders only; every Secret, key and PersistentVolumeClaim that the values, the manifests and
  the project's ``K8S_EXECUTOR_CONFIG`` name exists in ``deploy/k8s/``.
- The search service runs ``rag-pipeline serve`` with flags the CLI's own parser accepts, on a non-loopback host
  with ``RAG_SERVE_TOKEN`` (which serve requires there), probes and Prometheus annotations on the service's port.
- ``deploy/helm/dagster-values.yaml`` with Dagster's own schemas: the ``dagster.yaml`` the chart makes from these
  values (run launcher, run coordinator, concurrency, run monitoring and retries, PostgreSQL storage) loads with
  Dagster's instance schema, each configurable class's config passes that class's schema, ``K8sRunLauncher`` and
  ``QueuedRunCoordinator`` are built from it, and its limits equal ``deploy/dagster.postgres.yaml``'s.
- ``K8S_EXECUTOR_CONFIG`` against ``k8s_job_executor``'s config schema, and ``EMBED_STEP_K8S_CONFIG`` (the
  embedding step's ``dagster-k8s/config`` tag) through dagster-k8s's ``get_user_defined_k8s_config``. Then the
  embedding step's Kubernetes Job is built the way ``k8s_job_executor`` builds it (run launcher, code location,
  executor config, step tag merged, ``construct_dagster_k8s_job``) and that Job validates against the Kubernetes
  schema, with the tag's resources and the shared data volume on its container.
- Container resources everywhere parse as Kubernetes quantities, requests within limits.
- The values' environment is read by the project's ``Settings`` (RAG_EXECUTOR=k8s, QDRANT_URL, shards, replicas),
  QDRANT_URL names the Qdrant chart's service, and shards/replicas suit the 3-node cluster.
- Pods run as the Dockerfile's USER, and the image installs dagster-k8s (run and step pods need it).

What is not validated here, and why: the charts are not rendered. No ``helm`` binary is installed by the project
and neither chart is in a registry this machine reaches (dagster-io.github.io/helm, qdrant.github.io/qdrant-helm),
so the templates' output (Deployments, RBAC, the instance ConfigMap as rendered) is not checked against the
Kubernetes schema, and the values' keys are checked only against the lists below, read from each chart's
source (the pydantic models under ``helm/dagster/schema`` in Dagster's repository, recent but not pinned to
exactly 1.13.27; qdrant-helm 1.19.0's values.yaml).
The ``dagster.yaml`` above is built by this module's mirror of the chart's template, not by the chart. Nothing
runs on a cluster: image pulls, RBAC, the ReadWriteMany storage class, Qdrant's clustering and the Celery
alternative (commented out in the values) are untested.
"""

from __future__ import annotations

import importlib
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import kubernetes
import kubernetes_validate
import pytest
import yaml
from dagster import QueuedRunCoordinator
from dagster._config import process_config
from dagster._core.instance.config import dagster_instance_config
from dagster._core.storage.dagster_run import DagsterRun
from dagster._serdes.config_class import ConfigurableClassData
from dagster_k8s import K8sRunLauncher, k8s_job_executor
from dagster_k8s.container_context import K8sContainerContext
from dagster_k8s.job import (
    USER_DEFINED_K8S_CONFIG_KEY,
    UserDefinedDagsterK8sConfig,
    construct_dagster_k8s_job,
    get_user_defined_k8s_config,
)
from kubernetes.utils import parse_quantity

from rag_pipeline.cli import build_parser
from rag_pipeline.defs.executors import (
    EMBED_QUEUE,
    EMBED_STEP_K8S_CONFIG,
    K8S_EXECUTOR_CONFIG,
    build_executor,
    step_tags,
)
from rag_pipeline.setting_catalog import by_name
from rag_pipeline.settings import Settings
from rag_pipeline_tests.kit.paths import REPO_ROOT

ROOT = REPO_ROOT
K8S_DIR = ROOT / "deploy" / "k8s"
DAGSTER_VALUES = ROOT / "deploy" / "helm" / "dagster-values.yaml"
QDRANT_VALUES = ROOT / "deploy" / "helm" / "qdrant-values.yaml"
POSTGRES_INSTANCE = ROOT / "deploy" / "dagster.postgres.yaml"

# The Kubernetes version the manifests are checked against (kubernetes-validate ships schemas up to its own version).
KUBERNETES_VERSION = "1.33.0"
# What docs/guides/kubernetes.md installs: one namespace, releases `dagster` and `qdrant`.
NAMESPACE = "rag"
DAGSTER_RELEASE = "dagster"
DAGSTER_HOME = "/opt/dagster/dagster_home"  # the chart's default global.dagsterHome
PLACEHOLDER = "change-me"

# Keys of the Dagster chart's values schema (helm/dagster/schema/schema/charts/... in Dagster's repository) for the
# parts these values set. Names only: a key outside these lists is one the chart would reject or ignore.
# fmt: off
DAGSTER_CHART_KEYS: dict[str, set[str]] = {
    "": {
        "dagsterWebserver", "dagster-user-deployments", "postgresql", "generatePostgresqlPasswordSecret",
        "generateCeleryConfigSecret", "rabbitmq", "redis", "flower", "ingress", "imagePullSecrets",
        "computeLogManager", "scheduler", "runLauncher", "pythonLogs", "dagsterDaemon", "busybox", "migrate",
        "telemetry", "serviceAccount", "global", "retention", "concurrency", "additionalInstanceConfig",
    },
    "global": {"postgresqlSecretName", "dagsterHome", "serviceAccountName", "celeryConfigSecretName"},
    "postgresql": {
        "postgresqlScheme", "image", "enabled", "postgresqlHost", "postgresqlUsername", "postgresqlPassword",
        "postgresqlDatabase", "postgresqlParams", "service",
    },
    "dagster-user-deployments": {"enabled", "enableSubchart", "imagePullSecrets", "deployments"},
    "deployment": {
        "name", "image", "port", "dagsterApiGrpcArgs", "codeServerArgs", "includeConfigInLaunchedRuns", "env",
        "envConfigMaps", "envSecrets", "annotations", "nodeSelector", "affinity", "tolerations",
        "podSecurityContext", "securityContext", "resources", "livenessProbe", "readinessProbe", "startupProbe",
        "labels", "volumeMounts", "volumes", "schedulerName",
    },
    "runLauncher.config.k8sRunLauncher": {
        "image", "imagePullPolicy", "jobNamespace", "loadInclusterConfig", "kubeconfigFile", "envConfigMaps",
        "envSecrets", "envVars", "volumeMounts", "volumes", "labels", "failPodOnRunFailure", "resources",
        "schedulerName", "securityContext", "runK8sConfig",
    },
    "dagsterDaemon": {
        "enabled", "image", "runCoordinator", "heartbeatTolerance", "env", "envConfigMaps", "envSecrets",
        "deploymentLabels", "labels", "nodeSelector", "affinity", "tolerations", "podSecurityContext",
        "securityContext", "resources", "livenessProbe", "readinessProbe", "startupProbe", "annotations",
        "runMonitoring", "runRetries", "sensors", "schedules", "schedulerName", "volumeMounts", "volumes",
    },
    "dagsterDaemon.runCoordinator": {"enabled", "type", "config"},
    "concurrency": {"enabled", "pools", "runs"},
    "concurrency.pools": {"defaultLimit", "granularity", "opGranularityRunBuffer"},
    "concurrency.runs": {"maxConcurrentRuns", "tagConcurrencyLimits"},
}
# Top-level keys of qdrant-helm 1.19.0's values.yaml.
QDRANT_CHART_KEYS = {
    "replicaCount", "image", "imagePullSecrets", "nameOverride", "fullnameOverride", "args", "env", "service",
    "ingress", "livenessProbe", "readinessProbe", "startupProbe", "additionalLabels", "additionalAnnotations",
    "podAnnotations", "podLabels", "resources", "containerSecurityContext", "podSecurityContext", "lifecycle",
    "updateVolumeFsOwnership", "nodeSelector", "tolerations", "affinity", "topologySpreadConstraints",
    "persistence", "snapshotPersistence", "snapshotRestoration", "config", "sidecarContainers", "metrics",
    "serviceAccount", "priorityClassName", "shareProcessNamespace", "terminationGracePeriodSeconds",
    "podManagementPolicy", "podDisruptionBudget", "apiKey", "readOnlyApiKey", "additionalVolumes",
    "additionalVolumeMounts", "chartTests",
}
# fmt: on


def _documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _manifests() -> list[tuple[str, dict[str, Any]]]:
    found = [
        (f"{p.name}:{d['kind']}/{d['metadata']['name']}", d)
        for p in sorted(K8S_DIR.glob("*.yaml"))
        for d in _documents(p)
    ]
    assert found, f"no manifests in {K8S_DIR}"
    return found


def _of_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for _, d in _manifests() if d["kind"] == kind}


def _secret_keys() -> dict[str, set[str]]:
    return {name: set(s.get("stringData", {})) | set(s.get("data", {})) for name, s in _of_kind("Secret").items()}


def _dagster_values() -> dict[str, Any]:
    return yaml.safe_load(DAGSTER_VALUES.read_text())


def _qdrant_values() -> dict[str, Any]:
    return yaml.safe_load(QDRANT_VALUES.read_text())


def _code_location(values: dict[str, Any]) -> dict[str, Any]:
    deployments = values["dagster-user-deployments"]["deployments"]
    assert len(deployments) == 1, "one code location: rag_pipeline.definitions"
    return deployments[0]


def _k8s_validate(resource: dict[str, Any]) -> None:
    """Strict validation against the pinned Kubernetes version; a kind without a schema fails (no silent pass)."""
    try:
        kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        where = ".".join(str(p) for p in error.path)
        pytest.fail(f"{resource['kind']}/{resource['metadata'].get('name')}: {where}: {error.message}")
    except kubernetes_validate.SchemaNotFoundError as error:
        pytest.fail(error.message)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _assert_processes(config_type: Any, value: Any, what: str) -> Any:
    result = process_config(config_type, value)
    assert result.success, f"{what}: " + "; ".join(e.message for e in result.errors or [])
    return result.value


# ---------------------------------------------------------------------------------------------------------------
# Plain manifests (deploy/k8s)


@pytest.mark.parametrize(("where", "resource"), _manifests(), ids=[w for w, _ in _manifests()])
def test_every_manifest_validates_against_the_kubernetes_schema(where: str, resource: dict[str, Any]) -> None:
    _k8s_validate(resource)


def test_the_validator_rejects_an_unknown_field() -> None:
    """The strict schema really bites: a misspelt field in a copy of the search Deployment fails."""
    broken = json.loads(json.dumps(_of_kind("Deployment")["rag-search"]))
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_secrets_hold_placeholders_only() -> None:
    secrets = _of_kind("Secret")
    assert secrets
    for name, secret in secrets.items():
        assert "data" not in secret, f"{name}: use stringData with placeholders, never base64 data"
        assert secret["stringData"], name
        for key, value in secret["stringData"].items():
            assert value == PLACEHOLDER, f"{name}.{key} must be the placeholder {PLACEHOLDER!r}"
    assert {"OPENAI_API_KEY", "SLACK_BOT_TOKEN", "JIRA_API_TOKEN", "QDRANT_API_KEY"} <= _secret_keys()[
        "rag-pipeline-secrets"
    ]


def test_every_secret_and_volume_named_anywhere_exists() -> None:
    keys = _secret_keys()
    claims = set(_of_kind("PersistentVolumeClaim"))
    values = _dagster_values()
    location = _code_location(values)
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]

    secret_names = [s["name"] for s in location["envSecrets"] + launcher.get("envSecrets", [])]
    secret_names += list(K8S_EXECUTOR_CONFIG.get("env_secrets", []))
    for name in secret_names:
        assert name in keys, f"secret {name} (envSecrets) is not in deploy/k8s"
    assert "postgresql-password" in keys[values["global"]["postgresqlSecretName"]]
    qdrant_key = _qdrant_values()["apiKey"]["valueFrom"]["secretKeyRef"]
    assert qdrant_key["key"] in keys[qdrant_key["name"]]

    for workload in _of_kind("Deployment").values():
        pod = workload["spec"]["template"]["spec"]
        for container in pod["containers"]:
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["key"] in keys.get(ref["name"], set()), f"{env['name']}: {ref}"
        volumes = pod.get("volumes", [])
        assert {v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v} <= claims
    for volume in location["volumes"] + launcher.get("volumes", []):
        if "persistentVolumeClaim" in volume:
            assert volume["persistentVolumeClaim"]["claimName"] in claims


def test_search_service_runs_serve_with_flags_the_cli_accepts() -> None:
    deployment = _of_kind("Deployment")["rag-search"]
    template = deployment["spec"]["template"]
    (container,) = template["spec"]["containers"]
    command = container["command"]
    assert command[:2] == ["rag-pipeline", "serve"]
    args = build_parser().parse_args(command[1:])  # the project's own parser: an unknown flag exits here
    assert args.command == "serve"
    assert args.host == "0.0.0.0"  # reachable from the Service, hence the token below
    env = {e["name"]: e for e in container["env"]}
    assert env["RAG_SERVE_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "rag-serve-secrets"
    assert env["QDRANT_URL"]["value"] == _code_location(_dagster_values())["env"]["QDRANT_URL"]
    assert args.data_dir == next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "rag-data")

    (port,) = container["ports"]
    assert port["containerPort"] == args.port
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": port["name"]}
    assert f"127.0.0.1:{args.port}/health" in container["livenessProbe"]["exec"]["command"][-1]
    annotations = template["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/path"] == "/metrics"
    assert annotations["prometheus.io/port"] == str(args.port)

    service = _of_kind("Service")["rag-search"]
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    assert service["spec"]["ports"][0]["targetPort"] in (port["name"], port["containerPort"])


def test_disruption_budget_and_autoscaler_cover_the_search_pods() -> None:
    deployment = _of_kind("Deployment")["rag-search"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    budget = _of_kind("PodDisruptionBudget")["rag-search"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    autoscaler = _of_kind("HorizontalPodAutoscaler")["rag-search"]
    assert autoscaler["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "rag-search"}
    # A budget of minAvailable 1 leaves a drain something to evict only with two replicas or more.
    assert autoscaler["spec"]["minReplicas"] > budget["spec"]["minAvailable"]
    assert "replicas" not in deployment["spec"], "the autoscaler owns the replica count"


def _image_user() -> tuple[int, int]:
    """The uid and gid the Dockerfile's USER line runs the image as."""
    found = re.search(r"^USER\s+(\d+):(\d+)\s*$", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert found, "the Dockerfile runs as a numeric USER uid:gid"
    return int(found.group(1)), int(found.group(2))


def test_pods_run_as_the_images_user() -> None:
    uid, gid = _image_user()
    pod = _of_kind("Deployment")["rag-search"]["spec"]["template"]["spec"]["securityContext"]
    code_server = _code_location(_dagster_values())["podSecurityContext"]
    runs = _dagster_values()["runLauncher"]["config"]["k8sRunLauncher"]["runK8sConfig"]["podSpecConfig"]
    for where, context in (("search", pod), ("code server", code_server), ("runs", runs["securityContext"])):
        assert (context["runAsUser"], context["runAsGroup"], context["fsGroup"]) == (uid, gid, gid), where


def test_the_image_installs_dagster_k8s() -> None:
    """Run and step pods run this project's image: it loads the chart's dagster.yaml (run_launcher: dagster_k8s) and,
    with RAG_EXECUTOR=k8s, imports k8s_job_executor. The Dockerfile installs pyproject's dependencies (and any
    extra it names as .[extra]), so dagster-k8s must be among them, on the same release as dagster-postgres."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in re.findall(r"\.\[([\w,-]+)\]", (ROOT / "Dockerfile").read_text()):
        for name in extra.split(","):
            requirements += project.get("optional-dependencies", {}).get(name, [])
    pins = dict(re.match(r"([\w.-]+)==([\w.]+)", r).groups() for r in requirements if re.match(r"[\w.-]+==", r))
    assert pins.get("dagster-k8s") == pins["dagster-postgres"], (
        "the image lacks dagster-k8s==" + pins["dagster-postgres"]
    )


# ---------------------------------------------------------------------------------------------------------------
# Resources


def _check_resources(resources: dict[str, Any], where: str) -> None:
    requests, limits = resources.get("requests", {}), resources.get("limits", {})
    # cpu, memory, ephemeral-storage, or an extended resource such as nvidia.com/gpu
    unknown = {
        n for n in set(requests) | set(limits) if n not in {"cpu", "memory", "ephemeral-storage"} and "/" not in n
    }
    assert not unknown, f"{where}: unknown resources {unknown}"
    parsed = {}
    for kind, values in (("requests", requests), ("limits", limits)):
        for name, value in values.items():
            try:
                parsed[kind, name] = parse_quantity(value)
            except ValueError:
                pytest.fail(f"{where}: {kind}.{name} {value!r} is not a Kubernetes quantity")
            assert parsed[kind, name] > 0, where
    for name in set(limits) & set(requests):
        if parsed["requests", name] > parsed["limits", name]:
            pytest.fail(f"{where}: the {name} request is above its limit")


def _all_resources() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for where, resource in _manifests():
        spec = resource.get("spec", {}).get("template", {}).get("spec", {})
        found += [(f"{where} {c['name']}", c["resources"]) for c in spec.get("containers", []) if "resources" in c]
    values = _dagster_values()
    found.append(("dagster code location", _code_location(values)["resources"]))
    found.append(("dagster run worker", values["runLauncher"]["config"]["k8sRunLauncher"]["resources"]))
    found.append(("qdrant", _qdrant_values()["resources"]))
    found.append(("embedding step tag", EMBED_STEP_K8S_CONFIG["container_config"]["resources"]))
    step_default = K8S_EXECUTOR_CONFIG.get("step_k8s_config", {}).get("container_config", {}).get("resources")
    if step_default:
        found.append(("executor step_k8s_config", step_default))
    return found


@pytest.mark.parametrize(("where", "resources"), _all_resources(), ids=[w for w, _ in _all_resources()])
def test_resources_are_kubernetes_quantities_with_requests_within_limits(where: str, resources: dict[str, Any]) -> None:
    _check_resources(resources, where)


def test_a_bad_quantity_is_caught() -> None:
    with pytest.raises(pytest.fail.Exception):
        _check_resources({"requests": {"memory": "4 GB"}}, "example")
    with pytest.raises(pytest.fail.Exception):
        _check_resources({"requests": {"cpu": "4"}, "limits": {"cpu": "2"}}, "example")


# ---------------------------------------------------------------------------------------------------------------
# Helm values: structure


def _unknown_keys(values: dict[str, Any]) -> list[str]:
    unknown = []

    def check(block: dict[str, Any], allowed: str) -> None:
        unknown.extend(f"{allowed or '<top>'}.{k}" for k in block if k not in DAGSTER_CHART_KEYS[allowed])

    check(values, "")
    for section in ("global", "postgresql", "dagster-user-deployments", "dagsterDaemon", "concurrency"):
        check(values.get(section, {}), section)
    for deployment in values["dagster-user-deployments"]["deployments"]:
        check(deployment, "deployment")
    check(values["runLauncher"]["config"]["k8sRunLauncher"], "runLauncher.config.k8sRunLauncher")
    check(values["dagsterDaemon"]["runCoordinator"], "dagsterDaemon.runCoordinator")
    check(values["concurrency"]["pools"], "concurrency.pools")
    check(values["concurrency"]["runs"], "concurrency.runs")
    return unknown


def test_dagster_values_use_only_keys_of_the_charts_schema() -> None:
    assert _unknown_keys(_dagster_values()) == []
    broken = _dagster_values()
    broken["runLauncher"]["config"]["k8sRunLauncher"]["envSecret"] = []
    assert _unknown_keys(broken) == ["runLauncher.config.k8sRunLauncher.envSecret"]


def test_dagster_values_serve_this_projects_code_location() -> None:
    values = _dagster_values()
    location = _code_location(values)
    assert location["image"]["repository"] == "rag-pipeline"
    assert location["image"]["tag"] == "latest"
    assert location["codeServerArgs"] == ["-m", "rag_pipeline.definitions"]
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    assert location["includeConfigInLaunchedRuns"]["enabled"] is True
    assert location["env"]["RAG_EXECUTOR"] == "k8s"
    assert location["env"]["RAG_DATA_DIR"] == next(m["mountPath"] for m in location["volumeMounts"])
    assert values["generatePostgresqlPasswordSecret"] is False
    assert "postgresqlPassword" not in values["postgresql"], "the password comes from the Secret"


def test_the_values_environment_is_read_by_the_project() -> None:
    location = _code_location(_dagster_values())
    env = dict(location["env"])
    secrets = _secret_keys()
    for ref in location["envSecrets"]:
        env.update(dict.fromkeys(secrets[ref["name"]], PLACEHOLDER))
    catalogued = by_name()  # every variable the code reads (test_setting_catalog proves it, built names too)
    for name in location["env"]:
        # Each name the values set is one the project reads (a misspelt QDRANT_SHARD would be ignored silently).
        assert name in catalogued, f"{name} is read nowhere"
    settings = Settings.from_env(env)
    assert settings.execution.executor == "k8s"
    assert settings.qdrant.url == env["QDRANT_URL"]
    assert settings.qdrant.api_key_set
    assert (settings.qdrant.shards, settings.qdrant.replicas) == (6, 2)
    assert settings.data_dir == Path(env["RAG_DATA_DIR"])
    assert isinstance(build_executor(settings), type(k8s_job_executor))
    assert build_executor(settings).name == k8s_job_executor.name


def test_qdrant_values_make_a_three_node_cluster_the_collections_fit() -> None:
    values = _qdrant_values()
    assert set(values) <= QDRANT_CHART_KEYS, set(values) - QDRANT_CHART_KEYS
    nodes = values["replicaCount"]
    assert nodes == 3
    assert values["config"]["cluster"]["enabled"] is True
    assert values["persistence"]["size"] and parse_quantity(values["persistence"]["size"]) > 0
    assert values["podDisruptionBudget"] == {"enabled": True, "maxUnavailable": 1}
    env = _code_location(_dagster_values())["env"]
    shards, replicas = int(env["QDRANT_SHARDS"]), int(env["QDRANT_REPLICAS"])
    # Every shard survives one node's loss, no node holds two copies of a shard, shards spread evenly.
    assert 2 <= replicas <= nodes
    assert shards % nodes == 0
    assert values["podDisruptionBudget"]["maxUnavailable"] < replicas
    # QDRANT_URL names the chart's Service (fullnameOverride) on its REST port, in the same namespace.
    assert env["QDRANT_URL"] == f"http://{values['fullnameOverride']}:6333"


# ---------------------------------------------------------------------------------------------------------------
# Dagster's own schemas: the instance the chart makes from the values, the run launcher, the executor, the step tag


def _run_launcher_config(values: dict[str, Any]) -> dict[str, Any]:
    """The K8sRunLauncher config the chart writes into dagster.yaml (its _run-launcher.tpl), from the values."""
    k8s = values["runLauncher"]["config"]["k8sRunLauncher"]
    config: dict[str, Any] = {
        "load_incluster_config": k8s["loadInclusterConfig"],
        "job_namespace": k8s.get("jobNamespace") or NAMESPACE,
        "image_pull_policy": k8s["imagePullPolicy"],
        "service_account_name": f"{DAGSTER_RELEASE}",
        "dagster_home": DAGSTER_HOME,
        "instance_config_map": f"{DAGSTER_RELEASE}-instance",
        "postgres_password_secret": values["global"]["postgresqlSecretName"],
        "env_config_maps": [f"{DAGSTER_RELEASE}-pipeline-env"] + [c["name"] for c in k8s.get("envConfigMaps", [])],
    }
    renamed = {"envSecrets": "env_secrets", "image": "job_image", "runK8sConfig": "run_k8s_config"}
    for key, value in k8s.items():
        if key in {"loadInclusterConfig", "jobNamespace", "imagePullPolicy", "envConfigMaps"}:
            continue
        if key == "envSecrets":
            value = [s["name"] for s in value]
        elif key == "image":
            value = f"{value['repository']}:{value['tag']}"
        elif key == "runK8sConfig":
            value = {_snake(k): v for k, v in value.items()}
        config[renamed.get(key, _snake(key))] = value
    return config


def _instance_config(values: dict[str, Any]) -> dict[str, Any]:
    """The dagster.yaml the chart renders from these values (configmap-instance.yaml), for the parts they set."""
    pg = values["postgresql"]
    postgres_db = {
        "username": pg["postgresqlUsername"],
        "password": {"env": "DAGSTER_PG_PASSWORD"},
        "hostname": pg["postgresqlHost"],
        "db_name": pg["postgresqlDatabase"],
        "port": pg["service"]["port"],
        "params": pg.get("postgresqlParams", {}),
        "scheme": pg["postgresqlScheme"],
    }
    storage = {"postgres_db": postgres_db}
    daemon = values["dagsterDaemon"]
    coordinator = daemon["runCoordinator"]
    coordinator_config = {
        _snake(k): v for k, v in coordinator.get("config", {}).get("queuedRunCoordinator", {}).items()
    }
    concurrency = values["concurrency"]
    runs = concurrency["runs"]
    return {
        "run_storage": {"module": "dagster_postgres.run_storage", "class": "PostgresRunStorage", "config": storage},
        "event_log_storage": {
            "module": "dagster_postgres.event_log",
            "class": "PostgresEventLogStorage",
            "config": storage,
        },
        "schedule_storage": {
            "module": "dagster_postgres.schedule_storage",
            "class": "PostgresScheduleStorage",
            "config": storage,
        },
        "run_launcher": {"module": "dagster_k8s", "class": "K8sRunLauncher", "config": _run_launcher_config(values)},
        "run_coordinator": {
            "module": "dagster.core.run_coordinator",
            "class": coordinator["type"],
            "config": coordinator_config,
        },
        "concurrency": {
            "pools": {_snake(k): v for k, v in concurrency["pools"].items()},
            "runs": {
                "max_concurrent_runs": runs["maxConcurrentRuns"],
                "tag_concurrency_limits": runs["tagConcurrencyLimits"],
            },
        },
        "run_monitoring": {_snake(k): v for k, v in daemon["runMonitoring"].items()},
        "run_retries": {_snake(k): v for k, v in daemon["runRetries"].items()},
        "telemetry": {"enabled": values["telemetry"]["enabled"]},
    }


@pytest.fixture
def no_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """K8sRunLauncher loads the in-cluster Kubernetes config when built; there is no cluster here."""
    monkeypatch.setattr("dagster_k8s.launcher.load_kubernetes_config", lambda **_: None)


def test_the_instance_from_the_values_loads_with_dagsters_schema(
    tmp_path: Path, no_cluster: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The chart gives every Dagster pod the password from global.postgresqlSecretName as this variable.
    monkeypatch.setenv("DAGSTER_PG_PASSWORD", PLACEHOLDER)
    instance = _instance_config(_dagster_values())
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(instance))
    loaded, _ = dagster_instance_config(str(tmp_path))  # the instance schema, concurrency rules included
    for key in ("run_storage", "event_log_storage", "schedule_storage", "run_launcher", "run_coordinator"):
        block = loaded[key]
        # The module as Dagster resolves it (the chart writes dagster.core.*, Dagster reads dagster._core.*).
        data = ConfigurableClassData(block["module"], block["class"], yaml.safe_dump(block["config"]))
        configurable = getattr(importlib.import_module(data.module_name), data.class_name)
        _assert_processes(configurable.config_type(), block["config"], f"{key} ({block['class']})")
    launcher = ConfigurableClassData(
        "dagster_k8s", "K8sRunLauncher", yaml.safe_dump(loaded["run_launcher"]["config"])
    ).rehydrate(K8sRunLauncher)
    assert launcher.env_secrets == ["rag-pipeline-secrets"]
    assert launcher.job_namespace == NAMESPACE
    coordinator = ConfigurableClassData(
        loaded["run_coordinator"]["module"], "QueuedRunCoordinator", yaml.safe_dump(loaded["run_coordinator"]["config"])
    ).rehydrate(QueuedRunCoordinator)
    assert isinstance(coordinator, QueuedRunCoordinator)


def test_the_instance_keeps_the_limits_of_the_postgresql_instance() -> None:
    instance = _instance_config(_dagster_values())
    reference = yaml.safe_load(POSTGRES_INSTANCE.read_text())
    assert instance["concurrency"] == reference["concurrency"]
    assert instance["run_retries"] == reference["run_retries"]
    assert instance["run_monitoring"] == reference["run_monitoring"]
    assert instance["telemetry"] == reference["telemetry"]
    assert (
        instance["run_storage"]["config"]["postgres_db"]["scheme"]
        == reference["run_storage"]["config"]["postgres_db"]["scheme"]
    )


def test_a_bad_run_launcher_value_is_refused_by_dagster() -> None:
    config = _run_launcher_config(_dagster_values())
    config["fail_pod_on_run_failure"] = "yes"
    assert not process_config(K8sRunLauncher.config_type(), config).success
    config = _run_launcher_config(_dagster_values())
    config["env_secret"] = ["rag-pipeline-secrets"]
    assert not process_config(K8sRunLauncher.config_type(), config).success


def test_the_executor_config_passes_k8s_job_executors_schema() -> None:
    processed = _assert_processes(
        k8s_job_executor.config_schema.config_type, K8S_EXECUTOR_CONFIG, "K8S_EXECUTOR_CONFIG"
    )
    assert processed["env_secrets"] == K8S_EXECUTOR_CONFIG["env_secrets"]
    broken = {**K8S_EXECUTOR_CONFIG, "max_concurent": 8}
    assert not process_config(k8s_job_executor.config_schema.config_type, broken).success


def test_the_embedding_step_tag_passes_dagster_k8s_schema() -> None:
    tags = step_tags(EMBED_QUEUE, embedding=True)
    assert json.loads(tags[USER_DEFINED_K8S_CONFIG_KEY]) == EMBED_STEP_K8S_CONFIG
    user_config = get_user_defined_k8s_config(tags)  # raises DagsterInvalidConfigError on a bad tag
    assert user_config.container_config["resources"] == EMBED_STEP_K8S_CONFIG["container_config"]["resources"]
    with pytest.raises(Exception, match="dagster-k8s/config"):
        get_user_defined_k8s_config({USER_DEFINED_K8S_CONFIG_KEY: json.dumps({"container": {}})})


def _executor_container_context(executor_config: dict[str, Any]) -> K8sContainerContext:
    """The container context k8s_job_executor builds from its config (dagster_k8s/executor.py, k8s_job_executor)."""
    return K8sContainerContext(
        image_pull_policy=executor_config.get("image_pull_policy"),
        image_pull_secrets=executor_config.get("image_pull_secrets"),
        service_account_name=executor_config.get("service_account_name"),
        env_config_maps=executor_config.get("env_config_maps"),
        env_secrets=executor_config.get("env_secrets"),
        env_vars=executor_config.get("env_vars"),
        volume_mounts=executor_config.get("volume_mounts"),
        volumes=executor_config.get("volumes"),
        labels=executor_config.get("labels"),
        namespace=executor_config.get("job_namespace"),
        resources=executor_config.get("resources"),
        scheduler_name=executor_config.get("scheduler_name"),
        security_context=executor_config.get("security_context"),
        run_k8s_config=UserDefinedDagsterK8sConfig.from_dict(executor_config.get("step_k8s_config", {})),
    )


def _step_job(tags: dict[str, str]) -> dict[str, Any]:
    """The Kubernetes Job k8s_job_executor would create for a step with these op tags, as a manifest."""
    values = _dagster_values()
    launcher = K8sRunLauncher(
        **_assert_processes(K8sRunLauncher.config_type(), _run_launcher_config(values), "run launcher")
    )
    location = _code_location(values)
    # The code location's container context the chart passes on to runs (includeConfigInLaunchedRuns).
    code_location = K8sContainerContext.create_from_config(
        {
            "k8s": {
                "env_config_maps": [f"{DAGSTER_RELEASE}-dagster-user-deployments-{location['name']}-user-env"],
                "env_secrets": [s["name"] for s in location["envSecrets"]],
                "volumes": location["volumes"],
                "volume_mounts": location["volumeMounts"],
            }
        }
    )
    executor_config = _assert_processes(k8s_job_executor.config_schema.config_type, K8S_EXECUTOR_CONFIG, "executor")
    context = (
        K8sContainerContext.create_for_run(DagsterRun(job_name="index"), launcher, include_run_tags=False)
        .merge(code_location)
        .merge(_executor_container_context(executor_config))
        .merge(K8sContainerContext(run_k8s_config=get_user_defined_k8s_config(tags)))
    )
    job_config = context.get_k8s_job_config(None, launcher).with_image(
        f"{location['image']['repository']}:{location['image']['tag']}"
    )
    job = construct_dagster_k8s_job(
        job_config=job_config,
        args=["dagster", "api", "execute_step"],
        job_name="dagster-step-0123456789abcdef",
        pod_name="dagster-step-0123456789abcdef",
        component="step_worker",
        user_defined_k8s_config=context.run_k8s_config,
        labels={"dagster/job": "index", "dagster/op": "slack_dense_vectors"},
        env_vars=[{"name": "DAGSTER_RUN_STEP_KEY", "value": "slack_dense_vectors"}],
    )
    return kubernetes.client.ApiClient().sanitize_for_serialization(job)


def test_the_embedding_steps_job_is_a_valid_kubernetes_job_with_its_resources(no_cluster: None) -> None:
    job = _step_job(step_tags(EMBED_QUEUE, embedding=True))
    _k8s_validate(job)
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["resources"] == EMBED_STEP_K8S_CONFIG["container_config"]["resources"]
    assert container["image"] == "rag-pipeline:latest"
    assert {"secretRef": {"name": "rag-pipeline-secrets"}} in container["envFrom"]
    data_dir = _code_location(_dagster_values())["env"]["RAG_DATA_DIR"]
    assert {"name": "rag-data", "mountPath": data_dir} in container["volumeMounts"]
    assert pod["securityContext"]["fsGroup"] == _image_user()[1]
    assert [v["name"] for v in pod["volumes"]].count("rag-data") == 1  # launcher and code location merged


def test_another_steps_job_gets_the_executors_default_resources(no_cluster: None) -> None:
    job = _step_job(step_tags(EMBED_QUEUE))
    _k8s_validate(job)
    (container,) = job["spec"]["template"]["spec"]["containers"]
    # dagster-k8s deep-merges: the run launcher's resources, then the executor's step_k8s_config over them.
    launcher = _dagster_values()["runLauncher"]["config"]["k8sRunLauncher"]["resources"]
    step = K8S_EXECUTOR_CONFIG["step_k8s_config"]["container_config"]["resources"]
    expected = {kind: {**launcher.get(kind, {}), **step.get(kind, {})} for kind in ("requests", "limits")}
    assert container["resources"] == {kind: value for kind, value in expected.items() if value}
    _check_resources(container["resources"], "a step without a tag")
