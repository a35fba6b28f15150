"""The index's part of a backup with a Qdrant server (:class:`rag_pipeline.index.backup.ServerIndexBackup`), against a
fake client and an ``httpx.MockTransport`` standing in for the server's snapshot routes (no server runs here): each
collection is snapshotted, downloaded and its snapshot deleted; a restore checks the files and uploads each with its
sha256 and ``priority=snapshot``; a server whose collections hold points is replaced only with --force."""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from rag_pipeline.index.backup import ServerIndexBackup
from rag_pipeline.index.store import CollectionNames
from rag_pipeline.pipeline.backup import BackupRefused, BackupSources, RestoreTarget, back_up, restore
from rag_pipeline.settings import DataPaths

URL = "http://qdrant.test:6333"


class FakeServer:
    """Collections with a point count, their snapshots, and the HTTP routes the backup calls."""

    def __init__(self, collections: dict[str, int]) -> None:
        self.collections = dict(collections)
        self.snapshots: dict[tuple[str, str], bytes] = {}
        self.deleted: list[tuple[str, str]] = []
        self.uploads: list[dict[str, Any]] = []

    # --- the client's calls ---
    def collection_exists(self, collection_name: str) -> bool:
        return collection_name in self.collections

    def create_snapshot(self, collection_name: str, wait: bool = True) -> Any:
        name = f"{collection_name}-1.snapshot"
        self.snapshots[(collection_name, name)] = f"tar of {collection_name}".encode() * 1000
        return SimpleNamespace(name=name)

    def delete_snapshot(self, collection_name: str, snapshot_name: str, wait: bool = True) -> None:
        del self.snapshots[(collection_name, snapshot_name)]
        self.deleted.append((collection_name, snapshot_name))

    def count(self, collection_name: str, exact: bool = True) -> Any:
        return SimpleNamespace(count=self.collections[collection_name])

    # --- the HTTP routes ---
    def handle(self, request: httpx.Request) -> httpx.Response:
        parts = request.url.path.strip("/").split("/")
        if request.method == "GET" and parts[0] == "collections" and parts[2] == "snapshots":
            assert request.headers.get("api-key") == "secret"
            return httpx.Response(200, content=self.snapshots[(parts[1], parts[3])])
        if request.method == "POST" and parts[-1] == "upload":
            self.uploads.append({"collection": parts[1], **dict(request.url.params), "body": request.read()})
            return httpx.Response(200, json={"result": True})
        return httpx.Response(404)


def _index(server: FakeServer) -> ServerIndexBackup:
    http = httpx.Client(transport=httpx.MockTransport(server.handle), headers={"api-key": "secret"})
    return ServerIndexBackup(URL, "secret", CollectionNames(), client=server, http=http)


def test_each_collection_is_snapshotted_downloaded_and_restored_with_its_checksum(tmp_path: Path) -> None:
    paths = DataPaths(root=tmp_path / "data")
    paths.root.mkdir()
    paths.language.write_text("{}\n")
    source = FakeServer({"rag_children": 12, "rag_parents": 3})
    result = back_up(BackupSources(paths, None, _index(source)), tmp_path / "backup")
    manifest = result.manifest
    snapshots = {f.path: f for f in manifest.files if f.kind == "snapshot"}
    assert set(snapshots) == {"index/rag_children.snapshot", "index/rag_parents.snapshot"}
    assert manifest.index_engine == "qdrant-client:server" and manifest.index_held_seconds == 0
    assert source.snapshots == {} and len(source.deleted) == 2  # nothing left on the server's disk
    body = (tmp_path / "backup" / "index" / "rag_children.snapshot").read_bytes()
    assert snapshots["index/rag_children.snapshot"].sha256 == hashlib.sha256(body).hexdigest()

    # Restored to a server whose collections hold points: refused, then replaced with --force.
    target_server = FakeServer({"rag_children": 5})
    target = RestoreTarget(DataPaths(root=tmp_path / "restored"), tmp_path / "restored" / "dagster_home",
                           server=_index(target_server))  # fmt: skip
    with pytest.raises(BackupRefused, match="collection rag_children"):
        restore(tmp_path / "backup", target)
    restore(tmp_path / "backup", target, force=True)
    uploaded = {u["collection"]: u for u in target_server.uploads}
    assert set(uploaded) == {"rag_children", "rag_parents"}
    assert uploaded["rag_children"]["priority"] == "snapshot"
    assert uploaded["rag_children"]["checksum"] == snapshots["index/rag_children.snapshot"].sha256
    assert body in uploaded["rag_children"]["body"]
    assert (tmp_path / "restored" / "language.json").read_text() == "{}\n"


def test_a_missing_collection_is_noted_and_engines_must_match(tmp_path: Path) -> None:
    paths = DataPaths(root=tmp_path / "data")
    paths.root.mkdir()
    manifest = back_up(BackupSources(paths, None, _index(FakeServer({}))), tmp_path / "backup").manifest
    assert any("rag_children" in note for note in manifest.notes)
    server_backup = back_up(BackupSources(paths, None, _index(FakeServer({"rag_children": 1}))), tmp_path / "b2")
    embedded_target = RestoreTarget(DataPaths(root=tmp_path / "r"), tmp_path / "r" / "dagster_home")
    with pytest.raises(BackupRefused, match="set QDRANT_URL"):
        restore(server_backup.path, embedded_target)
