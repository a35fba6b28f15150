"""The principal directory as software-defined assets: ``<source>_directory`` for every source whose resources
can read one (Slack and Jira), in the source's group, refreshed hourly (the discovery cadence) and by
``index``/``sync``.

Thin wiring: each source resource reads its own directory (``read_directory``: export, dump, CSV or API, through
:mod:`rag_pipeline.directory`); the write and the ACL refresh are
:func:`rag_pipeline.directory.sync.sync_directory`; this module turns the result into metadata, a freshness
policy and a check.
"""

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

import dagster as dg
from pydantic import Field

from rag_pipeline.defs.chain.resources import QdrantResource
from rag_pipeline.defs.executors import QDRANT_QUEUE, step_tags
from rag_pipeline.directory.accounts import DirectorySnapshot
from rag_pipeline.directory.audit import AccessAudit, count_documents
from rag_pipeline.directory.store import DirectoryStore
from rag_pipeline.directory.sync import DirectorySync, sync_directory
from rag_pipeline.index.store import VectorStore
from rag_pipeline.settings import Settings

DIRECTORY_CRON = "20 * * * *"
DIRECTORY_FRESHNESS = dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=3), warn_window=timedelta(hours=2))


class DirectoryResource(dg.ConfigurableResource):
    """Where the directory is kept."""

    path: str = Field(description="SQLite file of the directory (<data>/directory.sqlite)")

    def store(self) -> DirectoryStore:
        return DirectoryStore(self.path)


def directory_resource(settings: Settings) -> DirectoryResource:
    return DirectoryResource(path=str(settings.paths.directory))


class DirectorySource(Protocol):
    """A source resource that can read who exists in the source (accounts, groups, channel members); ``previous``
    is the directory synced so far, for what a failed read keeps."""

    def read_directory(
        self, log: Callable[[str], None] | None = None, previous: DirectoryStore | None = None
    ) -> DirectorySnapshot: ...


@contextmanager
def _index_of(qdrant: QdrantResource) -> Iterator[VectorStore | None]:
    """The index for the ACL refresh, or None where none was written yet (nothing to refresh)."""
    location = qdrant.location()
    if location.embedded and not (Path(location.path) / location.names.children).exists():
        yield None
        return
    with qdrant.open() as store:
        yield store


def refresh_directory(
    source: str,
    resource: DirectorySource,
    directory: DirectoryResource,
    qdrant: QdrantResource,
    log: Callable[[str], None] | None = None,
) -> DirectorySync:
    """Read, write, and rewrite the ACLs of channels whose readers changed (the asset's and the CLI's body)."""
    started = time.perf_counter()
    store = directory.store()
    snapshot = resource.read_directory(log, previous=store)
    if not snapshot.channel_members:
        # Only channel memberships become document ACLs; without them the index need not be opened.
        return sync_directory(snapshot, store, started=started)
    with _index_of(qdrant) as index:
        return sync_directory(snapshot, store, index, None if index is not None else "no index yet", started)


