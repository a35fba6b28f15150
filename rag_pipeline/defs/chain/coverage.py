"""The coverage of a run (:mod:`rag_pipeline.scheduling.coverage`) as every step of a chain reads it: from the
raw asset's config in the run's config, so the steps downstream process only the cells the run read."""

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from rag_pipeline.pipeline.keys import raw_config
from rag_pipeline.scheduling.coverage import Coverage, days_of_week


def run_days(partition_keys: Sequence[str]) -> tuple[str, str]:
    """The first and last day of a run's weeks."""
    weeks = sorted(str(k) for k in partition_keys)
    return days_of_week(weeks[0])[0], days_of_week(weeks[-1])[-1]


def coverage_of(config: Mapping[str, Any], partition_keys: Sequence[str]) -> Coverage:
    """The cells a run owns, from its raw asset's config (a plan, named containers, or everything)."""
    plan = config.get("plan") or {}
    if plan:
        return Coverage({c: (str(p["first_day"]), str(p["last_day"])) for c, p in plan.items()})
    containers = config.get("containers") or []
    if containers:
        first, last = run_days(partition_keys)
        return Coverage({str(c): (first, last) for c in containers})
    return Coverage.everything()


def run_coverage(context: dg.AssetExecutionContext, raw_asset: str) -> Coverage:
    """The coverage of the current run, as every step of the chain reads it (the raw asset's run config)."""
    return coverage_of(raw_config(context.run.run_config, raw_asset), context.partition_keys)
