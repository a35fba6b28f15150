"""What the built-in connectors' ``source.py`` modules share when they declare their :class:`Source`.

A built-in connector's Dagster spec sits where the layout puts it (``rag_pipeline.defs.<name>.spec:<name>_spec``,
imported by the Dagster layer only), so :func:`built_in_fields` derives it from the name. Each connector keeps the
functions the eval-set miners call in its own ``mining`` module under the same three names; :func:`mining_facts`
reads them from it, so a registration cannot wire one connector's handles to another's author lookup. Shared code:
it names no source.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypedDict

from rag_pipeline.sources.registry import MiningFacts, SourceSettings


class BuiltInFields(TypedDict):
    """The :class:`Source` fields a built-in connector states first: who it is and where its parts are."""

    name: str
    title: str
    containers_label: str
    settings: type[SourceSettings]
    dagster_spec: str


def built_in_fields(name: str, title: str, containers_label: str, settings: type[SourceSettings]) -> BuiltInFields:
    """A built-in connector's name, title, containers' label and settings section, plus its Dagster spec at the
    layout's place (``Source(**built_in_fields(...), ...)``)."""
    return BuiltInFields(
        name=name,
        title=title,
        containers_label=containers_label,
        settings=settings,
        dagster_spec=f"rag_pipeline.defs.{name}.spec:{name}_spec",
    )


class MiningModule(Protocol):
    """A connector's ``mining`` module: how other documents name one of its documents, and who wrote it."""

    def handles(self, record: Mapping[str, Any]) -> Sequence[str]: ...

    def references(self, text: str) -> Sequence[tuple[int, int, str]]: ...

    def author_account(self, record: Mapping[str, Any]) -> str | None: ...


def mining_facts(
    module: MiningModule,
    *,
    query_text: Callable[[Mapping[str, Any]], str] | None = None,
    miners: tuple[str, ...] = (),
) -> MiningFacts:
    """The :class:`MiningFacts` of a connector whose ``mining`` module is ``module``, plus its question text and
    its own miners where it has them."""
    return MiningFacts(
        handles=module.handles,
        references=module.references,
        author_account=module.author_account,
        query_text=query_text,
        miners=miners,
    )


def metadata_handles(record: Mapping[str, Any], field: str, handle: Callable[[str], str]) -> list[str]:
    """The handle of a document whose metadata names it in ``field`` (a page id, an issue key); none without."""
    value = record["metadata"].get(field)
    return [handle(str(value))] if value else []


def metadata_account(record: Mapping[str, Any], source: str, field: str) -> str | None:
    """``<source>:<account id>`` of the person a document's metadata names in ``field`` (who wrote it), as the
    principal directory keys accounts; None where it names nobody."""
    account = record["metadata"].get(field)
    return f"{source}:{account}" if isinstance(account, str) and account else None
