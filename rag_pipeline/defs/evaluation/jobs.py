"""Jobs that run the evaluation: every arm (one run per partition), then the comparison report."""

import dagster as dg

from rag_pipeline.defs.evaluation.assets import EVAL_ARMS, retrieval_eval, retrieval_eval_report

retrieval_eval_job = dg.define_asset_job(
    "retrieval_eval_job",
    selection=[retrieval_eval],
    partitions_def=EVAL_ARMS,
    description="Evaluate one retrieval arm (partition) over every eval set.",
)
retrieval_eval_report_job = dg.define_asset_job(
    "retrieval_eval_report_job",
    selection=[retrieval_eval_report],
    description="Compare the evaluated arms: tables, CIs, significance, plots and checks.",
)
EVAL_JOBS = [retrieval_eval_job, retrieval_eval_report_job]
