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
from rag_pipeline.vectors.sparse import Bm25Encoder, Bm25Params, Bm25Tokenizer

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
    def name(self) -> str:
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
) -> MultiSignalReranker:
    """Fit LambdaRank on the examples that have at least one relevant candidate.

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
    training = _prepare_training(examples, params, trained_on, bag, encoder, cache_dir, tune_reg_lambda)
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
) -> _Training:
    import lightgbm as lgb

    encoder = encoder or term_encoder()
    tokenizer = encoder.params.tokenizer
    featurize(examples, encoder)
    usable = [e for e in examples if any(label > 0 for label in e.labels)]
    params = {**LAMBDARANK_PARAMS, **(params or {})}
    tuned = tune_reg_lambda and "reg_lambda" not in params and len(usable) >= MIN_TUNING_QUERIES
    if not tuned:
        params.setdefault("reg_lambda", REG_LAMBDA)
    # Looked up before the inner cross-validation too: its fits are most of a fold's cost.
    cached = None
    if cache_dir is not None and usable:
        key_params = {**params, "reg_lambda": "inner-cv"} if tuned else params
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
) -> CrossFit:
    """Assign query texts to folds and train one model per fold on the other folds' examples. Every fold's boosters
    are fitted in one pool (:func:`run_fits`), so ``progress(done, total)`` counts the folds' models as they are
    made, after the fits."""
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
