"""Project discovery: new Jira projects become partitions; the sync sensor gives them their history."""

import json

import dagster as dg

from rag_pipeline.defs.chain.assets import ChainKeys
from rag_pipeline.defs.chain.discovery import MAX_REPORTED_SKIPS, report_skips, skipped_note
from rag_pipeline.defs.chain.partitions import JIRA_PROJECTS, jira_projects
from rag_pipeline.defs.jira.resources import JiraResource


def build_jira_project_discovery_sensor(keys: ChainKeys) -> dg.SensorDefinition:
    """Discovery of new projects: they become partitions (``jira_sync_sensor`` requests their history)."""

    @dg.sensor(
        minimum_interval_seconds=3600,
        asset_selection=keys.all,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Lists the Jira projects the API user can browse (paginated; archived skipped by default; "
        "allow/deny lists from the jira resource), adds new ones as `jira_projects` partitions (the sync sensor then "
        "requests their initial history). Listings with an invalid key are skipped and reported in the tick.",
    )
    def jira_project_discovery_sensor(context: dg.SensorEvaluationContext, jira: JiraResource) -> dg.SensorResult:
        discovery = jira.reader(context.log.info).discover()
        projects = discovery.projects
        known = set(context.instance.get_dynamic_partitions(JIRA_PROJECTS))
        new = [p for p in projects if p.key not in known]
        invalid = [str(p) for p in discovery.problems]
        notes = report_skips(context, [skipped_note("project listing(s) with an invalid key", invalid)])
        cursor: dict[str, object] = {"projects": sorted(p.key for p in projects)}
        if notes:
            cursor["skipped"] = {"invalid": invalid[:MAX_REPORTED_SKIPS]}
        return dg.SensorResult(
            dynamic_partitions_requests=[jira_projects.build_add_request([p.key for p in new])] if new else [],
            cursor=json.dumps(cursor),
            skip_reason=None if new else "; ".join(["no new projects", *notes]),
        )

    return jira_project_discovery_sensor
