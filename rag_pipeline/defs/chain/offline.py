"""Reading an offline source file once per version of it (shared by the export and dump resources)."""

from collections.abc import Container
from pathlib import Path

from rag_pipeline.connectors.jira.dump import JiraRead
from rag_pipeline.connectors.slack.export import SlackRead
from rag_pipeline.sources.source_read import SourceRead


def file_version(path: str) -> float:
    """A value that changes when the file (or folder) is replaced: its modification time."""
    return Path(path).stat().st_mtime


def containers_of(read: SlackRead | JiraRead, containers: Container[str]) -> SourceRead:
    """An offline source's documents of the given channels/projects (its whole file is read at once), with
    every problem of the read."""
    documents = [d for d in read.documents if d.container in containers]
    return SourceRead(documents=documents, problems=list(read.problems))
