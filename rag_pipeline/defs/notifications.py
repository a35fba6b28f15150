"""Slack notifications: a failed run, or a failed/regressed evaluation check, becomes a message in a
configured channel (asset, partition, the error or metric deltas, a link to the run).

Off unless RAG_NOTIFY_SLACK_CHANNEL is set (see ``definitions.notifications_enabled``).
"""

import json

import dagster as dg
from dagster_shared.error import SerializableErrorInfo
from pydantic import Field
from slack_sdk import WebClient

from rag_pipeline.connectors.slack.api import build_web_client
from rag_pipeline.notify.slack_notice import Notice, post_notice, run_link

EVAL_REPORT = dg.AssetKey("retrieval_eval_report")
EVAL_CHECKS = ("quality_floor", "no_regression", "acl_no_leaks")
ACCESS_AUDIT = dg.AssetKey("access_audit")
# The checks whose failures are posted: (asset, check, cursor key). The evaluation's keep their bare names as
# cursor keys (cursors written before the audit existed stay valid).
WATCHED_CHECKS = (
    *((EVAL_REPORT, name, name) for name in EVAL_CHECKS),
    (ACCESS_AUDIT, "no_mass_access_change", "access_audit/no_mass_access_change"),
)
# Check metadata worth a line in the message, in this order.
_CHECK_DETAIL_KEYS = ("regressions", "failures", "leaks", "changes")


class SlackNotificationResource(dg.ConfigurableResource):
    """Where notifications go: a channel, posted with a bot token (chat:write)."""

    token: str = Field(description="Bot token with chat:write; set it with EnvVar('SLACK_BOT_TOKEN')")
    channel: str = Field(description="Channel id or name (RAG_NOTIFY_SLACK_CHANNEL)")
    base_url: str | None = Field(default=None, description="Web API base URL override (SLACK_API_BASE_URL)")
    webserver_url: str | None = Field(
        default="http://127.0.0.1:3000", description="Dagster UI base URL for run links (DAGSTER_WEBSERVER_URL)"
    )

    def client(self) -> WebClient:
        return build_web_client(self.token, self.base_url, rate_limit_retries=5)

    def post(self, notice: Notice) -> str:
        return post_notice(self.client(), self.channel, notice)


def _root_error(error: SerializableErrorInfo | None) -> str:
    """The error that caused a step to fail, not Dagster's "Error occurred while executing op" wrapper."""
    if error is None:
        return "failed"
    while error.cause is not None:
        error = error.cause
    return error.message.strip()  # Dagster writes it as "<exception class>: <message>"


def _partition(run: dg.DagsterRun) -> str:
    tags = run.tags
    if "dagster/partition" in tags:
        return tags["dagster/partition"]
    start, end = tags.get("dagster/asset_partition_range_start"), tags.get("dagster/asset_partition_range_end")
    return f"{start} … {end}" if start and end else "none"


@dg.run_failure_sensor(
    name="run_failure_slack_notification_sensor",
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Posts every failed run to the notification channel: job, assets, partition, the failing steps' "
    "errors and a link to the run.",
)
def run_failure_slack_notification_sensor(
    context: dg.RunFailureSensorContext, slack_notifications: SlackNotificationResource
) -> None:
    run = context.dagster_run
    errors, failed_steps = [], []
    for event in context.get_step_failure_events():
        data = event.step_failure_data
        message = (data.user_failure_data.description if data.user_failure_data else None) or _root_error(data.error)
        errors.append(f"{event.step_key}: {message}")
        failed_steps.append(event.step_key)
    # A run launched with an explicit selection names its assets; one built from a whole job (materialize(),
    # the in-process runners) has none, so the failed steps (one per asset) say which assets broke.
    assets = sorted(key.to_user_string() for key in run.asset_selection or []) or sorted(filter(None, failed_steps))
    notice = Notice(
        title=f"Run failed: {run.job_name}",
        fields={
            "Assets": ", ".join(assets) or "none",
            "Partition": _partition(run),
            "Run": run.run_id[:8],
        },
        details=errors or [context.failure_event.message or "the run failed"],
        link=run_link(slack_notifications.webserver_url, run.run_id),
    )
    slack_notifications.post(notice)


@dg.sensor(
    name="eval_check_slack_notification_sensor",
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Posts each failed evaluation check (quality floor, regression, ACL leak) of retrieval_eval_report, "
    "and each mass access change the access_audit finds, once, with the details and a link to the run. The cursor "
    "remembers the last evaluation seen per check.",
)
def eval_check_slack_notification_sensor(
    context: dg.SensorEvaluationContext, slack_notifications: SlackNotificationResource
) -> dg.SkipReason | None:
    seen: dict[str, int] = json.loads(context.cursor) if context.cursor else {}
    posted = 0
    for asset, name, cursor_key in WATCHED_CHECKS:
        key = dg.AssetCheckKey(asset, name)
        records = context.instance.event_log_storage.get_asset_check_execution_history(key, limit=50)
        if cursor_key not in seen:
            # First look: history before the sensor existed is not news.
            seen[cursor_key] = max((r.id for r in records), default=0)
            continue
        for record in sorted(r for r in records if r.id > seen[cursor_key]):
            seen[cursor_key] = record.id
            if record.status.value != "FAILED" or record.event is None or record.event.dagster_event is None:
                continue
            evaluation = record.event.dagster_event.asset_check_evaluation_data
            details: list[str] = []
            for detail_key in _CHECK_DETAIL_KEYS:
                value = evaluation.metadata.get(detail_key)
                if value is not None:
                    items = value.value if isinstance(value.value, list) else [f"{detail_key}: {value.value}"]
                    details.extend(str(item) for item in items)
            severity = evaluation.severity.value if evaluation.severity else "ERROR"
            slack_notifications.post(
                Notice(
                    title=f"{'Evaluation' if asset == EVAL_REPORT else 'Access audit'} check failed: {name}",
                    fields={
                        "Asset": asset.to_user_string(),
                        "Check": name,
                        "Severity": severity,
                        "Run": record.run_id[:8],
                    },
                    details=details or [evaluation.description or "the check did not pass"],
                    link=run_link(slack_notifications.webserver_url, record.run_id),
                )
            )
            posted += 1
    context.update_cursor(json.dumps(seen, sort_keys=True))
    return None if posted else dg.SkipReason("no new failed evaluation checks")
