"""What the live API resources of ``defs/<name>/resources.py`` share: the connector's sync settings taken from the
resource's config fields, an Atlassian client's options, and one live read of a run's containers with the step
metadata every live raw asset reports."""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class LiveRead:
    """How a live API resource reads its partitions: the errors that refuse one container (the others are still
    read), the reader's counters totalled into the step metadata, the error of a read that ran out of time, and the
    resource's own ``metadata``."""

    refused: type[Exception]
    counted: tuple[str, ...]
    timeout: type[Exception] | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


class LiveApiResource:
    """Mixed into a live API resource, before its Dagster base: ``read_partitions`` is :func:`read_live` through a
    fresh :meth:`reader`, as :meth:`live_read` says."""

    def reader(self, log: Callable[[str], None] | None = None) -> LiveReader:
        raise NotImplementedError

    def live_read(self) -> LiveRead:
        raise NotImplementedError

    def read_partitions(
        self, days_by_container: Mapping[str, Sequence[str]], log: Callable[[str], None] | None = None
    ) -> SourceRead:
        how = self.live_read()
        return read_live(self.reader(log), days_by_container, (how.refused,), how.counted, how.timeout, **how.metadata)
