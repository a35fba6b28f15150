"""Small helpers that turn numbers into Dagster materialization metadata."""

from __future__ import annotations

import pandas as pd


def length_stats(values: pd.Series, unit: str) -> dict[str, float]:
    """Mean, median, p95 and max of a length column, keyed ``<unit>_mean`` etc."""
    if len(values) == 0:
        return {f"{unit}_mean": 0.0, f"{unit}_p50": 0.0, f"{unit}_p95": 0.0, f"{unit}_max": 0.0}
    series = pd.to_numeric(values)
    return {
        f"{unit}_mean": round(float(series.mean()), 1),
        f"{unit}_p50": float(series.quantile(0.5)),
        f"{unit}_p95": float(series.quantile(0.95)),
        f"{unit}_max": float(series.max()),
    }
