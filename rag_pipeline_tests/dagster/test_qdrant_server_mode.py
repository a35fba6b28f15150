"""Server mode: QDRANT_URL/QDRANT_API_KEY select qdrant-client against a server, which gets the
collections with the configured shards/replicas and the payload indexes filters rely on."""

from __future__ import annotations

import dagster as dg

from rag_pipeline.index.store import BOOL_FIELDS, DATETIME_FIELDS, FLOAT_FIELDS, KEYWORD_FIELDS
from rag_pipeline_tests.kit import pipeline
from rag_pipeline_tests.kit.emulators.qdrant_rest import QdrantRestRecorder


def test_server_mode_creates_collections_and_payload_indexes(tmp_path, monkeypatch) -> None:
    with QdrantRestRecorder() as server:
        env = {"QDRANT_URL": server.url, "QDRANT_API_KEY": "qdrant-secret", "QDRANT_SHARDS": "4",
               "QDRANT_REPLICAS": "2", "RAG_HNSW_M": "24", "RAG_HNSW_EF_CONSTRUCT": "150"}  # fmt: skip
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        qdrant = pipeline.resources(tmp_path)["qdrant"]
        assert isinstance(qdrant.api_key, dg.EnvVar)  # the key stays an environment variable in config
        qdrant = qdrant.process_config_and_initialize()
        assert qdrant.engine == "qdrant-client:server"
        with qdrant.open() as store:
            store.create_collections(384)
        assert not (tmp_path / "qdrant").exists()  # nothing embedded was opened
    children, parents = "rag_children", "rag_parents"
    assert set(server.collections) == {children, parents}
    config = server.collections[children]["config"]
    assert config["shard_number"] == 4 and config["replication_factor"] == 2
    assert config["hnsw_config"] == {"m": 24, "ef_construct": 150, "full_scan_threshold": 10_000}
    assert config["vectors"]["dense"]["size"] == 384 and config["sparse_vectors"]["bm25"]["modifier"] == "idf"
    expected = (
        {f: "keyword" for f in KEYWORD_FIELDS}
        | {f: "bool" for f in BOOL_FIELDS}
        | {f: "datetime" for f in DATETIME_FIELDS}
        | {f: "float" for f in FLOAT_FIELDS}
    )
    assert server.collections[children]["indexes"] == expected == server.collections[parents]["indexes"]
    assert {"acl.groups", "acl.users", "source", "container", "document_id", "updated"} <= set(expected)
    assert {c.api_key for c in server.calls} == {"qdrant-secret"}
