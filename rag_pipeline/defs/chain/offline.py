"""Reading an offline source file once per version of it (shared by the export and dump resources)."""

from collections.abc import Callable, Container, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from rag_pipeline.sources.document import Document
from rag_pipeline.sources.problems import RecordProblem
from rag_pipeline.sources.source_read import SourceRead


class WholeRead(Protocol):
    """An offline source's whole file, read once: its documents and the records it skipped."""

    @property
    def documents(self) -> Sequence[Document]: ...

    @property
    def problems(self) -> Sequence[RecordProblem]: ...


def file_version(path: str) -> float:
    """A value that changes when the file (or folder) is replaced: its modification time."""
    return Path(path).stat().st_mtime


def containers_of(read: WholeRead, containers: Container[str]) -> SourceRead:
    """An offline source's documents of the given channels/projects (its whole file is read at once), with
    every problem of the read."""
    documents = [d for d in read.documents if d.container in containers]
    return SourceRead(documents=documents, problems=list(read.problems))


class WholeFileRead:
    """Mixed into an offline resource, before its Dagster base: ``read_partitions`` is the containers' documents of
    its whole file (:meth:`read`, cached per version of the file), whatever days were asked for."""

    def read(self) -> WholeRead:
        raise NotImplementedError

    def read_partitions(
        self, days_by_container: Mapping[str, Sequence[str]], log: Callable[[str], None] | None = None
    ) -> SourceRead:
        return containers_of(self.read(), days_by_container)
