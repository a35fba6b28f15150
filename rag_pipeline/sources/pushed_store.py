"""The raw record of pushed sources: every accepted push (``POST /v1/ingest/documents``, ``rag-pipeline push``) kept
in the data folder, so that an index rebuilt from raw data (a model change: the index folder removed, then
``rag-pipeline index --full-refresh``) gets the pushed documents back without the pushing system sending them again.

Layout: ``<data dir>/pushed_sources/<source>/<ISO year>-W<week>.jsonl``, one file per week of *arrival*, each push
appended as the lines of its checked batch (:meth:`PushBatch.lines`: a document as pushed, or ``{"id": …,
"deleted": true}``, a tombstone). Appending keeps the arrival order, which decides: reading every week in order,
the latest version of an id wins (an older version than the one already read is skipped, as the index writer skips
it), and a tombstone removes what came before it. A line cut short by a crash half-way through an append is skipped
and counted (the next append starts on a line of its own), never a reason to lose the rest.

Nothing here deletes: retention has no owner for this folder (it is the only copy of what was pushed), and a
``backup`` copies it with the rest of the data folder. Removing ``pushed_sources/<source>`` forgets that source."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from rag_pipeline.sources.pushed_documents import SOURCE_NAME, PushBatch, PushedDocument

FOLDER = "pushed_sources"
_LOCK = ".lock"


@dataclass
class PushedState:
    """One pushed source as its record says it is now: the documents (latest version per id) and the ids whose
    last word is a deletion; ``unreadable``: lines skipped (a torn append, a line edited by hand)."""

    source: str
    documents: dict[str, PushedDocument] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    unreadable: int = 0

    def batch(self) -> PushBatch:
        """The state as one batch: every live document, and every tombstone as a deletion."""
        return PushBatch(self.source, list(self.documents.values()), sorted(self.deleted))


class PushedStore:
    """The raw record of every pushed source under one data folder."""

    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / FOLDER

    def week_file(self, source: str, at: datetime) -> Path:
        year, week, _ = at.astimezone(UTC).isocalendar()
        return self.root / source / f"{year:04d}-W{week:02d}.jsonl"

    def record(self, batch: PushBatch, at: datetime | None = None) -> Path:
        """Append ``batch`` to its source's file of the week of ``at`` (now), durably (fsync) and under the
        source's lock, so two writers never interleave their lines."""
        if SOURCE_NAME.fullmatch(batch.source) is None:
            raise ValueError(f"{batch.source[:40]!r} is not a pushed source's name")
        path = self.week_file(batch.source, at or datetime.now(UTC))
        path.parent.mkdir(parents=True, exist_ok=True)
        text = batch.lines()
        with self._locked(batch.source), path.open("a+b") as out:
            if out.tell() > 0:
                out.seek(-1, os.SEEK_END)
                if out.read(1) != b"\n":  # a torn line left by a crash: the next record starts a line of its own
                    text = "\n" + text
            out.write(text.encode("utf-8"))
            out.flush()
            os.fsync(out.fileno())
        return path

    def sources(self) -> list[str]:
        """The sources with a record, by name."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and SOURCE_NAME.fullmatch(p.name))

    def files(self, source: str) -> list[Path]:
        """The source's week files, oldest first (the names sort by week)."""
        folder = self.root / source
        return sorted(folder.glob("*-W*.jsonl")) if folder.is_dir() else []

    def state(self, source: str) -> PushedState:
        """The source as its record says it is now (:class:`PushedState`)."""
        state = PushedState(source)
        versions: dict[str, float] = {}
        for path in self.files(source):
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.strip():
                    _fold(state, versions, line)
        return state

    @contextlib.contextmanager
    def _locked(self, source: str) -> Iterator[None]:
        with (self.root / source / _LOCK).open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def _fold(state: PushedState, versions: dict[str, float], line: str) -> None:
    """One record line into ``state``: a tombstone removes the id; a document replaces it unless an older version
    than the one already read (the index writer's rule)."""
    try:
        value = json.loads(line)
        if isinstance(value, dict) and value.get("deleted") is True and set(value) <= {"id", "deleted"}:
            doc_id = value.get("id")
            if not isinstance(doc_id, str):
                raise ValueError("a deletion without an id")
            state.documents.pop(doc_id, None)
            versions.pop(doc_id, None)
            state.deleted.add(doc_id)
            return
        document = PushedDocument.model_validate_json(line)
    except (ValueError, ValidationError):
        state.unreadable += 1
        return
    version = document.document(state.source).version
    if version < versions.get(document.id, version):
        return
    versions[document.id] = version
    state.documents[document.id] = document
    state.deleted.discard(document.id)
