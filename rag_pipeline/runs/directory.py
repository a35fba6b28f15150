"""Refreshing the principal directory from the command line, through the same resources and the same body
(``defs.directory.refresh_directory``) as the ``<source>_directory`` assets."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rag_pipeline.directory.people import Links, Person, UnknownPerson, find_person
from rag_pipeline.directory.store import DirectoryStore
from rag_pipeline.directory.sync import DirectorySync
from rag_pipeline.retrieval.principal import Principal
from rag_pipeline.runs.code_location import (
    ACCESS_AUDIT,
    build_resources,
    directory_resource,
    qdrant_resource,
    refresh_directory,
    run_access_audit,
    source_specs,
)
from rag_pipeline.settings import Settings


def refresh_directories(
    settings: Settings, sources: Sequence[str], live: bool | None = None, log: Callable[[str], None] | None = None
) -> list[DirectorySync]:
    """Refresh each source's directory from its live API where configured (``live=False``: from the offline
    files, as ``index`` does), writing it and rewriting the ACLs of Slack channels whose readers changed."""

    specs = {name: spec for name, spec in source_specs(settings).items() if name in sources}
    resources = build_resources(settings, specs, live)
    directory = directory_resource(settings)
    qdrant = qdrant_resource(settings).process_config_and_initialize()
    done = []
    # A source whose resources read no directory (a folder of documents) has nobody to look up.
    for source in [s for s in sources if s in specs and specs[s].directory]:
        resource: Any = resources[f"{source}_source"]
        initialize = getattr(resource, "process_config_and_initialize", None)
        done.append(refresh_directory(source, initialize() if initialize else resource, directory, qdrant, log))
    record_in_dagster(settings, done)
    return done


def sources_without_directory(settings: Settings, sources: Sequence[str]) -> list[str]:
    """The named sources that keep no principal directory (their documents carry their own readers)."""
    specs = source_specs(settings)
    return [s for s in sources if s in specs and not specs[s].directory]


def record_in_dagster(settings: Settings, done: Sequence[DirectorySync]) -> None:
    """Each refresh as a materialization of its ``<source>_directory`` asset on the runners' instance, so the UI
    shows the directory `index`, `demo` or `sync` wrote (with the same metadata as the asset's own runs), then the
    access audit of what those syncs changed, as the ``access_audit`` asset would after them."""
    import dagster as dg

    from rag_pipeline.runs.instance import ensure_dagster_home, open_instance

    ensure_dagster_home(settings)
    with open_instance() as instance:
        for sync in done:
            metadata: dict[str, Any] = {k: v for k, v in sync.as_metadata().items() if v is not None}
            metadata["skipped_examples"] = [str(p) for p in sync.problems[:20]]
            instance.report_runless_asset_event(
                dg.AssetMaterialization(asset_key=f"{sync.source}_directory", metadata=metadata)
            )
        if done:
            audit, check = run_access_audit(
                instance,
                directory_resource(settings),
                qdrant_resource(settings).process_config_and_initialize(),
                settings.audit_mass_change_accounts,
            )
            instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=ACCESS_AUDIT, metadata=audit))
            instance.report_runless_asset_event(
                dg.AssetCheckEvaluation(
                    asset_key=ACCESS_AUDIT,
                    check_name=check.check_name or "",
                    passed=check.passed,
                    severity=check.severity,
                    metadata=check.metadata,
                    description=check.description,
                )
            )


def directory_store(settings: Settings) -> DirectoryStore:
    return DirectoryStore(settings.paths.directory)


def person_of(settings: Settings, who: str) -> Person:
    """The person ``who`` (email, account id or source:id) names; :class:`UnknownPerson` otherwise."""
    store = directory_store(settings)
    if not store.exists():
        raise UnknownPerson(
            f"no directory at {settings.paths.directory}: run `rag-pipeline index` (or `sync`, or `directory`) first"
        )
    return find_person(store, who, Links.read(settings.identity_links_file))


def reader_of(settings: Settings, who: str) -> tuple[Principal, Person | None]:
    """The reader ``who`` searches as: the directory's person where it knows one, else the bare id (public
    documents and those naming it)."""
    try:
        person = person_of(settings, who)
    except UnknownPerson:
        return Principal(user_id=who if "@" not in who else None), None
    return person.principal(), person
