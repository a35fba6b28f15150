"""Partitions: UTC weeks (Monday to Sunday, the current one included so a sync can refresh it), one set
per source; each week's partition holds every channel's or project's documents of that week.

The number of partitions grows with time only (52 a year: 261 at five years, whatever the number of
channels), well inside Dagster's guidance of 100,000 per asset; why weeks and not (day x container) is in
docs/decisions/partitions-and-backfills.md. Channels and projects are still registered as dynamic partitions
named ``<source>_<containers_label>`` (``slack_channels``, ``jira_projects``; ``SourceSpec.containers``): the
registry discovery adds to and the sync sensor reads, not a dimension of any asset.
"""

from datetime import date

import dagster as dg

from rag_pipeline.scheduling.coverage import week_start


def weekly_partitions(start: str) -> dg.WeeklyPartitionsDefinition:
    """Weeks from the one holding ``start`` (the first day a document may have) through the current one."""
    monday = week_start(date.fromisoformat(start))
    # day_offset=1: weeks start on Monday (ISO), so a partition key is its Monday.
    return dg.WeeklyPartitionsDefinition(start_date=monday.isoformat(), day_offset=1, end_offset=1, timezone="UTC")
