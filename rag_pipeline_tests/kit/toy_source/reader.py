"""Reading the toy folder: one JSON object per ``*.json`` file, ``{"id", "shelf", "title", "text", "author",
"updated"}``; a file that is not such an object is a problem naming it, and the others are kept."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from rag_pipeline.sources.document import Acl, Document, content_hash
from rag_pipeline.sources.problems import RecordProblem
from rag_pipeline.sources.source_read import SourceRead


def read_folder(folder: Path | None) -> SourceRead:
    out = SourceRead()
    if folder is None:
        return out
    for path in sorted(folder.glob("*.json")):
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            updated = datetime.fromisoformat(raw["updated"])
            out.documents.append(
                Document(
                    id=f"toy:{raw['id']}",
                    source="toy",
                    container=str(raw["shelf"]),
                    title=str(raw["title"]),
                    text=str(raw["text"]),
                    url=None,
                    authors=(str(raw["author"]),),
                    created=updated,
                    updated=updated,
                    version=updated.timestamp(),
                    content_hash=content_hash(str(raw["text"])),
                    acl=Acl(public=True),
                )
            )
        except (ValueError, KeyError, TypeError) as exc:
            out.problems.append(RecordProblem(str(path), f"not a toy document: {exc!r}"))
    return out
