"""Everything Jira adds to the code location, built from the settings: what differs from any live source
(discovery, reconciliation, the raw asset's words); the shape is :mod:`rag_pipeline.defs.chain.live_spec`'s."""

from collections.abc import Callable, Mapping, Sequence

import dagster as dg
from pydantic import Field

from rag_pipeline.connectors.jira.api import JiraApiReader
from rag_pipeline.connectors.jira.reconcile import plan_project
from rag_pipeline.connectors.jira.settings import JiraApiSettings, JiraSettings
from rag_pipeline.defs.chain.live_spec import (
    Discovered,
    LiveSource,
    Reconciliation,
    Skipped,
    live_source_spec,
    report_listing_problems,
)
from rag_pipeline.defs.chain.source_spec import SourceSpec
from rag_pipeline.defs.jira.resources import JIRA_API_POOL, JiraCsvResource, JiraDumpResource, JiraResource
from rag_pipeline.defs.source_spec_kit import atlassian_api_resource, require_listed
from rag_pipeline.index.store import IndexedDocument
from rag_pipeline.reconciliation.reconcile import ReconcilePlan
from rag_pipeline.settings import ApiLimits, Settings
from rag_pipeline.sources.problems import RecordProblem

Planner = Callable[[str, Mapping[str, IndexedDocument]], ReconcilePlan]


def jira_api_resource(api: JiraApiSettings, limits: ApiLimits | None = None) -> JiraResource:
    """The live Jira connector (secrets: JIRA_API_TOKEN, JIRA_PAT); ``limits`` bound every read."""
    return atlassian_api_resource(JiraResource, api, limits, "JIRA")


def select_projects(
    jira: JiraResource, keys: Sequence[str], problems: list[RecordProblem] | None = None
) -> list[tuple[str, str]]:
    """(key, key) of the named projects (default: every project the API user can browse, reporting on stderr
    listings with an invalid key)."""
    discovery = jira.process_config_and_initialize().reader().discover()
    report_listing_problems("Jira", discovery.problems, problems)
    by_key = {p.key for p in discovery.projects}
    wanted = [k.upper() for k in keys] or [p.key for p in discovery.projects]
    require_listed(
        wanted,
        by_key,
        by_key,
        "Jira project(s) {} not found among the projects the API user can browse",
        "grant it Browse projects, or check the allow/deny lists and include_archived",
    )
    return [(k, k) for k in wanted]


class JiraReconciliationConfig(dg.Config):
    """Which projects to reconcile (default: every discovered project)."""

    projects: list[str] = Field(default_factory=list, description="Project keys; empty: every discovered project")


def discover_projects(jira: JiraResource, log: Callable[[str], None]) -> Discovered:
    """The projects the API user can browse, and listings skipped for an invalid key."""
    discovery = jira.reader(log).discover()
    return Discovered(
        ids=[p.key for p in discovery.projects],
        skipped=(Skipped("project listing(s) with an invalid key", "invalid", [str(p) for p in discovery.problems]),),
    )


def plan_reconciliation(jira: JiraResource, reader: JiraApiReader, config: JiraReconciliationConfig) -> Planner:
    def plan(project: str, indexed: Mapping[str, IndexedDocument]) -> ReconcilePlan:
        return plan_project(reader, project, indexed)

    return plan


def jira_spec(settings: Settings) -> SourceSpec:
    """Jira: weekly partitions, ``jira_issues`` and its chain, dump or REST API, discovery, reconciliation."""
    jira = settings.section("jira", JiraSettings)
    return live_source_spec(
        settings,
        LiveSource(
            name="jira",
            containers_label="projects",
            raw_asset="jira_issues",
            raw_description="Jira issues updated in the partition's week (UTC), of every project the run covers: "
            "summary, description (ADF or wiki markup) and every comment as text, status, typed links and the "
            "project's (or the issue security level's) ACL. Read from the Jira REST API (Cloud /search/jql or Server "
            "/search) or, offline, from a dump.",
            api_pool=JIRA_API_POOL,
            offline_resource_key="jira_dump",
            offline_resource=_offline_resource(jira),
            live_resource=jira_api_resource(jira.api, settings.api_limits) if jira.api else None,
            select_live_containers=select_projects,
            discover=discover_projects,
            discovery_sensor="jira_project_discovery_sensor",
            discovery_description="Lists the Jira projects the API user can browse (paginated; archived skipped by "
            "default; allow/deny lists from the jira resource), adds new ones as `jira_projects` partitions (the sync "
            "sensor then requests their initial history). Listings with an invalid key are skipped and reported in "
            "the tick.",
            cursor_key="projects",
            reconciliation=Reconciliation(
                config=JiraReconciliationConfig,
                containers_field="projects",
                plan=plan_reconciliation,
                cron="30 3 * * *",
                description="Lists every discovered project's current issue ids (ids only, large pages) and compares "
                "them with the index: issues Jira no longer has are removed; issues moved to another project (new key, "
                "same id) are rewritten under their new project, never duplicated.",
                job_description="Removes Jira issues deleted at the source and rewrites issues moved to another "
                "project.",
                schedule_description="Daily Jira reconciliation (deletions and moves) at 03:30 UTC.",
            ),
        ),
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
