"""The offline default reranker: multi-signal features combined by a learning-to-rank model.

No PyPI package ships cross-encoder weights, so the default learns how to weigh the signals the
index already has (BM25, dense, fusion, field coverage, recency, length, source) with LightGBM
LambdaRank, trained on labelled queries it is never scored on. With no labels it falls back to a
documented fixed-weight linear score (:data:`FIXED_WEIGHTS`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightgbm as lgb
import numpy as np

from rag_pipeline.retrieval.rerank.features import FEATURE_NAMES, FEATURES_VERSION, candidate_features
from rag_pipeline.retrieval.results import SearchResult
from rag_pipeline.vectors.sparse import Bm25Encoder

# The no-labels default: plain fusion order, nudged by the signals that helped most when learned on
# the bundled dev sets (title coverage for Jira summaries, dense closeness to the best candidate).
FIXED_WEIGHTS: dict[str, float] = {
    "hybrid_score_rel": 1.0,
    "dense_score_gap": 0.5,
    "bm25_score_rel": 0.2,
    "title_coverage": 0.15,
    "parent_coverage": 0.1,
}

LAMBDARANK_PARAMS: dict[str, Any] = {
    "objective": "lambdarank",
    "n_estimators": 300,
    "learning_rate": 0.05,
    "num_leaves": 15,
    "min_child_samples": 10,
    "subsample": 0.8,
    "subsample_freq": 1,
    "colsample_bytree": 0.8,
    # L2 on leaf values: a few hundred training queries leave leaves of one or two relevant candidates, and
    # every value from 3 to 30 scored higher under cross-fitting on all three dev sets (0.6558 → 0.6605 Jira,
    # 0.685 → 0.701 Slack, 0.717 → 0.730 ACL at 10; docs/notes/hybrid_quality.md); 10 sits mid-plateau.
    "reg_lambda": 10.0,
    "lambdarank_truncation_level": 20,
    "deterministic": True,
    "force_row_wise": True,
    "num_threads": 2,
    "verbose": -1,
}
MODEL_FILE = "model.txt"
META_FILE = "reranker.json"


@dataclass
class RerankExample:
    """One labelled query and its candidates (with signals and parent text) for training."""

    query_id: str
    query: str
    candidates: list[SearchResult]
    labels: list[int]
    features: np.ndarray | None = None


@dataclass
class MultiSignalReranker:
    """Learned (LightGBM booster) or fixed-weight multi-signal reranker."""

    booster: lgb.Booster | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    encoder: Bm25Encoder = field(default_factory=Bm25Encoder)

    @property
    def name(self) -> str:
        if self.booster is None:
            return "multi-signal(fixed-weights)"
        return f"multi-signal(lambdarank:{self.metadata.get('version', '?')})"

    @property
    def version(self) -> str:
        return str(self.metadata.get("version", "fixed-weights-" + FEATURES_VERSION))

    def score(self, query: str, candidates: Sequence[SearchResult]) -> list[float]:
        scores: list[float] = self.score_features(candidate_features(query, candidates, self.encoder)).tolist()
        return scores

    def score_features(self, features: np.ndarray) -> np.ndarray:
        if len(features) == 0:
            return np.zeros(0)
        if self.booster is None:
            weights = np.array([FIXED_WEIGHTS.get(n, 0.0) for n in FEATURE_NAMES])
            weighted: np.ndarray = features @ weights
            return weighted
        return np.asarray(self.booster.predict(features, num_threads=1), dtype=np.float64)

    # --- persistence ------------------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        if self.booster is not None:
            self.booster.save_model(str(directory / MODEL_FILE))
        (directory / META_FILE).write_text(json.dumps(self.metadata, indent=2, sort_keys=True) + "\n")
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> MultiSignalReranker:
        directory = Path(directory)
        meta_path = directory / META_FILE
        if not meta_path.exists():
            raise FileNotFoundError(f"no reranker at {directory} (missing {META_FILE}); materialize reranker_model")
        metadata = json.loads(meta_path.read_text())
        if metadata.get("features") != list(FEATURE_NAMES):
            raise ValueError(
                f"reranker at {directory} was trained on features {metadata.get('features')}; "
                f"this code computes {list(FEATURE_NAMES)} — retrain it (materialize reranker_model)"
            )
        model = directory / MODEL_FILE
        booster = lgb.Booster(model_file=str(model)) if model.exists() else None
        return cls(booster=booster, metadata=metadata)


def featurize(examples: Sequence[RerankExample], encoder: Bm25Encoder | None = None) -> None:
    """Compute each example's feature matrix once (training and cross-fitting reuse them)."""
    encoder = encoder or Bm25Encoder()
    for example in examples:
        if example.features is None:
            example.features = candidate_features(example.query, example.candidates, encoder)


