"""The index's part of a backup: the embedded engine's folder copied under its lock, or a Qdrant server's collections
taken as snapshots (``rag-pipeline backup``; the rest of the data folder: :mod:`rag_pipeline.pipeline.backup`).

Embedded (qdrant-edge): every opener of the folder, readers and writers, takes ``store.lock`` first
(:mod:`~rag_pipeline.index.store_lock`), and a store flushes its shards before it lets go. So the backup takes that
lock like any opener (waiting its turn, up to ``RAG_STORE_WAIT_SECONDS``; the search service sees the waiting marker
and hands the folder over within ~50 ms), copies the files (sparse: only their data), and gives the lock back. While
it holds the folder, searches wait for it (they do not fail): the copy of the test kit's index held it for a few
milliseconds, and a copy costs what reading the index's data costs, never its holes. The hashing is done afterwards,
on the copy, without the lock.

Server (``QDRANT_URL``): Qdrant's own snapshot of each collection (``create_snapshot``), downloaded and deleted from
the server; a restore uploads it (``POST /collections/{name}/snapshots/upload?priority=snapshot``). A snapshot is of
the node asked: with a cluster of several nodes use Qdrant's per-node snapshots or the provider's backups instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx

from rag_pipeline.index.store import CollectionNames
from rag_pipeline.index.store_lock import LOCK_FILE, WAITING_DIR, FolderLock, LockHolder, acquire_folder
from rag_pipeline.pipeline.backup_files import BytesFn, copy_file

# Downloading or uploading a snapshot of a large collection takes long; only a silent connection is an error.
SNAPSHOT_TIMEOUT = httpx.Timeout(60.0, read=600.0, write=600.0)
SNAPSHOT_SUFFIX = ".snapshot"


@dataclass(frozen=True)
class IndexCopy:
    """What :meth:`IndexBackup.copy_into` wrote under its target folder (paths relative to it) and how long the
    index was held (the embedded folder's lock; 0 for a server)."""

    files: list[str]
    held_seconds: float
    note: str | None = None


class IndexBackup(Protocol):
    """The index's part of a backup, whichever engine holds it."""

    engine: str

    def copy_into(self, target: Path, on_bytes: BytesFn | None = None) -> IndexCopy: ...


def _folder_files(folder: Path) -> Iterator[Path]:
    """Every file of the embedded folder but the lock's own files (they describe a process, not the index)."""
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if relative.parts[0] in (LOCK_FILE, WAITING_DIR) or not path.is_file() or path.is_symlink():
            continue
        yield path


class EmbeddedIndexBackup:
    """The embedded engine's folder, copied while this process holds its lock."""

    engine = "qdrant-edge"

    def __init__(
        self,
        folder: Path,
        *,
        wait_seconds: float,
        on_wait: Callable[[str], None] | None = None,
        label: str = "rag-pipeline backup",
    ) -> None:
        self.folder = folder
        self.wait_seconds = wait_seconds
        self.on_wait = on_wait
        self.label = label

    def copy_into(self, target: Path, on_bytes: BytesFn | None = None) -> IndexCopy:
        """The folder's files under ``target``, copied while the lock is held (no hash: the caller hashes the copy
        after the lock is given back). An index never written (no folder) copies nothing."""
        if not self.folder.is_dir():
            return IndexCopy([], 0.0, f"no embedded index at {self.folder}: nothing of the index was copied")
        # A no-op load: the lock alone keeps every other opener out, and the shards need not be opened to be copied
        # (a store that closed flushed them; a killed writer's WAL is copied and replayed by the next open).
        lock = acquire_folder(
            self.folder, lambda: None, wait_seconds=self.wait_seconds, label=self.label, on_wait=self.on_wait
        )
        held = time.monotonic()
        try:
            files = []
            for path in _folder_files(self.folder):
                relative = path.relative_to(self.folder)
                try:
                    copy_file(path, target / relative, on_bytes, digest=False, sync=False)
                except FileNotFoundError:
                    continue  # a temporary file of the engine's, gone since it was listed (nobody writes now)
                files.append(relative.as_posix())
        finally:
            lock.release()
        return IndexCopy(files, time.monotonic() - held)

    def holder(self) -> LockHolder | None:
        """Who holds the folder now (a restore refuses to write under a running service)."""
        return FolderLock(self.folder, self.label).current_holder() if self.folder.is_dir() else None


class ServerIndexBackup:
    """The collections of a Qdrant server, as one snapshot file each (``<collection>.snapshot``)."""

    engine = "qdrant-client:server"

    def __init__(
        self,
        url: str,
        api_key: str | None,
        names: CollectionNames,
        *,
        client: Any = None,
        http: httpx.Client | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.names = names
        self._api_key = api_key
        # A ``qdrant_client.QdrantClient`` (a fake in the tests): collection_exists, create_snapshot, delete_snapshot
        # and count are what snapshots use.
        self._client = client
        self._http = http

    @property
    def client(self) -> Any:
        if self._client is None:
            from qdrant_client import QdrantClient  # ~1 s to import: only where a server is used

            self._client = QdrantClient(url=self.url, api_key=self._api_key)
        return self._client

    def _session(self) -> httpx.Client:
        if self._http is None:
            headers = {"api-key": self._api_key} if self._api_key else {}
            self._http = httpx.Client(headers=headers, timeout=SNAPSHOT_TIMEOUT)
        return self._http

    def collections(self) -> list[str]:
        return [self.names.children, self.names.parents]

    def copy_into(self, target: Path, on_bytes: BytesFn | None = None) -> IndexCopy:
        """A snapshot of each collection, downloaded under ``target`` and then deleted from the server (it takes the
        collection's size on the server's disk). Collections are taken one after the other, each at one instant."""
        files = []
        missing = []
        for collection in self.collections():
            if not self.client.collection_exists(collection):
                missing.append(collection)
                continue
            snapshot = self.client.create_snapshot(collection, wait=True)
            name = str(snapshot.name)
            file = f"{collection}{SNAPSHOT_SUFFIX}"
            try:
                self._download(f"{self.url}/collections/{collection}/snapshots/{name}", target / file, on_bytes)
            finally:
                self.client.delete_snapshot(collection, name, wait=True)
            files.append(file)
        note = f"collections not on the server (nothing copied of them): {', '.join(missing)}" if missing else None
        return IndexCopy(files, 0.0, note)

    def _download(self, url: str, path: Path, on_bytes: BytesFn | None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._session().stream("GET", url) as response, path.open("wb") as handle:
            response.raise_for_status()
            for chunk in response.iter_bytes(1 << 20):
                handle.write(chunk)
                if on_bytes is not None:
                    on_bytes(len(chunk))

    def non_empty(self) -> list[str]:
        """The collections that exist on the server and hold points (a restore replaces them only with --force)."""
        return [
            c for c in self.collections() if self.client.collection_exists(c) and self.client.count(c, exact=True).count
        ]

    def restore(self, snapshots: dict[str, Path], checksums: dict[str, str]) -> None:
        """Upload each collection's snapshot file; the server checks its sha256 (``checksum``) before it recovers, and
        replaces the collection (``priority=snapshot``: the snapshot's data wins over any replica's)."""
        for collection, path in snapshots.items():
            with path.open("rb") as handle:
                response = self._session().post(
                    f"{self.url}/collections/{collection}/snapshots/upload",
                    params={"priority": "snapshot", "wait": "true", "checksum": checksums[collection]},
                    files={"snapshot": (path.name, handle, "application/octet-stream")},
                )
            response.raise_for_status()
