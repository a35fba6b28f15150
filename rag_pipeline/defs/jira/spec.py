"""Everything Jira adds to the code location, built from the settings."""

import logging
from collections.abc import Sequence

import dagster as dg

from rag_pipeline.connectors.jira.settings import JiraApiSettings, JiraSettings
from rag_pipeline.defs.chain.assets import ChainKeys, build_source_chain
from rag_pipeline.defs.chain.partitions import jira_projects, weekly_partitions
from rag_pipeline.defs.chain.source_spec import SourceSpec
from rag_pipeline.defs.jira.assets import build_jira_issues
from rag_pipeline.defs.jira.reconciliation import build_jira_reconciliation
from rag_pipeline.defs.jira.resources import JiraCsvResource, JiraDumpResource, JiraResource
from rag_pipeline.defs.jira.sensors import build_jira_project_discovery_sensor
from rag_pipeline.settings import ApiLimits, Settings
from rag_pipeline.sources.problems import RecordProblem, SourceError

_log = logging.getLogger(__name__)


def jira_api_resource(api: JiraApiSettings, limits: ApiLimits | None = None) -> JiraResource:
    """The live Jira connector; secrets stay EnvVars (Cloud: JIRA_API_TOKEN, Server/DC: JIRA_PAT). ``limits`` bound
    every read (timeouts, page cap, per-partition budgets)."""
    limits = limits or ApiLimits()
    return JiraResource(
        url=api.url,
        cloud=api.cloud,
        username=api.username,
        api_token=dg.EnvVar("JIRA_API_TOKEN") if api.api_token_set else None,
        personal_access_token=dg.EnvVar("JIRA_PAT") if api.pat_set else None,
        site=api.site,
        page_size=api.page_size,
        overlap_minutes=api.overlap_minutes,
        timeout_seconds=limits.timeout_seconds,
        page_cap=limits.page_cap,
        requests_per_partition=limits.requests_per_partition,
        seconds_per_partition=limits.seconds_per_partition,
    )


def select_projects(
    jira: JiraResource, keys: Sequence[str], problems: list[RecordProblem] | None = None
) -> list[tuple[str, str]]:
    """(key, key) of the named projects (default: every project the API user can browse, reporting on stderr
    listings with an invalid key)."""
    discovery = jira.process_config_and_initialize().reader().discover()
    if problems is not None:
        problems.extend(discovery.problems)
    else:
        for problem in discovery.problems:
            _log.warning("Jira: skipped %s", problem)
    discovered = discovery.projects
    by_key = {p.key: p for p in discovered}
    wanted = [k.upper() for k in keys] or [p.key for p in discovered]
    missing = [k for k in wanted if k not in by_key]
    if missing:
        known = ", ".join(sorted(by_key)) or "none"
        raise SourceError(
            f"Jira project(s) {', '.join(missing)} not found among the projects the API user can browse ({known}); "
            "grant it Browse projects, or check the allow/deny lists and include_archived"
        )
    return [(k, k) for k in wanted]


def jira_spec(settings: Settings) -> SourceSpec:
    """Jira: weekly partitions, ``jira_issues`` and its chain, dump or REST API, reconciliation."""
    partitions = weekly_partitions(settings.partition_start)
    jira = settings.section("jira", JiraSettings)
    keys = ChainKeys("jira", "jira_issues")
    raw = build_jira_issues(partitions, settings.partition_start, settings.max_document_chars)
    discovery = build_jira_project_discovery_sensor(keys)
    return SourceSpec(
        name="jira",
        containers_label="projects",
        partitions=partitions,
        containers=jira_projects,
        keys=keys,
        assets=(raw, *build_source_chain(keys, partitions)),
        offline_resource_key="jira_dump",
        offline_resource=_offline_resource(jira),
        live_resource=jira_api_resource(jira.api, settings.api_limits) if jira.api else None,
        live=build_jira_reconciliation(keys, discovery),
        api_tag="jira-api",
        select_live_containers=select_projects,
        directory=True,
    )


def _offline_resource(jira: JiraSettings) -> JiraCsvResource | JiraDumpResource:
    """Jira's CSV export where one is given (RAG_JIRA_CSV, --jira-csv), else the JSON-lines dump."""
    directory = str(jira.directory) if jira.directory else None
    if jira.csv:
        return JiraCsvResource(
            paths=[str(p) for p in jira.csv],
            site=jira.offline_site,
            date_format=jira.csv_date_format,
            delimiter=jira.csv_delimiter,
            directory_file=directory,
        )
    return JiraDumpResource(path=str(jira.dump), site=jira.offline_site, directory_file=directory)
