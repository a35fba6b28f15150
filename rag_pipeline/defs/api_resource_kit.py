"""What the live API resources of ``defs/<name>/resources.py`` share: the connector's sync settings taken from the
resource's config fields, an Atlassian client's options, and one live read of a run's containers with the step
metadata every live raw asset reports."""

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from rag_pipeline.connectors.atlassian.client import AtlassianClientOptions
from rag_pipeline.defs.chain.live_read import read_containers
from rag_pipeline.sources.api_stats import ApiStats
from rag_pipeline.sources.source_read import SourceRead

SyncSettings = TypeVar("SyncSettings", bound=BaseModel)


def sync_settings_of(resource: BaseModel, settings: type[SyncSettings], **renamed: Any) -> SyncSettings:
    """``settings`` made of the resource's config fields of the same names (lists as tuples), plus ``renamed``: the
    settings' fields the resource calls otherwise. A field only the settings have keeps its default."""
    shared = type(resource).model_fields.keys() & settings.model_fields.keys()
    values = {name: getattr(resource, name) for name in shared}
    return settings(**{name: tuple(v) if isinstance(v, list) else v for name, v in values.items()}, **renamed)


class AtlassianConfig(Protocol):
    """The config fields of an Atlassian API resource its client is built from."""

    @property
    def username(self) -> str | None: ...
    @property
    def api_token(self) -> str | None: ...
    @property
    def personal_access_token(self) -> str | None: ...
    @property
    def cloud(self) -> bool: ...
    @property
    def max_retries(self) -> int: ...
    @property
    def timeout_seconds(self) -> int: ...


def atlassian_client_options(resource: AtlassianConfig, backoff_seconds: float | None = None) -> AtlassianClientOptions:
    """The client options of one run's reader: the resource's credentials and retries, fresh call counters
    (``backoff_seconds`` unset: the client's default)."""
    options = AtlassianClientOptions(
        username=resource.username,
        api_token=resource.api_token,
        personal_access_token=resource.personal_access_token,
        cloud=resource.cloud,
        stats=ApiStats(),
        max_retries=resource.max_retries,
        timeout=resource.timeout_seconds,
    )
    if backoff_seconds is not None:
        options["backoff_seconds"] = backoff_seconds
    return options


class LiveReader(Protocol):
    """A connector's reader for one run: its call counters and the read of one container's days."""

    @property
    def stats(self) -> ApiStats: ...

    def read_days(self, container: str, days: Sequence[str], /) -> Any: ...


def read_live(
    reader: LiveReader,
    days_by_container: Mapping[str, Sequence[str]],
    refused: tuple[type[Exception], ...],
    counted: Sequence[str] = (),
    timeout: type[Exception] | None = None,
    **metadata: Any,
) -> SourceRead:
    """:func:`read_containers` through ``reader``, with the step metadata: the reader's calls, the ``counted``
    totals, the resource's own ``metadata`` and the guard tripped per failed container."""
    out, guards_tripped, totals = read_containers(days_by_container, reader.read_days, refused, counted, timeout)
    out.metadata = {**reader.stats.as_metadata(), **totals, **metadata, "guards_tripped": guards_tripped}
    return out
