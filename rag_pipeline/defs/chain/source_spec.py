"""What one source (Slack, Jira, ...) adds to the code location, in one object.

Each registered source (:mod:`rag_pipeline.sources.registry`) names a function ``Settings -> SourceSpec`` (its
``dagster_spec``); the code location, the in-process runners and the evaluation take asset keys, partitions and
resources from the specs. A source with only offline data builds its spec with
:func:`rag_pipeline.defs.chain.offline_spec.offline_source_spec`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import dagster as dg

from rag_pipeline.pipeline.keys import ChainKeys
from rag_pipeline.sources.identity import SourceIdentity
from rag_pipeline.sources.problems import RecordProblem
from rag_pipeline.sources.source_read import SourceRead

if TYPE_CHECKING:
    # What define_asset_job returns; dagster does not export the type at the top level.
    from rag_pipeline.runs.dagster_private import UnresolvedAssetJobDefinition


class OfflineSource(Protocol):
    """An offline source resource (an export or dump file): everything it holds, read at once."""

    @property
    def path(self) -> str: ...

    def input_paths(self) -> list[str]:
        """Every file or folder it reads (what a change of the source is detected on)."""
        ...

    def identity(self) -> SourceIdentity:
        """Whose data it is (from the data or the resource's config); IdentityError naming the flag if unknown."""
        ...

    def read(self) -> Any: ...

    def read_partitions(self, days_by_container: Any, log: Callable[[str], None] | None = None) -> SourceRead: ...


@dataclass(frozen=True)
class LiveDefinitions:
    """What a live source adds when it is configured: reconciliation (asset, job, schedule) and discovery."""

    reconciliation: dg.AssetsDefinition
    job: UnresolvedAssetJobDefinition
    schedule: dg.ScheduleDefinition
    discovery_sensor: dg.SensorDefinition


class ContainerSelector(Protocol):
    """Resolves the containers a live sync covers: names/ids given (or all discovered) -> [(id, name)]. Listings
    the discovery refused (an invalid id) go to ``problems`` when given (the sync's report of what it
    skipped), else to the log."""

    def __call__(
        self, resource: Any, names: Sequence[str], problems: list[RecordProblem] | None = None, /
    ) -> list[tuple[str, str]]: ...


@dataclass(frozen=True)
class SourceSpec:
    """One source: partitions, its chain of assets, offline and live resources, reconciliation, discovery."""

    name: str
    containers_label: str  # "channels" / "projects": metadata labels and the reconciliation config field
    partitions: dg.PartitionsDefinition  # weeks (defs/chain/partitions.py)
    containers: dg.DynamicPartitionsDefinition
    keys: ChainKeys
    assets: tuple[dg.AssetsDefinition, ...]  # raw documents first, then the chain down to the Qdrant points
    offline_resource_key: str
    offline_resource: OfflineSource
    live_resource: dg.ConfigurableResource | None  # None where the live API is not configured
    live: LiveDefinitions | None = None  # None for a source without a live API
    api_tag: str = ""  # the run tag value of live syncs (``rag/source``); default ``<name>-api``
    select_live_containers: ContainerSelector | None = None
    # Whether its resources read a principal directory (``read_directory``): a ``<name>_directory`` asset.
    directory: bool = False

    def __post_init__(self) -> None:
        if not self.api_tag:
            object.__setattr__(self, "api_tag", f"{self.name}-api")

    @property
    def source_resource_key(self) -> str:
        """The resource the raw asset reads from: the live API where configured, else the offline file."""
        return f"{self.name}_source"

    @property
    def containers_name(self) -> str:
        """The name of the dynamic partitions that register the source's channels/projects."""
        name = self.containers.name
        assert name is not None, "a source's containers are named dynamic partitions"
        return name

    @property
    def is_live(self) -> bool:
        return self.live_resource is not None and self.live is not None

    @property
    def live_definitions(self) -> LiveDefinitions:
        """The live definitions of a live source (a TypeError names a source that has none)."""
        if self.live is None or self.select_live_containers is None:
            raise TypeError(f"source {self.name} has no live API")
        return self.live

    def resources(self, live: bool | None = None) -> dict[str, object]:
        """This source's resources; ``live=False`` feeds the chain from the offline file even where the
        API is configured (the demo), and only a live setup has the API resource, whose secrets must
        not be needed offline."""
        use_live = self.is_live if live is None else live and self.is_live
        out: dict[str, object] = {self.offline_resource_key: self.offline_resource}
        if use_live:
            out[self.name] = out[self.source_resource_key] = self.live_resource
        else:
            out[self.source_resource_key] = self.offline_resource
        return out
