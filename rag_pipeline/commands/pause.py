"""``rag-pipeline pause [--reason TEXT]`` and ``rag-pipeline resume``: the one switch for all scheduled ingestion
(rag_pipeline/scheduling/pause.py)."""

from __future__ import annotations

import argparse
import json

from rag_pipeline.commands.arguments import add_data_dir
from rag_pipeline.scheduling.pause import current_pause, pause, resume
from rag_pipeline.settings import Settings


def add_parser(sub: argparse._SubParsersAction) -> None:
    paused = sub.add_parser(
        "pause",
        help="pause all scheduled ingestion (sync sensors, reconciliation schedules) until `resume`",
        description="Switches off every source's scheduled sync and reconciliation at the daemon's next tick, "
        "without a restart (a file in the data folder). Runs started by hand still run; the principal directory "
        "keeps refreshing. Watermarks stay where they are, so `resume` catches up from them. With no change to make, "
        "prints the pause in force. Exit 0.",
    )
    paused.add_argument("--reason", default="", help="why, shown in the sensors' skip reason and in `status`")
    add_data_dir(paused)
    paused.add_argument("--json", action="store_true", help="print the pause as JSON")
    paused.set_defaults(func=run_pause)
    resumed = sub.add_parser(
        "resume",
        help="resume scheduled ingestion after `pause`",
        description="Removes the pause switch: the next tick of each sync sensor plans the catch-up from its "
        "watermarks. RAG_INGESTION_PAUSED=1 (a setting) is lifted only by unsetting it. Exit 0.",
    )
    add_data_dir(resumed)
    resumed.set_defaults(func=run_resume)


def run_pause(args: argparse.Namespace, settings: Settings) -> int:
    record = pause(settings.data_dir, args.reason)
    if args.json:
        print(json.dumps({"paused_at": record.paused_at, "by": record.by, "reason": record.reason}))
    else:
        print(record.describe())
    return 0


def run_resume(args: argparse.Namespace, settings: Settings) -> int:
    lifted = resume(settings.data_dir)
    print("scheduled ingestion resumed" if lifted else "scheduled ingestion was not paused")
    if settings.ingestion_paused:
        print("note: RAG_INGESTION_PAUSED is still set in the configuration; it keeps ingestion paused")
    still = current_pause(settings.data_dir, settings.ingestion_paused)
    return 0 if still is None or settings.ingestion_paused else 1
