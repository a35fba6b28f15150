"""The million-chunk bench's synthetic workspace: the same documents every time, the project's payload and ACL
shape, readers whose filters keep what they say, and a fill that resumes where it stopped."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench import search_million
from bench.search_million import CHILDREN_PER_DOCUMENT, Workspace, fill
from rag_pipeline.stages import document_points


@pytest.fixture(scope="module")
def workspace() -> Workspace:
    return Workspace()


def test_a_batch_is_the_same_documents_every_time_with_the_real_payload_shape(workspace: Workspace) -> None:
    first, again = workspace.frames(100, 20), workspace.frames(100, 20)
    assert first.children["chunk_id"].tolist() == again.children["chunk_id"].tolist()
    assert np.array_equal(np.stack(first.dense["vector"]), np.stack(again.dense["vector"]))
    assert len(first.children) == 20 * CHILDREN_PER_DOCUMENT and len(first.parents) == 20
    points = document_points(first)
    child = points[0].children[0]
    assert child.dense is not None and abs(np.linalg.norm(child.dense) - 1.0) < 1e-4 and len(child.dense) == 384
    assert child.sparse is not None and len(child.sparse.indices) > 20  # BM25 terms of ~60 words
    assert set(child.payload["acl"]) == {"public", "users", "groups"}
    assert child.payload["parent_id"] == points[0].parents[0].id and child.payload["level"] == "child"


def test_the_readers_see_what_they_are_meant_to(workspace: Workspace) -> None:
    holders: dict[str, int] = {}
    for acl in workspace.acls:
        for group in acl["groups"]:
            holders[group] = holders.get(group, 0) + 1
    assert len(holders) > 1_000  # thousands of groups in use, a long tail of them on one container
    assert sum(1 for acl in workspace.acls if acl["users"] and not acl["groups"]) > 500  # private containers
    user, groups = workspace.reader("narrow")
    assert all(holders[g] == 1 for g in groups) and any(user in acl["users"] for acl in workspace.acls)
    _, member_groups = workspace.reader("member")
    member_share = sum(
        p
        for p, acl in zip(workspace.container_p, workspace.acls, strict=True)
        if set(acl["groups"]) & set(member_groups)
    )
    assert 0.3 < member_share < 0.8


# Two fills of the embedded engine (~30 s on a loaded 2-core machine).
@pytest.mark.slow
@pytest.mark.parametrize("direct", [True, False], ids=["direct-upsert", "through-writer"])
def test_a_fill_resumes_at_its_next_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, direct: bool) -> None:
    monkeypatch.setattr(search_million, "BATCH_DOCUMENTS", 10)
    monkeypatch.setattr(search_million, "DIRECT_BATCH_DOCUMENTS", 10)
    stopped = fill(tmp_path, 160, stop_at=20, direct=direct)  # 40 documents wanted, stopped after two batches
    assert stopped["written"] == 20 and stopped["children_points"] == 80 and stopped["optimized_at"] == 20
    done = fill(tmp_path, 160, direct=direct)
    assert done["written"] == 40 and done["children_points"] == 160 and done["parent_points"] == 40
    assert json.loads((tmp_path / "fill.json").read_text())["optimized_at"] == 40


@pytest.mark.slow
def test_the_direct_fill_writes_the_points_the_writer_writes(tmp_path: Path) -> None:
    """The fast fill skips only the writer's version reads: same ids, payloads (ACL mirror included) and counts."""
    fill(tmp_path / "direct", 80, direct=True)
    fill(tmp_path / "writer", 80, direct=False)
    payloads = {}
    for kind in ("direct", "writer"):
        store = search_million.open_store(tmp_path / kind)
        try:
            ids = sorted(r.id for r in store._scroll(store.names.children, None, None))
            payloads[kind] = {h.id: h.payload for h in store.retrieve(store.names.children, [str(i) for i in ids])}
            assert store.count(store.names.parents) == 20
        finally:
            store.close()
    assert len(payloads["direct"]) == 80
    assert payloads["direct"] == payloads["writer"]
    assert all(p["acl_public"] == "false" for p in payloads["direct"].values())
