"""The offline default reranker: multi-signal features combined by a learning-to-rank model.

No PyPI package ships cross-encoder weights, so the default learns how to weigh the signals the
index already has (BM25, dense, fusion, field coverage, recency, length, source) with LightGBM
LambdaRank, trained on labelled queries it is never scored on. With no labels it falls back to a
documented fixed-weight linear score (:data:`FIXED_WEIGHTS`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from rag_pipeline.machine import usable_cores
from rag_pipeline.pipeline.retained import (
    TEMPORARY_FILES,
    TEMPORARY_LABEL,
    Expired,
    RetentionScope,
    children,
    folders_older_than,
    newest_mtime,
)
from rag_pipeline.retrieval.rerank.features import FEATURE_NAMES, FEATURES_VERSION, candidate_features
from rag_pipeline.retrieval.results import SearchResult
from rag_pipeline.vectors.sparse import THREAD_LEVEL_TOKENIZERS, Bm25Encoder, Bm25Params, Bm25Tokenizer

if TYPE_CHECKING:
    # Imported where a model is loaded or trained: lightgbm brings scikit-learn (~2 s), which every
    # `rag-pipeline` command would otherwise pay at start-up, --help included.
    import lightgbm as lgb

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
    "lambdarank_truncation_level": 20,
    "deterministic": True,
    "force_row_wise": True,
    "num_threads": 2,
    "verbose": -1,
}
# L2 on leaf values and the bag, decided once (2026-11-29) by bench/reranker_tuning.py on half of each bundled dev
# set's queries (5-fold CV, tuning-query-weighted mean nDCG@10 over the candidates: L2 10 with 3 boosters 0.7457,
# the best cell of L2 {0, 3, 10, 30} × bag {1, 3, 5} × trees {100, 200, 300}; bag 5 0.7446, one booster 0.71–0.79
# with a seed-to-seed spread of 0.017–0.047), and checked on the other half against the old per-training-set
# inner cross-validation with bag 5: Jira 0.732 vs 0.736, Slack 0.798 vs 0.806, ACL 0.792 vs 0.804 (24–263
# held-out queries), with 3 fits instead of 21 per model (bench/results/reranker_tuning.json). The old search
# stays available (train_reranker(tune_reg_lambda=True)).
# Indexes with CJK terms (the Korean and CJK chat indexes, issue 65): a smaller model, and the hybrid guard below.
# The English parameters above overfit the few hundred one-relevant known-item queries a Korean chat set has: on the
# Korean help-desk set split by channel (bench/experiments/korean_heldout.py), every smaller cell of {50, 100, 200,
# 300} trees × {3, 7, 15} leaves × {10, 30, 60} minimum rows beat them in 5-fold cross-fitting (Samsung 0.684 →
# 0.694–0.710, iPhone 0.786 → 0.786–0.795 nDCG@10); the cell chosen on one channel, scored on the other, gained
# +0.005 and +0.010, and this one has the best mean of the two (docs/notes/korean_quality.md).
CJK_MODEL_PARAMS: dict[str, Any] = {"n_estimators": 100, "num_leaves": 7, "min_child_samples": 60}
GUARDED_TOKENIZERS = THREAD_LEVEL_TOKENIZERS
# The guard's inner folds when a single model is trained (train_reranker); cross_fit reuses its own folds.
GUARD_FOLDS = 3
# What a fallback model scores a candidate by: its hybrid rank (lower is better), so it returns the hybrid order.
HYBRID_ORDER = "hybrid-order"
REG_LAMBDA_GRID: tuple[float, ...] = (0.0, 3.0, 10.0, 30.0)
REG_LAMBDA = 10.0
TUNING_FOLDS = 4
# Below this many labelled queries an inner fold is too small to tell the values apart: LightGBM's default.
MIN_TUNING_QUERIES = 50
# Boosters that differ only in their row and feature sampling seeds, averaged: one booster's nDCG@10 moves by
# up to ±0.02 with the seed alone, which hid real differences between feature sets (see above).
BAG = 3
MODEL_FILE = "model-{}.txt"
# Where an evaluation keeps its cached fits, under its reports folder (train_reranker's cache_dir).
FITS_FOLDER = "reranker_fits"
META_FILE = "reranker.json"


T = TypeVar("T")


# At most this many fits at a time: a machine's core count says nothing of a container's CPU quota.
MAX_FIT_WORKERS = 4


def fit_workers() -> int:
    """Fits run at a time: one per core this process may use, at most :data:`MAX_FIT_WORKERS`."""
    return min(usable_cores(), MAX_FIT_WORKERS)


def _side_by_side(params: dict[str, Any]) -> bool:
    """Whether fits with these parameters give the same model with any thread count."""
    return bool(params.get("deterministic")) and bool(params.get("force_row_wise"))


def run_fits(fits: Sequence[Callable[[int], T]], params: dict[str, Any]) -> list[T]:
    """``[fit(threads) for fit in fits]``, in that order, several at a time with one LightGBM thread each where
    ``params`` make the model independent of the thread count.

    LightGBM releases the GIL while it trains, and small fits scale better across fits than across threads:
    on 2 cores (AMD EPYC, AVX2) two one-thread fits of the reranker take 2.67 s together where one two-thread
    fit takes 1.89 s. Models are the same with any thread count (``deterministic=True`` and row-wise histograms,
    :func:`_side_by_side`; ``test_retrieval`` compares the trees), so this changes the time, not the figures; a
    saved model's parameters section names the thread count it was fitted with. With one worker (one core, or
    other parameters) the fits run one after another with the parameters' ``num_threads`` (``threads`` 0)."""
    workers = min(fit_workers() if _side_by_side(params) else 1, len(fits))
    if workers <= 1:
        return [fit(0) for fit in fits]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lightgbm-fit") as pool:
        return list(pool.map(lambda fit: fit(1), fits))


