"""Snapshot of the whole Dagster code location, so a refactor of the Dagster layer can prove nothing moved.

For an offline and a live environment the definitions are built, reduced to a deterministic, JSON-serializable
description (assets with their groups, kinds, owners, partitions, deps, checks, pools, policies and automation
conditions; asset checks; jobs; schedules; sensors; resources; the executor) and compared with
``snapshots/definitions_<case>.json``. On a mismatch the differing paths are listed.

Regenerate the files after an intended change with ``RAG_UPDATE_SNAPSHOTS=1 pytest <this file>``.

Only ``load_definitions`` knows how the definitions are built (from ``Settings.from_env`` of exactly the case's
variables, so the environment running pytest cannot change them); everything else reads them through Dagster's API.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import pytest


def load_definitions(env: dict[str, str], data_dir: Path) -> dg.Definitions:
    """The code location for an environment holding exactly ``env`` among the configuration variables."""
    from rag_pipeline.defs.builders import build_definitions
    from rag_pipeline.settings import Settings

    return build_definitions(Settings.from_env({**env, "RAG_DATA_DIR": str(data_dir)}))


CASES: dict[str, dict[str, str]] = {
    "offline": {},
    "live": {
        "SLACK_BOT_TOKEN": "xoxb-test",
        "JIRA_URL": "https://jira.example.test",
        "JIRA_USERNAME": "bot@example.test",
        "JIRA_API_TOKEN": "t",
        "RAG_NOTIFY_SLACK_CHANNEL": "C1",
    },
}
SNAPSHOT_DIR = Path(__file__).parent / "snapshots"
UPDATE_ENV_VAR = "RAG_UPDATE_SNAPSHOTS"
MAX_REPORTED_DIFFERENCES = 60


# --- the snapshot ---------------------------------------------------------------------------------------------


def _key(key: dg.AssetKey) -> str:
    return key.to_user_string()


def _check_key(key: dg.AssetCheckKey) -> str:
    return f"{_key(key.asset_key)}:{key.name}"


def describe_partitions(partitions_def: dg.PartitionsDefinition | None) -> dict[str, Any] | None:
    """A partitions definition by structure: its type, and for each kind what defines its keys."""
    if partitions_def is None:
        return None
    out: dict[str, Any] = {"type": type(partitions_def).__name__}
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        out["dimensions"] = {
            dim.name: describe_partitions(dim.partitions_def) for dim in partitions_def.partitions_defs
        }
    elif isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
        end = partitions_def.end
        out.update(
            start=partitions_def.start.strftime(partitions_def.fmt),
            end=end.strftime(partitions_def.fmt) if end is not None else None,
            timezone=partitions_def.timezone,
            end_offset=partitions_def.end_offset,
            fmt=partitions_def.fmt,
            cron_schedule=partitions_def.cron_schedule,
        )
    elif isinstance(partitions_def, dg.DynamicPartitionsDefinition):
        out["name"] = partitions_def.name
    elif isinstance(partitions_def, dg.StaticPartitionsDefinition):
        out["keys"] = list(partitions_def.get_partition_keys())
    return out


def describe_automation_condition(condition: dg.AutomationCondition | None) -> list[str] | None:
    """The condition tree as the UI shows it, one indented line per node: ``name [label]``.

    Node names carry their parameters (``cron_tick_passed(cron_schedule=0 * * * *, cron_timezone=UTC)``);
    the hashed node ids of Dagster's snapshot are left out.
    """
    if condition is None:
        return None
    lines: list[str] = []

    def walk(node: Any, depth: int) -> None:
        snap = node.node_snapshot
        label = f" [{snap.label}]" if snap.label else ""
        lines.append(f"{'  ' * depth}{snap.name}{label}")
        for child in node.children:
            walk(child, depth + 1)

    walk(condition.get_snapshot(), 0)
    return lines


def describe_freshness(policy: Any) -> dict[str, Any] | None:
    """A freshness policy by its windows (seconds) or, for other kinds, its repr."""
    if policy is None:
        return None
    out: dict[str, Any] = {"type": type(policy).__name__}
    if hasattr(policy, "fail_window"):
        warn = policy.warn_window
        out.update(
            fail_window_seconds=policy.fail_window.to_timedelta().total_seconds(),
            warn_window_seconds=warn.to_timedelta().total_seconds() if warn is not None else None,
        )
    else:
        out["repr"] = repr(policy)
    return out


def describe_retry(policy: dg.RetryPolicy | None) -> dict[str, Any] | None:
    if policy is None:
        return None
    return {
        "max_retries": policy.max_retries,
        "delay": policy.delay,
        "backoff": policy.backoff.value if policy.backoff else None,
        "jitter": policy.jitter.value if policy.jitter else None,
    }


def describe_backfill(policy: dg.BackfillPolicy | None) -> dict[str, Any] | None:
    if policy is None:
        return None
    return {"type": policy.policy_type.value, "max_partitions_per_run": policy.max_partitions_per_run}


def describe_check(spec: dg.AssetCheckSpec) -> dict[str, Any]:
    return {
        "blocking": spec.blocking,
        "has_description": bool(spec.description),
        "additional_deps": sorted(_key(dep.asset_key) for dep in spec.additional_deps),
        "automation_condition": describe_automation_condition(spec.automation_condition),
        "partitions": describe_partitions(spec.partitions_def),
    }


def describe_assets(defs: dg.Definitions) -> dict[str, Any]:
    graph = defs.resolve_asset_graph()
    assets: dict[str, Any] = {}
    for node in graph.asset_nodes:
        assets_def = node.assets_def
        op = assets_def.op if assets_def.is_executable else None
        assets[_key(node.key)] = {
            "group": node.group_name,
            "kinds": sorted(node.kinds),
            "owners": sorted(node.owners),
            "tags": dict(sorted(node.tags.items())),
            "metadata_keys": sorted(node.metadata),
            "has_description": bool(node.description),
            "code_version": node.code_version,
            "execution_type": node.execution_type.value,
            "op_name": op.name if op is not None else None,
            "partitions": describe_partitions(node.partitions_def),
            # The effective mapping of every upstream asset (explicit, or what Dagster infers).
            "deps": {
                _key(parent): type(graph.get_partition_mapping(node.key, parent)).__name__
                for parent in sorted(node.parent_entity_keys, key=_key)
            },
            "checks": {
                key.name: describe_check(graph.get_check_spec(key)) for key in sorted(node.check_keys, key=_check_key)
            },
            "pools": sorted(node.pools or []),
            "backfill_policy": describe_backfill(node.backfill_policy),
            "automation_condition": describe_automation_condition(node.automation_condition),
            "retry_policy": describe_retry(op.retry_policy if op is not None else None),
            "freshness_policy": describe_freshness(node.freshness_policy),
            "legacy_freshness_policy": describe_freshness(node.legacy_freshness_policy),
            "io_manager_key": node.io_manager_key,
            "required_resource_keys": sorted(assets_def.required_resource_keys),
        }
    return dict(sorted(assets.items()))


def describe_jobs(defs: dg.Definitions) -> dict[str, Any]:
    """The declared jobs (Dagster's implicit ``__ASSET_JOB`` follows from the assets and is left out)."""
    jobs: dict[str, Any] = {}
    for job in defs.resolve_all_job_defs():
        if job.name.startswith("__"):
            continue
        jobs[job.name] = {
            "asset_keys": sorted(_key(k) for k in job.asset_layer.selected_asset_keys),
            "asset_check_keys": sorted(_check_key(k) for k in job.asset_layer.asset_graph.asset_check_keys),
            "partitions": describe_partitions(job.partitions_def),
            "has_description": bool(job.description),
            "tags": dict(sorted(job.tags.items())),
            "executor": job.executor_def.name,
        }
    return dict(sorted(jobs.items()))


def describe_schedules(defs: dg.Definitions) -> dict[str, Any]:
    schedules: dict[str, Any] = {}
    for schedule in defs.get_repository_def().schedule_defs:
        cron = schedule.cron_schedule
        schedules[schedule.name] = {
            "cron": cron if isinstance(cron, str) else list(cron),
            "timezone": schedule.execution_timezone,
            "job": schedule.job_name,
            "default_status": schedule.default_status.value,
            "has_description": bool(schedule.description),
            "required_resource_keys": sorted(schedule.required_resource_keys),
        }
    return dict(sorted(schedules.items()))


def describe_sensors(defs: dg.Definitions) -> dict[str, Any]:
    """Every sensor of the code location, Dagster's default automation condition sensor included."""
    graph = defs.resolve_asset_graph()
    sensors: dict[str, Any] = {}
    for sensor in defs.get_repository_def().sensor_defs:
        selection = sensor.asset_selection
        sensors[sensor.name] = {
            "type": sensor.sensor_type.value,
            "default_status": sensor.default_status.value,
            "minimum_interval_seconds": sensor.minimum_interval_seconds,
            "target_asset_keys": sorted(_key(k) for k in selection.resolve(graph)) if selection is not None else None,
            "target_jobs": sorted(target.job_name for target in sensor.targets),
            "has_description": bool(sensor.description),
            "required_resource_keys": sorted(sensor.required_resource_keys),
        }
    return dict(sorted(sensors.items()))


def definitions_snapshot(defs: dg.Definitions) -> dict[str, Any]:
    """The code location as a sorted, JSON-serializable dict (no addresses, paths or secrets)."""
    graph = defs.resolve_asset_graph()
    snapshot = {
        "assets": describe_assets(defs),
        "asset_checks": sorted(_check_key(k) for k in graph.asset_check_keys),
        "jobs": describe_jobs(defs),
        "schedules": describe_schedules(defs),
        "sensors": describe_sensors(defs),
        "resources": {key: type(value).__name__ for key, value in sorted((defs.resources or {}).items())},
        "executor": defs.executor.name if isinstance(defs.executor, dg.ExecutorDefinition) else repr(defs.executor),
    }
    # Through JSON and back: tuples become lists, keys strings, exactly as the stored file reads.
    return json.loads(json.dumps(snapshot, sort_keys=True))


# --- comparison -----------------------------------------------------------------------------------------------


def is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def snapshot_differences(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Readable differences between two snapshots, one line per path that differs."""
    where = path or "<root>"
    if isinstance(expected, Mapping) and isinstance(actual, Mapping):
        out: list[str] = []
        for key in sorted(set(expected) | set(actual)):
            sub = f"{path}.{key}" if path else str(key)
            if key not in actual:
                out.append(f"{sub}: missing (expected {json.dumps(expected[key])[:200]})")
            elif key not in expected:
                out.append(f"{sub}: unexpected (now {json.dumps(actual[key])[:200]})")
            else:
                out.extend(snapshot_differences(expected[key], actual[key], sub))
        return out
    if is_list(expected) and is_list(actual):
        if expected == actual:
            return []
        if all(_is_scalar(v) for v in [*expected, *actual]) and sorted(map(str, expected)) != sorted(map(str, actual)):
            removed = [v for v in expected if v not in actual]
            added = [v for v in actual if v not in expected]
            return [f"{where}: removed {json.dumps(removed)}, added {json.dumps(added)}"]
        if len(expected) != len(actual):
            return [f"{where}: {json.dumps(expected)} != {json.dumps(actual)}"]
        out = []
        for index, (old, new) in enumerate(zip(expected, actual, strict=True)):
            out.extend(snapshot_differences(old, new, f"{path}[{index}]"))
        return out
    if expected != actual or type(expected) is not type(actual):
        return [f"{where}: expected {json.dumps(expected)}, got {json.dumps(actual)}"]
    return []


def snapshot_path(case: str) -> Path:
    return SNAPSHOT_DIR / f"definitions_{case}.json"


def write_snapshot(path: Path, snapshot: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(snapshot, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def assert_matches_snapshot(snapshot: Mapping[str, Any], path: Path) -> None:
    """Fail with the list of differing paths unless ``snapshot`` equals the stored one."""
    if not path.exists():
        pytest.fail(f"{path.name} is missing; create it with {UPDATE_ENV_VAR}=1")
    expected = json.loads(path.read_text(encoding="utf-8"))
    differences = snapshot_differences(expected, snapshot)
    if differences:
        shown = differences[:MAX_REPORTED_DIFFERENCES]
        more = len(differences) - len(shown)
        pytest.fail(
            f"The Dagster definitions differ from {path.name} ({len(differences)} differences):\n  "
            + "\n  ".join(shown)
            + (f"\n  ... and {more} more" if more > 0 else "")
            + f"\nIf the change is intended, regenerate with {UPDATE_ENV_VAR}=1.",
            pytrace=False,
        )


# --- the tests ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(CASES))
def test_definitions_match_snapshot(case: str, tmp_path: Path) -> None:
    snapshot = definitions_snapshot(load_definitions(CASES[case], tmp_path / "data"))
    text = json.dumps(snapshot)
    assert str(tmp_path) not in text, "the snapshot holds a temporary path"
    assert CASES["live"]["SLACK_BOT_TOKEN"] not in text, "the snapshot holds a secret"
    path = snapshot_path(case)
    if os.environ.get(UPDATE_ENV_VAR) == "1":
        write_snapshot(path, snapshot)
        return
    assert_matches_snapshot(snapshot, path)


def test_snapshot_is_deterministic(tmp_path: Path) -> None:
    """Two builds (different data folders) give the same snapshot."""
    first = definitions_snapshot(load_definitions(CASES["live"], tmp_path / "one"))
    second = definitions_snapshot(load_definitions(CASES["live"], tmp_path / "two"))
    assert snapshot_differences(first, second) == []


def test_differences_name_the_changed_paths() -> None:
    expected = {"assets": {"a": {"pools": ["qdrant"], "deps": {"b": "IdentityPartitionMapping"}}}, "jobs": {"j": {}}}
    actual = {"assets": {"a": {"pools": [], "deps": {"b": "AllPartitionMapping"}}}, "sensors": {}}
    assert snapshot_differences(expected, actual) == [
        'assets.a.deps.b: expected "IdentityPartitionMapping", got "AllPartitionMapping"',
        'assets.a.pools: removed ["qdrant"], added []',
        'jobs: missing (expected {"j": {}})',
        "sensors: unexpected (now {})",
    ]
