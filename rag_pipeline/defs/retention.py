"""The retention schedule: once a day (``RAG_RETENTION_CRON``, UTC) the ``retention_job`` deletes what
``rag-pipeline prune`` would, through the same :func:`~rag_pipeline.runs.retention.plan_retention` and
:func:`~rag_pipeline.runs.retention.apply_retention`, on the daemon's own instance.

A job with one op rather than an asset: retention produces nothing downstream assets read, and as an asset it would
show in the lineage of every other asset. It runs in the run's own process (the in-process executor) whatever
``RAG_EXECUTOR`` says: it needs the data folder and the instance, not a worker, and takes seconds. Its own run is
not finished while it prunes, so it never deletes itself.
"""

# No `from __future__ import annotations`: Dagster reads the op's context hint itself and refuses a string.
import dagster as dg

from rag_pipeline.runs.retention import KIND_LABELS, apply_retention, describe, human_bytes, plan_retention
from rag_pipeline.settings import Settings

RETENTION_JOB = "retention_job"
RETENTION_SCHEDULE = "retention_schedule"


def build_retention_job(settings: Settings) -> dg.JobDefinition:
    """``retention_job``: plan and apply retention under ``settings.retention`` on the run's instance."""

    @dg.op(
        name="prune_data_folder",
        description="Deletes finished runs older than RAG_RETENTION_RUN_DAYS (keeping those that hold a partition's "
        "newest materialization, a sync watermark or the newest index of an input file), evaluation reports, old "
        "reranker versions and fits older than RAG_RETENTION_REPORT_DAYS, and superseded parquet and temporary "
        "files (rag_pipeline/runs/retention.py).",
    )
    def prune_data_folder(context: dg.OpExecutionContext) -> dg.Output[None]:
        plan = plan_retention(settings, context.instance)
        for kept in plan.kept_runs[:20]:
            context.log.info(f"kept run {kept.run_id} ({kept.job_name}): {kept.reason}")
        for refused in plan.refused:
            context.log.warning(f"refused (left alone): {refused}")
        result = apply_retention(plan, context.instance)
        for skipped in result.skipped:
            context.log.warning(f"skipped: {skipped}")
        summary = describe(result.kinds)
        context.log.info(
            f"deleted {summary}: reclaimed {human_bytes(result.bytes_reclaimed)}, {result.runs_deleted} run(s); "
            f"kept {len(plan.kept_runs)} old run(s) still read"
        )
        return dg.Output(
            None,
            metadata={
                "runs_deleted": result.runs_deleted,
                "bytes_reclaimed": result.bytes_reclaimed,
                "reclaimed": human_bytes(result.bytes_reclaimed),
                "old_runs_kept": len(plan.kept_runs),
                "run_days": settings.retention.run_days,
                "report_days": settings.retention.report_days,
                "deleted": dg.MetadataValue.json(
                    {
                        kind: {"count": total.count, "bytes": total.bytes, "what": KIND_LABELS[kind]}
                        for kind, total in result.kinds.items()
                        if total.count
                    }
                ),
                "skipped": len(result.skipped),
            },
        )

    @dg.job(
        name=RETENTION_JOB,
        executor_def=dg.in_process_executor,
        description="Retention of the data folder and the instance (`rag-pipeline prune` does the same by hand): old "
        "finished runs, old evaluation reports and superseded files; what the current version reads is kept.",
        tags={"rag/retention": "daily"},
    )
    def retention_job() -> None:
        prune_data_folder()

    return retention_job


def build_retention_definitions(settings: Settings) -> tuple[list[dg.JobDefinition], list[dg.ScheduleDefinition]]:
    """The retention job, and its daily schedule unless ``RAG_RETENTION_ENABLED`` is off (then the job is still
    there to run by hand). The schedule runs from the first start where a live source syncs on its own; an offline
    demo's code location runs nothing by itself, so there it is defined stopped (start it in the UI)."""
    job = build_retention_job(settings)
    if not settings.retention.enabled:
        return [job], []
    schedule = dg.ScheduleDefinition(
        name=RETENTION_SCHEDULE,
        job=job,
        cron_schedule=settings.retention.cron,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING
        if settings.synced_sources
        else dg.DefaultScheduleStatus.STOPPED,
        description=f"Daily retention at '{settings.retention.cron}' (UTC, RAG_RETENTION_CRON): runs older than "
        f"{settings.retention.run_days} days, reports older than {settings.retention.report_days} days "
        "(0: kept forever); RAG_RETENTION_ENABLED=0 defines no schedule.",
    )
    return [job], [schedule]
