"""bench/scale.py's synthetic data: deterministic, the same payloads and terms in every shape, and the text shape's
neighbourhoods as low-dimensional as real chunk vectors' (the isotropic shape's are not)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.scale import SHAPES, IsotropicTopics, TextShapedTopics
from bench.scale_calibration import neighbourhood, vector_set_stats


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_batch_is_the_same_points_every_time_and_its_dense_vectors_are_unit_length(shape: str) -> None:
    corpus = SHAPES[shape]()
    first, again = corpus.batch(4096, 64), SHAPES[shape]().batch(4096, 64)
    assert [p.id for p in first] == [p.id for p in again]
    assert [p.dense for p in first] == [p.dense for p in again]
    dense = np.asarray([p.dense for p in first])
    np.testing.assert_allclose(np.linalg.norm(dense, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(dense, corpus.dense(4096, 64), atol=1e-7)
    # each batch's offset seeds it: another offset is other points, not the same ones again
    assert np.max(np.abs(corpus.dense(4096, 32) - corpus.dense(8192, 32))) > 0.01


def test_shapes_differ_only_in_dense_vectors() -> None:
    text, isotropic = TextShapedTopics().batch(0, 50), IsotropicTopics().batch(0, 50)
    assert [p.payload for p in text] == [p.payload for p in isotropic]
    assert [p.sparse for p in text] == [p.sparse for p in isotropic]
    assert not np.allclose([p.dense for p in text], [p.dense for p in isotropic])


def test_the_text_shape_has_real_chunk_vectors_neighbourhoods_and_the_isotropic_shape_does_not() -> None:
    # Real bundled child chunks embedded with MiniLM (bench/results/scale_calibration.json, 4,000 chunks): LID 18.4,
    # 10th neighbour at cosine 0.59, every pair at 0.21. The text shape was fitted to that at the same size.
    text = vector_set_stats(TextShapedTopics().dense(0, 4000), None, probes=400)
    assert 14 < text["corpus"]["lid_median"] < 26
    assert 0.4 < text["corpus"]["cos_10th"] < 0.7
    assert 0.12 < text["mean_pair_cos"] < 0.28
    # What decides HNSW recall at scale: queries' LID once topics are full (60k points here; 300k in the bench)
    for shape, low, high in ((TextShapedTopics, 10, 30), (IsotropicTopics, 45, 400)):
        corpus = shape()
        points = np.concatenate([corpus.dense(s, 20_000) for s in range(0, 60_000, 20_000)])
        lid = neighbourhood(corpus.query_vectors(100), points)["lid_median"]
        assert low < lid < high, (shape.__name__, lid)
