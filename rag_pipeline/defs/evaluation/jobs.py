"""Jobs that run the evaluation: every arm (one run per partition), then the comparison report."""

from typing import Any

import dagster as dg


def build_eval_jobs(
    retrieval_eval: dg.AssetsDefinition, report: dg.AssetsDefinition, arms: dg.StaticPartitionsDefinition
) -> list[Any]:
    """``retrieval_eval_job`` (one arm per run: its partitions are the selected asset's) and
    ``retrieval_eval_report_job``."""
    del arms  # the job takes its partitioning from retrieval_eval (passing it is deprecated)
    return [
        dg.define_asset_job(
            "retrieval_eval_job",
            selection=[retrieval_eval],
            description="Evaluate one retrieval arm (partition) over every eval set.",
        ),
        dg.define_asset_job(
            "retrieval_eval_report_job",
            selection=[report],
            description="Compare the evaluated arms: tables, CIs, significance, plots and checks.",
        ),
    ]
