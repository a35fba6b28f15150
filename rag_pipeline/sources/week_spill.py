"""An offline source's documents spilled to disk once, one file per week, so that neither the first index's check
nor its batches hold the whole export in memory (issue 68: the whole-file read was ~4.5 KB per document, 1.35 GB
at 250,000 documents).

The export is read a piece at a time (a Slack export channel by channel); each piece's documents are appended to
the file of the week of their day (pickled :class:`Document` objects), and the piece is let go. A batch's raw step
then reads only its weeks' files (:meth:`WeekSpill.read`).

A run must see the same documents as with the whole read where it matters: every copy of an id read more than
once (the raw step's checks keep the newest one and report the others) and every document whose day cannot be
taken or that no partition holds (before the partitions' first day, after today) go to a *shared* file that every
read includes, so the checks decide and report exactly as before.
"""

from __future__ import annotations

import pickle
import shutil
import tempfile
import weakref
from collections import Counter, defaultdict
from collections.abc import Container, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from rag_pipeline.pipeline.keys import week_key
from rag_pipeline.sources.document import Document
from rag_pipeline.sources.problems import RecordProblem
from rag_pipeline.sources.source_read import SourceRead

SHARED = "shared"


class WeekSpill:
    """Documents of one version of an offline source, one pickle file per week in a temporary folder (removed
    when the spill is collected or the process exits). ``problems``: the reader's, once each."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.problems: list[RecordProblem] = []
        self.documents_by_file: Counter[str] = Counter()
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(folder), True)

    @classmethod
    def write(
        cls, pieces: Iterable[tuple[Iterable[Document], Iterable[RecordProblem]]], first_day: str = "0001-01-01"
    ) -> WeekSpill:
        """Spill ``pieces`` (documents and problems of one part of the source each, read lazily one after the
        other) into a fresh temporary folder. Documents dated before ``first_day`` (the partitions' first day)
        or after today go to the shared file: no partition holds them, and every run's checks report them."""
        spill = cls(Path(tempfile.mkdtemp(prefix="rag-week-spill-")))
        today = datetime.now(UTC).date().isoformat()
        first_file: dict[str, str] = {}  # document id -> the file its first copy went to
        duplicated: set[str] = set()
        seen_problems: set[RecordProblem] = set()
        for documents, problems in pieces:
            for problem in problems:
                if problem not in seen_problems:  # manifest problems come with every piece of a Slack export
                    seen_problems.add(problem)
                    spill.problems.append(problem)
            by_file: dict[str, list[Document]] = defaultdict(list)
            for doc in documents:
                name = _file_of(doc, first_day, today)
                if doc.id in first_file:
                    duplicated.add(doc.id)
                    name = SHARED
                else:
                    first_file[doc.id] = name
                by_file[name].append(doc)
            for name, docs in by_file.items():
                spill._append(name, docs)
        # The first copies of ids read twice join the others in the shared file, before them (the order they were
        # read in: the checks' report names the versions in that order).
        moved: list[Document] = []
        for name in sorted({first_file[i] for i in duplicated} - {SHARED}):
            docs = spill._take(name)
            moved.extend(d for d in docs if d.id in duplicated)
            spill._append(name, [d for d in docs if d.id not in duplicated])
        if moved:
            spill._append(SHARED, [*moved, *spill._take(SHARED)])
        return spill

    def weeks(self) -> list[str]:
        """The weeks holding documents, in order (the shared file not included)."""
        return sorted(name for name, count in self.documents_by_file.items() if count and name != SHARED)

    def documents(self, weeks: Iterable[str] | None = None) -> Iterator[Document]:
        """The documents of ``weeks`` (all weeks when None), then every document of the shared file."""
        for name in self.weeks() if weeks is None else sorted(set(weeks)):
            yield from self._load(name)
        yield from self._load(SHARED)

    def groups(self) -> Iterator[list[Document]]:
        """Each week's documents, one list at a time, then the shared file's: the parts the raw step's checks
        can decide on alone (no id has copies in two of them)."""
        for name in [*self.weeks(), SHARED]:
            documents = list(self._load(name))
            if documents:
                yield documents

    def read(self, days_by_container: Container[str], days: Iterable[str]) -> SourceRead:
        """What a raw step reads for its partitions: the documents of the weeks of ``days`` in the containers
        given, with every problem of the source's read."""
        weeks = {week_key(day) for day in days}
        documents = [d for d in self.documents(weeks) if d.container in days_by_container]
        return SourceRead(documents=documents, problems=list(self.problems))

    def close(self) -> None:
        """Remove the folder now."""
        self._finalizer()

    def _append(self, name: str, docs: list[Document]) -> None:
        if not docs:
            return
        with (self.folder / name).open("ab") as handle:
            for doc in docs:
                pickle.dump(doc, handle, protocol=pickle.HIGHEST_PROTOCOL)
        self.documents_by_file[name] += len(docs)

    def _take(self, name: str) -> list[Document]:
        """A file's documents, the file removed."""
        docs = list(self._load(name))
        (self.folder / name).unlink(missing_ok=True)
        self.documents_by_file[name] = 0
        return docs

    def _load(self, name: str) -> Iterator[Document]:
        path = self.folder / name
        if not self.documents_by_file.get(name) or not path.exists():
            return
        with path.open("rb") as handle:
            while True:
                try:
                    yield pickle.load(handle)
                except EOFError:
                    return


def _file_of(doc: Document, first_day: str, today: str) -> str:
    """The week file of a document, or the shared file where its day cannot be taken or has no partition (the
    raw step's checks report those)."""
    try:
        day = doc.day
        return week_key(day) if first_day <= day <= today else SHARED
    except Exception:  # any bad day is the checks' problem to report, not the spill's
        return SHARED
