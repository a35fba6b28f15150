"""A simulated week of the unattended sync: lag from creation to indexed and API calls per tick.

Runs ``rag_pipeline_tests/kit/sync_week.py`` (the simulation the slow test ``test_sync_week.py`` uses): the Slack and
Jira emulators change tick by tick on a fake clock (messages, replies, edits, deletions and Jira updates at random
instants, a third at 23:00-23:59:59; a channel and a project created mid-week with 60 days of history), and the
project's real discovery sensors, sync sensors, gap checks and reconciliation jobs run at each cron tick, with every
run they request executed in-process. Four variants: Slack in the 15-per-page / 1-request-per-minute regime and in
Tier 3 (200 per page, 50 per minute), each with and without a 36-hour daemon outage. Each variant ends with a fresh
full sync of the final emulator state and a document-by-document comparison (missing, extra, stale, duplicated).

    .venv/bin/python -m bench.sync_week                       # the four variants, hourly crons (about an hour)
    .venv/bin/python -m bench.sync_week --cron "0 */3 * * *"  # coarser ticks, faster
    .venv/bin/python -m bench.sync_week --variants free-outage tier3-outage

Figures per variant and source: lag in ticks and hours (p50/p95/max) outside the outage, ticks after the outage
until everything that waited is indexed, API calls per tick and per container-day, the planned requests per tick
window against the budget, and the comparison.
"""

from __future__ import annotations

import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import common
from rag_pipeline_tests.kit import sync_week as week

VARIANTS: dict[str, dict[str, Any]] = {
    "free-outage": {"slack_page_size": 15},
    "free": {"slack_page_size": 15, "outage": None},
    "tier3-outage": {"slack_page_size": 200},
    "tier3": {"slack_page_size": 200, "outage": None},
}


def run_variant(name: str, cron: str, compare: bool) -> dict[str, Any]:
    scenario = week.Scenario(slack_cron=cron, jira_cron=cron, **VARIANTS[name])
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        result, comparisons, facts = week.run_week(scenario, Path(tmp), compare=compare, log=_progress(name))
    out: dict[str, Any] = {
        "scenario": {
            "start": scenario.start.isoformat(),
            "days": scenario.days,
            "cron": cron,
            "slack_page_size": scenario.slack_page_size,
            "outage": None if scenario.outage_window is None else [t.isoformat() for t in scenario.outage_window],
            "new_containers_at": scenario.new_at.isoformat(),
            "history_days_of_new_containers": scenario.history_days,
        },
        "runs": len(result.runs),
        "runs_failed": sum(1 for r in result.runs if not r.success),
        "gap_checks_failed": sum(1 for r in result.runs if r.gap_check_passed is False),
        "seconds": round(time.perf_counter() - started, 1),
    }
    for source in scenario.sources:
        windows = facts[source]["windows"]
        budget = facts[source]["budget_per_tick"]
        figures: dict[str, Any] = {
            "lag": week.lag_figures(result, source),
            "api": week.api_figures(result, source, budget),
            "requests_per_minute": facts[source]["requests_per_minute"],
            "planned_requests_per_tick_window_max": max((w[2] for w in windows), default=0),
            "tick_windows_planned_over_budget": sum(1 for w in windows if budget is not None and w[2] > budget),
        }
        if source in comparisons:
            figures["comparison_with_fresh_sync"] = comparisons[source].as_dict()
        out[source] = figures
    return out


def _progress(name: str) -> Any:
    def log(message: str) -> None:
        print(f"[{name}] {message}", file=sys.stderr, flush=True)

    return log


def main() -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--cron", default="0 * * * *", help="both sources' sync cron (default hourly, the project's)")
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=sorted(VARIANTS),
        default=list(VARIANTS),
        help="which variants to run (default all four)",
    )
    parser.add_argument("--no-compare", action="store_true", help="skip the fresh full sync and the comparison")
    parser.add_argument("--out", type=Path, default=common.RESULTS / "sync_week.json", help="JSON results file")
    args = parser.parse_args()
    logging.getLogger("dagster").setLevel(logging.WARNING)
    results = {name: run_variant(name, args.cron, not args.no_compare) for name in args.variants}
    common.write_json(args.out, {**results, "run": common.run_record()}, default=str)
    for name, r in results.items():
        for source in ("slack", "jira"):
            lag, api = r[source]["lag"], r[source]["api"]
            outage = lag.get("outage", {})
            print(
                f"{name:13} {source:5} lag ticks max {lag['synced_outside_outage']['ticks'].get('max')}, "
                f"hours p50/p95/max {lag['synced_outside_outage']['hours'].get('p50')}/"
                f"{lag['synced_outside_outage']['hours'].get('p95')}/{lag['synced_outside_outage']['hours'].get('max')}"
                f"; after outage {outage.get('ticks_after_outage_until_all_indexed', '-')} tick(s)"
                f"; never indexed {lag['never_indexed']}; calls/tick p50 {api['per_tick'].get('p50')} "
                f"max {api['per_tick'].get('max')}; per container-day {api['per_container_day']}"
                f"; vs fresh sync {r[source].get('comparison_with_fresh_sync', '-')}"
            )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
