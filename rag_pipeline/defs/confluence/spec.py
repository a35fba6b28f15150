"""Everything Confluence adds to the code location, built from the settings: what differs from any live source
(discovery, reconciliation, the raw asset's words); the shape is :mod:`rag_pipeline.defs.chain.live_spec`'s."""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import dagster as dg
from pydantic import Field

from rag_pipeline.connectors.confluence.api import ConfluenceApiReader
from rag_pipeline.connectors.confluence.reconcile import plan_space
from rag_pipeline.connectors.confluence.settings import ConfluenceApiSettings, ConfluenceSettings
from rag_pipeline.defs.chain.live_spec import (
    Discovered,
    LiveSource,
    Reconciliation,
    Skipped,
    live_source_spec,
    report_listing_problems,
)
from rag_pipeline.defs.chain.source_spec import SourceSpec
from rag_pipeline.defs.confluence.resources import CONFLUENCE_API_POOL, ConfluenceDumpResource, ConfluenceResource
from rag_pipeline.defs.source_spec_kit import atlassian_api_resource, require_listed
from rag_pipeline.index.store import IndexedDocument
from rag_pipeline.reconciliation.reconcile import ReconcilePlan
from rag_pipeline.settings import ApiLimits, Settings
from rag_pipeline.sources.problems import RecordProblem


def confluence_api_resource(api: ConfluenceApiSettings, limits: ApiLimits | None = None) -> ConfluenceResource:
    """The live Confluence connector (secrets: CONFLUENCE_API_TOKEN, CONFLUENCE_PAT), with its space filters."""
    return atlassian_api_resource(
        ConfluenceResource,
        api,
        limits,
        "CONFLUENCE",
        space_allow=list(api.space_allow),
        space_deny=list(api.space_deny),
    )


def select_spaces(
    confluence: ConfluenceResource, keys: Sequence[str], problems: list[RecordProblem] | None = None
) -> list[tuple[str, str]]:
    """(key, key) of the named spaces (default: every space the API user can view)."""
    discovery = confluence.process_config_and_initialize().reader().discover()
    report_listing_problems("Confluence", discovery.problems, problems)
    known = {s.key for s in discovery.spaces}
    wanted = list(keys) or sorted(known)
    require_listed(
        wanted,
        known,
        known,
        "Confluence space(s) {} not found among the spaces the API user can view",
        "grant it View on the space, or check the allow/deny lists",
    )
    return [(k, k) for k in wanted]


class ConfluenceReconciliationConfig(dg.Config):
    """Which spaces to reconcile (default: every discovered space)."""

    spaces: list[str] = Field(default_factory=list, description="Space keys; empty: every discovered space")


def discover_spaces(confluence: ConfluenceResource, log: Callable[[str], None]) -> Discovered:
    """The spaces the API user can view, and listings skipped (a key that cannot be a partition key)."""
    discovery = confluence.reader(log).discover()
    return Discovered(
        ids=[s.key for s in discovery.spaces],
        skipped=(Skipped("space listing(s) left out", "invalid", [str(p) for p in discovery.problems]),),
    )


def plan_reconciliation(
    confluence: ConfluenceResource, reader: ConfluenceApiReader, config: ConfluenceReconciliationConfig
) -> Callable[[str, Mapping[str, IndexedDocument], Mapping[str, Mapping[str, Any]]], ReconcilePlan]:
    def plan(
        space: str, indexed: Mapping[str, IndexedDocument], stored: Mapping[str, Mapping[str, Any]]
    ) -> ReconcilePlan:
        # A page moved under another parent keeps its version: the ancestors it was indexed under tell the move.
        ancestors = {doc: [str(a) for a in found.get("ancestors") or []] for doc, found in stored.items()}
        return plan_space(reader, space, indexed, ancestors)

    return plan


def confluence_spec(settings: Settings) -> SourceSpec:
    """Confluence: weekly partitions, ``confluence_pages`` and its chain, dump or REST API, discovery,
    reconciliation."""
    confluence = settings.section("confluence", ConfluenceSettings)
    return live_source_spec(
        settings,
        LiveSource(
            name="confluence",
            containers_label="spaces",
            raw_asset="confluence_pages",
            raw_description="Confluence pages and blog posts changed in the partition's week (UTC), of every space "
            "the run covers: title path (space › ancestors › page), storage-format body as text (macros, tables, "
            "code, mentions, attachments named), labels and inline and footer comments, with the space's view "
            "permission and every inherited view restriction as ACL. Read from the REST API (CQL by lastModified) "
            "or, offline, from a dump of REST content objects.",
            api_pool=CONFLUENCE_API_POOL,
            offline_resource_key="confluence_dump",
            offline_resource=ConfluenceDumpResource(
                path=str(confluence.dump) if confluence.dump else "",
                site=confluence.site,
                directory_file=str(confluence.directory) if confluence.directory else None,
            ),
            live_resource=confluence_api_resource(confluence.api, settings.api_limits) if confluence.api else None,
            select_live_containers=select_spaces,
            discover=discover_spaces,
            discovery_sensor="confluence_space_discovery_sensor",
            discovery_description="Lists the Confluence spaces the API user can view (paginated; archived skipped by "
            "default; allow/deny lists from the confluence resource), adds new ones as `confluence_spaces` partitions "
            "(the sync sensor then requests their initial history). Listings left out are reported in the tick.",
            cursor_key="spaces",
            reconciliation=Reconciliation(
                config=ConfluenceReconciliationConfig,
                containers_field="spaces",
                plan=plan_reconciliation,
                cron="0 4 * * *",
                stored_fields=("ancestors",),
                description="Lists every discovered space's current pages (ids, ancestors and view restrictions) and "
                "compares them with the index: pages deleted or trashed at the source are removed, pages moved to "
                "another space are rewritten there, and a restriction added or lifted is applied in place.",
                job_description="Removes Confluence pages deleted at the source, rewrites moved pages and applies "
                "changed view restrictions.",
                schedule_description="Daily Confluence reconciliation (deletions, moves, restrictions) at 04:00 UTC.",
            ),
        ),
    )
