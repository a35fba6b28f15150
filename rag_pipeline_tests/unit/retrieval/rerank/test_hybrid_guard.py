"""The learned reranker's hybrid guard and CJK parameters (issue 65 item 4): in an index with CJK terms a model that
does not beat the hybrid order on held-out folds is replaced by the hybrid order; English indexes are untouched."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rag_pipeline.retrieval.rerank.features import FEATURE_NAMES
from rag_pipeline.retrieval.rerank.learned import (
    CJK_MODEL_PARAMS,
    LAMBDARANK_PARAMS,
    MultiSignalReranker,
    RerankExample,
    cross_fit,
    gain_over_hybrid,
    model_params,
    ndcg_at_10,
    term_encoder,
    train_reranker,
)

HYBRID_RANK = FEATURE_NAMES.index("log_hybrid_rank")
SIGNAL = FEATURE_NAMES.index("bm25_score_rel")


def _examples(tokenizer: str, hybrid_right: bool, queries: int = 120, candidates: int = 20) -> list[RerankExample]:
    """Queries whose relevant candidate is first in the hybrid order (``hybrid_right``; every other feature noise),
    or placed at random by hybrid and marked by one feature alone."""
    rng = np.random.default_rng(7)
    terms = term_encoder(tokenizer).terms_id  # type: ignore[arg-type]
    out = []
    for q in range(queries):
        x = rng.random((candidates, len(FEATURE_NAMES)))
        x[:, HYBRID_RANK] = np.log1p(np.arange(candidates))
        relevant = 0 if hybrid_right else int(rng.integers(1, candidates))
        if not hybrid_right:
            x[:, SIGNAL] = 0.0
            x[relevant, SIGNAL] = 1.0
        labels = [int(i == relevant) for i in range(candidates)]
        out.append(RerankExample(f"q{q}", f"query {q}", [], labels, features=x, features_terms=terms))
    return out


def test_ndcg_at_10_of_one_relevant_candidate() -> None:
    assert ndcg_at_10([0, 1, 0], [3.0, 2.0, 1.0]) == pytest.approx(1 / np.log2(3))
    assert ndcg_at_10([0, 1, 0], [0.0, 5.0, 1.0]) == 1.0
    assert ndcg_at_10([0, 0], [1.0, 2.0]) == 0.0


def test_cjk_indexes_get_the_smaller_model_and_english_keeps_its_parameters() -> None:
    assert model_params("word") == LAMBDARANK_PARAMS
    for tokenizer in ("cjk-bigram", "ko-morpheme-bigram"):
        params = model_params(tokenizer)
        assert {k: params[k] for k in CJK_MODEL_PARAMS} == CJK_MODEL_PARAMS
    assert model_params("cjk-bigram", {"num_leaves": 3})["num_leaves"] == 3


def test_a_cjk_model_that_cannot_beat_hybrid_falls_back_to_the_hybrid_order(tmp_path: Path) -> None:
    examples = _examples("cjk-bigram", hybrid_right=True)
    model = train_reranker(examples, encoder=term_encoder("cjk-bigram"))
    assert model.hybrid_order and not model.boosters
    assert model.metadata["guard_inner_gain_ndcg10"] <= 0
    for e in examples[:10]:
        assert int(np.argmax(model.score_features(e.features))) == 0  # type: ignore[arg-type]
    assert gain_over_hybrid(model, examples) == 0.0
    loaded = MultiSignalReranker.load(model.save(tmp_path / "fallback"))
    assert loaded.hybrid_order and loaded.name == "multi-signal(hybrid-order)"
    assert loaded.version == model.version


def test_english_models_are_never_guarded() -> None:
    model = train_reranker(_examples("word", hybrid_right=True), encoder=term_encoder("word"), bag=1)
    assert not model.hybrid_order and len(model.boosters) == 1
    assert "guard_inner_gain_ndcg10" not in model.metadata


def test_a_cjk_model_that_beats_hybrid_is_kept() -> None:
    examples = _examples("cjk-bigram", hybrid_right=False)
    model = train_reranker(examples, encoder=term_encoder("cjk-bigram"), bag=1)
    assert not model.hybrid_order and model.boosters
    assert model.metadata["guard_inner_gain_ndcg10"] > 0.5
    assert gain_over_hybrid(model, examples) > 0


def test_cross_fit_guards_each_fold_by_the_other_folds() -> None:
    encoder = term_encoder("ko-morpheme-bigram")
    fallen = cross_fit(_examples("ko-morpheme-bigram", hybrid_right=True), folds=3, encoder=encoder)
    assert all(m.hybrid_order for m in fallen.models.values())
    kept = cross_fit(_examples("ko-morpheme-bigram", hybrid_right=False), folds=3, encoder=encoder)
    assert not any(m.hybrid_order for m in kept.models.values())
    assert all(m.metadata["guard_other_folds_gain_ndcg10"] > 0 for m in kept.models.values())
    unguarded = cross_fit(_examples("ko-morpheme-bigram", hybrid_right=True), folds=3, encoder=encoder, guard=False)
    assert not any(m.hybrid_order for m in unguarded.models.values())