def _threads(params: dict[str, Any], threads: int) -> dict[str, Any]:
    return params if threads == 0 else {**params, "num_threads": threads}


@dataclass
class RerankExample:
    """One labelled query and its candidates (with signals and parent text) for training."""

    query_id: str
    query: str
    candidates: list[SearchResult]
    labels: list[int]
    features: np.ndarray | None = None
    features_terms: str | None = None  # the encoder's terms_id the features were counted with


@dataclass
class MultiSignalReranker:
    """Learned (the mean of a bag of LightGBM boosters) or fixed-weight multi-signal reranker."""

    # The evaluation's "reranked" arm is this reranker: its calibration (retrieval/calibration.py) fits these scores.
    calibrated_as: ClassVar[str] = "reranked"

    boosters: list[lgb.Booster] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    encoder: Bm25Encoder = field(default_factory=Bm25Encoder)

    @property
    def hybrid_order(self) -> bool:
        """Whether this is the guard's fallback: the hybrid ranking as it came (:func:`hybrid_fallback`)."""
        return self.metadata.get("fallback") == HYBRID_ORDER

    @property
    def name(self) -> str:
        if self.hybrid_order:
            return "multi-signal(hybrid-order)"
        if not self.boosters:
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
        if self.hybrid_order:
            order: np.ndarray = -features[:, _HYBRID_RANK]
            return order
        if not self.boosters:
            weights = np.array([FIXED_WEIGHTS.get(n, 0.0) for n in FEATURE_NAMES])
            weighted: np.ndarray = features @ weights
            return weighted
        predictions = [np.asarray(b.predict(features, num_threads=1), dtype=np.float64) for b in self.boosters]
        mean: np.ndarray = np.mean(predictions, axis=0)
        return mean

    # --- persistence ------------------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for i, booster in enumerate(self.boosters):
            booster.save_model(str(directory / MODEL_FILE.format(i)))
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
        import lightgbm as lgb

        boosters = []
        for i in range(int(metadata.get("bag", 0))):
            model = directory / MODEL_FILE.format(i)
            if not model.exists():
                raise FileNotFoundError(f"reranker at {directory} lacks {model.name}; materialize reranker_model")
            boosters.append(lgb.Booster(model_file=str(model)))
        terms = str(metadata.get("bm25_terms", "word/english"))  # models saved before it counted word terms
        try:
            encoder = Bm25Encoder.for_terms(terms)
        except ValueError:
            raise ValueError(
                f"reranker at {directory} counts terms as {terms!r}, which this code does not know; "
                "retrain it (materialize reranker_model)"
            ) from None
        return cls(boosters=boosters, metadata=metadata, encoder=encoder)


