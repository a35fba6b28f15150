"""Readers for a long-running process (the search service): a person's principal by email or account id,
cached until the directory file changes, so a sync's membership change reaches the next request."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from rag_pipeline.directory.people import Links, UnknownPerson, find_person
from rag_pipeline.directory.store import DirectoryStore
from rag_pipeline.retrieval.principal import Principal


class DirectoryLookup:
    """``lookup(identifier)`` -> the principal of the person it names, or None when the directory does not know
    them. Answers are cached until the directory (or the links file) is written again."""

    def __init__(self, directory: str | Path, links: str | Path | None = None) -> None:
        self.store = DirectoryStore(directory)
        self.links_path = Path(links) if links is not None else None
        self._lock = threading.Lock()
        self._version: tuple[int, ...] = ()
        self._cache: dict[str, Principal | None] = {}
        self._links = Links()

    def _current_version(self) -> tuple[int, ...]:
        # A WAL write changes the -wal file before any checkpoint touches the main file: both count.
        paths = [self.store.path, self.store.path.with_name(self.store.path.name + "-wal")]
        if self.links_path is not None:
            paths.append(self.links_path)
        return tuple(_mtime_ns(p) for p in paths)

    def __call__(self, identifier: str) -> Principal | None:
        version = self._current_version()
        with self._lock:
            if version != self._version:
                self._cache.clear()
                self._links = Links.read(self.links_path)
                self._version = version
            if identifier in self._cache:
                return self._cache[identifier]
        try:
            found: Principal | None = find_person(self.store, identifier, self._links).principal()
        except UnknownPerson:
            found = None
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[identifier] = found
        return found


def _mtime_ns(path: Path) -> int:
    """The file's modification time, 0 when it is absent. One stat, no exists() first: SQLite deletes the -wal file
    at a checkpoint, and a check-then-stat raced it into a FileNotFoundError (a 500) during a directory write."""
    try:
        return path.stat().st_mtime_ns
    except FileNotFoundError:
        return 0


def person_resolver(directory: str | Path, links: str | Path | None = None) -> Callable[[str], Principal]:
    """For eval sets: the principal of the person an identifier names; :class:`UnknownPerson` otherwise."""
    lookup = DirectoryLookup(directory, links)

    def resolve(identifier: str) -> Principal:
        found = lookup(identifier)
        if found is None:
            raise UnknownPerson(f"the principal directory ({directory}) knows no person {identifier!r}")
        return found

    return resolve
