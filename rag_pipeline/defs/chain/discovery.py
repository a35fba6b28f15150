"""Discovery of the offline sources' channels and projects as dynamic partitions, and how every discovery
sensor reports what it left out."""

import json
from collections.abc import Sequence

import dagster as dg

from rag_pipeline.defs.chain.source_spec import OfflineSource, SourceSpec
from rag_pipeline.sources.identifiers import is_valid_container_id
from rag_pipeline.sources.problems import shown

# Enough to act on; a listing full of bad ids must not turn the tick log or the cursor into a dump.
MAX_REPORTED_SKIPS = 20


def skipped_note(what: str, skipped: Sequence[str]) -> str | None:
    """One line naming what a discovery tick left out (the first :data:`MAX_REPORTED_SKIPS`), or None."""
    if not skipped:
        return None
    more = len(skipped) - MAX_REPORTED_SKIPS
    listed = "; ".join(skipped[:MAX_REPORTED_SKIPS]) + (f" (and {more} more)" if more > 0 else "")
    return f"skipped {len(skipped)} {what}: {listed}"


def report_skips(context: dg.SensorEvaluationContext, notes: Sequence[str | None]) -> list[str]:
    """Log each note as a warning on the tick and return them (for the cursor and the skip message)."""
    kept = [n for n in notes if n]
    for note in kept:
        context.log.warning(note)
    return kept


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
        requests: list[dg.AddDynamicPartitionsRequest] = []
        cursor: dict[str, object] = {}
        skipped: dict[str, list[str]] = {}
        for spec in specs:
            source = given.get(spec.offline_resource_key) or getattr(context.resources, spec.offline_resource_key)
            found = {d.container for d in source.read().documents}
            # The readers validate ids too; this keeps a key that could name a path out of the instance whatever
            # reader (or future source) produced it.
            containers = sorted(c for c in found if is_valid_container_id(c))
            invalid = sorted(shown(c) for c in found if not is_valid_container_id(c))
            cursor[spec.containers_label] = containers
            if invalid:
                skipped[spec.containers_label] = invalid[:MAX_REPORTED_SKIPS]
            new = [c for c in containers if not context.instance.has_dynamic_partition(spec.containers_name, c)]
            if new:
                requests.append(spec.containers.build_add_request(new))
        notes = report_skips(
            context,
            [skipped_note(f"{label} with an invalid id (not partitions)", ids) for label, ids in skipped.items()],
        )
        if skipped:
            cursor["skipped"] = skipped
        return dg.SensorResult(
            dynamic_partitions_requests=requests,
            cursor=json.dumps(cursor),
            skip_reason=None if requests or not notes else "; ".join(notes),
        )

    return offline_source_discovery_sensor
