"""Discovery of the offline sources' channels and projects as dynamic partitions."""

import json

import dagster as dg

from rag_pipeline.defs.partitions import jira_projects, slack_channels
from rag_pipeline.defs.resources import JiraDumpResource, SlackExportResource


def offline_containers(slack_export: SlackExportResource, jira_dump: JiraDumpResource) -> tuple[list[str], list[str]]:
    """Channel ids and project keys that hold documents in the offline sources."""
    channels = sorted({d.container for d in slack_export.read().documents})
    projects = sorted({d.container for d in jira_dump.read().documents})
    return channels, projects


@dg.sensor(
    minimum_interval_seconds=3600,
    description="Adds the channels of the Slack export and the projects of the Jira dump as dynamic partitions.",
)
def offline_source_discovery_sensor(
    context: dg.SensorEvaluationContext, slack_export: SlackExportResource, jira_dump: JiraDumpResource
) -> dg.SensorResult:
    channels, projects = offline_containers(slack_export, jira_dump)
    new_channels = [c for c in channels if not context.instance.has_dynamic_partition(slack_channels.name, c)]
    new_projects = [p for p in projects if not context.instance.has_dynamic_partition(jira_projects.name, p)]
    requests = []
    if new_channels:
        requests.append(slack_channels.build_add_request(new_channels))
    if new_projects:
        requests.append(jira_projects.build_add_request(new_projects))
    return dg.SensorResult(
        dynamic_partitions_requests=requests,
        cursor=json.dumps({"channels": channels, "projects": projects}),
    )
