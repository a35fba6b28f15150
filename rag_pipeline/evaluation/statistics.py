"""Significance and uncertainty over per-query scores: bootstrap CIs, paired randomization tests, Holm.

Queries are the sampling unit throughout: a confidence interval says how much an arm's mean would move on
another draw of queries like these, and the paired test asks whether two arms' per-query differences are
centred away from zero.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence

import numpy as np


def _as_array(values: Iterable[float]) -> np.ndarray:
    return np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float)


def bootstrap_ci(
    values: Sequence[float] | np.ndarray, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Bootstrap confidence interval for the mean of ``values`` (BCa, percentile as fallback).

    A constant sample (including a single value) returns ``(v, v)``: every resample has the same mean, and
    BCa would divide by zero. An empty sample returns ``(nan, nan)``.
    """
    data = _as_array(values)
    if data.size == 0:
        return (math.nan, math.nan)
    if data.size < 2 or np.all(data == data[0]):
        return (float(data[0]), float(data[0]))
    from scipy import stats  # ~1 s to import: here, not at every command's start-up

    rng = np.random.default_rng(seed)
    with warnings.catch_warnings():
        # BCa warns (DegenerateDataWarning) and returns NaN on very lopsided samples, e.g. one hit in 200
        # queries; the percentile interval below is the sane answer there.
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        for method in ("BCa", "percentile"):
            result = stats.bootstrap(
                (data,),
                np.mean,
                n_resamples=n_resamples,
                confidence_level=confidence,
                method=method,
                vectorized=True,
                rng=rng,
            )
            low, high = result.confidence_interval
            if np.isfinite(low) and np.isfinite(high):
                return (float(low), float(high))
    return (math.nan, math.nan)


def _mean_difference(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    mean: np.ndarray = np.mean(x - y, axis=axis)
    return mean


def paired_permutation_p(a: Sequence[float], b: Sequence[float], n_resamples: int = 10000, seed: int = 0) -> float:
    """Two-sided paired randomization test of mean(a - b) = 0; ``a[i]`` and ``b[i]`` belong to the same query.

    Under the null the arm labels are exchangeable within each query, so scipy swaps them per query
    (``permutation_type="samples"``); with few queries it enumerates all ``2**n`` swaps exactly. Identical
    inputs (or no queries) return 1.0.
    """
    x, y = _as_array(a), _as_array(b)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError("paired_permutation_p takes 1-D samples; see paired_permutation_pvalues")
    return float(paired_permutation_pvalues(x[np.newaxis], y[np.newaxis], n_resamples, seed)[0])


def paired_permutation_pvalues(a: np.ndarray, b: np.ndarray, n_resamples: int = 10000, seed: int = 0) -> np.ndarray:
    """:func:`paired_permutation_p` for several measures at once: rows are measures (e.g. metrics), columns
    queries. Returns one p-value per row.

    One scipy call shares the swaps across rows, which costs about a quarter of testing row by row; each
    row's p-value is the same as its own 1-D test with the same seed.
    """
    x, y = np.atleast_2d(np.asarray(a, dtype=float)), np.atleast_2d(np.asarray(b, dtype=float))
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in shape: {x.shape} and {y.shape}")
    pvalues = np.ones(x.shape[0])
    differ = ~np.all(x == y, axis=1)
    # One query cannot be tested (scipy needs two observations): a mined set of one question says p = 1.
    if x.shape[1] < 2 or not differ.any():
        return pvalues
    x, y = x[differ], y[differ]
    from scipy import stats

    result = stats.permutation_test(
        (x, y),
        _mean_difference,
        permutation_type="samples",
        vectorized=True,
        n_resamples=n_resamples,
        # scipy materialises batch x rows x queries floats per step; ~64 MB keeps it fast and bounded.
        batch=max(1, min(n_resamples, 8_000_000 // x.size)),
        alternative="two-sided",
        axis=-1,
        rng=np.random.default_rng(seed),
    )
    pvalues[differ] = np.minimum(1.0, np.atleast_1d(result.pvalue))
    return pvalues


def holm(pvalues: Mapping[str, float]) -> dict[str, float]:
    """Holm–Bonferroni adjusted p-values, keyed like the input.

    The i-th smallest of m p-values becomes ``max over j <= i of min(1, (m - j + 1) * p_(j))``: the running
    maximum keeps the adjusted values in the same order as the raw ones. scipy has no Holm
    (``scipy.stats.false_discovery_control`` is Benjamini–Hochberg/Yekutieli, which control a different error).
    """
    keys = list(pvalues)
    m = len(keys)
    adjusted: dict[str, float] = {}
    running = 0.0
    for rank, key in enumerate(sorted(keys, key=lambda name: pvalues[name])):
        running = max(running, min(1.0, (m - rank) * float(pvalues[key])))
        adjusted[key] = running
    return {key: adjusted[key] for key in keys}


def percentile_ms(latencies: Iterable[float] | Mapping[str, float], q: float) -> float:
    """The ``q``-th percentile (0-100, linear interpolation) of latencies in ms; NaN when there are none."""
    values = latencies.values() if isinstance(latencies, Mapping) else latencies
    data = _as_array(values)
    if data.size == 0:
        return math.nan
    return float(np.percentile(data, q))