def train_reranker(
    examples: Sequence[RerankExample], params: dict[str, Any] | None = None, trained_on: str = ""
) -> MultiSignalReranker:
    """Fit LambdaRank on the examples that have at least one relevant candidate.

    Falls back to fixed weights (and says so in the metadata) when no example has one.
    """
    featurize(examples)
    usable = [e for e in examples if any(label > 0 for label in e.labels)]
    params = {**LAMBDARANK_PARAMS, **(params or {})}
    digest = hashlib.sha256(
        json.dumps(
            [FEATURES_VERSION, params, sorted((e.query_id, tuple(e.labels)) for e in usable)], default=str
        ).encode()
    ).hexdigest()[:12]
    metadata: dict[str, Any] = {
        "features": list(FEATURE_NAMES),
        "features_version": FEATURES_VERSION,
        "trained_on": trained_on,
        "training_queries": len(usable),
        "training_query_ids": sorted(e.query_id for e in usable),
        "skipped_queries_without_relevant_candidates": len(examples) - len(usable),
        "params": params,
    }
    if not usable:
        return MultiSignalReranker(metadata={**metadata, "version": f"fixed-weights-{FEATURES_VERSION}"})
    x = np.vstack([e.features for e in usable])  # type: ignore[misc]
    y = np.concatenate([np.asarray(e.labels, dtype=np.int32) for e in usable])
    groups = [len(e.labels) for e in usable]
    model = lgb.LGBMRanker(**params)
    model.fit(x, y, group=groups)
    importance = dict(zip(FEATURE_NAMES, model.booster_.feature_importance("gain").tolist(), strict=True))
    metadata.update(version=f"lambdarank-{digest}", feature_importance_gain=importance)
    return MultiSignalReranker(booster=model.booster_, metadata=metadata)


def query_key(text: str) -> str:
    """Queries with the same words are the same query for cross-fitting (an ACL eval set repeats
    each text under several principals)."""
    return " ".join(text.lower().split())


@dataclass
class CrossFit:
    """Fold models; look a query up by its text so a model never scores a text it trained on."""

    models: dict[int, MultiSignalReranker]
    fold_of_text: dict[str, int]

    def for_query(self, text: str) -> MultiSignalReranker:
        fold = self.fold_of_text.get(query_key(text))
        # A text no fold trained on may use any fold's model.
        return self.models[fold if fold is not None else min(self.models)]


def cross_fit(
    examples: Sequence[RerankExample], folds: int = 5, seed: int = 0, params: dict[str, Any] | None = None
) -> CrossFit:
    """Assign query texts to folds and train one model per fold on the other folds' examples."""
    texts = sorted({query_key(e.query) for e in examples})
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(texts))
    fold_of = {texts[i]: n % folds for n, i in enumerate(order)}
    models: dict[int, MultiSignalReranker] = {}
    for fold in range(min(folds, len(texts))):
        train = [e for e in examples if fold_of[query_key(e.query)] != fold]
        models[fold] = train_reranker(train, params, trained_on=f"cross-fit fold {fold + 1}/{folds}")
    return CrossFit(models, fold_of)


def load_current_reranker(directory: str | Path) -> MultiSignalReranker:
    """The reranker ``reranker_model`` last wrote under ``directory`` (its ``CURRENT`` file), or the
    fixed-weight default when none has been trained yet."""
    directory = Path(directory)
    current = directory / "CURRENT"
    if not current.exists():
        return MultiSignalReranker(metadata={"version": f"fixed-weights-{FEATURES_VERSION}"})
    return MultiSignalReranker.load(directory / current.read_text().strip())
