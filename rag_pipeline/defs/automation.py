"""When things run by themselves: each live source's sync sensor (``defs/sync/sensor.py``) requests range
runs of its whole chain, anything materialized by hand is followed eagerly downstream (the automation condition
sensor here), the evaluation runs daily and whenever an eval set changes (``defs/evaluation/sensors.py``), and
freshness and retry policies say what "late" and "transient" mean.

The crons come from settings, so the conditions are built by functions.
"""

from datetime import timedelta

import dagster as dg


def daily_eval_condition(cron: str) -> dg.AutomationCondition:
    """Every arm once a day, whatever changed (eval sets and models change outside the asset graph too)."""
    return dg.AutomationCondition.cron_tick_passed(cron, cron_timezone="UTC") & ~dg.AutomationCondition.in_progress()


# A raw partition not refreshed for a day (plus the hourly slack) is late; the index a little after it.
RAW_FRESHNESS = dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=26), warn_window=timedelta(hours=2))
INDEX_FRESHNESS = dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=27), warn_window=timedelta(hours=3))

# API-bound steps: the HTTP layers already retry 429/5xx per request; this covers a whole step dying
# (a connection reset mid-run, a restarted proxy). Access errors raise Failure(allow_retries=False).
API_RETRY = dg.RetryPolicy(max_retries=3, delay=30, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS)


def build_automation_condition_sensor(running: bool) -> dg.AutomationConditionSensorDefinition:
    """The sensor that evaluates the automation conditions (eager chains, the daily evaluation): RUNNING from
    the first start where a live source syncs by itself, else STOPPED (an offline demo runs nothing alone)."""
    return dg.AutomationConditionSensorDefinition(
        "default_automation_condition_sensor",
        target=dg.AssetSelection.all(),
        default_status=dg.DefaultSensorStatus.RUNNING if running else dg.DefaultSensorStatus.STOPPED,
        description="Evaluates every asset's automation condition: downstream assets follow a materialized raw "
        "partition eagerly and retrieval_eval runs daily (RAG_EVAL_CRON).",
    )
