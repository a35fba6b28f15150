"""Discovery of the offline sources' channels and projects as dynamic partitions."""

import json
from collections.abc import Sequence

import dagster as dg

from rag_pipeline.defs.source_spec import OfflineSource, SourceSpec


def build_offline_source_discovery_sensor(specs: Sequence[SourceSpec]) -> dg.SensorDefinition:
    """A sensor adding every offline source's containers as its dynamic partitions."""

    @dg.sensor(
        name="offline_source_discovery_sensor",
        minimum_interval_seconds=3600,
        required_resource_keys={s.offline_resource_key for s in specs},
        description="Adds the channels of the Slack export and the projects of the Jira dump as dynamic partitions.",
    )
    def offline_source_discovery_sensor(context: dg.SensorEvaluationContext, **given: OfflineSource) -> dg.SensorResult:
        # Direct invocation hands the resources over as keywords; the daemon leaves them on the context.
        requests, cursor = [], {}
        for spec in specs:
            source = given.get(spec.offline_resource_key) or getattr(context.resources, spec.offline_resource_key)
            containers = sorted({d.container for d in source.read().documents})
            cursor[spec.containers_label] = containers
            new = [c for c in containers if not context.instance.has_dynamic_partition(spec.containers_name, c)]
            if new:
                requests.append(spec.containers.build_add_request(new))
        return dg.SensorResult(dynamic_partitions_requests=requests, cursor=json.dumps(cursor))

    return offline_source_discovery_sensor
