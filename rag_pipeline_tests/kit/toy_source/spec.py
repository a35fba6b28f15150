"""The toy source's Dagster side: a resource over the folder and the spec the shared chain is built from."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import dagster as dg

from rag_pipeline.defs.chain.offline_spec import offline_source_spec
from rag_pipeline.defs.chain.source_spec import SourceSpec
from rag_pipeline.settings import Settings
from rag_pipeline.sources.source_read import SourceRead
from rag_pipeline_tests.kit.toy_source.reader import read_folder
from rag_pipeline_tests.kit.toy_source.source import ToyIdentity, ToySettings


class ToyFolderResource(dg.ConfigurableResource):
    """The folder of toy documents (unset: no documents)."""

    folder: str | None = None

    def input_paths(self) -> list[str]:
        return [self.folder] if self.folder else []

    def identity(self) -> ToyIdentity:
        return ToyIdentity(Path(self.folder).name if self.folder else "nobody")

    def read(self) -> SourceRead:
        return read_folder(Path(self.folder) if self.folder else None)

    def read_partitions(
        self, days_by_container: Mapping[str, Sequence[str]], log: Callable[[str], None] | None = None
    ) -> SourceRead:
        read = self.read()
        read.documents = [d for d in read.documents if d.container in days_by_container]
        return read


def toy_spec(settings: Settings) -> SourceSpec:
    toy = settings.section("toy", ToySettings)
    return offline_source_spec(
        name="toy",
        raw_asset="toy_notes",
        containers_label="shelves",
        offline_resource=ToyFolderResource(folder=str(toy.folder) if toy.folder else None),
        settings_partition_start=settings.partition_start,
        max_document_chars=settings.max_document_chars,
        description="Toy notes: one JSON file per note, on its shelf.",
    )
