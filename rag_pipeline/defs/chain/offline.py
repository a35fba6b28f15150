"""Reading an offline source file once per version of it (shared by the export and dump resources)."""

from collections.abc import Container, Sequence
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
