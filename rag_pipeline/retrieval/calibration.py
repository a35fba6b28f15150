"""Scores a reader can reason about: each search mode's raw score mapped to the probability that a result is
relevant, learned from the evaluation's judged results.

Raw scores mean different things per mode (a cosine, an unbounded BM25 sum, a fused rank score, a reranker's
logit), so a threshold on them means nothing to a caller. After every evaluation, each mode's (score, judged
relevant?) pairs over the top :data:`DEPTH` results of every judged query of every eval set are fitted with an
isotonic regression (monotone: a higher score is never less likely relevant), kept as at most :data:`MAX_KNOTS`
points in ``<reports>/calibration.json``. A result's ``relevance`` is then that fitted probability, and
``min_score`` filters on it: ``min_score=0.5`` keeps the results that are at least as likely relevant as not, by
the evaluation's judgments. Judgments are incomplete (a known-item set judges one document per query), so the
probability is a lower bound of how often a result is useful; docs/notes/min_score.md has the measured effect.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from sklearn.isotonic import IsotonicRegression

DEPTH = 10
MAX_KNOTS = 64
CALIBRATION_FILE = "calibration.json"


@dataclass(frozen=True)
class ModeCalibration:
    """One mode's fitted map: ``x`` scores (ascending) to ``y`` probabilities, interpolated between knots."""

    x: tuple[float, ...]
    y: tuple[float, ...]
    pairs: int
    positives: int

    def relevance(self, score: float) -> float:
        return float(np.interp(score, self.x, self.y))


@dataclass(frozen=True)
class Calibration:
    """Every calibrated mode, and what it was fitted on."""

    modes: dict[str, ModeCalibration]
    eval_sets: tuple[str, ...] = ()
    fitted_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    def relevance(self, mode: str, score: float) -> float | None:
        found = self.modes.get(mode)
        return None if found is None else found.relevance(score)

    def save(self, path: Path) -> None:
        body = {
            "fitted_at": self.fitted_at,
            "depth": DEPTH,
            "eval_sets": list(self.eval_sets),
            "modes": {
                m: {"x": list(c.x), "y": list(c.y), "pairs": c.pairs, "positives": c.positives}
                for m, c in self.modes.items()
            },
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".tmp")
        partial.write_text(json.dumps(body, indent=1) + "\n")
        os.replace(partial, path)  # a reader never sees half a file

    @classmethod
    def load(cls, path: Path) -> Calibration | None:
        """The saved calibration; None when there is none yet or it cannot be read (then nothing is calibrated)."""
        try:
            raw = json.loads(path.read_text())
            modes = {
                m: ModeCalibration(
                    tuple(map(float, c["x"])), tuple(map(float, c["y"])), int(c["pairs"]), int(c["positives"])
                )
                for m, c in raw["modes"].items()
                if len(c["x"]) == len(c["y"]) and c["x"]
            }
            return cls(modes, tuple(raw.get("eval_sets", ())), str(raw.get("fitted_at", "")))
        except Exception:  # any damage to the file: nothing calibrated, never a failed search
            return None


class CalibrationFile:
    """The calibration at ``path``, read again whenever the evaluation rewrites it (a stat per call)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._seen: tuple[int, int] | None = None
        self._current: Calibration | None = None

    @property
    def version(self) -> tuple[int, int] | None:
        """What identifies the file's content now (a cache of calibrated results keys on it)."""
        self.current()
        return self._seen

    def current(self) -> Calibration | None:
        try:
            stat = self.path.stat()
        except OSError:
            self._seen, self._current = None, None
            return None
        key = (stat.st_mtime_ns, stat.st_size)
        if key != self._seen:
            self._current, self._seen = Calibration.load(self.path), key
        return self._current


def calibration_pairs(
    rankings: Mapping[str, Sequence[tuple[str, float]]],
    relevant: Mapping[str, Mapping[str, float]],
    depth: int = DEPTH,
) -> list[tuple[float, bool]]:
    """(score, judged relevant) for the top ``depth`` results of every query with at least one judgment."""
    pairs: list[tuple[float, bool]] = []
    for qid, ranking in rankings.items():
        judged = relevant.get(qid) or {}
        if not any(grade > 0 for grade in judged.values()):
            continue
        pairs.extend((float(score), judged.get(doc, 0) > 0) for doc, score in ranking[:depth])
    return pairs


def fit_mode(pairs: Sequence[tuple[float, bool]]) -> ModeCalibration | None:
    """The isotonic fit of one mode's pairs (None without both relevant and irrelevant results)."""
    positives = sum(label for _, label in pairs)
    if not pairs or positives == 0 or positives == len(pairs):
        return None
    scores = np.array([s for s, _ in pairs], dtype=float)
    labels = np.array([float(label) for _, label in pairs])
    model = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip").fit(scores, labels)
    x, y = np.asarray(model.X_thresholds_, dtype=float), np.asarray(model.y_thresholds_, dtype=float)
    if len(x) > MAX_KNOTS:  # keep the ends and evenly spaced knots between: a few KB, same shape
        keep = np.unique(np.linspace(0, len(x) - 1, MAX_KNOTS).round().astype(int))
        x, y = x[keep], y[keep]
    rounded_x, rounded_y = tuple(round(float(v), 6) for v in x), tuple(round(float(v), 4) for v in y)
    return ModeCalibration(rounded_x, rounded_y, len(pairs), int(positives))


def fit_calibration(pairs_by_mode: Mapping[str, Sequence[tuple[float, bool]]], eval_sets: Sequence[str]) -> Calibration:
    """Every mode that has both relevant and irrelevant judged results, fitted."""
    modes = {mode: fitted for mode, pairs in pairs_by_mode.items() if (fitted := fit_mode(pairs)) is not None}
    return Calibration(modes, tuple(eval_sets))
