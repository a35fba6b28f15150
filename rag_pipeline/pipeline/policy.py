"""How a live source's scheduled sync plans its range runs, from the settings (the sensor, ``rag-pipeline sync``,
``status`` and the ingest metrics read the same policy)."""

from __future__ import annotations

from datetime import timedelta

from rag_pipeline.scheduling.plan import SyncPolicy
from rag_pipeline.settings import Settings


def sync_policy(settings: Settings, source: str) -> SyncPolicy:
    """How a live source's scheduled sync plans its range runs."""
    sync = settings.automation.sync(source)
    return SyncPolicy(
        first_day=settings.partition_start,
        initial_history_days=sync.initial_history_days,
        settle=timedelta(hours=settings.automation.settle_hours),
        max_range_days=settings.automation.max_range_days,
        requests_per_minute=sync.requests_per_minute,
    )