def build_directory_asset(source: str) -> dg.AssetsDefinition:
    """``<source>_directory``, with its check that every record was usable."""
    key = dg.AssetKey(f"{source}_directory")

    @dg.asset(
        key=key,
        group_name=source,
        kinds={source, "sqlite"},
        op_tags=step_tags(QDRANT_QUEUE),
        owners=["team:rag-platform"],
        required_resource_keys={f"{source}_source", "directory", "qdrant"},
        automation_condition=dg.AutomationCondition.on_cron(DIRECTORY_CRON),
        freshness_policy=DIRECTORY_FRESHNESS,
        check_specs=[
            dg.AssetCheckSpec(
                "records_usable",
                asset=key,
                description="Every directory record had an id (and a well-formed email where one was given); the "
                "others were skipped and listed in the materialization.",
            )
        ],
        description=f"Who exists in {source} and what they belong to (accounts, groups and the grants behind them, "
        "private-channel members), joined into people by email; searches, `whois` and `explain` resolve readers "
        "from it. A channel whose readers changed gets its indexed threads' ACL rewritten in place "
        "(acl_lag_seconds: from the sync seeing the change to the index honouring it).",
    )
    def directory_asset(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        done = refresh_directory(
            source,
            getattr(context.resources, f"{source}_source"),
            context.resources.directory,
            context.resources.qdrant,
            context.log.info,
        )
        context.log.info(done.summary())
        for problem in done.problems[:20]:
            context.log.warning(f"directory record skipped: {problem}")
        metadata: dict[str, Any] = {**done.as_metadata(), "skipped_examples": [str(p) for p in done.problems[:20]]}
        skipped = len(done.problems)
        return dg.MaterializeResult(
            metadata={k: v for k, v in metadata.items() if v is not None},
            check_results=[
                dg.AssetCheckResult(
                    check_name="records_usable",
                    passed=skipped == 0,
                    severity=dg.AssetCheckSeverity.WARN,
                    metadata={"records_skipped": skipped},
                )
            ],
        )

    return directory_asset


ACCESS_AUDIT = dg.AssetKey("access_audit")
MASS_CHANGE_CHECK = "no_mass_access_change"
# Lines of changes shown in the materialization and the check (the rest: `rag-pipeline audit`).
_SHOWN_CHANGES = 50


def audit_access(
    directory: DirectoryResource, qdrant: QdrantResource, after_id: int = 0
) -> tuple[AccessAudit, DirectoryStore]:
    """The access changes recorded after row ``after_id``, their documents counted in the index (the asset's and
    the CLI's body)."""
    store = directory.store()
    rows = store.access_changes(after_id=after_id)
    if any(r.documents is None for r in rows):
        with _index_of(qdrant) as index:
            if index is not None:
                store.count_access_documents(count_documents(index, rows))
                rows = store.access_changes(after_id=after_id)
    return AccessAudit(tuple(rows)), store


def run_access_audit(
    instance: dg.DagsterInstance,
    directory: DirectoryResource,
    qdrant: QdrantResource,
    mass_change_accounts: int,
    log: Callable[[str], None] | None = None,
) -> tuple[dict[str, Any], dg.AssetCheckResult]:
    """The audit of the changes since the last ``access_audit`` materialization on ``instance``: its metadata and
    its mass-change check (the asset's body, and what `index`/`directory` record after their directory syncs)."""
    started = time.perf_counter()
    previous = instance.get_latest_materialization_event(ACCESS_AUDIT)
    materialized = previous.asset_materialization if previous is not None else None
    last = materialized.metadata.get("last_row_id") if materialized is not None else None
    after_id = int(last.value) if last is not None and isinstance(last.value, int) else 0
    audit, store = audit_access(directory, qdrant, after_id)
    lines = audit.lines(store)
    if log is not None:
        for line in lines[:_SHOWN_CHANGES]:
            log(line)
    mass = audit.is_mass_change(mass_change_accounts)
    shown = "\n".join(f"- {line}" for line in lines[:_SHOWN_CHANGES]) or "no access changed"
    if len(lines) > _SHOWN_CHANGES:
        shown += f"\n- … and {len(lines) - _SHOWN_CHANGES:,} more (`rag-pipeline audit`)"
    metadata: dict[str, Any] = {
        "changes": len(audit.rows),
        "accounts_gained": audit.accounts("gained"),
        "accounts_lost": audit.accounts("lost"),
        "documents_gained": audit.documents("gained"),
        "documents_lost": audit.documents("lost"),
        "last_row_id": audit.rows[-1].id if audit.rows else after_id,
        "access_changes": dg.MetadataValue.md(shown),
        "seconds": round(time.perf_counter() - started, 3),
    }
    check = dg.AssetCheckResult(
        asset_key=ACCESS_AUDIT,
        check_name=MASS_CHANGE_CHECK,
        passed=not mass,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={"accounts_changed": audit.accounts_changed, "threshold": mass_change_accounts, "changes": lines[:20]},
        description=f"{audit.accounts_changed} account(s) gained or lost access"
        + (f", over the threshold of {mass_change_accounts}" if mass else ""),
    )
    return metadata, check


def build_access_audit_asset(sources: list[str], mass_change_accounts: int) -> dg.AssetsDefinition:
    """``access_audit``: after every directory sync, who gained or lost access to what (and how many documents),
    with a check that fails on a mass change."""

    @dg.asset(
        key=ACCESS_AUDIT,
        group_name="access",
        kinds={"sqlite"},
        deps=[dg.AssetKey(f"{source}_directory") for source in sources],
        op_tags=step_tags(QDRANT_QUEUE),
        owners=["team:rag-platform"],
        required_resource_keys={"directory", "qdrant"},
        automation_condition=dg.AutomationCondition.eager(),
        check_specs=[
            dg.AssetCheckSpec(
                MASS_CHANGE_CHECK,
                asset=ACCESS_AUDIT,
                description=f"At most {mass_change_accounts} accounts gained or lost access since the last audit "
                "(RAG_AUDIT_MASS_CHANGE_ACCOUNTS); more is a mass change someone should review.",
            )
        ],
        description="Who gained or lost access to which containers at the directory syncs since the last audit, "
        "and how many documents each grant admits (`rag-pipeline audit --since` prints the same). No query text, no "
        "document text.",
    )
    def access_audit(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        resources = context.resources
        metadata, check = run_access_audit(
            context.instance, resources.directory, resources.qdrant, mass_change_accounts, context.log.info
        )
        return dg.MaterializeResult(metadata=metadata, check_results=[check])

    return access_audit
