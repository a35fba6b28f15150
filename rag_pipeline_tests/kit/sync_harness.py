"""A live source's scheduled sync on a fake clock: the real discovery sensor, sync sensor, gap check and
reconciliation schedule, evaluated at chosen instants, and every run they request executed in-process on
one Dagster instance (as the daemon would launch them, with the requests' tags)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import dagster as dg
from dagster._core.definitions.sensor_definition import SensorExecutionData

from rag_pipeline.defs.builders import build_definitions
from rag_pipeline.defs.chain.source_spec import SourceSpec
from rag_pipeline.defs.sync.sensor import build_sync_sensor
from rag_pipeline.pipeline.policy import sync_policy
from rag_pipeline.pipeline.tags import FAILED_CONTAINERS_TAG
from rag_pipeline.runs.execution import execute_run
from rag_pipeline.runs.instance import QUIET_RUN_CONFIG
from rag_pipeline.settings import Settings


@dataclass
class SyncHarness:
    """One source's automation against ``instance``, on the clock ``now`` that the test moves."""

    settings: Settings
    source: str
    instance: dg.DagsterInstance
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    results: list[dg.ExecuteInProcessResult] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.defs = build_definitions(self.settings)
        self.spec: SourceSpec = next(s for s in _specs(self.settings) if s.name == self.source)
        self.sensor = build_sync_sensor(
            self.spec,
            self.settings.automation.sync(self.source).cron,
            sync_policy(self.settings, self.source),
            clock=lambda: self.now,
        )
        self.job = self.defs.resolve_implicit_global_asset_job_def()
        self.cursors: dict[str, str | None] = {}

    def _evaluate(self, sensor: dg.SensorDefinition) -> SensorExecutionData:
        with dg.build_sensor_context(
            instance=self.instance,
            cursor=self.cursors.get(sensor.name),
            definitions=self.defs,
            resources=self.defs.get_repository_def().get_top_level_resources(),
        ) as context:
            data = sensor.evaluate_tick(context)
        self.cursors[sensor.name] = data.cursor
        for request in data.dynamic_partitions_requests or []:
            if isinstance(request, dg.AddDynamicPartitionsRequest):
                self.instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        return data

    def discover(self) -> None:
        """One tick of the source's discovery sensor (new containers become partitions)."""
        self._evaluate(self.defs.resolve_sensor_def(self.spec.live.discovery_sensor.name))

    def plan(self) -> list[dg.RunRequest]:
        """One evaluation of the sync sensor at ``now``."""
        data = self._evaluate(self.sensor)
        return list(data.run_requests or []) if data else []

    def execute(self, requests: Sequence[dg.RunRequest]) -> list[dg.ExecuteInProcessResult]:
        """Run what the sensor requested, as its runs (the whole chain and the gap check, with its tags)."""
        done = []
        for request in requests:
            result = execute_run(
                self.job,
                self.instance,
                tags=dict(request.tags),
                raise_on_error=False,
                run_config={**QUIET_RUN_CONFIG, **(request.run_config or {})},
                asset_selection=[dg.AssetKey(k) for k in self.spec.keys.all],
            )
            done.append(result)
        self.results.extend(done)
        return done

    def tick(self) -> list[dg.ExecuteInProcessResult]:
        """Discovery, then the sync sensor, then its runs."""
        self.discover()
        return self.execute(self.plan())

    def reconcile(self) -> dg.ExecuteInProcessResult:
        """The source's reconciliation job, as its daily schedule runs it."""
        job = self.defs.resolve_job_def(self.spec.live.job.name)
        return execute_run(job, self.instance, raise_on_error=False, run_config=QUIET_RUN_CONFIG)


def plan_of(request: dg.RunRequest | dg.DagsterRun) -> dict[str, dict[str, Any]]:
    """The per-container plan of a sync run request or run (its raw asset's config)."""
    ops = (request.run_config or {}).get("ops") or {}
    return next((op["config"]["plan"] for op in ops.values() if "plan" in op.get("config", {})), {})


def planned_ranges(requests: Sequence[dg.RunRequest]) -> dict[str, tuple[str, str, str]]:
    """container -> (first day, last day, reason) over the requests."""
    return {
        container: (part["first_day"], part["last_day"], part["reason"])
        for request in requests
        for container, part in plan_of(request).items()
    }


def container_results(instance: dg.DagsterInstance, results: Sequence[dg.ExecuteInProcessResult]) -> dict[str, bool]:
    """container -> whether its part of the sync runs succeeded (the run, less ``rag/failed_containers``)."""
    out: dict[str, bool] = {}
    for result in results:
        run = instance.get_run_by_id(result.run_id)
        assert run is not None
        failed = json.loads(run.tags.get(FAILED_CONTAINERS_TAG) or "{}")
        for container in plan_of(run):
            out[container] = result.success and container not in failed
    return out


def _specs(settings: Settings) -> list[SourceSpec]:
    from rag_pipeline.defs.parts import source_specs

    return list(source_specs(settings).values())
