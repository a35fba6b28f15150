"""BM25 weights, Qdrant IDF scoring on both engines, and the embedding cache."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from rag_pipeline.index.store import StorePoint
from rag_pipeline.vectors.cache import EmbeddingCache, embed_with_cache
from rag_pipeline.vectors.sparse import Bm25Encoder, Bm25Params


def test_bm25_document_weights_match_hand_computation() -> None:
    encoder = Bm25Encoder(Bm25Params(k1=1.2, b=0.75, avg_len=4))
    # After stopwords ("the") and stemming: dog x2, chase x1, cat x1 -> document length 4.
    doc = encoder.encode_documents(["The dog chased the cats and the dogs"])[0]
    query = encoder.encode_query("dog")
    weights = dict(zip(doc.indices, doc.values, strict=True))
    dl, avg, k1, b = 4, 4, 1.2, 0.75

    def w(tf: int) -> float:
        return tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avg))

    assert len(weights) == 3
    assert weights[query.indices[0]] == pytest.approx(w(2), rel=1e-6)
    assert sorted(weights.values()) == pytest.approx(sorted([w(2), w(1), w(1)]), rel=1e-6)
    assert query.values == [1.0]
    # Same tokenizer at query and index time: an inflected query hits the same term id.
    assert encoder.encode_query("Dogs").indices == query.indices


def test_idf_scores_follow_the_formula(store) -> None:
    encoder = Bm25Encoder(Bm25Params(avg_len=5))
    texts = ["kernel panic on boot", "grub kernel update", "wifi driver missing", "printer offline", "kernel"]
    vectors = encoder.encode_documents(texts)
    store.upsert(
        store.names.children,
        [
            StorePoint(
                id=f"00000000-0000-0000-0000-00000000000{i}",
                payload={"document_id": f"d{i}", "version": 1.0},
                dense=[1.0, 0.0, 0.0, float(i)],
                sparse=v,
            )
            for i, v in enumerate(vectors)
        ],
    )
    query = encoder.encode_query("kernel panic")
    hits = store.search_sparse(query, limit=10)
    n = len(texts)
    df = {t: sum(t in v.indices for v in vectors) for t in query.indices}
    idf = {t: math.log((n - df[t] + 0.5) / (df[t] + 0.5) + 1) for t in query.indices}
    for hit in hits:
        i = int(hit.payload["document_id"][1:])
        weights = dict(zip(vectors[i].indices, vectors[i].values, strict=True))
        expected = sum(idf[t] * weights.get(t, 0.0) for t in query.indices)
        assert hit.score == pytest.approx(expected, abs=1e-5)
    assert hits[0].payload["document_id"] == "d0"  # the only document with both terms
    assert {h.payload["document_id"] for h in hits} == {"d0", "d1", "d4"}


def test_embedding_cache_computes_each_text_once(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def encode(texts):
        calls.append(list(texts))
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)

    cache = EmbeddingCache(tmp_path / "cache.sqlite")
    vectors, stats = embed_with_cache(["a", "bb", "a"], "m", encode, cache)
    assert (stats.computed, stats.cached) == (3, 0) and calls == [["a", "bb"]]
    assert vectors[:, 0].tolist() == [1, 2, 1]
    cache.close()
    cache = EmbeddingCache(tmp_path / "cache.sqlite")  # persisted across processes/opens
    vectors2, stats2 = embed_with_cache(["bb", "a", "ccc"], "m", encode, cache)
    assert (stats2.computed, stats2.cached) == (1, 2) and calls[-1] == ["ccc"]
    assert vectors2[:, 0].tolist() == [2, 1, 3]
    _, other_model = embed_with_cache(["a"], "other-model", encode, cache)
    assert other_model.computed == 1  # the key includes the model id
