"""One range run of a source's chain, launched the way Dagster's run launcher launches a run: a process of its own
executing the code location's reconstructable asset job (``rag_pipeline.definitions``) on the instance of
DAGSTER_HOME, with the executor the code location chooses (RAG_EXECUTOR).

``python -m rag_pipeline_tests.kit.range_run --source slack --container ubuntu --first 2004-11-16 --last 2004-11-16``
prints one JSON line: the run id, whether it succeeded, and its wall seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from datetime import date

import dagster as dg
from dagster._core.definitions.reconstruct import ReconstructableRepository

from rag_pipeline.defs.parts import source_specs
from rag_pipeline.pipeline.keys import week_key
from rag_pipeline.pipeline.partition_start import record_planned_start
from rag_pipeline.runs.instance import QUIET_RUN_CONFIG, ensure_dagster_home, open_instance, range_tags
from rag_pipeline.settings import Settings

SOURCE_TAG = "rag/test-range"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", required=True)
    parser.add_argument("--container", required=True)
    parser.add_argument("--first", required=True, help="first day (YYYY-MM-DD)")
    parser.add_argument("--last", required=True, help="last day (YYYY-MM-DD)")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    settings = Settings.from_env()
    spec = source_specs(settings)[args.source]
    # Runs launched together on a new SQLite instance must not create its databases together.
    ensure_dagster_home(settings)
    start, end = week_key(args.first), week_key(args.last)
    # As the sync sensor does before requesting a run: the run's steps load the code location afresh (a Celery
    # worker), and the data folder's partition start must not be later than the run's own first week.
    record_planned_start(settings.data_dir, args.source, date.fromisoformat(args.first))
    # The container's own days of the weeks, as a sync plan names them (no watermark: a past range).
    plan = {args.container: {"first_day": args.first, "last_day": args.last}}
    job = ReconstructableRepository.for_module("rag_pipeline.definitions", "defs").get_reconstructable_job(
        "__ASSET_JOB"
    )
    began = time.perf_counter()
    with open_instance() as instance:
        instance.add_dynamic_partitions(spec.containers_name, [args.container])
        with dg.execute_job(
            job,
            instance,
            run_config={**QUIET_RUN_CONFIG, "ops": {spec.keys.raw: {"config": {"plan": plan}}}},
            tags={**range_tags(start, end), SOURCE_TAG: f"{args.source}:{args.first}"},
            asset_selection=[dg.AssetKey(key) for key in spec.keys.all],
        ) as result:
            print(json.dumps({"run_id": result.run_id, "success": result.success,
                              "seconds": round(time.perf_counter() - began, 2)}))  # fmt: skip
            return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main())
