"""Dense search runs on the engine's HNSW graph by default, exact on request, with configurable parameters."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from rag_pipeline.defs.chain.resources import qdrant_resource
from rag_pipeline.index.edge_store import EdgeVectorStore
from rag_pipeline.index.store import AclCondition, DenseSearch, SearchFilter, StorePoint
from rag_pipeline.settings import Settings

DIM = 384
# 8,000 points of 384 floats are ~12 MB of vectors: above the engine's 10 MB indexing threshold, so
# optimize() builds a graph instead of leaving one plain (exactly scanned) segment.
POINTS = 8_000


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def _vectors(clustered: bool, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if not clustered:  # no structure at all: the worst case for a graph, where a tiny ef must miss neighbours
        return _unit(rng.standard_normal((POINTS, DIM)))
    centres = _unit(rng.standard_normal((200, DIM)))
    return _unit(centres[rng.integers(0, 200, POINTS)] + rng.standard_normal((POINTS, DIM)) * 0.05)


def _build(folder: Path, vectors: np.ndarray, search: DenseSearch) -> None:
    with EdgeVectorStore(folder, dense_search=search) as store:
        store.create_collections(DIM)
        points = [
            StorePoint(
                id=str(uuid.UUID(int=i + 1)),
                payload={"document_id": f"d{i}", "acl": {"public": False, "users": [], "groups": [f"g{i % 10}"]}},
                dense=vector.tolist(),
            )
            for i, vector in enumerate(vectors)
        ]
        store.upsert(store.names.children, points)
        assert store.optimize() is True
        info = store._shards[store.names.children].info()
        assert info.indexed_vectors_count >= POINTS  # the graph covers every point


def _truth(vectors: np.ndarray, query: np.ndarray, allowed: np.ndarray | None = None) -> set[str]:
    scores = vectors @ query
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    return {str(uuid.UUID(int=int(i) + 1)) for i in np.argsort(-scores)[:10]}


def _recall(store: EdgeVectorStore, vectors: np.ndarray, queries: np.ndarray, group: int | None = None) -> float:
    allowed = (np.arange(POINTS) % 10 == group) if group is not None else None
    flt = SearchFilter(acl=AclCondition(user_ids=("u",), groups=(f"g{group}",))) if group is not None else None
    found = []
    for query in queries:
        hits = store.search_dense(query.tolist(), 10, flt)
        if group is not None:
            assert all(h.payload["acl"]["groups"] == [f"g{group}"] for h in hits)
        found.append(len({h.id for h in hits} & _truth(vectors, query, allowed)) / 10)
    return float(np.mean(found))


@pytest.fixture(scope="module")
def clustered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    folder = tmp_path_factory.mktemp("clustered")
    vectors = _vectors(clustered=True)
    _build(folder, vectors, DenseSearch())
    return folder, vectors


def test_hnsw_by_default_finds_the_exact_neighbours_of_text_like_vectors(clustered: tuple[Path, np.ndarray]) -> None:
    folder, vectors = clustered
    rng = np.random.default_rng(9)
    queries = _unit(vectors[rng.integers(0, POINTS, 40)] + rng.standard_normal((40, DIM)) * 0.03)
    with EdgeVectorStore(folder) as store:
        assert store.dense_search.describe() == "hnsw (m=16, ef_construct=100, ef=128)"
        assert _recall(store, vectors, queries) >= 0.98
        # An ACL admitting a tenth of the points: filtered graph search, no leak, same recall.
        assert _recall(store, vectors, queries, group=4) >= 0.95


def test_exact_search_is_the_brute_force_answer_and_hnsw_parameters_reach_the_engine(tmp_path: Path) -> None:
    vectors = _vectors(clustered=False)
    _build(tmp_path, vectors, DenseSearch(m=4, ef_construct=8))
    queries = _unit(np.random.default_rng(5).standard_normal((30, DIM)))
    with EdgeVectorStore(tmp_path, dense_search=DenseSearch(exact=True)) as store:
        assert store.dense_search.describe() == "exact"
        assert _recall(store, vectors, queries) == 1.0
    # A sparse graph and a tiny candidate list on unstructured vectors: the graph visibly approximates.
    with EdgeVectorStore(tmp_path, dense_search=DenseSearch(hnsw_ef=10)) as store:
        assert _recall(store, vectors, queries) < 0.9


def test_hnsw_settings_come_from_the_environment(tmp_path: Path) -> None:
    env = {"RAG_DATA_DIR": str(tmp_path), "RAG_HNSW_M": "32", "RAG_HNSW_EF_CONSTRUCT": "200", "RAG_HNSW_EF": "64"}
    resource = qdrant_resource(Settings.from_env(env))
    with resource.open() as store:
        assert store.dense_search == DenseSearch(hnsw_ef=64, m=32, ef_construct=200)
    with resource.open(exact=True) as store:
        assert store.dense_search.exact
    exact = qdrant_resource(Settings.from_env({"RAG_DATA_DIR": str(tmp_path), "RAG_DENSE_EXACT": "1"}))
    with exact.open() as store:
        assert store.dense_search.describe() == "exact"


def test_payload_links_and_int8_quantization_are_fixed_at_creation_when_asked(tmp_path: Path) -> None:
    """``DenseSearch.payload_m`` and ``quantization`` reach the child collection's config (bench.search_million's
    knobs); the defaults leave both to the engine (payload links on, floats only)."""
    import json

    knobs, plain = tmp_path / "knobs", tmp_path / "plain"
    with EdgeVectorStore(knobs, dense_search=DenseSearch(payload_m=0, quantization="int8")) as store:
        store.create_collections(DIM)
        store.upsert(store.names.children, [StorePoint(id=str(uuid.UUID(int=1)), payload={}, dense=[1.0] * DIM)])
        assert [h.id for h in store.search_dense([1.0] * DIM, 1)] == [str(uuid.UUID(int=1))]
    with EdgeVectorStore(plain) as store:
        store.create_collections(DIM)
    config = json.loads((knobs / "rag_children" / "edge_config.json").read_text())
    assert config["hnsw_config"]["payload_m"] == 0
    assert config["quantization_config"]["scalar"]["type"] == "int8"
    default = json.loads((plain / "rag_children" / "edge_config.json").read_text())
    assert "payload_m" not in default["hnsw_config"] or default["hnsw_config"]["payload_m"] is None
    assert not default.get("quantization_config")
    assert DenseSearch(payload_m=0, quantization="int8").describe().endswith("payload_m=0, int8 quantization)")
