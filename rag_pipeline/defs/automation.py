"""When things run by themselves: each live source's sync sensor (``defs/sync.py``) requests range runs
of its whole chain, anything materialized by hand is followed eagerly downstream, the evaluation runs
daily and whenever an eval set changes, and freshness and retry policies say what "late" and
"transient" mean.

The crons come from settings, so the conditions are built by functions.
"""

import hashlib
import json
from datetime import timedelta
from pathlib import Path

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


def eval_set_hashes(folder: Path) -> dict[str, str]:
    """Content hash of every file under the eval-sets folder, by relative path."""
    if not folder.is_dir():
        return {}
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def build_eval_sets_changed_sensor(arms: list[str], asset_keys: list[str], eval_dir: Path) -> dg.SensorDefinition:
    """A sensor requesting every evaluation arm when an eval-set file is added, removed or edited."""

    @dg.sensor(
        name="eval_sets_changed_sensor",
        minimum_interval_seconds=60,
        asset_selection=asset_keys,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Hashes every file under eval_sets/ (RAG_EVAL_DIR); when one is added, removed or edited, "
        "requests every arm of retrieval_eval (the report follows eagerly). The cursor holds the hashes.",
    )
    def eval_sets_changed_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        current = eval_set_hashes(eval_dir)
        if context.cursor is None:
            # First look: today's sets are covered by the daily evaluation.
            context.update_cursor(json.dumps(current, sort_keys=True))
            return dg.SkipReason(f"recorded {len(current)} eval-set files")
        previous: dict[str, str] = json.loads(context.cursor)
        if current == previous:
            return dg.SkipReason("eval sets unchanged")
        changed = sorted(k for k in set(current) | set(previous) if current.get(k) != previous.get(k))
        fingerprint = hashlib.sha256(json.dumps(current, sort_keys=True).encode()).hexdigest()[:16]
        return dg.SensorResult(
            run_requests=[
                dg.RunRequest(
                    run_key=f"eval-sets:{fingerprint}:{arm}",
                    partition_key=arm,
                    tags={"rag/eval_sets_changed": ",".join(changed)[:200]},
                )
                for arm in arms
            ],
            cursor=json.dumps(current, sort_keys=True),
        )

    return eval_sets_changed_sensor