_HYBRID_RANK = FEATURE_NAMES.index("log_hybrid_rank")


def hybrid_fallback(metadata: dict[str, Any], encoder: Bm25Encoder, reason: str) -> MultiSignalReranker:
    """The guard's model: it scores candidates by their hybrid rank, so a reranked search returns the hybrid order.
    Saved and loaded like any model (no boosters; ``fallback`` in its metadata)."""
    meta = {**metadata, "bag": 0, "fallback": HYBRID_ORDER, "fallback_reason": reason}
    meta["version"] = (
        f"hybrid-order-{FEATURES_VERSION}-"
        + hashlib.sha256(json.dumps(sorted(meta.get("training_query_ids", []))).encode()).hexdigest()[:12]
    )
    return MultiSignalReranker(metadata=meta, encoder=encoder)


def guarded(tokenizer: str) -> bool:
    """Whether models counting terms with ``tokenizer`` (a CJK index's) get the CJK parameters and the guard."""
    return tokenizer in GUARDED_TOKENIZERS


def model_params(tokenizer: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """LambdaRank parameters for an index with this tokenizer (:data:`CJK_MODEL_PARAMS` for CJK terms), then
    ``params``."""
    base = {**LAMBDARANK_PARAMS, **CJK_MODEL_PARAMS} if guarded(tokenizer) else LAMBDARANK_PARAMS
    return {**base, **(params or {})}


def ndcg_at_10(labels: Sequence[int], scores: Sequence[float] | np.ndarray) -> float:
    """nDCG@10 (gain 2^label − 1, ideal over these candidates) of the candidates ordered by ``scores`` (ties keep
    the candidates' order); 0 without a relevant candidate."""
    gains = np.exp2(np.asarray(labels, dtype=np.float64)) - 1.0
    ideal = np.sort(gains)[::-1][:10]
    discounts = 1.0 / np.log2(np.arange(2, 12))
    best = float(ideal @ discounts[: len(ideal)])
    if best <= 0:
        return 0.0
    order = sorted(range(len(gains)), key=lambda i: (-float(scores[i]), i))[:10]
    return float(gains[order] @ discounts[: len(order)]) / best


def gain_over_hybrid(model: MultiSignalReranker, examples: Sequence[RerankExample]) -> float:
    """Summed nDCG@10 of ``model``'s order minus the hybrid order's (the candidates' own), over ``examples``."""
    total = 0.0
    for e in examples:
        if e.features is None or not len(e.labels):
            continue
        hybrid = -e.features[:, _HYBRID_RANK]
        total += ndcg_at_10(e.labels, model.score_features(e.features)) - ndcg_at_10(e.labels, hybrid)
    return total


def term_encoder(tokenizer: Bm25Tokenizer = "word") -> Bm25Encoder:
    """What the term-overlap features count terms with: the index's BM25 tokenizer, so that CJK text (where the
    word tokenizer finds one term per sentence) gets its bigram overlaps. Only the terms matter, not k1/b."""
    return Bm25Encoder(Bm25Params(tokenizer=tokenizer))


def featurize(examples: Sequence[RerankExample], encoder: Bm25Encoder | None = None) -> None:
    """Compute each example's feature matrix once (training and cross-fitting reuse them)."""
    encoder = encoder or term_encoder()
    for example in examples:
        # features counted with other terms are recounted: a model must score what it was trained on
        if example.features is None or example.features_terms != encoder.terms_id:
            example.features = candidate_features(example.query, example.candidates, encoder)
            example.features_terms = encoder.terms_id


def _matrix(examples: Sequence[RerankExample]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    x = np.vstack([e.features for e in examples])  # type: ignore[misc]
    y = np.concatenate([np.asarray(e.labels, dtype=np.int32) for e in examples])
    return x, y, [len(e.labels) for e in examples]


def _fold_of(examples: Sequence[RerankExample], folds: int, seed: int) -> dict[str, int]:
    """Query text → fold, so every example of one text lands in the same fold."""
    texts = sorted({query_key(e.query) for e in examples})
    order = np.random.default_rng(seed).permutation(len(texts))
    return {texts[i]: n % folds for n, i in enumerate(order)}


def choose_reg_lambda(
    usable: Sequence[RerankExample],
    params: dict[str, Any],
    grid: Sequence[float] = REG_LAMBDA_GRID,
    folds: int = TUNING_FOLDS,
) -> tuple[float, dict[str, float]]:
    """The L2 value whose models score the best mean nDCG@10 (LightGBM's, over each held-out query's
    candidates) across ``folds`` inner folds of ``usable``; ties go to the smaller value."""
    import lightgbm as lgb

    fold_of = _fold_of(usable, folds, seed=1)
    splits = []  # (training matrix, held-out matrix) per fold, shared by every value of the grid
    for fold in range(folds):
        train = [e for e in usable if fold_of[query_key(e.query)] != fold]
        valid = [e for e in usable if fold_of[query_key(e.query)] == fold]
        if train and valid:
            splits.append((_matrix(train), _matrix(valid)))
    held_out = sum(len(valid[2]) for _, valid in splits)

    def weighted_ndcg(value: float, split: Any, threads: int) -> float:
        (x, y, groups), (xv, yv, gv) = split
        model = lgb.LGBMRanker(**_threads({**params, "reg_lambda": value}, threads))
        model.fit(x, y, group=groups, eval_X=(xv,), eval_y=(yv,), eval_group=[gv], eval_at=[10])
        return float(model.evals_result_["valid_0"]["ndcg@10"][-1] * len(gv))

    fits = [partial(weighted_ndcg, value, split) for value in grid for split in splits]
    results = iter(run_fits(fits, params))
    scores: dict[str, float] = {}
    for value in grid:
        total = 0.0
        for _ in splits:  # summed in the same order as when the fits ran one after another
            total += next(results)
        scores[str(value)] = total / max(held_out, 1)
    best = max(grid, key=lambda v: (round(scores[str(v)], 6), -v))
    return best, scores


def train_reranker(
    examples: Sequence[RerankExample],
    params: dict[str, Any] | None = None,
    trained_on: str = "",
    bag: int = BAG,
    encoder: Bm25Encoder | None = None,
    cache_dir: Path | None = None,
    tune_reg_lambda: bool = False,
    guard: bool | None = None,
) -> MultiSignalReranker:
    """Fit LambdaRank on the examples that have at least one relevant candidate.

    In an index with CJK terms (:func:`guarded`; ``guard`` None) the parameters are :data:`CJK_MODEL_PARAMS` and the
    model is guarded: :data:`GUARD_FOLDS` inner folds of the training queries each fit one booster on the others, and
    unless their held-out nDCG@10 beats the hybrid order's in sum, the model is the hybrid order itself
    (:func:`hybrid_fallback`), so the reranked arm never trades a known loss for a hoped gain.

    With ``cache_dir``, a model trained before on the same training matrix (features, labels, query groups) with
    the same parameters, bag, features version and terms is loaded instead of trained: an unchanged index
    re-evaluates without a single fit (issue 48). The key is the content, never the eval set's name, so a changed
    index or label retrains.

    L2 is :data:`REG_LAMBDA` unless ``params`` sets ``reg_lambda``; with ``tune_reg_lambda`` (and no value in
    ``params``) it is chosen from :data:`REG_LAMBDA_GRID` by an inner cross-validation on these examples (with at
    least :data:`MIN_TUNING_QUERIES` of them): the old procedure, 16 more fits, kept for ``bench.reranker_tuning``.
    Then ``bag`` boosters are fitted with seeds 0… and averaged. Falls back to
    fixed weights (and says so in the metadata) when no example has a relevant candidate. ``encoder`` counts
    the term-overlap features (the index's BM25 encoder; word terms by default); the model keeps its tokenizer.
    """
    training = _prepare_training(examples, params, trained_on, bag, encoder, cache_dir, tune_reg_lambda, guard)
    return training.model(run_fits(training.fits, training.params) if training.fits else [])


@dataclass
class _Training:
    """One model's training, prepared: its boosters' fits still to run (none for a cached or fixed-weights model)
    and what makes the model of what they return, in order (``model``), so several models' fits share one pool."""

    params: dict[str, Any]
    fits: list[Callable[[int], Any]]
    model: Callable[[list[Any]], MultiSignalReranker]

    @classmethod
    def ready(cls, params: dict[str, Any], model: MultiSignalReranker) -> _Training:
        return cls(params, [], lambda _boosters: model)


def _prepare_training(
    examples: Sequence[RerankExample],
    params: dict[str, Any] | None,
    trained_on: str,
    bag: int,
    encoder: Bm25Encoder | None,
    cache_dir: Path | None,
    tune_reg_lambda: bool,
    guard: bool | None = False,
) -> _Training:
    import lightgbm as lgb

    encoder = encoder or term_encoder()
    tokenizer = encoder.params.tokenizer
    guard = guarded(tokenizer) if guard is None else guard
    featurize(examples, encoder)
    usable = [e for e in examples if any(label > 0 for label in e.labels)]
    params = model_params(tokenizer, params)
    tuned = tune_reg_lambda and "reg_lambda" not in params and len(usable) >= MIN_TUNING_QUERIES
    if not tuned:
        params.setdefault("reg_lambda", REG_LAMBDA)
    # Looked up before the inner cross-validation too: its fits are most of a fold's cost.
    cached = None
    if cache_dir is not None and usable:
        key_params = {**params, "reg_lambda": "inner-cv"} if tuned else params
        key_params = {**key_params, "guard": GUARD_FOLDS} if guard else key_params
        cached = _cache_entry(cache_dir, key_params, bag, encoder, *_matrix(usable))
        if (cached / META_FILE).exists():
            try:
                return _Training.ready(params, MultiSignalReranker.load(cached))
            except (OSError, ValueError):  # a damaged entry: train again and replace it
                pass
    tuning: dict[str, float] = {}
    if tuned:
        params["reg_lambda"], tuning = choose_reg_lambda(usable, params)
    digest = hashlib.sha256(
        json.dumps(
            # word-tokenized models keep the versions they had before the tokenizer was recorded
            [FEATURES_VERSION, params, bag, sorted((e.query_id, tuple(e.labels)) for e in usable)]
            + ([tokenizer] if tokenizer != "word" else []),
            default=str,
        ).encode()
    ).hexdigest()[:12]
    metadata: dict[str, Any] = {
        "features": list(FEATURE_NAMES),
        "features_version": FEATURES_VERSION,
        "bm25_tokenizer": tokenizer,
        "bm25_terms": encoder.terms_id,
        "trained_on": trained_on,
        "training_queries": len(usable),
        "training_query_ids": sorted(e.query_id for e in usable),
        "skipped_queries_without_relevant_candidates": len(examples) - len(usable),
        "params": params,
        "bag": 0,
        "reg_lambda_inner_ndcg10": tuning,
    }
    if not usable:
        fixed = MultiSignalReranker(
            metadata={**metadata, "version": f"fixed-weights-{FEATURES_VERSION}"}, encoder=encoder
        )
        return _Training.ready(params, fixed)
    if guard:
        gain = _inner_gain(usable, params)
        metadata["guard_inner_gain_ndcg10"] = gain
        if gain <= 0:
            fallback = hybrid_fallback(metadata, encoder, f"inner folds: {gain:+.4f} nDCG@10 against hybrid")
            if cached is not None:
                _store(fallback, cached)
            return _Training.ready(params, fallback)
    x, y, groups = _matrix(usable)

    def bagged(seed: int, threads: int) -> lgb.Booster:
        model = lgb.LGBMRanker(**_threads({**params, "seed": seed}, threads))
        model.fit(x, y, group=groups)
        return model.booster_

    def finish(boosters: list[lgb.Booster]) -> MultiSignalReranker:
        gains = np.sum([b.feature_importance("gain") for b in boosters], axis=0) / bag
        importance = dict(zip(FEATURE_NAMES, gains.tolist(), strict=True))
        metadata.update(version=f"lambdarank-{digest}", bag=bag, feature_importance_gain=importance)
        reranker = MultiSignalReranker(boosters=boosters, metadata=metadata, encoder=encoder)
        if cached is not None:
            _store(reranker, cached)
        return reranker

    return _Training(params, [partial(bagged, seed) for seed in range(bag)], finish)


def _inner_gain(usable: Sequence[RerankExample], params: dict[str, Any], folds: int = GUARD_FOLDS) -> float:
    """Mean held-out nDCG@10 gain over the hybrid order of one booster per inner fold (the guard's test)."""
    import lightgbm as lgb

    fold_of = _fold_of(usable, folds, seed=2)
    splits = []
    for fold in range(folds):
        train = [e for e in usable if fold_of[query_key(e.query)] != fold]
        valid = [e for e in usable if fold_of[query_key(e.query)] == fold]
        if train and valid:
            splits.append((train, valid))
    if not splits:
        return 0.0

    def held_out_gain(train: list[RerankExample], valid: list[RerankExample], threads: int) -> float:
        x, y, groups = _matrix(train)
        model = lgb.LGBMRanker(**_threads({**params, "seed": 0}, threads))
        model.fit(x, y, group=groups)
        return gain_over_hybrid(MultiSignalReranker(boosters=[model.booster_]), valid)

    gains = run_fits([partial(held_out_gain, train, valid) for train, valid in splits], params)
    return round(sum(gains) / sum(len(valid) for _, valid in splits), 6)


def _cache_entry(
    cache_dir: Path,
    params: dict[str, Any],
    bag: int,
    encoder: Bm25Encoder,
    x: np.ndarray,
    y: np.ndarray,
    groups: list[int],
) -> Path:
    """The cache folder of a fit: named by the digest of everything the fitted boosters depend on."""
    digest = hashlib.sha256()
    digest.update(json.dumps([FEATURES_VERSION, params, bag, encoder.terms_id], sort_keys=True, default=str).encode())
    for array in (np.ascontiguousarray(x, dtype=np.float64), np.ascontiguousarray(y, dtype=np.int64)):
        digest.update(str(array.shape).encode())
        digest.update(array.tobytes())
    digest.update(json.dumps(list(groups)).encode())
    return Path(cache_dir) / digest.hexdigest()[:24]


def _store(reranker: MultiSignalReranker, entry: Path) -> None:
    """Saved into a temporary folder, then renamed: a concurrent reader sees a whole entry or none."""
    temp = entry.with_name(f"{entry.name}.{os.getpid()}.tmp")
    shutil.rmtree(temp, ignore_errors=True)
    reranker.save(temp)
    try:
        temp.rename(entry)
    except OSError:  # another process stored the same fit first
        shutil.rmtree(temp, ignore_errors=True)


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
    examples: Sequence[RerankExample],
    folds: int = 5,
    seed: int = 0,
    params: dict[str, Any] | None = None,
    encoder: Bm25Encoder | None = None,
    progress: Callable[[int, int], None] | None = None,
    cache_dir: Path | None = None,
    guard: bool | None = None,
) -> CrossFit:
    """Assign query texts to folds and train one model per fold on the other folds' examples. Every fold's boosters
    are fitted in one pool (:func:`run_fits`), so ``progress(done, total)`` counts the folds' models as they are
    made, after the fits.

    Guarded (CJK terms, ``guard`` None: :func:`guarded`), each fold's model is kept only if the *other* folds'
    models beat the hybrid order on their own held-out folds in sum; otherwise the fold is scored in the hybrid order
    (:func:`hybrid_fallback`). A fold's own labels never decide its fate, so the arm stays an honest estimate; no
    extra fit is needed."""
    encoder = encoder or term_encoder()
    guard = guarded(encoder.params.tokenizer) if guard is None else guard
    fold_of = _fold_of(examples, folds, seed)
    total = min(folds, len(fold_of))
    if progress:
        progress(0, total)
    trainings = []
    for fold in range(total):
        train = [e for e in examples if fold_of[query_key(e.query)] != fold]
        trainings.append(
            _prepare_training(train, params, f"cross-fit fold {fold + 1}/{folds}", BAG, encoder, cache_dir, False)
        )
    # Every fold's boosters in one pool: per fold, a bag of 3 on 2 cores left a core idle for one fit in two.
    fits = [fit for training in trainings for fit in training.fits]
    boosters = iter(run_fits(fits, trainings[0].params) if fits else [])
    models: dict[int, MultiSignalReranker] = {}
    for fold, training in enumerate(trainings):
        models[fold] = training.model([next(boosters) for _ in training.fits])
        if progress:
            progress(fold + 1, total)
    if guard:
        gains = {
            fold: gain_over_hybrid(model, [e for e in examples if fold_of[query_key(e.query)] == fold])
            for fold, model in models.items()
        }
        for fold, model in list(models.items()):
            others = sum(g for f, g in gains.items() if f != fold)
            model.metadata["guard_other_folds_gain_ndcg10"] = round(others, 6)
            if others <= 0:
                models[fold] = hybrid_fallback(
                    model.metadata, model.encoder, f"other folds: {others:+.4f} summed nDCG@10 against hybrid"
                )
    return CrossFit(models, fold_of)


def load_current_reranker(directory: str | Path, tokenizer: Bm25Tokenizer = "word") -> MultiSignalReranker:
    """The reranker ``reranker_model`` last wrote under ``directory`` (its ``CURRENT`` file; it counts terms as
    it was trained to), or the fixed-weight default counting terms with ``tokenizer`` when none has been trained."""
    directory = Path(directory)
    current = directory / "CURRENT"
    if not current.exists():
        return MultiSignalReranker(
            metadata={"version": f"fixed-weights-{FEATURES_VERSION}"}, encoder=term_encoder(tokenizer)
        )
    return MultiSignalReranker.load(directory / current.read_text().strip())


class RerankerVersions:
    """Retention of the learned reranker's versions (:class:`~rag_pipeline.pipeline.retained.RetainedArtifact`):
    those ``CURRENT`` does not name, older than ``RAG_RETENTION_REPORT_DAYS`` (without ``CURRENT`` no version is
    known to be unused: none goes)."""

    kind = "reranker_models"
    label = "learned reranker versions not CURRENT"

    def expired(self, scope: RetentionScope) -> Iterator[Expired]:
        current_file = scope.settings.paths.reranker / "CURRENT"
        if not current_file.is_file():
            return
        current = current_file.read_text().strip()
        versions = folders_older_than(scope.settings.paths.reranker, scope.report_cutoff, lambda v: v.name == current)
        for version, mtime in versions:
            yield Expired(version, f"reranker version {version.name} (CURRENT is {current})", mtime)


class RerankerFits:
    """Retention of the cached fits under ``reports/reranker_fits``: not written for ``RAG_RETENTION_REPORT_DAYS`` (a
    cache: a fit still needed is trained again once)."""

    kind = "reranker_fits"
    label = "cached reranker fits"

    def expired(self, scope: RetentionScope) -> Iterator[Expired]:
        fits = scope.settings.paths.reports / FITS_FOLDER
        for fit, mtime in folders_older_than(fits, scope.report_cutoff, lambda f: f.name.endswith(".tmp")):
            yield Expired(fit, f"fit cache entry not written for {scope.report_age}", mtime)


class RerankerFitSaves:
    """The temporary folders of fit saves that never finished (older than a day), whatever the settings."""

    kind = TEMPORARY_FILES
    label = TEMPORARY_LABEL

    def expired(self, scope: RetentionScope) -> Iterator[Expired]:
        for temp in children(scope.settings.paths.reports / FITS_FOLDER):
            if temp.name.endswith(".tmp") and newest_mtime(temp) < scope.temporary_cutoff:
                yield Expired(temp, "a reranker fit whose save never finished")
