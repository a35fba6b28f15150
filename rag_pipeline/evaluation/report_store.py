"""Where evaluation reports live and which one is the baseline.

Layout under the reports folder::

    history/<stamp>/<eval set>/...      every report, never overwritten
    history/<stamp>/latest_summary.json the figures of that report, all eval sets
    latest/<eval set>/...               a copy of the newest report per eval set
    latest_summary.json                 the regression baseline: the last report without a regression

The baseline moves only when nothing regressed, so a regression keeps failing until it is fixed
instead of becoming the new normal after one report.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rag_pipeline.pipeline.retained import Expired, RetentionScope, children, newest_mtime

SUMMARY_FILE = "latest_summary.json"
STAMP_FORMAT = "%Y%m%dT%H%M%SZ"


class ReportStore:
    """History, latest copy and regression baseline of the evaluation reports in one folder."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @property
    def baseline_path(self) -> Path:
        return self.root / SUMMARY_FILE

    @property
    def latest_dir(self) -> Path:
        return self.root / "latest"

    def baseline(self) -> dict[str, Any]:
        """Figures per eval set of the last report without a regression ({} before the first)."""
        return dict(json.loads(self.baseline_path.read_text())) if self.baseline_path.exists() else {}

    @staticmethod
    def new_stamp() -> str:
        return datetime.now(UTC).strftime(STAMP_FORMAT)

    def report_dir(self, stamp: str, eval_set: str | None = None) -> Path:
        """The history folder of one report (or of one eval set within it)."""
        folder = self.root / "history" / stamp
        return folder / eval_set if eval_set else folder

    def publish_latest(self, stamp: str, eval_set: str) -> None:
        """Make a report's folder for one eval set the ``latest/`` copy."""
        target = self.latest_dir / eval_set
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(self.report_dir(stamp, eval_set), target)

    def record(self, stamp: str, summaries: dict[str, Any], regressed: bool) -> None:
        """Store a report's figures in its history folder; it becomes the baseline unless it regressed."""
        text = json.dumps(summaries, indent=2) + "\n"
        folder = self.report_dir(stamp)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / SUMMARY_FILE).write_text(text)
        if not regressed:
            self.baseline_path.write_text(text)

    def stamps_with(self, eval_set: str) -> list[str]:
        """The reports (oldest first) that scored ``eval_set``: those whose folder holds its per-query scores."""
        return sorted(p.parent.parent.name for p in (self.root / "history").glob(f"*/{eval_set}/per_query.parquet"))

    def newest(self) -> dict[str, Any] | None:
        """Figures of the newest report (regressed or not), or None before the first."""
        reports = sorted((self.root / "history").glob(f"*/{SUMMARY_FILE}"))
        if reports:
            return dict(json.loads(reports[-1].read_text()))
        return self.baseline() or None


class ReportChecks:
    """The report's verdicts: arms under their eval set's floor, arms that regressed, ACL leaks."""

    def __init__(self) -> None:
        self.floor_failures: list[str] = []
        self.regressions: list[str] = []
        self.leaks = 0
        self.compared = 0

    def check_arm(
        self, eval_set: str, arm: str, ndcg: float, leaks: int, floor: float, baseline: dict[str, Any], tolerance: float
    ) -> None:
        """One arm's nDCG@10 against the floor and against the baseline report's value for it."""
        self.leaks += leaks
        if not ndcg >= floor:  # NaN (nothing judged) fails too
            self.floor_failures.append(f"{eval_set}/{arm}: nDCG@10 {ndcg:.3f} < floor {floor:.3f}")
        before = baseline.get(eval_set, {}).get("arms", {}).get(arm, {}).get("means", {}).get("ndcg@10")
        if before is not None:
            self.compared += 1
            if ndcg < before - tolerance:
                self.regressions.append(f"{eval_set}/{arm}: nDCG@10 {before:.3f} → {ndcg:.3f}")


class ReportHistory:
    """Retention of ``reports/history`` (:class:`~rag_pipeline.pipeline.retained.RetainedArtifact`): report folders
    older than ``RAG_RETENTION_REPORT_DAYS``, except each eval set's newest report and the newest report as a whole
    (``demo``, the report's regression check and a reader of reports/ look at them); a kept report folder still
    loses the eval sets that have a newer report elsewhere."""

    kind = "eval_reports"
    label = "evaluation reports (reports/history)"

    def expired(self, scope: RetentionScope) -> Iterator[Expired]:
        cutoff = scope.report_cutoff
        if cutoff is None:
            return
        stamps = [p for p in children(scope.settings.paths.reports / "history") if p.is_dir() and not p.is_symlink()]
        newest_of_set: dict[str, Path] = {}
        for stamp in stamps:  # sorted: stamps sort by time
            for eval_set in children(stamp):
                if eval_set.is_dir():
                    newest_of_set[eval_set.name] = stamp
        with_summary = [s for s in stamps if (s / SUMMARY_FILE).exists()]
        newest = with_summary[-1] if with_summary else (stamps[-1] if stamps else None)
        kept = set(newest_of_set.values()) | ({newest} if newest else set())
        for stamp in stamps:
            made = _stamp_time(stamp)
            if made >= cutoff.timestamp():
                continue
            if stamp not in kept:
                yield Expired(stamp, f"report of {stamp.name}, older than {scope.report_age}", made)
                continue
            for eval_set in children(stamp):
                if eval_set.is_dir() and newest_of_set.get(eval_set.name) != stamp:
                    old = f"{eval_set.name} report of {stamp.name}, older than {scope.report_age}"
                    yield Expired(eval_set, f"{old} (a newer one exists)", made)


def _stamp_time(stamp: Path) -> float:
    """When a report was made: its folder's stamp (:meth:`ReportStore.new_stamp`), else its newest file."""
    try:
        return datetime.strptime(stamp.name, STAMP_FORMAT).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return newest_mtime(stamp)
