"""Progress of an evaluation: each phase of an eval set (an arm's queries, the reranker's training data) reported
as done/total, rate and ETA at least every ``every_seconds``, through :class:`ThroughputReporter` — so the
Dagster step log and a command running the step in-process (``rag_pipeline.progress``) both see it."""

from __future__ import annotations

from collections.abc import Callable

from rag_pipeline.evaluation.runner import ProgressCallback
from rag_pipeline.vectors.progress import ProgressUpdate, ThroughputReporter


def eval_set_progress(
    eval_set: str, report: Callable[[ProgressUpdate], None] | None = None, every_seconds: float = 10.0
) -> ProgressCallback:
    """A ``progress(phase, done, total)`` for the runners that reports each phase as ``<eval set> <phase>``."""
    reporters: dict[str, ThroughputReporter] = {}

    def progress(phase: str, done: int, total: int) -> None:
        if phase not in reporters:
            reporters[phase] = ThroughputReporter(f"{eval_set} {phase}", report, every_seconds=every_seconds)
        reporters[phase](done, total)

    return progress
