"""What a source hands the raw documents asset for a run's partitions, whichever reader it is."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rag_pipeline.sources.document import Document
from rag_pipeline.sources.problems import RecordProblem


@dataclass
class SourceRead:
    """Documents for a run's partitions; ``partition_day`` overrides a document's own day,
    ``failed`` maps a container to why it could not be read."""

    documents: list[Document] = field(default_factory=list)
    problems: list[RecordProblem] = field(default_factory=list)
    partition_day: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
