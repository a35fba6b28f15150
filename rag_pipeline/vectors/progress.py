"""Throttled progress of long work (embedding): done/total, rate and ETA, at most every tenth or every 30 s.

Embedding is most of a first index (tens of chunks per second on a laptop CPU), and a step that prints
nothing for ten minutes looks hung. :class:`ThroughputReporter` turns the encoder's ``on_progress(done,
total)`` calls into a few lines a person (Dagster's run log, a CLI bar) can follow, and publishes each one on
the ``rag_pipeline.progress`` logger with the figures attached, so a command running the step in-process can
draw a bar without knowing the step.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

PROGRESS_LOGGER = logging.getLogger("rag_pipeline.progress")
PROGRESS_FIELD = "rag_progress"  # the LogRecord attribute carrying a ProgressUpdate


@dataclass(frozen=True)
class ProgressUpdate:
    """One report: what is being done, how far, how fast."""

    what: str
    done: int
    total: int
    per_second: float
    eta_seconds: float | None

    def speed(self) -> str:
        """``21.3/s, ETA 8m 35s`` (no ETA once done)."""
        eta = f", ETA {_duration(self.eta_seconds)}" if self.eta_seconds is not None and self.done < self.total else ""
        return f"{self.per_second:.1f}/s{eta}"

    def line(self) -> str:
        share = f" ({self.done / self.total:.0%})" if self.total else ""
        return f"{self.what}: {self.done:,}/{self.total:,}{share}, {self.speed()}"


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


class ThroughputReporter:
    """``reporter(done, total)`` reports when a tenth more is done, ``every_seconds`` passed, or at the end.

    The rate counts from ``reporter(0, total)``, the producer's "starting now", where there is one, else from
    construction: a reporter made before other work (a step's second phase) must not count that work's time.
    """

    def __init__(
        self,
        what: str,
        report: Callable[[ProgressUpdate], None] | None = None,
        every_fraction: float = 0.1,
        every_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self.report = report
        self.every_fraction = every_fraction
        self.every_seconds = every_seconds
        self.clock = clock
        self.started = clock()
        self._last_done = 0
        self._last_time = self.started
        self.updates: list[ProgressUpdate] = []

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if done == 0 and self._last_done == 0:
            self.started = self._last_time = now
            return
        due = (
            done >= total
            or (total and (done - self._last_done) / total >= self.every_fraction)
            or now - self._last_time >= self.every_seconds
        )
        if not due or done == self._last_done:
            return
        elapsed = max(now - self.started, 1e-9)
        rate = done / elapsed
        update = ProgressUpdate(self.what, done, total, rate, (total - done) / rate if rate > 0 else None)
        self._last_done, self._last_time = done, now
        self.updates.append(update)
        if self.report is not None:
            self.report(update)
        PROGRESS_LOGGER.info(update.line(), extra={PROGRESS_FIELD: update})
